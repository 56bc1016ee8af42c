"""The one entry point for what a job needs to know about its nodes before it starts: `node_facts` runs
one read-only batch per node through the preflight's fan-out (checks/collect.py) and reads it through the
preflight's own Host (checks/resources/launch.py, NumaNodes, NpuTopology) into fleet.plan.NodeFacts:

- the master's address as each node resolves it, the route and addresses toward it (the launcher's NIC,
  the launch spec's routes, the collectives' HCCL interface);
- the login user (whether the job runs through sudo -n -u as the training user);
- the job's paths as the training user, its interpreter as the node's shell expands it and the
  ascend-ready version it imports;
- whether the node sees the controller's run dir (the marker file);
- NPU topology and NUMA nodes (each rank's NUMA binding, training/numa.py).

The multi-node launcher, verl's Ray cluster (both through training/node_probe.py) and the collectives
(checks/cluster/collective_run.py) read their node facts here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ascend_ready.checks.cluster import port_plan
from ascend_ready.checks.collect import collect
from ascend_ready.checks.parsers.npu_smi_topo import parse_npu_smi_topo
from ascend_ready.checks.parsers.numa import parse_cpulist, parse_node_cpulists
from ascend_ready.checks.probes import Probe
from ascend_ready.checks.profile import DEFAULT_PROFILE, HardwareProfile, load_profile
from ascend_ready.checks.resources import Host
from ascend_ready.checks.resources.base import ProbeFailed
from ascend_ready.checks.resources.launch import (
    JobInterpreter,
    JobPaths,
    LoginUser,
    MasterRoute,
    SharedRunDir,
)
from ascend_ready.checks.resources.npu import NPU_SMI_TOPO, NUMA_NODES
from ascend_ready.checks.snapshot import HostSnapshot
from ascend_ready.errors import ParseError, TrainingError
from ascend_ready.fleet.plan import NodeFacts
from ascend_ready.fleet.transport import FanoutOptions, Target

__all__ = ["FactQuery", "NpuNuma", "fact_probes", "node_facts", "npu_numa", "read_facts"]


@dataclass(frozen=True)
class FactQuery:
    """What a launch asks of one node: the master it rendezvouses at, the paths it needs (label -> (test
    flag, path); "python" is the job's interpreter), the controller's marker file and its contents."""

    master: str
    paths: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    marker: str | None = None
    nonce: str | None = None


def fact_probes(query: FactQuery, profile: HardwareProfile | None = None,
                ) -> tuple[list[Probe], dict[str, str]]:
    """The probes of one node's batch, and probe id -> path label (JobPaths)."""
    profile = profile or load_profile(DEFAULT_PROFILE)
    route = MasterRoute.probes_for(query.master)
    probes = [route[0], LoginUser.PROBE, *route[1:], NPU_SMI_TOPO(profile), NUMA_NODES(profile)]
    paths, labels = JobPaths.probes_for(query.paths)
    probes += paths
    if "python" in query.paths:
        probes += JobInterpreter.probes_for(*query.paths["python"])
    if query.marker:
        probes += SharedRunDir.probes_for(query.marker)
    # the ports the job's plan must find free (checks/cluster/port_plan.py judges them)
    probes.append(port_plan.LISTEN_PROBE)
    return probes, labels


def _text(read: Callable[[], str]) -> str | None:
    """A resource's raw text, None where its probe failed or printed nothing (the binding says why)."""
    try:
        return read() if read().strip() else None
    except ProbeFailed:
        return None


def read_facts(snap: HostSnapshot, query: FactQuery, labels: Mapping[str, str],
               profile: HardwareProfile | None = None) -> NodeFacts:
    """NodeFacts from one node's batch, read through the preflight's Host."""
    host = Host(snap, profile or load_profile(DEFAULT_PROFILE))
    route = host.master_route
    facts = NodeFacts(
        login_user=host.login_user.user, master_ip=route.master_ip, route=route.route, addr=route.addr,
        topo=_text(lambda: host.npu_topology.text), numa_nodes=_text(lambda: host.numa_nodes.text),
        sees_output=host.shared_run_dir.sees(query.nonce),
    )
    listen = snap.probes.get(port_plan.LISTEN_PROBE_ID)
    facts.listening = None if listen is None else (listen.rc, listen.stdout)
    facts.missing.update(host.job_paths.missing(labels, query.paths))
    if "python" in query.paths:
        facts.python = host.job_interpreter.python
        if facts.python is None:
            facts.missing["python"] = query.paths["python"][1]
        facts.ascend_ready = host.job_interpreter.ascend_ready
    return facts


def node_facts(targets: Mapping[str, Target], fanout: FanoutOptions, queries: Mapping[str, FactQuery],
               users: Mapping[str, str | None]) -> dict[str, NodeFacts]:
    """Every node's facts, one batch each. `users`: host -> the training user the paths are tested as,
    where it is not the SSH user (the batch then runs through sudo -n, as the job will). TrainingError
    naming the first node whose batch could not run."""
    profile = load_profile(DEFAULT_PROFILE)
    plans = {name: fact_probes(queries[name], profile) for name in targets}
    run_on = [dataclasses.replace(t, become=True) if users.get(name) and not t.become else t
              for name, t in targets.items()]

    def plan(t: Target) -> tuple[list[Probe], str]:
        return plans[t.name][0], users.get(t.name) or t.user or "root"

    facts = {}
    for snap in collect(run_on, plan, fanout):
        if not snap.reachable:
            raise TrainingError(f"{snap.name}: the pre-start probe failed: {snap.error}",
                                hint="check the node's SSH access and, for another training user, sudo -n")
        facts[snap.name] = read_facts(snap, queries[snap.name], plans[snap.name][1], profile)
    return facts


@dataclass(frozen=True)
class NpuNuma:
    """Which NUMA node each NPU of a node hangs off (its CPU affinity in `npu-smi info -t topo`, mapped
    onto the sysfs node CPU lists), or why no NPU of it can be placed (`reason`)."""

    affinity: Mapping[str, str] = field(default_factory=dict)  # topo label (NPU0, Phy-ID0) -> CPUs
    nodes: Mapping[int, set[int]] = field(default_factory=dict)
    reason: str = ""

    def of(self, device: int | None) -> tuple[int | None, str, str]:
        """(NUMA node, the NPU's CPU affinity, why unbound) of one device."""
        label = next((d for d in self.affinity if d in (f"NPU{device}", f"Phy-ID{device}")), None)
        cpus = self.affinity.get(label, "") if label else ""
        if device is None or not cpus or cpus == "NA":
            return None, "", "npu-smi prints no CPU affinity for it"
        node = node_of(parse_cpulist(cpus), dict(self.nodes))
        if node is None:
            return None, "", f"its affinity {cpus} is in no NUMA node"
        return node, cpus, ""


def node_of(cpus: set[int], nodes: dict[int, set[int]]) -> int | None:
    """The NUMA node holding most of `cpus` (an NPU's affinity lies within one node on every host seen)."""
    best = max(nodes, key=lambda n: (len(nodes[n] & cpus), -n), default=None)
    return best if best is not None and nodes[best] & cpus else None


def npu_numa(topo_text: str | None, nodes_text: str | None) -> NpuNuma:
    """NpuNuma from a node's facts (NodeFacts.topo, NodeFacts.numa_nodes: the NpuTopology and NumaNodes
    resources' text); a listing that cannot be read is a reason, never a guessed node."""
    if not topo_text:
        return NpuNuma(reason="`npu-smi info -t topo` is not available on the node")
    try:
        topo = parse_npu_smi_topo(topo_text)
    except ParseError as exc:
        return NpuNuma(reason=f"`npu-smi info -t topo` could not be read: {exc.message}")
    try:
        nodes = parse_node_cpulists(nodes_text or "")
    except ParseError as exc:
        return NpuNuma(reason=f"the sysfs NUMA node list could not be read: {exc.message}")
    if len(nodes) < 2:
        return NpuNuma(reason=f"the node has {len(nodes) or 'no'} NUMA node(s) in sysfs: nothing to choose")
    return NpuNuma({d: topo.cpu_affinity.get(d, "") for d in topo.devices}, nodes)
