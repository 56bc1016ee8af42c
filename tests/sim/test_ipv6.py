"""The simulated cluster dual-stack (sim/net.py Network.enable_ipv6, sim/cluster.py enable_ipv6): each node's
eth0 and the host's veth get a unique-local IPv6 address, the controller reaches every node over SSH at it
with the host key checked, the nodes reach each other, nothing is routed beyond the /64, and disable_ipv6
leaves the cluster as it was (IPv4 only)."""

from __future__ import annotations

import ipaddress
import subprocess

import pytest
from sim_support import cluster_up, node_run, own_cluster

pytestmark = pytest.mark.sim

RUN_DIR, SUBNET = own_cluster("ipv6", 5)


@pytest.fixture(scope="module")
def cluster(sim_host):
    with cluster_up(RUN_DIR, SUBNET, 2, "a2-ubuntu2204") as c:
        yield c


def _ssh(cluster, address: str, command: str) -> subprocess.CompletedProcess:
    from ascend_ready.sim.inventory import ssh_options

    argv = ["ssh", "-i", str(cluster.key_path), *ssh_options(cluster), "-o", "ConnectTimeout=5",
            "-o", "BatchMode=yes", f"root@{address}", command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def test_ipv6_on_reaches_every_node_over_ssh_and_off_leaves_ipv4_only(cluster):
    from ascend_ready.sim import cluster as sim

    addrs = sim.enable_ipv6(cluster)
    try:
        net6 = cluster.net.subnet6
        assert net6.is_private and set(addrs) == {"node01", "node02"}
        assert all(ipaddress.ip_address(a) in net6 for a in addrs.values())
        for name, addr in addrs.items():
            # the host key is checked (StrictHostKeyChecking=yes): known_hosts names the node at its IPv6 too
            proc = _ssh(cluster, addr, "hostname")
            assert (proc.returncode, proc.stdout.strip()) == (0, name), proc.stderr
        route = node_run(cluster, "node01", "ip", "-o", "route", "get", addrs["node02"])
        assert route.returncode == 0, route.stderr
        assert " dev eth0 " in route.stdout and f"src {addrs['node01']}" in route.stdout
        # nothing beyond the /64: no IPv6 default route in a node, a blackhole for the /64 on the host
        assert node_run(cluster, "node01", "ip", "-6", "route", "show", "default").stdout.strip() == ""
        outside = node_run(cluster, "node01", "ip", "-o", "route", "get", "2001:db8::1")
        assert outside.returncode != 0 and "unreachable" in outside.stderr
        host = subprocess.run(["ip", "-6", "route", "show", "type", "blackhole", "root", str(net6)],
                              capture_output=True, text=True).stdout
        assert str(net6) in host
    finally:
        sim.disable_ipv6(cluster)
    eth0 = node_run(cluster, "node01", "ip", "-o", "addr", "show", "dev", "eth0").stdout
    assert addrs["node01"] not in eth0 and "inet 10." in eth0
    assert addrs["node01"] not in cluster.known_hosts.read_text()
    gone = _ssh(cluster, addrs["node01"], "hostname")
    assert gone.returncode == 255
    again = _ssh(cluster, cluster.node("node01").ip, "hostname")  # IPv4 as before
    assert (again.returncode, again.stdout.strip()) == (0, "node01"), again.stderr
