"""hccn_tool semantics beyond the captured samples: argument order, setters, validation, reachability."""

from __future__ import annotations

from ascend_ready.sim import hw
from ascend_ready.sim.render.hccn import update_conf


def test_option_order_is_free(make_node, a2_state):
    node = make_node(a2_state)
    assert node.out("hccn_tool", "-g", "-tls", "-i", "0") == node.out("hccn_tool", "-i", "0", "-tls", "-g")


def test_setters_validate(make_node, a2_state):
    node = make_node(a2_state)
    bad = node.run("hccn_tool", "-i", "0", "-ip", "-s", "address", "10.0.0.300", "netmask", "255.255.0.0")
    assert bad == ("Invalid address: 10.0.0.300\n", 1)
    assert node.run("hccn_tool", "-i", "0", "-ip", "-s", "address", "10.0.0.3")[1] == 1   # netmask missing
    assert node.run("hccn_tool", "-i", "0", "-tls", "-s", "enable", "2")[1] == 1
    assert not (node.root / "etc" / "hccn.conf").exists()


def test_net_health_needs_netdetect(make_node, a2_state):
    node = make_node(a2_state)
    assert node.out("hccn_tool", "-i", "0", "-net_health", "-g") == "net health status: Init\n"
    node.out("hccn_tool", "-i", "0", "-netdetect", "-s", "address", "192.1.0.1")
    assert node.out("hccn_tool", "-i", "0", "-net_health", "-g") == "net health status: Success\n"
    assert node.out("hccn_tool", "-i", "0", "-netdetect", "-g") == "netdetect address: 192.1.0.1\n"


def test_ping_count(make_node, a2_state):
    # A node on its own answers every routable address; in a cluster the holder answers (test_fabric.py).
    node = make_node(a2_state)
    node.provision_nics([0, 1])
    out = node.out("hccn_tool", "-i", "0", "-ping", "-g", "address", "192.2.0.11", "pkt", "5")
    assert out.endswith("5 packets transmitted, 5 received, 0.00% packet loss\n")
    assert out.count("recv seq=") == 5


def test_fault_written_after_a_node_change_wins(make_node, a2_state):
    node = make_node(a2_state)
    node.out("hccn_tool", "-i", "3", "-tls", "-s", "enable", "0")
    node.write(hw.inject_fault(node.state, "tls-mismatch", device=3, enable=1))
    assert node.out("hccn_tool", "-i", "3", "-tls", "-g").startswith("dev_id:3, tls switch[1]")
    node.out("hccn_tool", "-i", "3", "-tls", "-s", "enable", "0")   # the remediation
    assert node.out("hccn_tool", "-i", "3", "-tls", "-g").startswith("dev_id:3, tls switch[0]")


def test_update_conf_keeps_foreign_lines():
    text = "# managed by cloud-init\naddress_1=1.1.1.1\nnetmask_1=255.0.0.0\n"
    assert update_conf(text, {0: {"address": "2.2.2.2", "tls": 1}}) == (
        "# managed by cloud-init\naddress_0=2.2.2.2\naddress_1=1.1.1.1\nnetmask_1=255.0.0.0\n")


def test_a3_devices_are_the_16_chips(make_node):
    node = make_node(hw.initial_state("atlas-800t-a3", node_index=0, node_name="n"))
    assert node.out("hccn_tool", "-i", "15", "-link", "-g") == "link status: UP\n"
    assert node.run("hccn_tool", "-i", "16", "-link", "-g")[1] == 1
