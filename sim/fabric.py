"""The cluster's parameter plane (the device NICs' RoCE network): who answers `hccn_tool -ping`; its faults.

The host keeps it in `<run-dir>/fabric/fabric.json` (each node's planes, the cluster-level faults); every
node sees that folder read-only at /var/lib/ascend-sim-cluster, with every node's simdir beside it in
`nodes/<name>`, so a ping resolves its target against what the peers' device NICs really hold. Stdlib only.

A plane is one RoCE network: on an 800T A2 device N of every node is cabled to plane N (rail-optimised
wiring, one switch group per device index), and the planes are not routed to each other. A ping from
node A device i to address T:

1. leaves only if device i's link is UP, it has an address, and T is in its subnet or it has a gateway;
2. is answered by the plane's gateway (the switch) when T is the sender's gateway, else by the device NIC
   on the same plane that holds T (its node's state: the address
   `hccn_tool -ip -s` set, or a fault's, as `hccn_tool -ip -g` prints it there), if its link is UP and the
   plane is not cut between the two nodes (fault `plane-cut`);
3. loses the packets a lossy device (fault `packet-loss`) at either end drops.

Two NICs on one plane holding the same address (a copied hccn.conf) both answer ARP; the sender keeps the
first reply (Linux ARP ignores another reply within `locktime`, 1 s, arp(7)) and talks to that NIC only.
Which one is first depends on timing; here it is a stable hash of (sender, holder), so a sender always
reaches the same holder while another sender may reach the other one, and a down holder never answers.
The ping itself therefore passes: a duplicated IP is found by reading `-ip -g` everywhere, not by pinging.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from ascend_ready.errors import SimError
from ascend_ready.sim.hw.faults import FaultSpec
from ascend_ready.sim.hw.state import NodeView, all_chips, find_chip_by_logic

__all__ = ["CLUSTER_ROOT", "FAULTS", "Echo", "Fabric", "Port", "clear", "echo", "initial", "inject", "load",
           "save"]

#: where a node sees the cluster's fabric folder (read-only), and every node's simdir under nodes/
CLUSTER_ROOT = "/var/lib/ascend-sim-cluster"
FABRIC_FILE = "fabric.json"
SCHEMA = 1

FAULTS: dict[str, FaultSpec] = {
    "plane-cut": FaultSpec(
        "the parameter plane is cut between this node and a peer (both ends' links stay UP): pings "
        "between the two on that plane lose every packet, both ways",
        ("hccn_tool -ping",), {"plane": 0, "peer": None},
        {"plane": "plane (device index) that is cut", "peer": "the node at the other end"}),
    "packet-loss": FaultSpec(
        "a device NIC drops a share of the packets it sends or receives (a dirty optic, a flapping port): "
        "every ping to or from it loses them",
        ("hccn_tool -ping",), {"device": 0, "loss_pct": 66.67},
        {"device": "device (logic) id",
         "loss_pct": "percent of packets dropped: after n, floor(n x loss) are gone (3 at 66.67: 1 back)"}),
}


def cluster_root_from_env() -> Path:
    return Path(os.environ.get("ASCEND_SIM_CLUSTER_ROOT", CLUSTER_ROOT))


# ---------------------------------------------------------------- host side (pure, plus load/save)

def initial(states: Mapping[str, dict]) -> dict:
    """The healthy fabric of nodes `states` (name -> hardware state): device N on plane N."""
    nodes = {name: {"planes": {str(chip["logic_id"]): chip["logic_id"]
                               for _npu, chip in all_chips(state, present_only=False)
                               if chip["nic"] is not None}}
             for name, state in states.items()}
    return {"schema": SCHEMA, "nodes": nodes, "faults": [], "fault_seq": 0}


def load(root: Path) -> dict | None:
    try:
        return json.loads((Path(root) / FABRIC_FILE).read_text())
    except (OSError, ValueError):
        return None


def save(root: Path, doc: dict) -> None:
    """Atomically, so a node's ping never reads half a file."""
    root = Path(root)
    tmp = root / f".{FABRIC_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, root / FABRIC_FILE)


