"""A short command on a node: one result shape for every session (fleet/sessions.py `Session.run`), its
stdout and stderr apart, and a time limit kept on the node itself, so a command the controller gave up on
does not go on running there (as the probe batch's watchdog stops an overrunning probe).

Three ways to run something on a node, which differ in how long it lives, not in how it reaches the node
or becomes the user (fleet/become.py): the probe batch (fleet/transport.py `run_script`), a short command
(`Session.run`, here) and a job streamed and stopped on many nodes (fleet/job.py `run_job`).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

__all__ = ["GRACE_S", "TIMEOUT_RC", "UNREACHABLE_RC", "CommandResult", "bounded"]

#: what a command gets between TERM and KILL on the node once its time is up
GRACE_S = 5
#: the exit status of a command stopped at its time limit (coreutils `timeout`: 124, or 137 after KILL)
TIMEOUT_RC = 124
#: the exit status of a command whose node could not be reached (ssh(1)'s own)
UNREACHABLE_RC = 255


@dataclass(frozen=True)
class CommandResult:
    """How a short command ended: its exit status, stdout and stderr, and whether its time ran out."""

    rc: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out

    @property
    def output(self) -> str:
        """stdout then stderr, for a message that quotes what the command said."""
        if self.stdout and self.stderr and not self.stdout.endswith("\n"):
            return f"{self.stdout}\n{self.stderr}"
        return self.stdout + self.stderr


def bounded(command: str, timeout_s: float) -> str:
    """`command` (a shell command line) stopped on the node after `timeout_s`: coreutils `timeout` runs it
    in a process group of its own and signals the whole group (TERM, then KILL GRACE_S later). A node
    without `timeout` runs it unbounded; the controller still stops waiting (Session.run)."""
    limit = max(1, math.ceil(timeout_s))
    inner = shlex.quote(command)
    return (f"if command -v timeout >/dev/null 2>&1; then "
            f"exec timeout -k {GRACE_S} {limit} /bin/sh -c {inner}; else exec /bin/sh -c {inner}; fi")
