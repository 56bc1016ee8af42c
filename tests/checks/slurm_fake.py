"""A slurmctld stand-in for the health check's calls, printing what Slurm 22.05.8 (Debian's slurm-wlm, the
one the simulated cluster runs) prints: tests/checks/data/sinfo-partition_slurm-22.05.8.txt is its
`sinfo -h -N -o '%N|%P|%T|%u|%H|%E'` after `scontrol update NodeName=node02 State=DRAIN Reason=...` (user
root, the reason's time in SLURM_TIME_FORMAT's standard form) and node04 drained by hand; an idle node has
`Unknown|Unknown|none`. Resume clears the reason (user and time back to Unknown); Comment= is kept apart."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

CAPTURE = Path(__file__).parent / "data" / "sinfo-partition_slurm-22.05.8.txt"


@dataclass
class Node:
    state: str = "idle"
    user: str = "Unknown"
    time: str = "Unknown"
    reason: str = "none"
    comment: str = ""


class FakeSlurm:
    """Nodes of one partition `main` (the default: sinfo prints `main*`)."""

    def __init__(self, nodes: dict[str, Node] | None = None, clock: datetime | None = None):
        self.nodes = nodes or {f"node{i:02d}": Node() for i in range(1, 5)}
        self.clock = clock or datetime(2026, 12, 2, 6, 38, 5)
        self.calls: list[list[str]] = []

    @classmethod
    def from_capture(cls, text: str | None = None) -> FakeSlurm:
        nodes = {}
        for line in (text or CAPTURE.read_text()).splitlines():
            name, _part, state, user, time, reason = line.split("|", 5)
            nodes[name] = Node(state, user, time, reason)
        return cls(nodes)

    def line(self, name: str, fmt: str) -> str:
        n = self.nodes[name]
        fields = {"%N": name, "%P": "main*", "%T": n.state, "%u": n.user, "%H": n.time, "%E": n.reason}
        return "|".join(fields[f] for f in fmt.split("|"))

    def __call__(self, argv, timeout):
        self.calls.append(list(argv))
        if argv[0] == "sinfo":
            fmt = argv[argv.index("-o") + 1]
            names = [argv[argv.index("-n") + 1]] if "-n" in argv else sorted(self.nodes)
            out = "".join(self.line(n, fmt) + "\n" for n in names if n in self.nodes)
            return subprocess.CompletedProcess(argv, 0, out, "")
        update = dict(a.split("=", 1) for a in argv[2:])
        node = self.nodes[update["NodeName"]]
        if "Comment" in update:
            node.comment = update["Comment"]
        if update.get("State") == "DRAIN":
            node.state, node.user, node.reason = "drained", "root", update["Reason"]
            node.time = self.clock.isoformat()
        elif update.get("State") == "RESUME":
            node.state, node.user, node.time, node.reason = "idle", "Unknown", "Unknown", "none"
        return subprocess.CompletedProcess(argv, 0, "", "")

    def tick(self, seconds: float = 1.0) -> None:
        self.clock += timedelta(seconds=seconds)

    @property
    def updates(self):
        return [c for c in self.calls if c[0] == "scontrol"]