def _planes(doc: dict, node: str) -> dict[str, int]:
    if node not in doc["nodes"]:
        raise SimError(f"no node {node!r} in the cluster's fabric", hint=f"nodes: {', '.join(doc['nodes'])}")
    return doc["nodes"][node]["planes"]


def inject(doc: dict, node: str, kind: str, **params) -> dict:
    """A copy of `doc` with cluster fault `kind` (see FAULTS) injected on `node`."""
    spec = FAULTS.get(kind)
    if spec is None:
        raise SimError(f"unknown cluster fault {kind!r}", hint=f"known: {', '.join(FAULTS)}")
    unknown = set(params) - set(spec.params)
    if unknown:
        raise SimError(f"fault {kind}: unknown parameter(s) {', '.join(sorted(unknown))}",
                       hint=f"parameters of {kind}: {', '.join(spec.params)}")
    p = {**spec.params, **params}
    planes = _planes(doc, node)
    if kind == "plane-cut":
        peer, plane = p["peer"], _int(kind, "plane", p["plane"])
        if not isinstance(peer, str) or peer == node:
            raise SimError(f"plane-cut needs --param peer=<another node>, not {peer!r}")
        if plane not in planes.values() or plane not in _planes(doc, peer).values():
            raise SimError(f"plane-cut: plane {plane} does not reach both {node} and {peer}")
        p = {"plane": plane, "peer": peer}
    else:
        device, loss = _int(kind, "device", p["device"]), p["loss_pct"]
        if str(device) not in planes:
            raise SimError(f"packet-loss: {node} has no device NIC {device}")
        if isinstance(loss, bool) or not isinstance(loss, int | float) or not 0 < loss <= 100:
            raise SimError(f"packet-loss: loss_pct must be a number in (0, 100], not {loss!r}")
        p = {"device": device, "loss_pct": loss}
    new = copy.deepcopy(doc)
    new["fault_seq"] = new.get("fault_seq", 0) + 1
    new["faults"].append({"id": new["fault_seq"], "node": node, "kind": kind, "params": p})
    return new


