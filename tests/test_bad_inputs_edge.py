"""One error edge for every CLI (issue 18): each bad input below exits 2 (or the code named) with one
`error:` line and a `hint:` naming a command that exists, no traceback, and nothing written, before
any host is probed or any run directory is touched. docs/bad-inputs.md lists these and more."""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascend_ready.checks.cli import main as check_main
from ascend_ready.provision.cli import main as matrix_main
from ascend_ready.sim.cli import main as sim_main
from ascend_ready.training.cli import main as train_main

CLIS = {"ascend-check": check_main, "ascend-train": train_main, "ascend-matrix": matrix_main,
        "ascend-sim": sim_main}
#: closed on this machine: a live run that got this far would be refused at once (exit 3), never 2
CLOSED = "127.0.0.1:1"


@pytest.fixture
def run(tmp_path, monkeypatch):
    """Invoke a CLI in an empty working directory; returns (result, files written under it)."""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)

    def invoke(cli: str, args: str | list[str]):
        argv = shlex.split(args) if isinstance(args, str) else args
        result = CliRunner().invoke(CLIS[cli], argv, prog_name=cli)
        written = sorted(str(p.relative_to(work)) for p in work.rglob("*"))
        return result, written

    return invoke


def refused(result, written, code: int, error: str, hint: str) -> None:
    err = result.stderr
    assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output and "Usage:" not in err and "Error:" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and error in errors[0], err
    hints = [ln for ln in err.splitlines() if ln.startswith("hint: ")]
    assert len(hints) == 1 and hint in hints[0], err
    assert written == [], written


@pytest.mark.parametrize(("cli", "args", "error", "hint"), [
    ("ascend-check", "--hostz x", "no such option '--hostz'", "`ascend-check -h`"),
    ("ascend-check", "--tier fast", "invalid value for '--tier'", "`ascend-check -h`"),
    ("ascend-check", "collect", "missing option '-o' / '--output-dir'", "`ascend-check collect -h`"),
    ("ascend-check", "nosuch", "no such command 'nosuch'", "`ascend-check -h`"),
    ("ascend-train", "grpo", "missing option '--config'", "`ascend-train grpo -h`"),
    ("ascend-train", "grpo -c tiny --bogus", "no such option '--bogus'", "`ascend-train grpo -h`"),
    ("ascend-train", "grpo -c tiny --nproc-per-node 0", "'--nproc-per-node': 0 is not in the range x>=1",
     "`ascend-train grpo -h`"),
    ("ascend-train", "grpo -c tiny --nnodes -1", "'--nodes' / '--nnodes': -1 is not in the range x>=1",
     "`ascend-train grpo -h`"),
    ("ascend-train", "grpo -c tiny --master-port 99999", "99999 is not in the range 1<=x<=65535",
     "`ascend-train grpo -h`"),
    ("ascend-train", "plan -c tiny --nodes 0", "0 is not in the range x>=1", "`ascend-train plan -h`"),
    ("ascend-matrix", "--bogus", "no such option '--bogus'", "`ascend-matrix -h`"),
    ("ascend-matrix", "resolve --cann", "option '--cann' requires an argument", "`ascend-matrix resolve -h`"),
    ("ascend-sim", "up", "missing argument 'COUNT'", "`ascend-sim up -h`"),
    ("ascend-sim", "up 0", "0 is not in the range 1<=x<=200", "`ascend-sim up -h`"),
])
def test_clicks_usage_errors_go_through_the_guard(run, cli, args, error, hint):
    refused(*run(cli, args), 2, error, hint)


@pytest.mark.parametrize(("args", "option"), [
    (f"collect -o /proc/x --hosts {CLOSED}", "-o /proc/x: cannot write in /proc"),
    (f"--junit /proc/x.xml --hosts {CLOSED}", "--junit /proc/x.xml: not writable"),
    (f"--prometheus /proc/x.prom --hosts {CLOSED}", "--prometheus /proc/x.prom: not writable"),
    (f"--html /proc/x.html --hosts {CLOSED}", "--html /proc/x.html: not writable"),
    (f"--launch-spec /proc/spec.json --hosts {CLOSED}", "--launch-spec /proc/spec.json: not writable"),
    (f"--rank-table /proc/hccl.json --hosts {CLOSED}", "--rank-table /proc/hccl.json: not writable"),
    (f"--hostfile no/such/dir/hosts --hosts {CLOSED}", "directory no/such/dir does not exist"),
])
def test_every_output_path_is_checked_before_any_probe(run, args, option):
    # exit 2, not 3: the closed host was never tried
    refused(*run("ascend-check", args), 2, option, "")


