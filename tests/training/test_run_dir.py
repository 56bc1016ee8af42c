"""Nothing is lost (issue 25 item 2, 9b, 8's disk part; issue 28's unwritable job directory): a run
directory that holds a run is refused without --resume before anything is written, `-o 'DIR/{run}'` is a
fresh subdirectory, every node's output directory is tried as the job's user with room before the
controller writes, and a copy onto a node that cannot take it is a message, not a traceback.

The output-dir probe is the real shell script run by /bin/sh here (as root: a read-only and a full file
system mounted in a private mount namespace), its output parsed and judged through the preflight's Host."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from ascend_ready.checks.parsers.output_dir import parse_output_dir
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.resources import Host
from ascend_ready.checks.resources.output_dir import output_dir_script
from ascend_ready.checks.snapshot import HostSnapshot, ProbeResult
from ascend_ready.errors import ConfigError, ParseError
from ascend_ready.fleet.transport import FanoutOptions, Target
from ascend_ready.training import run_dir
from ascend_ready.training.cli import main

ROOT = os.geteuid() == 0 and shutil.which("unshare") is not None


def _run_probe(path, mount: str | None = None) -> str:
    """The output-dir probe's stdout for `path`; `mount`: a tmpfs mounted (options) over its parent first,
    in a private mount namespace (needs root)."""
    script = output_dir_script(str(path))
    if mount is None:
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    parent = os.path.dirname(str(path))
    wrapped = f"mount -t tmpfs -o {mount} tmpfs {parent} && exec sh -c \"$0\""
    return subprocess.run(["unshare", "-m", "sh", "-c", wrapped, script], capture_output=True, text=True,
                          check=True).stdout


def _host(stdout: str, path, min_gb: float = 1.0) -> Host:
    prof = load_profile().model_copy(update={"checkpoint_dir": str(path), "min_disk_free_gb": min_gb})
    snap = HostSnapshot(name="node01", probes={"output-dir": ProbeResult(command="sh -c ...", rc=0,
                                                                       stdout=stdout)})
    return Host(snap, prof)


def _make_run(d):
    (d / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    (d / "final").mkdir()
    (d / "config.yaml").write_text("max_steps: 60\n")
    (d / "metrics.jsonl").write_text('{"step": 1}\n')


def _listing(d):
    return sorted((str(p.relative_to(d)), p.stat().st_mtime_ns) for p in d.rglob("*"))


# ----------------------------------------------------------------------------------- the controller


def test_a_new_run_into_a_run_directory_is_refused_naming_it_and_writes_nothing(tmp_path):
    out = tmp_path / "r4"
    out.mkdir()
    _make_run(out)
    before = _listing(out)
    result = CliRunner().invoke(main, ["grpo", "-c", "tiny", "-o", str(out), "--skip-preflight",
                                       "max_steps=20"])
    assert result.exit_code == 2, result.output
    assert f"--output-dir {out} already holds a run (config.yaml, metrics.jsonl, checkpoints, final)" \
        in result.output
    assert "--resume" in result.output and "{run}" in result.output
    assert "Traceback" not in result.output
    assert _listing(out) == before


def test_the_run_template_is_a_fresh_subdirectory_the_same_on_the_nodes(tmp_path):
    out, node = run_dir.expand(f"{tmp_path}/x/{{run}}", "/shared/{run}", "grpo")
    name = os.path.basename(out)
    assert name.startswith("grpo-") and node == f"/shared/{name}"
    assert run_dir.expand("runs/a", None, "ppo") == ("runs/a", None)
    with pytest.raises(ConfigError, match="the only placeholder is"):
        run_dir.expand("runs/{rnu}", None, "grpo")


def test_the_hint_after_a_failure_fits_what_the_run_directory_holds(tmp_path):
    from ascend_ready.training.checkpoint import commit_checkpoint

    hint = run_dir.after_failure_hint(tmp_path, tmp_path / "logs")
    assert "nothing to --resume" in hint and "with --resume" not in hint
    ck = tmp_path / "checkpoints" / "checkpoint-3"
    ck.mkdir(parents=True)
    commit_checkpoint(ck, 3, "grpo", {})
    assert "with --resume to continue from the last checkpoint (checkpoint-3)" in \
        run_dir.after_failure_hint(tmp_path, tmp_path / "logs")


# ----------------------------------------------------------------------------------- the nodes' probe


def test_a_new_directory_under_a_writable_parent_may_be_written(tmp_path):
    path = tmp_path / "new" / "sub"
    state = _host(_run_probe(path), path).output_dir.state
    assert state.writable and state.base == str(tmp_path) and state.run_files == ()
    assert state.disk is not None and state.disk.avail_kb > 0
    assert _host(_run_probe(path), path).output_dir.problems(resume=False) == []
    assert not path.exists() and os.listdir(tmp_path) == []  # the try left nothing


def test_a_directory_holding_a_run_is_named_unless_resumed(tmp_path):
    _make_run(tmp_path)
    host = _host(_run_probe(tmp_path), tmp_path)
    assert host.output_dir.problems(resume=False) == [
        f"{tmp_path} already holds a run (config.yaml, metrics.jsonl, checkpoints, final)"]
    assert host.output_dir.problems(resume=True) == []


@pytest.mark.skipif(not ROOT, reason="mounts a read-only tmpfs (root and unshare)")
def test_a_read_only_output_dir_is_not_writable(tmp_path):
    path = tmp_path / "ro" / "run"
    (tmp_path / "ro").mkdir()
    problems = _host(_run_probe(path, "ro,size=1m"), path).output_dir.problems(resume=False, min_free_gb=0)
    want = f"{tmp_path}/ro (to create {path}) is not writable by user root: Read-only file system"
    assert problems == [want]


@pytest.mark.skipif(not ROOT, reason="mounts a tiny tmpfs (root and unshare)")
def test_a_full_output_file_system_is_judged_not_the_root_one(tmp_path):
    path = tmp_path / "full" / "run"
    (tmp_path / "full").mkdir()
    problems = _host(_run_probe(path, "size=64k"), path).output_dir.problems(resume=False)
    assert len(problems) == 1 and "GB free, the job's bound is 1 GB" in problems[0], problems
    assert f"{tmp_path}/full" in problems[0]


def test_a_garbled_probe_output_is_a_parse_error_naming_the_line():
    with pytest.raises(ParseError, match="su: Authentication failure"):
        parse_output_dir("su: Authentication failure\nuser root\n")
    with pytest.raises(ParseError, match="no `writable` line"):
        parse_output_dir("user root\npath /x\nbase /\ndf:\n")


def test_refuse_node_dirs_names_node_dir_and_user_before_anything_is_written(tmp_path):
    _make_run(tmp_path)
    before = _listing(tmp_path)
    targets = {"node01": Target("node01", address="local")}
    with pytest.raises(ConfigError) as err:
        run_dir.refuse_node_dirs(targets, FanoutOptions(), str(tmp_path), {}, resume=False,
                                 min_free_gb=10**9)
    msg = err.value.message
    assert f"node01: {tmp_path} already holds a run" in msg
    assert "GB free, the job's bound is 1e+09 GB" in msg
    assert _listing(tmp_path) == before
    run_dir.refuse_node_dirs(targets, FanoutOptions(), str(tmp_path), {}, resume=True, min_free_gb=0)


@pytest.mark.skipif(not ROOT, reason="mounts a read-only tmpfs (root and unshare)")
def test_a_copy_onto_a_read_only_node_dir_is_a_message_not_a_traceback(tmp_path):
    # fleet.sessions' LocalSession and SshSession raise the same ConfigError (SFTP says only "Failure")
    src = tmp_path / "config.yaml"
    src.write_text("x: 1\n")
    (tmp_path / "ro").mkdir()
    code = ("import sys; from pathlib import Path; from ascend_ready.fleet.sessions import LocalSession\n"
            "from ascend_ready.errors import ConfigError\n"
            "try:\n    LocalSession('node01').put_file(Path(sys.argv[1]), sys.argv[2])\n"
            "except ConfigError as e:\n    print(e.message)")
    wrapped = f"mount -t tmpfs -o ro tmpfs {tmp_path}/ro && exec \"$0\" -c \"$1\" \"$2\" \"$3\""
    import sys

    proc = subprocess.run(["unshare", "-m", "sh", "-c", wrapped, sys.executable, code, str(src),
                           f"{tmp_path}/ro/r4/config.yaml"], capture_output=True, text=True)
    want = f"node01: cannot write {tmp_path}/ro/r4/config.yaml: Read-only file system"
    assert proc.stdout.strip() == want, proc.stdout + proc.stderr


def test_resume_of_a_run_that_stopped_before_its_first_checkpoint_says_there_is_nothing_to_resume(tmp_path):
    # what a job that failed before its first checkpoint leaves: config.yaml, logs/, an empty checkpoints/
    out = tmp_path / "r5"
    (out / "checkpoints").mkdir(parents=True)
    (out / "logs").mkdir()
    (out / "config.yaml").write_text("max_steps: 20\n")
    result = CliRunner().invoke(main, ["grpo", "-c", "tiny", "-o", str(out), "--resume", "--skip-preflight"])
    assert result.exit_code == 2, result.output
    assert "holds only config.yaml, checkpoints of a run that stopped before its first" in result.output
    assert "there is nothing to --resume: start again in another -o" in result.output
    assert "drop --resume" not in result.output  # which the run-dir refusal would then refuse


def test_a_run_dir_made_here_on_a_share_the_job_user_cannot_use_is_refused_and_removed(tmp_path):
    # issue 28: the controller's mkdir makes the shared run dir its own user's; the launch re-tries it
    # on the nodes that share it and, refused, removes what it made (here the node does not answer)
    out = tmp_path / "share" / "r4"
    created = run_dir.missing_parts(out)
    assert created == [out, tmp_path / "share"]
    out.mkdir(parents=True)
    (out / "config.yaml").write_text("x: 1\n")
    marker = out / ".ascend-train-shared-0011"
    marker.write_text("0011")
    node = {"node01": Target("node01", address="127.0.0.1", port=1, user="root")}
    with pytest.raises(ConfigError, match="node01: unreachable"):
        run_dir.recheck_made_here(node, FanoutOptions(connect_timeout_s=2), str(out), {}, created,
                                  [out / "config.yaml", marker])
    assert os.listdir(tmp_path) == []
    run_dir.recheck_made_here(node, FanoutOptions(), str(out), {}, [], [])  # it was there before: tried first