def _int(kind: str, name: str, value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise SimError(f"fault {kind}: {name}={value!r} is not a number") from None


def clear(doc: dict, node: str) -> dict:
    """A copy of `doc` without the cluster faults that involve `node` (injected on it, or naming it peer)."""
    new = copy.deepcopy(doc)
    new["faults"] = [f for f in doc["faults"] if node not in (f["node"], f["params"].get("peer"))]
    return new


# ---------------------------------------------------------------- node side: who answers a ping

@dataclass(frozen=True)
class Port:
    """One device NIC as its node shows it."""

    node: str
    device: int
    plane: int
    address: str | None
    netmask: str | None
    gateway: str | None
    link_up: bool


@dataclass(frozen=True)
class Echo:
    """The fate of each packet of one ping (True: its reply came back), who answered, and why not."""

    received: tuple[bool, ...]
    peer: Port | None = None
    why: str = ""


def _port(view: NodeView, device: int, plane: int) -> Port | None:
    hit = find_chip_by_logic(view.state, device)
    if hit is None or hit[1]["nic"] is None:
        return None
    return Port(view.state["node"]["name"], device, plane, view.nic_value(device, "address"),
                view.nic_value(device, "netmask"), view.nic_value(device, "gateway"),
                hit[1]["nic"]["link"] == "UP")


def _routable(src: Port, target: str) -> bool:
    if src.address is None or src.netmask is None:
        return False
    try:
        net = ipaddress.ip_network(f"{src.address}/{src.netmask}", strict=False)
        return ipaddress.ip_address(target) in net or bool(src.gateway)
    except ValueError:
        return False


def echo(view: NodeView, device: int, target: str, count: int, fabric: Fabric | None) -> Echo:
    """What a ping of `count` packets from `device` of the node `view` to `target` gets back.

    Without a cluster fabric (a node on its own) every routable address answers."""
    lost = (False,) * count
    plane = fabric.plane(view.state["node"]["name"], device) if fabric is not None else device
    src = _port(view, device, plane)
    if src is None or not src.link_up:
        return Echo(lost, why="the sending device's link is DOWN")
    if not _routable(src, target):
        return Echo(lost, why="no route: no address, or the target is off-subnet and there is no gateway")
    if fabric is None:
        return Echo((True,) * count, why="no cluster fabric: every routable address answers")
    return fabric.resolve(src, target, count)


class Fabric:
    """The cluster's fabric as a node sees it: fabric.json and every node's simdir under `root`/nodes."""

    def __init__(self, doc: dict, root: Path):
        self.doc, self.root = doc, Path(root)
        self._views: dict[str, NodeView | None] = {}

    @classmethod
    def load(cls, root: Path) -> Fabric | None:
        """None where there is no cluster (a node tool run on its own, e.g. in unit tests)."""
        doc = load(root)
        return None if doc is None else cls(doc, root)

    def plane(self, node: str, device: int) -> int:
        return int(self.doc["nodes"].get(node, {}).get("planes", {}).get(str(device), device))

    def _view(self, node: str) -> NodeView | None:
        if node not in self._views:
            try:
                # A peer's installed versions do not matter here (and its files are not in this node).
                self._views[node] = NodeView.load(self.root / "nodes" / node, Path("/nonexistent"))
            except (OSError, ValueError):
                self._views[node] = None  # a node that is not up (yet): nothing of it answers
        return self._views[node]

    def ports(self, plane: int) -> list[Port]:
        """Every device NIC of the cluster on `plane`, as its node shows it now."""
        out = []
        for node, entry in sorted(self.doc["nodes"].items()):
            view = self._view(node)
            if view is None:
                continue
            for key, p in sorted(entry["planes"].items()):
                port = _port(view, int(key), p) if p == plane else None
                if port is not None:
                    out.append(port)
        return out

    def _cut(self, a: str, b: str, plane: int) -> bool:
        return any(f["kind"] == "plane-cut" and f["params"]["plane"] == plane
                   and {f["node"], f["params"]["peer"]} == {a, b} for f in self.doc["faults"])

    def _loss(self, port: Port) -> Fraction:
        kept = Fraction(1)
        for f in self.doc["faults"]:
            if f["kind"] == "packet-loss" and (f["node"], f["params"]["device"]) == (port.node, port.device):
                kept *= 1 - Fraction(str(f["params"]["loss_pct"])) / 100
        return 1 - kept

    def resolve(self, src: Port, target: str, count: int) -> Echo:
        """Who on the sender's plane answers `target`, and which of `count` packets come back."""
        lost = (False,) * count
        if target == src.address:
            return Echo((True,) * count, src, "the sender's own address")
        holders = [p for p in self.ports(src.plane) if p.address == target and (p.node, p.device) !=
                   (src.node, src.device)]
        if not holders and src.gateway and target == src.gateway:
            # The plane's gateway is the switch's interface on it (hccn.conf gateway_N, also the usual
            # netdetect address): it answers whoever's link is up, through the sender's own losses.
            loss = self._loss(src)
            received = tuple((k + 1) * loss // 1 == k * loss // 1 for k in range(count))
            why = "" if all(received) else f"{float(loss) * 100:.2f}% of packets dropped"
            return Echo(received, None, why)
        if not holders:
            return Echo(lost, why=f"no device NIC on plane {src.plane} holds {target}")
        answering = [p for p in holders if p.link_up and not self._cut(src.node, p.node, src.plane)]
        if not answering:
            return Echo(lost, holders[0], f"the holder of {target} is down or cut off from {src.node}")
        peer = min(answering, key=lambda p: hashlib.sha256(
            f"{src.node}/{src.device}/{p.node}/{p.device}".encode()).digest())
        loss = 1 - (1 - self._loss(src)) * (1 - self._loss(peer))
        # Spread evenly: after k packets, floor(k * loss) have been dropped.
        received = tuple((k + 1) * loss // 1 == k * loss // 1 for k in range(count))
        return Echo(received, peer, "" if all(received) else f"{float(loss) * 100:.2f}% of packets dropped")
