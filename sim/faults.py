"""Inject and clear faults on a running node: its hardware (ascend_ready.sim.hw), the cluster's fabric
(ascend_ready.sim.fabric) and its CPU (ascend_ready.sim.cgroup).

Hardware: the node's simdir is rewritten (state.json, gen, sysfs, dmesg), its /dev is resynced and
file-level faults are applied to its root. Fabric: <run-dir>/fabric/fabric.json is rewritten, which every
node reads at its next ping. CPU: the node's processes move into a cgroup with a quota. No node restarts.
"""

from __future__ import annotations

import json
from pathlib import Path

from ascend_ready.errors import ConfigError, SimError
from ascend_ready.sim import cgroup, cluster
from ascend_ready.sim.nodeinit import populate_dev

CPU_THROTTLE = "cpu-throttle"
NIC_SLOW = "nic-slow"


def parse_params(pairs: tuple[str, ...] | list[str]) -> dict:
    """`k=v` strings -> a dict; values are read as JSON where they parse (numbers, true/false), else text."""
    out: dict = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"bad --param {pair!r}", hint="write it as key=value, e.g. --param npu=3")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def catalog() -> dict[str, tuple[str, object]]:
    """Every fault kind `ascend-sim fault` takes: kind -> (scope "node" | "cluster", its FaultSpec)."""
    hw = cluster.hardware_api()
    if hw is None:
        return {}
    from ascend_ready.sim import fabric

    throttle = hw.FaultSpec(
        "the node's processes share a CPU quota (cgroup cpu.max, or v1 cpu.cfs_quota_us): a straggler",
        ("everything the node runs",), {"pct": 25}, {"pct": "percent of one CPU the whole node may use"})
    kinds = {kind: ("node", spec) for kind, spec in hw.FAULTS.items()}
    kinds.update({kind: ("cluster", spec) for kind, spec in fabric.FAULTS.items()})
    # The shape of NVIDIA/nccl-tests#106: every pair all-reduce with one node ran at ~56 % of the others
    # (49 against 88 GB/s) and the maintainer named that node ("node 644 has a problem and is slow").
    slow = hw.FaultSpec(
        "the node's network port carries at most `mbit` Mbit/s each way (a port negotiated down, a bad "
        "cable; tc tbf on its eth0 and on its bridge port): its collectives are slow, its compute is not",
        ("every connection of the node",), {"mbit": 200}, {"mbit": "Mbit/s the port carries each way"})
    kinds[CPU_THROTTLE] = ("node", throttle)
    kinds[NIC_SLOW] = ("node", slow)
    return kinds


def change(node_name: str, kind: str | None, params: dict) -> dict:
    """Inject fault `kind` with params into the node, or clear all its faults when kind is None.

    Returns what changed: the node's hardware state, the fabric (a cluster fault), the throttle record or
    the port's rate. Clearing clears the node's hardware faults, the cluster faults that name it, its CPU
    quota and its port's rate cap."""
    cluster.require_root()
    c = cluster.load_running()
    node = c.node(node_name)
    if not node.alive():
        raise SimError(f"{node_name} is not running")
    kinds = catalog()
    if kind is not None and kind not in kinds:
        raise ConfigError(f"unknown fault kind {kind!r}", hint=f"choose from: {', '.join(sorted(kinds))}")
    if kind is None:
        cgroup.release(node.pid, node.dir(c.run_dir))
        c.net.unshape(node.index, node.pid)
        _change_fabric(c, lambda fab, doc: fab.clear(doc, node.name))
    elif kind == NIC_SLOW:
        unknown = set(params) - {"mbit"}
        if unknown:
            raise ConfigError(f"fault {kind}: unknown parameter(s) {', '.join(sorted(unknown))}",
                              hint="parameters of nic-slow: mbit")
        mbit = params.get("mbit", 200)
        if isinstance(mbit, bool) or not isinstance(mbit, int | float) or not 0 < mbit <= 100_000:
            raise ConfigError(f"fault {kind}: mbit must be in (0, 100000], not {mbit!r}",
                              hint="e.g. --param mbit=200")
        c.net.shape(node.index, node.pid, mbit)
        return {"mbit": mbit, "eth0": c.net.shaped(node.pid)}
    elif kind == CPU_THROTTLE:
        unknown = set(params) - {"pct"}
        if unknown:
            raise ConfigError(f"fault {kind}: unknown parameter(s) {', '.join(sorted(unknown))}",
                              hint="parameters of cpu-throttle: pct")
        return cgroup.throttle(node.pid, node.dir(c.run_dir), c.run_dir, node.name, params.get("pct", 25))
    elif kinds[kind][0] == "cluster":
        return _change_fabric(c, lambda fab, doc: fab.inject(doc, node.name, kind, **params))
    return _change_hardware(c, node, kind, params)


def _change_fabric(c: cluster.Cluster, edit) -> dict | None:
    """Rewrite the cluster's fabric.json with `edit(fabric_module, doc)`, under the run dir's lock."""
    from ascend_ready.sim import fabric

    root = cluster.fabric_dir(c.run_dir)
    with cluster.run_dir_lock(c.run_dir):
        doc = fabric.load(root)
        if doc is None:
            return None  # a cluster started without the hardware model, or before the fabric existed
        doc = edit(fabric, doc)
        fabric.save(root, doc)
    return doc


def _peer_address(c: cluster.Cluster, hw, params: dict) -> dict:
    """device-ip-duplicate with peer=NODE: the address (and netmask) the peer's device holds now."""
    from ascend_ready.sim.hw.state import NodeView

    peer = c.node(params["peer"])
    default = hw.FAULTS["device-ip-duplicate"].params["device"]
    device = int(params.pop("same_as", params.get("device", default)))
    view = NodeView.load(peer.simdir(c.run_dir), Path(f"/proc/{peer.pid}/root"))
    address = view.nic_value(device, "address")
    if address is None:
        raise SimError(f"{peer.name} device {device} has no IP to copy",
                       hint=f"set one first: ascend-sim exec {peer.name} -- hccn_tool -i {device} -ip -s "
                            "address A.B.C.D netmask M.M.M.M")
    return {**params, "same_as": device, "address": address, "netmask": view.nic_value(device, "netmask")}


def _change_hardware(c: cluster.Cluster, node: cluster.Node, kind: str | None, params: dict) -> dict:
    hw = cluster.hardware_api()
    simdir = node.simdir(c.run_dir)
    if hw is None or not (simdir / "state.json").is_file():
        if kind is None:
            return {}  # nothing to clear
        raise SimError(f"{node.name} was started without the hardware model",
                       hint="restart the cluster: ascend-sim down; ascend-sim up N")
    state = json.loads((simdir / "state.json").read_text())
    devices_before = hw.device_nodes(state)
    if kind is None:
        state = hw.clear_faults(state)
    else:
        if kind == "device-ip-duplicate" and params.get("peer") is not None and "address" not in params:
            params = _peer_address(c, hw, dict(params))
        try:
            state = hw.inject_fault(state, kind, **params)
        except (TypeError, ValueError, KeyError) as exc:
            raise ConfigError(f"fault {kind}: {exc}",
                              hint="see `ascend-sim faults` for its parameters") from None
    hw.write_simdir(state, simdir)
    root = Path(f"/proc/{node.pid}/root")
    populate_dev(root, hw.device_nodes(state), previous=devices_before)
    hw.apply_root_faults(state, root)
    return state
