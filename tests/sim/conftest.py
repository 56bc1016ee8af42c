"""Fixtures of the simulator's own tests: run a shell command on a node over real SSH."""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Result:
    rc: int
    out: str
    err: str


@pytest.fixture(scope="session")
def remote(sim_ssh):
    """`remote(node, cmd, user="root")` -> Result(rc, out, err), over paramiko with strict host keys."""

    def run(name: str, cmd: str, user: str = "root", timeout: float = 60) -> Result:
        client = sim_ssh(name, user)
        stdin, stdout, stderr = client.exec_command(cmd, timeout=timeout)
        try:
            stdin.close()
            out, err = stdout.read().decode(), stderr.read().decode()
            return Result(stdout.channel.recv_exit_status(), out, err)
        finally:
            # Closed here, in this thread: a channel file left to the garbage collector may be finalised
            # inside paramiko's transport thread, whose close then deadlocks against SSHClient.close.
            for f in (stdin, stdout, stderr):
                f.close()
            client.close()

    return run
