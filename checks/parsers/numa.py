"""NUMA layout readers: the kernel's cpulist format (sysfs, and npu-smi's CPU Affinity column) and the
`grep -H . /sys/devices/system/node/node*/cpulist` listing of a host's NUMA nodes."""

from __future__ import annotations

import re

from ascend_ready.errors import ParseError

NODE_CPULISTS = "/sys/devices/system/node/node*/cpulist"
_NODE_LINE = re.compile(r"^/sys/devices/system/node/node(\d+)/cpulist:(.*)$")


def parse_cpulist(text: str) -> set[int]:
    """`0-23,48-71` -> the CPU numbers; ValueError for anything else."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.strip().split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"not a CPU list: {text.strip()!r}")
        cpus.update(range(int(lo), int(hi if sep else lo) + 1))
    return cpus


def parse_node_cpulists(text: str) -> dict[int, set[int]]:
    """`grep -H . .../node*/cpulist` -> NUMA node -> its CPUs. A line of another shape is a ParseError, except
    grep's own complaint when the glob matched nothing (a kernel without NUMA: no node listed)."""
    nodes: dict[int, set[int]] = {}
    for no, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or (line.startswith("grep:") and "No such file" in line):
            continue
        m = _NODE_LINE.match(line)
        if not m:
            raise ParseError("numa-nodes", "not a `node<N>/cpulist:<cpus>` line", line_no=no, line=line)
        try:
            nodes[int(m[1])] = parse_cpulist(m[2])
        except ValueError:
            raise ParseError("numa-nodes", "the CPU list is not the kernel's cpulist format",
                             line_no=no, line=line) from None
    return nodes


def format_cpulist(cpus) -> str:
    """The kernel's cpulist spelling of a CPU set: {0, 1, 2, 5} -> `0-2,5`."""
    parts: list[list[int]] = []
    for c in sorted(cpus):
        if parts and parts[-1][1] == c - 1:
            parts[-1][1] = c
        else:
            parts.append([c, c])
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in parts)
