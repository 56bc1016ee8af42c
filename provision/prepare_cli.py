"""`ascend-matrix` commands that prepare a real rack: the offline package directory (`packages`,
`manifest`) and the device NIC addresses of the inventory (`hccn-devices`).

Registered on the `ascend-matrix` group by provision/cli.py; its guard turns errors into exit codes.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click
import yaml

from ascend_ready.errors import ConfigError
from ascend_ready.provision.hccn import DEFAULT_DEVICES, plan_device_nics, render_host_vars, render_plan
from ascend_ready.provision.matrix import ARCHES, load_matrix
from ascend_ready.provision.packages import package_plan, write_manifest

FORMATS = click.Choice(["table", "json"])


def _matrix(ctx: click.Context):
    return load_matrix((ctx.find_root().obj or {}).get("matrix_file"))


@click.command("packages")
@click.argument("stack")
@click.option("--os", "os_id", default=None,
              help="OS id of the nodes, e.g. kylinv10sp3 (picks Python and glibc).")
@click.option("--arch", type=click.Choice(ARCHES), default=None,
              help="CPU arch of the nodes (default aarch64).")
@click.option("--product", default=None, help="NPU product: 910b (A2, default), 910_93 (A3), 310p.")
@click.option("--python", default=None,
              help="Python MAJOR.MINOR of the training venv (default: the stack's).")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
@click.pass_context
def packages_cmd(ctx: click.Context, stack: str, os_id: str | None, arch: str | None, product: str | None,
                 python: str | None, fmt: str) -> None:
    """List every file the offline package directory of STACK (a matrix stack id) must hold.

    \b
    The .run installers (top level, exact names), the wheelhouse/ requirements for the node's Python
    and arch, and the pip command that fills wheelhouse/ on a connected machine. Then run
    `ascend-matrix manifest DIR` and set stack_package_source: DIR (docs/packages.md).
    """
    plan = package_plan(stack, os=os_id, arch=arch, product=product, python=python, matrix=_matrix(ctx))
    if fmt == "json":
        click.echo(json.dumps(plan.model_dump(mode="json"), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 200, highlight=False)
    where = f"{plan.product} / {plan.arch}" + (f" on {plan.os}" if plan.os else "")
    where += f", Python {plan.python}"
    runs = Table(title=f"installers of {plan.stack} ({where}): put them at the top of the directory",
                 title_justify="left")
    for col in ("file", "component", "download from", "comes in"):
        runs.add_column(col, overflow="fold", no_wrap=col == "file")
    for f in plan.installers:
        component = f.component + (" (optional)" if f.optional else "")
        runs.add_row(f.name, component, f.download, f.comes_in or "-")
    console.print(runs)
    wheels = Table(title="wheelhouse/: a wheel for each requirement (and what it requires)",
                   title_justify="left")
    for col in ("requirement", "wheel", "why", "download from"):
        wheels.add_column(col, overflow="fold")
    for w in plan.wheels:
        wheels.add_row(w.requirement, w.file, w.why, w.download)
    console.print(wheels)
    console.print("fill wheelhouse/ on a connected machine (any arch):", markup=False)
    console.print("  " + shlex.join(plan.pip_download), markup=False, soft_wrap=True)
    for note in plan.notes:
        console.print(f"note: {note}", markup=False)
    console.print("then: ascend-matrix manifest DIR", markup=False)


@click.command("manifest")
@click.argument("directory")
def manifest_cmd(directory: str) -> None:
    """Write DIRECTORY/SHA256SUMS (sha256sum format, sorted) over every file the directory holds.

    Dot files and the manifest itself are left out. Check it anywhere with `sha256sum -c SHA256SUMS`.
    """
    path, count = write_manifest(directory)
    click.echo(f"wrote {path}: {count} file(s)", err=True)


def _refuse_foreign_vars(path: Path) -> None:
    """A host_vars file holding more than hccn_devices is the operator's: never overwrite it."""
    if not path.exists():
        return
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", hint="fix or remove the file") from None
    other = sorted(set(data or {}) - {"hccn_devices"}) if isinstance(data, dict) else ["(not a mapping)"]
    if other:
        raise ConfigError(f"{path} holds other variables ({', '.join(other)}); not overwriting it",
                          hint="print the YAML (no -o) and paste hccn_devices into that file, or move the "
                               "other variables to group_vars")