def test_ascend_train_output_dir_is_checked_before_the_preflight(run):
    refused(*run("ascend-train", "grpo -c tiny -o /proc/run"), 2,
            "--output-dir /proc/run: cannot write in /proc", "pick a directory you may write")


@pytest.mark.parametrize("cli", ["ascend-check", "ascend-train"])
@pytest.mark.parametrize(("hosts", "why"), [
    ("", "--hosts is empty"),
    ("a" * 300, "is 300 characters long; a host name has at most 253"),
    ("node01." + "b" * 64, "has a label of 64 characters"),
    ("no..de", "has an empty label"),
    ("-node01", "starts or ends with '-'"),
    ("no_de!", "has a character other than"),
    ("fe80::1:zz", "has ':' but is no IPv6 address"),
])
def test_host_names_are_validated_before_any_connection(run, cli, hosts, why):
    args = ["--hosts", hosts] if cli == "ascend-check" else ["grpo", "-c", "tiny", "--hosts", hosts]
    refused(*run(cli, args), 2, why, "--hosts node01,node02" if not hosts else "an IPv6 address in brackets")


def test_ipv6_in_brackets_and_plain_addresses_pass_validation():
    from ascend_ready.fleet.inventory import parse_hosts

    targets = parse_hosts("[fe80::1]:2222,root@10.0.0.1:22,node01.example.com,fe80::2,node_01")
    assert [(t.address, t.port) for t in targets] == [("fe80::1", 2222), ("10.0.0.1", 22),
                                                      ("node01.example.com", None), ("fe80::2", None),
                                                      ("node_01", None)]


def test_a_misspelt_config_key_names_the_near_match(run):
    refused(*run("ascend-train", "grpo -c tiny max_stepz=3"), 2, "invalid training config",
            "ascend-train schema")
    result, _ = run("ascend-train", "grpo -c tiny max_stepz=3 grpo.betta=0.1")
    assert "max_stepz: Extra inputs are not permitted (did you mean max_steps?)" in result.stderr
    assert "grpo.betta: Extra inputs are not permitted (did you mean beta?)" in result.stderr


def test_a_misspelt_profile_key_names_the_near_match(run, tmp_path):
    profile = tmp_path / "p.yml"
    profile.write_text("product: X\nnpu_cout: 8\n")
    result, written = run("ascend-check", ["--profile", str(profile), "--hosts", CLOSED])
    refused(result, written, 2, "invalid hardware profile", "`ascend-check schema profile`")
    assert "npu_cout: Extra inputs are not permitted (did you mean npu_count?)" in result.stderr


@pytest.mark.parametrize(("args", "error"), [
    ("--snapshot /nonexistent/snap", "the snapshot directory /nonexistent/snap: no such file or directory"),
    ("--snapshot loop", "the snapshot directory loop: a symlink loop"),
    ("diagnose /nonexistent/train.log", "/nonexistent/train.log: no such file or directory"),
    ("diagnose loop", "loop: a symlink loop"),
])
def test_a_missing_path_or_a_symlink_loop_says_so(run, args, error):
    os.symlink("loop", "loop")
    result, written = run("ascend-check", args)
    refused(result, [w for w in written if w != "loop"], 2, error, "")


def test_an_error_raised_without_a_hint_still_gets_one():
    import click

    from ascend_ready.cli_guard import GuardedCommand
    from ascend_ready.errors import ConfigError, TrainingError

    @click.command(cls=GuardedCommand)
    @click.option("--kind")
    def cmd(kind):
        raise (ConfigError if kind == "usage" else TrainingError)("it went wrong")

    usage = CliRunner().invoke(cmd, ["--kind", "usage"], prog_name="ascend-x")
    assert usage.exit_code == 2
    assert usage.stderr == "error: it went wrong\nhint: fix the value it names; `ascend-x -h` says what " \
                           "each option takes\n"
    stopped = CliRunner().invoke(cmd, ["--kind", "train"], prog_name="ascend-x")
    assert stopped.exit_code == 1 and "hint: the lines above say what stopped it" in stopped.stderr


