"""On a simulated Atlas 800T A2 node (a 4 x Kunpeng 920 host: 192 CPUs, 8 NUMA nodes), each of 8 ranks runs
bound to its NPU's NUMA node: the launcher's bindings from the node's own `npu-smi info -t topo` and sysfs
node files, each rank started as torchrun starts it (the NUMA wrapper module with LOCAL_RANK, RANK and
ASCEND_TRAIN_NUMA), read back from /proc/PID/status once it has become the training CLI."""

from __future__ import annotations

import re
import sys

import pytest
from sim_support import cluster_up, node_run, own_cluster

from ascend_ready.sim.hw import numa as sim_numa
from ascend_ready.training import numa

pytestmark = pytest.mark.sim

RUN_DIR, SUBNET = own_cluster("numa", 6)  # default /run/ascend-sim-pytest-numa, 10.251.200.192/27
TOOL = "PYTHONPATH=/opt/ascend-sim/lib /opt/ascend-sim/bin/python3 -S -m ascend_ready.sim.node.tool"

# Start 8 ranks in the background, wait until each has exec'd into the CLI (the binding is final then), print
# each rank's status lines and binding record, stop them. $1: ASCEND_TRAIN_NUMA; $2: python.
RANKS = r"""
CLI=ascend_ready.training.cli
pids=
for r in 0 1 2 3 4 5 6 7; do
  LOCAL_RANK=$r RANK=$r ASCEND_TRAIN_NUMA=$1 "$2" -m ascend_ready.training.numa ppo -c tiny \
    -o /tmp/numa-rank$r --skip-preflight launch.device=cpu >/tmp/numa-rank$r.log 2>&1 &
  pids="$pids $!"
done
for p in $pids; do
  n=0
  # the CLI itself, not numactl or the simulator's tool whose arguments still name it
  until tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q "^[^ ]*python[^ ]* -u -m $CLI "; do
    n=$((n + 1))
    [ $n -gt 600 ] && { echo "rank pid $p never became the CLI"; cat /tmp/numa-rank*.log; exit 1; }
    sleep 0.1
  done
done
r=0
for p in $pids; do
  echo "rank $r pid $p $(grep -E '^(Cpus|Mems)_allowed_list' /proc/$p/status | tr '\t\n' '  ')"
  echo "rank $r record $(tr '\0' '\n' < /proc/$p/environ | grep '^ASCEND_SIM_NUMA=')"
  r=$((r + 1))
done
kill $pids 2>/dev/null
wait
"""


@pytest.fixture(scope="module")
def node(sim_host):
    with cluster_up(RUN_DIR, SUBNET, 1, "a2-ubuntu2204") as c:
        if node_run(c, "node01", sys.executable, "-c", "import ascend_ready.training.numa").returncode != 0:
            pytest.skip("the simulated node cannot run this checkout's .venv (no shared filesystem)")
        yield c


def test_the_node_presents_a_kunpeng_host_whose_numa_nodes_agree_with_npu_smi(node):
    lscpu = node_run(node, "node01", "lscpu").stdout
    assert re.search(r"^CPU\(s\):\s+192$", lscpu, re.M) and re.search(r"^NUMA node\(s\):\s+8$", lscpu, re.M)
    hardware = node_run(node, "node01", "numactl", "-H").stdout
    assert hardware.startswith("available: 8 nodes (0-7)\n") and "node 6 cpus: 144 145" in hardware
    nodes = numa.parse_node_cpulists(node_run(node, "node01", "sh", "-c",
                                              f"grep -H . {numa.NODE_CPULISTS}").stdout)
    topo = node_run(node, "node01", "sh", "-c", f"{TOOL} npu-smi info -t topo").stdout
    assert [sorted(nodes[n])[0] for n in sorted(nodes)] == [24 * n for n in range(8)]
    assert "CPU Affinity" in topo and "144-167" in topo


def test_each_of_eight_ranks_runs_bound_to_its_npus_numa_node(node):
    grep = node_run(node, "node01", "sh", "-c", f"grep -H . {numa.NODE_CPULISTS}").stdout
    topo = node_run(node, "node01", "sh", "-c", f"{TOOL} npu-smi info -t topo").stdout
    bindings = numa.rank_bindings(list(range(8)), 8, topo, grep)
    assert [b.node for b in bindings] == [6, 0, 6, 0, 4, 2, 4, 2], [b.describe() for b in bindings]
    allowed = numa.parse_cpulist(re.search(r"Cpus_allowed_list:\s*(\S+)", node_run(
        node, "node01", "cat", "/proc/1/status").stdout)[1])
    out = node_run(node, "node01", "sh", "-c", RANKS, "ranks", numa.encode(bindings), sys.executable,
                   timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    cpus = dict(re.findall(r"^rank (\d) pid \d+ Cpus_allowed_list: (\S+)", out.stdout, re.M))
    records = dict(re.findall(r"^rank (\d) record ASCEND_SIM_NUMA=(\S+)", out.stdout, re.M))
    assert len(cpus) == len(records) == 8, out.stdout
    host, index = sim_numa.KUNPENG_920_4P, node.node("node01").index
    for b in bindings:
        # the presented binding numactl was asked for, and the real CPUs standing for that node's
        assert records[str(b.local_rank)] == f"cpunodebind={b.node};membind={b.node}"
        want = sim_numa.real_cpus(host, sim_numa.node_cpus(host, b.node), sorted(allowed), index)
        assert numa.parse_cpulist(cpus[str(b.local_rank)]) == want, (b.describe(), out.stdout)
    if len(allowed) > 1:  # nodes 0-3 and 4-7 stand on different real CPUs: the binding is observable
        assert cpus["0"] != cpus["1"], out.stdout
