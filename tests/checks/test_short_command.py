"""fleet's one short-command API (Session.run -> CommandResult) and its one become (fleet/become.py), on
this machine and over SSH (the fake sshd runs /bin/sh here): stdout and stderr apart, the exit status, a
time limit that stops the command on the node, not only the controller's wait, and `user=` through the
same sudo wrapper a job's command line uses."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

import pytest
from checks_sshd import FakeSshd

from ascend_ready.fleet.become import Become, as_user
from ascend_ready.fleet.sessions import LocalSession, open_sessions
from ascend_ready.fleet.transport import FanoutOptions, Target


def running(token: str) -> list[int]:
    """Pids of live processes whose command line holds `token` (zombies do not count)."""
    out = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if token in cmdline.read_bytes().decode(errors="replace") and state != "Z":
                out.append(int(cmdline.parent.name))
        except OSError:
            continue
    return out


def gone(token: str, within_s: float = 10.0) -> bool:
    end = time.monotonic() + within_s
    while running(token) and time.monotonic() < end:
        time.sleep(0.1)
    return not running(token)


@pytest.fixture
def ssh_session(tmp_path):
    with FakeSshd(tmp_path) as server:
        (tmp_path / "known_hosts").write_text(server.known_hosts_line())
        (tmp_path / "ssh_config").touch()
        t = Target(name="node07", address="127.0.0.1", port=server.port, user=server.user,
                   key_file=str(server.client_key_path))
        opts = FanoutOptions(known_hosts_file=str(tmp_path / "known_hosts"),
                             ssh_config_file=str(tmp_path / "ssh_config"), connect_timeout_s=5)
        with open_sessions([t], opts) as sessions:
            yield sessions["node07"]


@pytest.fixture(params=["local", "ssh"])
def session(request, tmp_path):
    if request.param == "local":
        return LocalSession("local")
    return request.getfixturevalue("ssh_session")


def test_stdout_and_stderr_come_apart_with_the_exit_status(session):
    res = session.run("echo out; echo err >&2; exit 3", 10)
    assert (res.rc, res.stdout, res.stderr, res.timed_out, res.ok) == (3, "out\n", "err\n", False, False)
    assert res.output == "out\nerr\n"
    assert session.run("true", 10).ok


def test_a_command_past_its_time_is_stopped_on_the_node(session):
    token = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    started = time.monotonic()
    # a child of the command's shell, as a tool would start one: the whole group goes
    res = session.run(f"echo begun; sleep 30{token} & sleep 31{token}; echo never", 1)
    assert res.timed_out and res.rc in (124, 137) and res.stdout == "begun\n", res
    assert time.monotonic() - started < 15
    assert gone(token), f"left running on the node: {running(token)}"


def test_user_becomes_through_one_sudo_wrapper(tmp_path, monkeypatch):
    # a sudo that records its arguments and runs the command (the node's own sudo is not ours to use)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sudo").write_text(f"#!/bin/sh\necho \"$*\" >>{tmp_path}/log\nshift 5\nexec \"$@\"\n")
    (bin_dir / "sudo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    session = LocalSession("local")
    assert session.run("echo hi", 10, user="train").stdout == "hi\n"
    assert (tmp_path / "log").read_text() == "-n -H -u train -- /bin/sh -c echo hi\n"
    assert session.run("echo me", 10, user=session.login_user).stdout == "me\n"  # no sudo for oneself
    assert (tmp_path / "log").read_text().count("\n") == 1
    # the job's command line (fleet/plan.py) and the Ray cluster's become the same way
    assert as_user("x", "train", "ops") == Become("train").command("x", "ops")
    assert shlex.split(as_user("x", "train", "ops"))[:6] == ["sudo", "-n", "-H", "-u", "train", "--"]
    assert as_user("x", None, "ops") == as_user("x", "ops", "ops") == "/bin/sh -c x"


def test_the_batch_become_refuses_a_password_with_a_line_break():
    from ascend_ready.errors import HostUnreachable

    with pytest.raises(HostUnreachable, match="line break"):
        Become("root", "a\nb").stdin_shell("node01", "ops")
    assert Become("root").stdin_shell("node01", "root") == ("/bin/sh -s", None)
