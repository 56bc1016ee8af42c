"""The cluster fabric: a ping from one node's device NIC resolves to the peer NIC that holds the address,
on the same plane, and the cluster-level faults (plane cut, packet loss) and node faults (link down, a
duplicated device IP) change what comes back. Four A2 nodes on disk, tools run in-process."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from ascend_ready.checks.parsers.hccn import parse_hccn_ping
from ascend_ready.errors import SimError
from ascend_ready.sim import fabric, hw
from ascend_ready.sim.harness.fleet import device_nics
from ascend_ready.sim.hw.state import NodeView
from ascend_ready.sim.node import tool as node_tool


@dataclass
class Cluster:
    root: Path  # what every node sees at /var/lib/ascend-sim-cluster
    nodes: dict  # name -> tests/sim_hw/conftest.py Node

    def ip(self, node: str, device: int) -> str:
        return self.nodes[node].view().nic_value(device, "address")

    def ping(self, src: str, device: int, address: str, pkt: int = 3) -> str:
        node = self.nodes[src]
        text, rc = node_tool.run("hccn_tool", ["-i", str(device), "-ping", "-g", "address", address,
                                               "pkt", str(pkt)], node.sim, node.root, cluster=self.root)
        assert rc == 0, text
        return text

    def loss(self, src: str, dst: str, plane: int) -> float:
        return parse_hccn_ping(self.ping(src, plane, self.ip(dst, plane))).loss_pct

    def edit(self, change) -> None:
        fabric.save(self.root, change(fabric.load(self.root)))

    def answered_by(self, src: str, device: int, address: str) -> tuple[str, int] | None:
        got = fabric.echo(self.nodes[src].view(), device, address, 3, fabric.Fabric.load(self.root))
        return None if got.peer is None else (got.peer.node, got.peer.device)


@pytest.fixture
def cluster(tmp_path, make_node) -> Cluster:
    """node01..node04 with their device NICs addressed as the simulated fleet's hccn role does."""
    root = tmp_path / "fabric"
    (root / "nodes").mkdir(parents=True)
    nodes = {}
    for index in range(1, 5):
        name = f"node{index:02d}"
        node = nodes[name] = make_node(hw.initial_state("atlas-800t-a2", node_index=index, node_name=name))
        (root / "nodes" / name).symlink_to(node.sim)  # in a node: a read-only bind of that node's simdir
        for nic in device_nics(index, 8):
            node.out("hccn_tool", "-i", str(nic["id"]), "-ip", "-s", "address", nic["address"],
                     "netmask", nic["netmask"])
            node.out("hccn_tool", "-i", str(nic["id"]), "-gateway", "-s", "gateway", nic["gateway"])
    fabric.save(root, fabric.initial({name: node.state for name, node in nodes.items()}))
    return Cluster(root, nodes)


def test_a_ping_is_answered_by_the_device_that_holds_the_address(cluster):
    out = cluster.ping("node01", 3, cluster.ip("node02", 3))
    # the shape of the ArthurChiao 910B1 capture (shared sample hccn_tool-ping-g_910b1_arthurchiao-blog.txt)
    assert out == ("device 3 PING 192.168.3.12\n"
                   "recv seq=0,time=1.418000ms\nrecv seq=1,time=0.034000ms\nrecv seq=2,time=0.040000ms\n"
                   "3 packets transmitted, 3 received, 0.00% packet loss\n")
    assert cluster.answered_by("node01", 3, "192.168.3.12") == ("node02", 3)


def test_the_planes_gateway_answers_a_device_whose_link_is_up(cluster):
    # hccl.gateway_ping pings gateway_N of /etc/hccn.conf: the switch's interface on the plane, not a NIC.
    gateway = cluster.nodes["node01"].view().nic_value(2, "gateway")
    assert parse_hccn_ping(cluster.ping("node01", 2, gateway)).loss_pct == 0
    node01 = cluster.nodes["node01"]
    node01.write(hw.inject_fault(node01.state, "link-down", device=2))
    assert parse_hccn_ping(cluster.ping("node01", 2, gateway)).received == 0


def test_an_address_nobody_holds_on_the_plane_does_not_answer(cluster):
    assert parse_hccn_ping(cluster.ping("node01", 0, "192.168.0.99")).received == 0
    # node02's device 1 holds its address on plane 1: device 0 (plane 0) routes to it and nobody answers
    lost = fabric.echo(cluster.nodes["node01"].view(), 0, cluster.ip("node02", 1), 3,
                       fabric.Fabric.load(cluster.root))
    assert lost.received == (False,) * 3 and "plane 0" in lost.why


def test_a_device_whose_link_is_down_loses_every_ping_both_ways(cluster):
    node03 = cluster.nodes["node03"]
    node03.write(hw.inject_fault(node03.state, "link-down", device=5))
    assert cluster.loss("node01", "node03", 5) == 100.0
    assert cluster.loss("node03", "node01", 5) == 100.0
    assert cluster.loss("node01", "node02", 5) == 0.0
    assert cluster.loss("node01", "node03", 4) == 0.0


