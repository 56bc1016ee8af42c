"""`ascend-check parse KIND FILE|-`: print vendor-tool output as the JSON model the checks judge.

Exit codes: 0 parsed; 1 the input could not be parsed (the error names the line); 2 usage error
(unknown KIND, unreadable FILE). `--list` prints the known kinds, one per line.
"""

from __future__ import annotations

import sys

import click

from ascend_ready.cli_guard import GuardedCommand
from ascend_ready.errors import ConfigError


def _kinds() -> list[str]:
    from ascend_ready.checks.parsers.base import kinds

    return kinds()


@click.command("parse", cls=GuardedCommand)
# Both required but for --list: shown as required (KIND FILE, not [KIND] [FILE]), checked below.
@click.argument("kind", required=False, metavar="KIND")
@click.argument("file", required=False, metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--list", "list_kinds", is_flag=True, help="List the output kinds and exit.")
def parse_command(kind: str | None, file: str | None, list_kinds: bool) -> None:
    """Parse FILE (or - for stdin) as vendor-tool output of KIND and print it as JSON.

    KIND and FILE are required (not with --list, which prints every KIND).

    \b
    Examples:
      npu-smi info -t health -i 0 | ascend-check parse npu-smi-health -
      ascend-check parse lspci-vvv lspci.txt

    Exit codes: 0 parsed, 1 unreadable output (the error names the line), 2 usage error.
    """
    from ascend_ready.checks.parsers.base import get_parser

    if list_kinds:
        click.echo("\n".join(_kinds()))
        return
    if kind is None or file is None:
        raise ConfigError("KIND and FILE are required", hint="known kinds: " + ", ".join(_kinds()))
    parse = get_parser(kind)
    try:
        if file == "-":
            data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        else:
            with open(file, "rb") as handle:
                data = handle.read()
    except OSError as error:
        raise ConfigError(f"cannot read {file}: {error.strerror or error}",
                          hint="pass a readable file, or - to read standard input") from None
    text = data.decode("utf-8", errors="replace")
    model = parse(text)
    click.echo(model.model_dump_json(indent=2))