@click.command("hccn-devices")
@click.option("--nodes", metavar="N1,N2", help="Nodes in order, Ansible ranges allowed: node[01:04].")
@click.option("-i", "--inventory", type=click.Path(dir_okay=False),
              help="Take the nodes (in order) from this Ansible inventory instead.")
@click.option("--limit", metavar="PATTERN", help="Only these inventory hosts/groups (with -i).")
@click.option("--device-net", required=True, metavar="CIDR",
              help="Network of device {dev} (192.168.{dev}.0/24), or one network for all (10.20.0.0/16).")
@click.option("--gateway", default=".1", show_default=True,
              help="Gateway: host number of the network (.1) or an address template (192.168.{dev}.254).")
@click.option("--first-host", type=click.IntRange(0), default=10, show_default=True,
              help="Host number of the first node's device NICs.")
@click.option("--devices", type=click.IntRange(1, 64), default=DEFAULT_DEVICES, show_default=True,
              help="Device NICs per node.")
@click.option("--netdetect", default=None,
              help="Address link detection pings (.N or template; default: gateway).")
@click.option("-o", "--output-dir", type=click.Path(file_okay=False),
              help="Write OUTPUT_DIR/<node>.yml (an inventory's host_vars/) instead of printing YAML.")
def hccn_devices_cmd(nodes: str | None, inventory: str | None, limit: str | None, device_net: str,
                     gateway: str, first_host: int, devices: int, netdetect: str | None,
                     output_dir: str | None) -> None:
    """Derive each node's hccn_devices (device NIC address, netmask, gateway) from address ranges.

    \b
    Device d of the i-th node (from 0) gets host FIRST_HOST + i of device d's network:
      ascend-matrix hccn-devices --nodes 'node[01:04]' --device-net '192.168.{dev}.0/24'
    gives node01 192.168.0.10 ... 192.168.7.10, node02 192.168.0.11 ..., gateways 192.168.{dev}.1.
    Overlapping addresses, a node listed twice or a network too small are refused.
    """
    from ascend_ready.fleet.inventory import expand_range, limit_targets, load_inventory
    from ascend_ready.paths import check_output_dir

    if bool(nodes) == bool(inventory):
        raise ConfigError("give --nodes or -i INVENTORY (one of them)",
                          hint="e.g. --nodes 'node[01:04]'")
    if inventory:
        targets = load_inventory(inventory)
        if limit:
            targets = limit_targets(targets, limit)
        names = [t.name for t in targets]
    else:
        if limit:
            raise ConfigError("--limit applies to -i INVENTORY", hint="list the nodes you want in --nodes")
        names = [n for item in nodes.split(",") if item.strip() for n in expand_range(item.strip())]
    plan = plan_device_nics(names, device_net, gateway=gateway, first_host=first_host, devices=devices,
                            netdetect=netdetect)
    if output_dir is None:
        click.echo(render_plan(plan), nl=False)
        return
    how = (f"ascend-matrix hccn-devices --device-net '{device_net}' --gateway '{gateway}' "
           f"--first-host {first_host} --devices {devices}")
    how += f" --netdetect '{netdetect}'" if netdetect else ""
    out = Path(output_dir)
    check_output_dir(out, "-o")
    for node in plan:
        _refuse_foreign_vars(out / f"{node}.yml")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for i, (node, nics) in enumerate(plan.items()):
            note = f"Device NICs of {node}, node {i} (from 0) of {len(plan)}, written by\n  {how}"
            (out / f"{node}.yml").write_text(render_host_vars(nics, note))
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror or exc}",
                          hint="pick a directory you may write, e.g. inventory/host_vars") from None
    click.echo(f"wrote {len(plan)} host_vars file(s) to {out}", err=True)


COMMANDS = (packages_cmd, manifest_cmd, hccn_devices_cmd)
