"""Property: whatever arguments a user types, built from each CLI's own options (found by introspecting
its click commands) with random values, the CLI answers with a documented exit code (0, 1, 2, 3, 130),
never a traceback, and writes nothing when it exits 2 (a usage or config error).

No real work runs: hosts are 127.0.0.1 ports that are closed (refused at once) or invalid names, the
training, preflight subprocess and verl launch are stubbed, and the simulator's commands that would
change the machine (up, down, exec, run, fault, base, packages) are parsed but their callbacks stubbed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ascend_ready.checks.cli import main as check_main
from ascend_ready.provision.cli import main as matrix_main
from ascend_ready.sim.cli import main as sim_main
from ascend_ready.training.cli import main as train_main

CLIS = {"ascend-check": check_main, "ascend-train": train_main, "ascend-matrix": matrix_main,
        "ascend-sim": sim_main}
EXIT_CODES = {0, 1, 2, 3, 130}
#: simulator commands that would change this machine: parsed, their callbacks stubbed
SIM_MUTATING = {"up", "down", "exec", "run", "fault", "base", "packages"}
CLOSED = "127.0.0.1:1"

#: values a new user types, good and bad; paths are relative to the example's own empty directory
TEXT = ["", "x", "1", "-1", "0", "99999", "a" * 300, "ü", "key=value", "npu.*", "zzz", "-", " ", "tiny",
        "grpo", "/proc/x", "out", "no/such/dir/file", "node[01:03]", "--", "nan"]
HOSTS = ["", CLOSED, "a" * 300, "no..de", "fe80::1:zz", "[::1]:1", "127.0.0.1:99999", ",", "user@"]
PATHS = ["/proc/x", "out", "out/file.json", "no/such/dir/f", "/nonexistent", "", "/etc/hostname", ".",
         "p" * 300]


def leaves(cli: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """(command path, command) of every command a user can run, groups that run on their own included."""
    out = []
    if not isinstance(cli, click.Group) or cli.invoke_without_command:
        out.append((path, cli))
    if isinstance(cli, click.Group):
        for name, sub in sorted(cli.commands.items()):
            out += leaves(sub, (*path, name))
    return out


def values_for(param: click.Parameter) -> st.SearchStrategy[str]:
    kind = param.type
    names = " ".join(param.opts)
    if "host" in names and "file" not in names:
        return st.sampled_from(HOSTS)
    if "config" in names:
        return st.sampled_from(["tiny", "tiny", "tiny", "nosuch", "/etc/hostname"])
    if isinstance(kind, click.Choice):  # mostly a valid choice: the example goes past the parser
        return st.one_of(st.sampled_from(list(map(str, kind.choices))), st.sampled_from(["bogus", ""]))
    if isinstance(kind, click.types.IntParamType | click.types.FloatParamType):
        return st.one_of(st.integers(1, 8).map(str), st.integers(-3, 70000).map(str),
                         st.sampled_from(["x", "1.5", "nan", ""]))
    if isinstance(kind, click.Path) or any(w in names for w in ("file", "dir", "output", "spec", "table")):
        return st.sampled_from(PATHS)
    return st.sampled_from(TEXT)


@st.composite
def command_lines(draw, name: str) -> list[str]:
    path, cmd = draw(st.sampled_from(leaves(CLIS[name])))
    argv = list(path)
    for param in cmd.params:
        if not isinstance(param, click.Option) or param.hidden or "--help" in param.opts:
            continue
        # each optional option in one line of four, a required one nearly always: deep enough to pass
        # the parser often, and still every option in some example
        if draw(st.integers(0, 9)) >= (9 if param.required else 2):
            continue
        flag = draw(st.sampled_from(param.opts))
        if param.is_flag:
            argv.append(flag)
        else:
            argv += [flag, draw(values_for(param))]
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        argv.append(draw(st.sampled_from(TEXT + PATHS)))
    if name == "ascend-check" and path in ((), ("collect",)) and not {"--hosts", "-i", "--inventory",
                                                                       "--snapshot"} & set(argv):
        argv += ["--hosts", CLOSED]  # never this machine's own batch, never SSH that waits
    return argv


@pytest.fixture(scope="module", autouse=True)
def stubbed():
    """The work behind the CLIs, stubbed: what is tested is the edge, not training or the simulator."""
    from ascend_ready.training import cli as train_cli
    from ascend_ready.training import preflight, verl_glue

    mp = pytest.MonkeyPatch()
    mp.setattr(train_cli, "run_algorithm", lambda *a, **k: {"stub": True})
    mp.setattr(train_cli.subprocess, "call", lambda *a, **k: 0)
    mp.setattr(preflight, "run_preflight",
               lambda *a, **k: preflight.PreflightResult(3, None, stderr="stubbed preflight"))
    mp.setattr(verl_glue, "launch", lambda *a, **k: {"stub": True})
    mp.setattr(verl_glue, "launch_across_nodes", lambda *a, **k: {"stub": True})
    mp.setattr(train_cli, "_quiet_libraries", lambda: None)
    for name, sub in sim_main.commands.items():
        if name in SIM_MUTATING:
            for _, leaf in leaves(sub):
                mp.setattr(leaf, "callback", lambda *a, **k: None)
    yield
    mp.undo()


@contextlib.contextmanager
def empty_cwd():
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="ascend-cli-prop-") as work:
        os.chdir(work)
        try:
            yield Path(work)
        finally:
            os.chdir(here)


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def check(name: str, argv: list[str]) -> None:
    with empty_cwd() as work:
        result = CliRunner().invoke(CLIS[name], argv, prog_name=name)
        written = listing(work)
    shown = f"{name} {' '.join(argv)!r}: exit {result.exit_code}\n{result.output[-2000:]}"
    event(f"exit {result.exit_code}")  # --hypothesis-show-statistics: how deep the examples went
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        f"{shown}\n{result.exception!r}"
    assert "Traceback" not in result.output, shown
    assert result.exit_code in EXIT_CODES, shown
    if result.exit_code == 2:
        assert written == [], f"{shown}\nwritten: {written}"
        assert "error: " in result.stderr and "hint: " in result.stderr, shown


#: ASCEND_CLI_EXAMPLES raises the count for a deeper search (the docs/bad-inputs.md table came from 400 each)
PROPERTY = settings(max_examples=int(os.environ.get("ASCEND_CLI_EXAMPLES", "60")), deadline=None,
                    derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("name", list(CLIS))
@PROPERTY
@given(data=st.data())
def test_every_cli_answers_any_command_line(name, data):
    check(name, data.draw(command_lines(name), label="argv"))


def test_the_generator_reaches_every_command():
    for name, cli in CLIS.items():
        assert len(leaves(cli)) >= 4, name
    assert ("collect",) in [p for p, _ in leaves(check_main)] and ((), check_main) in leaves(check_main)
