"""Every entry point of [project.scripts] answers `--version` and `-h` (as `--help`), exit 0."""

from __future__ import annotations

import importlib

import pytest
import tomllib
from click.testing import CliRunner
from sample_support import REPO

SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def entry_point(target: str):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_version_and_short_help(script):
    command = entry_point(SCRIPTS[script])
    runner = CliRunner()
    version = runner.invoke(command, ["--version"], prog_name=script)
    assert version.exit_code == 0, version.output
    assert version.stdout.startswith(f"{script}, version ")
    short, long = runner.invoke(command, ["-h"], prog_name=script), runner.invoke(command, ["--help"],
                                                                                   prog_name=script)
    assert short.exit_code == long.exit_code == 0, short.output
    assert short.stdout == long.stdout and short.stdout.startswith(f"Usage: {script} ")
    # subcommands too (click passes the option names down)
    sub = next(iter(command.commands))
    assert runner.invoke(command, [sub, "-h"], prog_name=script).stdout.startswith(f"Usage: {script} {sub} ")
