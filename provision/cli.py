"""`ascend-matrix`: show the compatibility matrix, resolve a full stack from a few pins, judge an
installed set. Results go to stdout (a table, or JSON with --format json); errors to stderr.

Exit codes: 0 success (judge: the installed set is valid), 1 judge found components that are off,
2 bad input or an invalid matrix file, or no stack fits the pins.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ascend_ready.cli_guard import GuardedGroup, debug_option
from ascend_ready.errors import ConfigError, ExitCode, MatrixError
from ascend_ready.provision.judge import Judgement, judge
from ascend_ready.provision.matrix import ARCHES, Matrix, load_matrix, matrix_json_schema, version_key
from ascend_ready.provision.resolver import ResolvedStack, resolve

FORMATS = click.Choice(["table", "json"])


class _Version(click.ParamType):
    """A version as the matrix reads it (8.2.RC1, 2.1.0.post10); refused at the command line, as a usage
    error naming the option, when it cannot be read."""

    name = "VERSION"

    def convert(self, value, param, ctx):
        try:
            version_key(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return value


VERSION = _Version()


def _console() -> Console:
    # Wide enough for the stack table when stdout is a pipe (rich would default to 80 columns).
    return Console(width=None if sys.stdout.isatty() else 200, highlight=False)


def _matrix(ctx: click.Context) -> Matrix:
    return load_matrix(ctx.obj["matrix_file"])


def _dump(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


@click.group(cls=GuardedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--matrix", "matrix_file", type=click.Path(dir_okay=False), default=None,
              help="Matrix file to use instead of the packaged provision/matrix.yml.")
@debug_option
@click.version_option(package_name="ascend-ready", prog_name="ascend-matrix")
@click.pass_context
def main(ctx: click.Context, matrix_file: str | None) -> None:
    """Show and query the Ascend compatibility matrix (HDK, CANN, torch, torch_npu, Python, OS)."""
    ctx.ensure_object(dict)
    ctx.obj["matrix_file"] = matrix_file


@main.command()
@click.option("--cann", default=None, type=VERSION, help="Show only the stacks of this CANN version.")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
@click.pass_context
def show(ctx: click.Context, cann: str | None, fmt: str) -> None:
    """List every validated stack (or the whole matrix as JSON)."""
    m = _matrix(ctx)
    if cann is not None and m.cann_release(cann) is None:
        raise MatrixError(f"cann: CANN {cann} is not in the matrix",
                          hint=f"known CANN versions: {', '.join(c.version for c in m.cann)}")
    stacks = [s for s in m.stacks if cann is None or m.cann_release(cann) is m.cann_release(s.cann)]
    stacks.sort(key=lambda s: (version_key(s.cann), version_key(s.torch)), reverse=True)
    if fmt == "json":
        data = m.model_dump(mode="json")
        data["stacks"] = [dict(s.model_dump(mode="json"), glibc=s.glibc) for s in stacks]
        _dump(data)
        return
    table = Table(title="ascend-ready compatibility matrix", title_justify="left")
    columns = ("stack", "CANN", "torch", "torch_npu", "python", "glibc", "HDK (910b / 910_93 / 310p)",
               "layout")
    for col in columns:
        table.add_column(col, no_wrap=True)
    for s in stacks:
        c = m.cann_release(s.cann)
        hdk = " / ".join(c.hdk.recommended.get(p, "-") for p in ("910b", "910_93", "310p"))
        mark = " *" if s.recommended else ""
        table.add_row(s.id + mark, s.cann, s.torch, s.torch_npu, ",".join(s.python), s.glibc, hdk, c.layout)
    console = _console()
    console.print(table)
    console.print("* recommended stack of its CANN release")


def _pin_options(fn):
    for name, help_text in reversed([
        ("--cann", "CANN version, e.g. 8.0.0 or 8.2.RC1"),
        ("--torch", "PyTorch version, e.g. 2.1.0"),
        ("--torch-npu", "torch_npu version, e.g. 2.1.0.post10"),
        ("--driver", "NPU driver version, e.g. 24.1.rc2"),
        ("--product", "NPU product: 910b (A2), 910_93 (A3), 310p"),
        ("--os", "OS id, e.g. centos7.6, ubuntu22.04 (see `show --format json`)"),
        ("--python", "Python MAJOR.MINOR, e.g. 3.10"),
    ]):
        fn = click.option(name, default=None, help=help_text)(fn)
    return fn


def _print_resolved(r: ResolvedStack) -> None:
    table = Table(title=f"resolved stack {r.id}", title_justify="left", show_header=False)
    table.add_column("component", style="bold", no_wrap=True)
    table.add_column("value")
    rows = [
        ("product / arch", f"{r.product} / {r.arch}" + (f" on {r.os}" if r.os else "")),
        ("HDK", r.hdk or "-"),
        ("driver", r.driver),
        ("firmware", r.firmware or "unknown"),
        ("CANN", f"{r.cann} (layout {r.layout.name}, {r.layout.op_package} package"
                 f"{', nnae available' if r.layout.nnae else ', no nnae'})"),
        ("torch / torch_npu", f"{r.torch} / {r.torch_npu} (branch {r.torch_npu_branch})"),
        ("python", f"{r.python} (wheels: {', '.join(r.python_versions)})"),
        ("glibc floor", f"{r.glibc_floor} ({r.manylinux})"),
        ("install root", r.layout.install_root),
        ("set_env", r.layout.set_env),
        ("version file", r.layout.version_file),
        ("HDK drivers accepted", ", ".join(r.hdk_compatible)),
    ]
    rows += [(f"package: {k}", v) for k, v in r.packages.model_dump().items() if v]
    if r.training is not None:
        rows.append(("training set", "none (see the warning)" if r.training.none else
                     ", ".join(f"{k} {v}" for k, v in (r.training.packages or {}).items())))
    if r.engine is not None:
        rows.append((f"engine: {r.engine.engine}", ", ".join(r.engine.rows)))
        rows += [(f"  with {k}", v) for k, v in r.engine.companions.items()]
    for k, v in rows:
        table.add_row(k, v)
    console = _console()
    console.print(table)
    for w in r.warnings:
        console.print(f"warning: {w}")


@main.command(name="resolve")
@_pin_options
@click.option("--arch", type=click.Choice(ARCHES), default=None, help="CPU arch (default aarch64).")
@click.option("--engine", type=click.Choice(["verl", "vllm-ascend", "mindspeed-rl"]), default=None,
              help="RL engine whose stated torch/torch_npu/CANN the stack must satisfy.")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
@click.pass_context
def resolve_cmd(ctx: click.Context, fmt: str, **pins: str | None) -> None:
    """Pick the full stack (driver, firmware, CANN, torch, torch_npu, Python, packages) for some pins."""
    r = resolve(_matrix(ctx), **pins)
    if fmt == "json":
        _dump(r.model_dump(mode="json"))
    else:
        _print_resolved(r)


def _print_judgement(j: Judgement) -> None:
    console = _console()
    if j.valid:
        console.print(f"valid: matches {j.stack}" if j.stack else "valid")
    else:
        table = Table(title="components that are off", title_justify="left")
        for col in ("component", "installed", "should be", "why"):
            table.add_column(col, no_wrap=col != "why")
        for f in j.findings:
            table.add_row(f.component, f.installed, f.expected or "-", f.reason)
        console.print(table)
    for u in j.unverified:
        console.print(f"unverified: {u}")


@main.command(name="judge")
@click.option("--driver", default=None, help="Installed NPU driver version.")
@click.option("--firmware", default=None, help="Installed NPU firmware version.")
@click.option("--cann", default=None, help="Installed CANN toolkit version.")
@click.option("--torch", default=None, help="Installed torch version.")
@click.option("--torch-npu", default=None, help="Installed torch_npu version.")
@click.option("--product", default=None, help="NPU product (default 910b).")
@click.option("--os", default=None, help="OS id.")
@click.option("--python", default=None, help="Python MAJOR.MINOR of the environment.")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
@click.pass_context
def judge_cmd(ctx: click.Context, fmt: str, **installed: str | None) -> None:
    """Judge an installed set: exit 0 if valid, 1 (listing what is off and what it should be) if not."""
    given = {k: v for k, v in installed.items() if v is not None}
    if not given:
        raise ConfigError("nothing to judge", hint="pass at least one of --driver --firmware --cann --torch "
                                                   "--torch-npu")
    j = judge(given, _matrix(ctx))
    if fmt == "json":
        _dump(j.model_dump(mode="json"))
    else:
        _print_judgement(j)
    sys.exit(ExitCode.OK if j.valid else ExitCode.FAILED)


@main.command()
def schema() -> None:
    """Print the JSON schema of the matrix file."""
    _dump(matrix_json_schema())


def _add_prepare_commands() -> None:
    """packages, manifest, hccn-devices: preparing a real rack (provision/prepare_cli.py)."""
    from ascend_ready.provision.prepare_cli import COMMANDS

    for command in COMMANDS:
        main.add_command(command)


_add_prepare_commands()