@contextlib.contextmanager
def silent_peer():
    """A TCP port that accepts and never sends an SSH banner: a host that takes its connect timeout."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def test_collect_under_its_old_spelling_warns_and_its_progress_is_logged(run):
    with silent_peer() as port:
        result, written = run("ascend-check", ["collect", "--output", "snap", "--hosts", f"127.0.0.1:{port}",
                                               "--select", "pcie.*", "--connect-timeout", "2.5"])
    assert result.exit_code == 3, result.output
    assert "warning: --output is deprecated; use -o/--output-dir" in result.stderr
    assert "collect: 0 of 1 host(s) done, 1 s" in result.stderr  # not a tty: a line after 1 s, then 5 s
    assert "snap/manifest.json" in written
    quiet, _ = run("ascend-check", ["collect", "-q", "-o", "snap2", "--hosts", CLOSED, "--select", "pcie.*"])
    assert quiet.exit_code == 3 and "host(s) done" not in quiet.stderr


# ----------------------------------------------------------------------------- --resume


def checkpoint(run_dir: Path, algo: str, step: int, **config) -> None:
    """A committed checkpoint as the trainers write it (training/checkpoint.py's marker)."""
    from ascend_ready.training.checkpoint import commit_checkpoint
    from ascend_ready.training.config import load_config

    directory = run_dir / "checkpoints" / f"checkpoint-{step}"
    directory.mkdir(parents=True)
    cfg = load_config("tiny", [f"{k}={v}" for k, v in config.items()])
    commit_checkpoint(directory, step, algo, cfg.model_dump(mode="json"))


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(("args", "error", "hint"), [
    ("sft -c tiny max_steps=30", "--resume: {ckpt} is a grpo checkpoint (step 21); this is sft",
     "`ascend-train grpo ... --resume`"),
    ("grpo -c tiny max_steps=12", "--resume: max_steps=12 is below the checkpoint's step 21",
     "give max_steps=22 or more"),
    ("grpo -c tiny max_steps=30 model.tiny.hidden_size=256",
     "the config does not match {ckpt}'s: model.tiny.hidden_size was 128, is now 256",
     "resume with the config the run was started with"),
])
def test_resume_refuses_another_run_before_anything_is_written(run, tmp_path, args, error, hint):
    runs = tmp_path / "runs"
    checkpoint(runs, "grpo", 21, max_steps=30)
    before = listing(runs)
    result, written = run("ascend-train", [*shlex.split(args), "-o", str(runs), "--resume"])
    refused(result, written, 2, error.format(ckpt=runs / "checkpoints" / "checkpoint-21"), hint)
    assert listing(runs) == before  # no config.yaml, no log dir


def test_resume_without_a_checkpoint_writes_nothing(run, tmp_path):
    out = tmp_path / "fresh"
    result, written = run("ascend-train", ["grpo", "-c", "tiny", "-o", str(out), "--resume"])
    refused(result, written, 2, f"--resume: no committed checkpoint under {out / 'checkpoints'}",
            "drop --resume")
    assert not out.exists()


@pytest.mark.parametrize(("cli", "args"), [
    ("ascend-train", ["grpo", "-c", "a" * 300]),
    ("ascend-train", ["grpo", "-c", "tiny", "-i", "a" * 300]),
    ("ascend-train", ["grpo", "-c", "tiny", "-o", "a" * 300]),
    ("ascend-train", ["plan", "-c", "tiny", "--profile", "a" * 300]),
    ("ascend-check", ["--profile", "a" * 300, "--hosts", CLOSED]),
    ("ascend-check", ["collect", "-o", "a" * 300, "--hosts", CLOSED]),
])
def test_a_path_too_long_for_the_system_is_a_usage_error(run, cli, args):
    refused(*run(cli, args), 2, "...: file name too long", "every part is under 256 bytes")


@pytest.mark.parametrize(("cli", "args", "error"), [
    ("ascend-check", ["--hosts", "[fe80::1"], "--hosts: unbalanced brackets in '[fe80::1'"),
    ("ascend-check", ["diagnose", "core"], "core: binary file (NUL bytes in its first 8192 bytes)"),
    ("ascend-sim", ["up", "2", "--subnet", "300.0.0.0/24"], "invalid value for '--subnet'"),
    ("ascend-matrix", ["show", "--cann", ""], "invalid value for '--cann': bad version '': empty"),
])
def test_inputs_the_property_test_and_the_table_found(run, cli, args, error):
    Path("core").write_bytes(bytes(range(256)))
    result, written = run(cli, args)
    refused(result, [w for w in written if w != "core"], 2, error, "")
