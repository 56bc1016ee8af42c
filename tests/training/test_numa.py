"""NUMA binding against the layout a simulated Atlas 800T A2 presents (real captures, sim/hw/numa.py): the
launcher's node per rank, and the wrapper when the process may use fewer CPUs than the host has."""

from __future__ import annotations

import os

import pytest

from ascend_ready.sim.hw import numa as sim_numa
from ascend_ready.sim.hw.state import NodeView, initial_state
from ascend_ready.sim.render import npu_smi
from ascend_ready.training import numa


@pytest.fixture(scope="module")
def a2():
    """(npu-smi info -t topo, `grep -H . .../node*/cpulist`) as a simulated A2 node prints them."""
    state = initial_state("atlas-800t-a2", node_index=0, node_name="node01")
    host = sim_numa.host_cpu(state)
    return npu_smi.topo(NodeView(state=state)), sim_numa.grep_node_cpulists(host), state


def test_each_of_eight_ranks_gets_the_node_its_npus_affinity_lies_in(a2):
    topo, grep, state = a2
    bindings = numa.rank_bindings(list(range(8)), 8, topo, grep)
    # npu-smi's affinities 144-167 / 0-23 / ... on 24-CPU nodes; the NPUs' PCI NUMA node agrees
    assert [b.node for b in bindings] == [6, 0, 6, 0, 4, 2, 4, 2]
    assert [b.node for b in bindings] == [f["numa_node"] for f in state["pci_functions"]]
    nodes = numa.parse_node_cpulists(grep)
    assert len(nodes) == 8 and all(numa.parse_cpulist(b.cpus) <= nodes[b.node] for b in bindings)
    assert numa.encode(bindings) == "6,0,6,0,4,2,4,2"


def test_a_rank_whose_nodes_cpus_it_may_not_use_runs_unbound_and_says_why(monkeypatch):
    """sched_setaffinity fallback (no numactl) in a cpuset of CPUs 0-1 on a 192-CPU host."""
    monkeypatch.setattr(numa.shutil, "which", lambda _: None)
    monkeypatch.setattr(numa, "_node_cpus", lambda node: set(range(24 * node, 24 * node + 24)))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    bound = []
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: bound.append(set(cpus)))
    _argv, line = numa.worker_argv(["grpo"], {"LOCAL_RANK": "1", "RANK": "1", numa.NUMA_ENV: "0,6"})
    assert bound == [] and "not bound: the CPUs of NUMA node 6 (144-167) are outside" in line
    _argv, line = numa.worker_argv(["grpo"], {"LOCAL_RANK": "0", "RANK": "0", numa.NUMA_ENV: "0,6"})
    assert bound == [{0, 1}] and "CPUs of NUMA node 0 (0-1; numactl is not installed" in line


def test_the_simulated_numactl_binds_the_real_cpus_standing_for_the_node(monkeypatch):
    host = sim_numa.KUNPENG_920_4P
    monkeypatch.setattr(sim_numa, "node_allowed_cpus", lambda: [0, 1])
    bound = []
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: bound.append(set(cpus)))
    env: dict[str, str] = {}
    text, rc, command = sim_numa.numactl(host, ["--cpunodebind=6", "--membind=6", "python3", "-V"], env)
    assert (rc, command, bound) == (0, ["python3", "-V"], [{1}])  # nodes 4-7 stand on the second CPU
    show = sim_numa.numactl_show(host, env)
    assert "cpubind: 6 \n" in show and "membind: 6 \n" in show and "policy: bind" in show
    sim_numa.numactl(host, ["-N", "2", "true"], {})
    assert bound[-1] == {0}
    sim_numa.numactl(host, ["-N", "6", "true"], {}, node_index=1)  # the second simulated node: rotated
    assert bound[-1] == {0}
    text, rc, command = sim_numa.numactl(host, ["--cpunodebind=8", "true"], {})
    assert rc == 1 and command is None and "<8> is invalid" in text
