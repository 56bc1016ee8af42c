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
        _stdin, stdout, stderr = client.exec_command(cmd, timeout=timeout)
        out, err = stdout.read().decode(), stderr.read().decode()
        return Result(stdout.channel.recv_exit_status(), out, err)

    return run
