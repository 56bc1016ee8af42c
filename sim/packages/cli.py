"""`ascend-sim packages ...`: build the package directory the provisioning playbooks install from."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ascend_ready.cli_guard import GuardedGroup
from ascend_ready.sim.packages.builder import ARCHES, build_package_dir, missing_node_tools


@click.group("packages", cls=GuardedGroup)
def packages_command() -> None:
    """Fake Ascend installer packages and stand-in wheels."""


@packages_command.command("build")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option("--stack", "stacks", multiple=True, required=True, metavar="JSON",
              help='One stack as JSON: {"driver": "25.5.1", "firmware": "7.8.0.2.212", "cann": "8.5.0", '
                   '"torch": "2.8.0", "torch_npu": "2.8.0.post2", "glibc": "2.28"}. Repeatable.')
@click.option("--arch", type=click.Choice(ARCHES), default="aarch64", show_default=True)
@click.option("--product", "products", multiple=True, default=("910b",), show_default=True,
              help="Chip product in the package names (910b, 310p...). Repeatable.")
def build(dest: Path, stacks: tuple[str, ...], arch: str, products: tuple[str, ...]) -> None:
    """Write installers, wheelhouse/, packages.json and SHA256SUMS into DEST."""
    parsed = []
    for text in stacks:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--stack") from exc
        if not isinstance(value, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--stack")
        parsed.append(value)
    out = build_package_dir(dest, parsed, arch=arch, products=products)
    for tool in missing_node_tools():
        click.echo(f"warning: {tool} is missing from sim/node/bin; the driver package "
                   "installs a placeholder that fails", err=True)
    for line in (out / "SHA256SUMS").read_text().splitlines():
        click.echo(line.split("  ", 1)[1])
