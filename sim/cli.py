"""`ascend-sim`: start, inspect, enter, fault and stop a simulated Ascend cluster on this machine.

Exit codes: 0 ok, 2 usage/config/privilege/simulator error; `exec` and `run` pass the command's own code.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

import click

from ascend_ready.cli_guard import GuardedGroup
from ascend_ready.errors import ConfigError, SimError
from ascend_ready.sim import base, cluster, profiles

log = logging.getLogger("ascend_ready.sim")


@click.group(cls=GuardedGroup)
@click.option("--debug", is_flag=True, help="Log debug detail to stderr.")
@click.option("-v", "--verbose", is_flag=True, hidden=True, help="Deprecated spelling of --debug.")
@click.version_option(package_name="ascend-ready", prog_name="ascend-sim")
def main(debug: bool, verbose: bool) -> None:
    """Simulated Ascend NPU cluster: nodes made of Linux namespaces, reachable over real SSH (needs root)."""
    if verbose:  # -v meant debug logs here only; everywhere else it is more output, and --debug logs
        click.echo("warning: ascend-sim -v/--verbose is deprecated; use --debug", err=True)
    logging.basicConfig(level=logging.DEBUG if debug or verbose else logging.INFO,
                        format="ascend-sim: %(message)s", stream=sys.stderr)


def _subnet(value: str | None, param, ctx) -> str | None:
    """--subnet read as a network before anything is locked or built (a usage error, exit 2)."""
    import ipaddress

    if value is None:
        return None
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError as exc:
        raise click.BadParameter(f"{exc} (e.g. 10.252.15.0/24)", ctx=ctx, param=param) from None
    return value


@main.command()
@click.argument("count", type=click.IntRange(1, 200))
@click.option("--profile", "profile_spec", default=None, metavar="P[,P...]",
              help="Node profile(s) <hardware>-<os>, cycled over the nodes (default: "
                   f"{profiles.default_profile()}). See `ascend-sim profiles`.")
@click.option("--subnet", default=None, callback=lambda ctx, param, value: _subnet(value, param, ctx),
              help="Private IPv4 subnet (default: $ASCEND_SIM_SUBNET or 10.251.0.0/24).")
def up(count: int, profile_spec: str | None, subnet: str | None) -> None:
    """Start COUNT nodes (builds the cached base image first if needed)."""
    started = time.monotonic()
    c = cluster.up(count, profile_spec, subnet=subnet)
    click.echo(f"{len(c.nodes)} node(s) up in {time.monotonic() - started:.1f} s; "
               f"inventory: {c.inventory_path}")


@main.command()
def down() -> None:
    """Stop every node and remove the cluster's network and files (safe to repeat)."""
    c = cluster.down()
    click.echo("cluster stopped" if c else "no cluster was running")


def _status_rows(c: cluster.Cluster) -> list[dict]:
    return [{"name": n.name, "ip": n.ip, "profile": n.profile, "hardware": n.hardware, "os": n.os,
             "pid": n.pid, "state": "running" if n.alive() else "dead"} for n in c.nodes]


@main.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def status(fmt: str) -> None:
    """Show the nodes of the running cluster."""
    cluster.require_root()
    c = cluster.Cluster.load()
    if fmt == "json":
        data = {"running": False, "nodes": []} if c is None else {
            "running": any(n.alive() for n in c.nodes), "run_dir": str(c.run_dir), "subnet": c.subnet,
            "inventory": str(c.inventory_path), "hardware_model": c.hardware_model,
            "python_fallbacks": c.python_fallbacks, "nodes": _status_rows(c)}
        click.echo(json.dumps(data, indent=2))
        return
    if c is None:
        click.echo("no cluster running")
        return
    rows = _status_rows(c)
    cols = ["name", "ip", "profile", "hardware", "pid", "state"]
    widths = {k: max(len(k), *(len(str(r[k])) for r in rows)) for k in cols}
    click.echo("  ".join(k.upper().ljust(widths[k]) for k in cols).rstrip())
    for r in rows:
        click.echo("  ".join(str(r[k]).ljust(widths[k]) for k in cols).rstrip())
    for note in c.python_fallbacks:
        click.echo(f"note: {note}")
    if not c.hardware_model:
        click.echo("note: hardware model not installed: nodes have no NPU devices")