def test_a_plane_cut_between_two_nodes_fails_only_that_pair_on_that_plane(cluster):
    cluster.edit(lambda doc: fabric.inject(doc, "node02", "plane-cut", plane=3, peer="node04"))
    assert cluster.loss("node02", "node04", 3) == 100.0
    assert cluster.loss("node04", "node02", 3) == 100.0
    assert cluster.loss("node02", "node03", 3) == 0.0
    assert cluster.loss("node02", "node04", 2) == 0.0
    cluster.edit(lambda doc: fabric.clear(doc, "node04"))  # it names node04 too
    assert cluster.loss("node02", "node04", 3) == 0.0


def test_a_lossy_device_drops_a_share_of_the_packets_to_and_from_it(cluster):
    cluster.edit(lambda doc: fabric.inject(doc, "node01", "packet-loss", device=6, loss_pct=66.67))
    assert cluster.ping("node02", 6, cluster.ip("node01", 6)) == (
        "device 6 PING 192.168.6.11\nrecv seq=0,time=1.418000ms\n"
        "3 packets transmitted, 1 received, 66.67% packet loss\n")
    six = parse_hccn_ping(cluster.ping("node01", 6, cluster.ip("node03", 6), pkt=6))
    assert (six.transmitted, six.received) == (6, 2)
    assert cluster.loss("node02", "node03", 6) == 0.0


def test_a_duplicated_device_ip_is_answered_by_one_holder_and_shows_in_ip_g(cluster):
    node02, address = cluster.nodes["node02"], cluster.ip("node04", 1)
    node02.write(hw.inject_fault(node02.state, "device-ip-duplicate", device=1, address=address))
    assert node02.out("hccn_tool", "-i", "1", "-ip", "-g") == f"ipaddr:{address}\nnetmask:255.255.255.0\n"
    # Both answer ARP; each sender sticks to the first reply, so the ping passes: only -ip -g shows it.
    first = cluster.answered_by("node01", 1, address)
    assert first in {("node02", 1), ("node04", 1)}
    assert cluster.answered_by("node01", 1, address) == first
    assert parse_hccn_ping(cluster.ping("node01", 1, address)).received == 3
    holder = cluster.nodes[first[0]]
    holder.write(hw.inject_fault(holder.state, "link-down", device=1))
    assert cluster.answered_by("node01", 1, address) == ({("node02", 1), ("node04", 1)} - {first}).pop()
    other = cluster.nodes[({"node02", "node04"} - {first[0]}).pop()]
    other.write(hw.inject_fault(other.state, "link-down", device=1))
    assert parse_hccn_ping(cluster.ping("node01", 1, address)).received == 0


def test_a_node_without_a_cluster_answers_every_routable_address(make_node, a2_state):
    node = make_node(a2_state)
    node.out("hccn_tool", "-i", "0", "-ip", "-s", "address", "192.168.0.11", "netmask", "255.255.255.0")
    text, _ = node_tool.run("hccn_tool", ["-i", "0", "-ping", "-g", "address", "192.168.0.99"], node.sim,
                            node.root, cluster=node.sim.parent / "no-cluster")
    assert text.endswith("3 packets transmitted, 3 received, 0.00% packet loss\n")


def test_the_fabric_lists_each_nodes_planes():
    doc = fabric.initial({"a": hw.initial_state("atlas-800t-a3", node_index=1, node_name="a"),
                          "b": hw.initial_state("atlas-300i-duo", node_index=2, node_name="b")})
    assert doc["nodes"]["a"]["planes"] == {str(d): d for d in range(16)}
    assert doc["nodes"]["b"]["planes"] == {}  # inference cards have no RoCE NIC


@pytest.mark.parametrize(("node", "kind", "params", "message"), [
    ("node01", "plane-cut", {"plane": 3}, "peer"),
    ("node01", "plane-cut", {"plane": 3, "peer": "node01"}, "another node"),
    ("node01", "plane-cut", {"plane": 9, "peer": "node02"}, "plane 9"),
    ("node01", "plane-cut", {"plane": 3, "peer": "node09"}, "node09"),
    ("node01", "packet-loss", {"device": 2, "loss_pct": 0}, "loss_pct"),
    ("node01", "packet-loss", {"device": 8}, "no device NIC 8"),
    ("node01", "packet-loss", {"ratio": 1}, "unknown parameter"),
    ("node01", "flood", {}, "unknown cluster fault"),
])
def test_cluster_faults_are_validated(node, kind, params, message):
    doc = fabric.initial({f"node0{i}": hw.initial_state("atlas-800t-a2", node_index=i, node_name=f"node0{i}")
                          for i in (1, 2)})
    with pytest.raises(SimError, match=message):
        fabric.inject(doc, node, kind, **params)


def test_peer_views_ignore_versions_they_cannot_see(cluster):
    view = NodeView.load(cluster.root / "nodes" / "node02", Path("/nonexistent"))
    assert view.driver_version is None and view.nic_value(0, "address") == "192.168.0.12"
