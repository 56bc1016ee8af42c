"""The probe batch ends with its session: a tool whose child double-forks (escaping the process tree, to
init, with the batch's output pipe held open) leaves nothing behind, whether the batch ends on its own
(the escaped child is reaped before END) or the controller goes away mid-batch (the watchdog sees the
session leader's parent, sshd, gone and stops the whole session). The fault is the one a fault sweep
on simulated nodes found: `npu-smi` hung on node02 with a double-forked child (issue 18)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascend_ready.checks.cli import main
from ascend_ready.checks.probes import Probe, build_script

pytestmark = pytest.mark.skipif(not Path("/proc/uptime").exists(), reason="needs /proc (Linux)")


def fake_tools(tmp_path: Path, token: str) -> Path:
    """An `npu-smi` that hangs after double-forking a child (reparented to init, holding stdout)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "npu-smi"
    tool.write_text(f"#!/bin/sh\n( sh -c 'exec sleep 3{token}' & )\n: >{tmp_path}/started\n"
                    f"exec sleep 4{token}\n")
    tool.chmod(0o755)
    return bin_dir


def left(token: str) -> list[int]:
    """Pids of processes still running one of the fake tool's sleeps (zombies do not count)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token in stat.read_bytes().decode(errors="replace"):
                state = (stat.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    out.append(int(stat.parent.name))
        except OSError:
            continue
    return out


def until(predicate, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_double_forked_child_is_gone_when_ascend_check_returns(tmp_path, monkeypatch):
    token = str(os.getpid())[-4:] + "91"
    monkeypatch.setenv("PATH", f"{fake_tools(tmp_path, token)}:{os.environ['PATH']}")
    started = time.monotonic()
    result = CliRunner().invoke(main, ["--select", "npu.count", "--timeout", "1", "--host-deadline", "60"])
    took = time.monotonic() - started
    assert result.exit_code == 1 and "npu-smi info` timed out after 1 s" in result.stdout
    assert left(token) == []
    assert took < 20, took  # not the 60 s host deadline: the escaped child no longer holds the output


def test_the_batch_stops_when_the_controller_goes_away(tmp_path):
    """A stand-in sshd (the session leader's parent) is killed mid-batch, as sshd exits when the
    controller's connection closes: the watchdog stops the batch, the hung tool and its escaped child."""
    token = str(os.getpid())[-4:] + "92"
    env = {**os.environ, "PATH": f"{fake_tools(tmp_path, token)}:{os.environ['PATH']}"}
    script, _ = build_script([Probe("npu-smi-info", argv=("npu-smi", "info"))], default_timeout_s=120,
                             budget_s=120)
    sshd = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         "p = subprocess.Popen(['/bin/sh', '-s'], stdin=subprocess.PIPE, stdout=subprocess.PIPE, "
         "start_new_session=True)\n"
         "p.stdin.write(sys.stdin.buffer.read()); p.stdin.close()\n"
         "print(p.pid, flush=True); time.sleep(600)\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    try:
        sshd.stdin.write(script)
        sshd.stdin.close()
        batch = int(sshd.stdout.readline())
        assert until(lambda: (tmp_path / "started").exists() and len(left(token)) == 2, 30), left(token)
        sshd.kill()
        sshd.wait()
        # the watchdog looks every 0.5 s, then TERM, and KILL 2 s later for what is left
        assert until(lambda: (not left(token) and not Path(f"/proc/{batch}/stat").exists())
                     or _zombie(batch), 15), left(token)
    finally:
        sshd.kill()
        for pid in left(token):  # only the fake tool's own sleeps, by pid
            os.kill(pid, 9)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