@main.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.argument("node")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_(node: str, argv: tuple[str, ...]) -> None:
    """Run a command inside NODE as root: `ascend-sim exec node01 -- npu-smi info`."""
    cluster.require_root()
    n = cluster.load_running().node(node)
    args = cluster.nsenter_argv(n, list(argv))
    sys.stdout.flush()
    os.execvp(args[0], args)


def expand_cluster_vars(argv, values: dict[str, str]) -> list[str]:
    """`$ASCEND_SIM_INVENTORY` (and the other cluster variables) in the arguments replaced by their values,
    so `ascend-sim run -- ascend-check -i '$ASCEND_SIM_INVENTORY'` works without a shell in between."""
    out = []
    for arg in argv:
        for name in sorted(values, key=len, reverse=True):
            arg = arg.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
        out.append(arg)
    return out


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def run(argv: tuple[str, ...]) -> None:
    """Run a command on the controller side, with $ASCEND_SIM_INVENTORY and $ASCEND_SIM_SSH_CONFIG set."""
    cluster.require_root()  # the cluster's private key is root's
    c = cluster.load_running()
    values = {"ASCEND_SIM_INVENTORY": str(c.inventory_path), "ASCEND_SIM_SSH_CONFIG": str(c.ssh_config),
              "ASCEND_SIM_RUN_DIR": str(c.run_dir)}
    argv = expand_cluster_vars(argv, values)
    sys.stdout.flush()
    try:
        os.execvpe(argv[0], list(argv), {**os.environ, **values})
    except FileNotFoundError:
        raise ConfigError(f"command not found: {argv[0]}") from None


@main.command()
@click.option("--path", "path_only", is_flag=True, help="Print the inventory file's path, not its text.")
def inventory(path_only: bool) -> None:
    """Print the Ansible inventory (INI) of the running cluster."""
    cluster.require_root()
    c = cluster.load_running()
    click.echo(str(c.inventory_path) if path_only else c.inventory_path.read_text(), nl=path_only)


@main.command()
@click.argument("node")
@click.argument("kind", required=False)
@click.option("--param", "params", multiple=True, metavar="K=V", help="Fault parameter (repeatable).")
@click.option("--clear", is_flag=True, help="Remove every fault from NODE (and cluster faults naming it).")
def fault(node: str, kind: str | None, params: tuple[str, ...], clear: bool) -> None:
    """Inject a fault into NODE (or --clear them); tools on the nodes show it at once, nothing restarts.

    Cluster faults name NODE as one end: `ascend-sim fault node02 plane-cut --param plane=3 --param
    peer=node04`."""
    from ascend_ready.sim import faults

    if clear == bool(kind):
        raise ConfigError("give either a fault KIND or --clear", hint="fault kinds: ascend-sim faults")
    parsed = faults.parse_params(params)
    faults.change(node, None if clear else kind, parsed)
    click.echo(f"{node}: faults cleared" if clear else f"{node}: injected {kind}")


@main.command(name="faults")
def list_faults() -> None:
    """List the fault kinds: a node's (hardware, CPU) and the cluster's (the device NICs' fabric)."""
    from ascend_ready.sim import faults

    kinds = faults.catalog()
    if not kinds:
        raise SimError("the hardware model (ascend_ready.sim.hw) is not installed")
    for kind, (scope, spec) in sorted(kinds.items()):
        shown = spec.description if scope == "node" else f"[cluster] {spec.description}"
        click.echo(f"{kind}\t{shown}")


@main.command(name="profiles")
def list_profiles() -> None:
    """List the node profiles (<hardware>-<os>)."""
    for name in profiles.names():
        p = profiles.get(name)
        click.echo(f"{name}\t{p.hardware}\t{p.os.description}")


@main.group(name="base", cls=GuardedGroup)
def base_group() -> None:
    """The cached Debian base image every node overlays."""


@base_group.command(name="build")
def base_build() -> None:
    cluster.require_root()
    click.echo(str(base.ensure().path))


@base_group.command(name="status")
def base_status() -> None:
    click.echo(json.dumps(base.status(), indent=2))


@base_group.command(name="clean")
@click.option("--all", "all_versions", is_flag=True, help="Also remove the current base.")
def base_clean(all_versions: bool) -> None:
    cluster.require_root()
    for p in base.clean(all_versions=all_versions):
        click.echo(f"removed {p}")


def _add_packages() -> None:
    # Imported here so `ascend-sim --help` stays fast; the group builds the fake vendor packages.
    from ascend_ready.sim.packages.cli import packages_command

    main.add_command(packages_command)


_add_packages()
