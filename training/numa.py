"""NUMA binding of each rank to its NPU's node, as field guides do by hand with `numactl`: which node
an NPU hangs off (its CPU affinity in `npu-smi info -t topo`, mapped onto the node CPU lists in sysfs),
and the per-rank wrapper torchrun starts, which binds the worker and then becomes it.

    python -m ascend_ready.training.numa ARGS...   (torchrun's worker module; ARGS go to the CLI)

reads LOCAL_RANK and ASCEND_TRAIN_NUMA (one NUMA node per local rank, `-` for none), says the binding,
then execs `numactl --cpunodebind=N --membind=N python -m ascend_ready.training.cli ARGS` (or, without
numactl, binds the CPUs itself with sched_setaffinity; memory then follows first touch).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass

from ascend_ready.checks.cluster.node_facts import npu_numa
from ascend_ready.checks.parsers.numa import NODE_CPULISTS, format_cpulist, parse_cpulist, parse_node_cpulists

NUMA_ENV = "ASCEND_TRAIN_NUMA"
CLI_MODULE = "ascend_ready.training.cli"
#: what the node probe runs and the launcher reads (the checks' parser of the same listing)
__all__ = ["NODE_CPULISTS", "RankBinding", "encode", "format_cpulist", "parse_cpulist", "parse_node_cpulists",
           "rank_bindings", "worker_argv"]


@dataclass(frozen=True)
class RankBinding:
    """The NUMA node of one local rank's NPU, or None with the reason it is not bound."""

    local_rank: int
    device: int | None
    node: int | None
    cpus: str = ""
    reason: str = ""

    def describe(self) -> str:
        dev = f"NPU {self.device}" if self.device is not None else "no NPU"
        if self.node is None:
            return f"local rank {self.local_rank} ({dev}): not bound: {self.reason}"
        return (f"local rank {self.local_rank} ({dev}): NUMA node {self.node}, CPUs {self.cpus} "
                f"(numactl --cpunodebind={self.node} --membind={self.node})")


def rank_bindings(devices: list[int], nproc: int, topo_text: str | None, nodes_text: str | None
                  ) -> list[RankBinding]:
    """Local rank i runs on the i-th visible device; its node is where that NPU's CPU affinity lies
    (checks/cluster/node_facts.py `npu_numa`, from the node's `npu-smi info -t topo` and sysfs listing).

    Every rank without a known node says why, so the binding shown per rank is never a guess.
    """

    def unbound(reason: str) -> list[RankBinding]:
        return [RankBinding(i, devices[i] if i < len(devices) else None, None, reason=reason)
                for i in range(nproc)]

    if not devices:
        return unbound("no NPU is assigned to it (a CPU job, or the spec lists no healthy devices)")
    affinity = npu_numa(topo_text, nodes_text)
    if affinity.reason:
        return unbound(affinity.reason)
    out = []
    for i in range(nproc):
        device = devices[i] if i < len(devices) else None
        node, cpus, reason = affinity.of(device)
        out.append(RankBinding(i, device, node, cpus=cpus, reason=reason))
    return out


def encode(bindings: list[RankBinding]) -> str:
    """ASCEND_TRAIN_NUMA: the node of each local rank, `-` where unbound (`3,3,0,0,-`)."""
    return ",".join("-" if b.node is None else str(b.node) for b in bindings)


def _node_cpus(node: int) -> set[int]:
    with open(f"/sys/devices/system/node/node{node}/cpulist") as fh:
        return parse_cpulist(fh.read())


def worker_argv(args: list[str], environ: dict[str, str]) -> tuple[list[str], str]:
    """(the argv this wrapper execs, the line it prints) for this local rank."""
    local_rank = int(environ.get("LOCAL_RANK", "0"))
    rank = environ.get("RANK", "?")
    nodes = environ.get(NUMA_ENV, "").split(",")
    node = nodes[local_rank] if local_rank < len(nodes) else "-"
    plain = [sys.executable, "-u", "-m", CLI_MODULE, *args]
    if node in ("-", ""):
        return plain, f"numa: rank {rank} (local {local_rank}): not bound"
    numactl = shutil.which("numactl")
    if numactl:
        return ([numactl, f"--cpunodebind={node}", f"--membind={node}", *plain],
                f"numa: rank {rank} (local {local_rank}): numactl --cpunodebind={node} --membind={node}")
    cpus = _node_cpus(int(node))
    # A container's cpuset (or a scheduler's) may leave this process fewer CPUs than the host has: bind to
    # the node's CPUs it may use, and run unbound, saying so, when it may use none of them.
    usable = cpus & os.sched_getaffinity(0)
    if not usable:
        return plain, (f"numa: rank {rank} (local {local_rank}): not bound: the CPUs of NUMA node {node} "
                       f"({format_cpulist(cpus)}) are outside those this process may use "
                       f"({format_cpulist(os.sched_getaffinity(0))}; a container's cpuset?)")
    os.sched_setaffinity(0, usable)  # inherited through exec; memory follows first touch on those CPUs
    return plain, (f"numa: rank {rank} (local {local_rank}): CPUs of NUMA node {node} "
                   f"({format_cpulist(usable)}; numactl is not installed, memory is not bound)")


def main() -> None:
    argv, line = worker_argv(sys.argv[1:], dict(os.environ))
    print(line, file=sys.stderr, flush=True)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
