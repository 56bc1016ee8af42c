"""A blackhole route a cluster left in a smaller subnet inside a new cluster's (the simulator keeps each
cluster's blackhole forever, sim/net.py) is more specific than the new cluster's connected route: the
nodes it covers were unreachable and `up` failed with "sshd did not come up". The new cluster's own
blackhole covers it, so `up` removes it."""

from __future__ import annotations

import ipaddress
import subprocess

import pytest
from sim_support import cluster_up, node_run, own_cluster

from ascend_ready.sim.net import BLACKHOLE_METRIC, blackholes_inside

pytestmark = pytest.mark.sim

RUN_DIR, SUBNET = own_cluster("leftover", 6)

#: `ip -o route show root 10.251.210.0/24` as iproute2 6.1 printed it here after a cluster at 10.251.210.0/27
#: was stopped and another at 10.251.210.0/25 came up (each line ends in a space), plus two lines the
#: function must leave alone: a connected route of the same shape and a blackhole of another metric
ROUTES = "".join(f"{line} \n" for line in (
    "blackhole 10.251.210.0/25 metric 4000000000",
    "blackhole 10.251.210.0/27 metric 4000000000",
    "10.251.210.0/25 dev asim6c1dh proto kernel scope link src 10.251.210.1",
    "blackhole 10.251.210.128/27 metric 4000000000",
    "blackhole 10.9.0.0/28 metric 100",
))


def test_only_the_simulators_blackholes_strictly_inside_are_named():
    inside = blackholes_inside(ipaddress.ip_network("10.251.210.0/25"), ROUTES)
    assert inside == [ipaddress.ip_network("10.251.210.0/27")]


def test_a_leftover_blackhole_inside_the_subnet_does_not_cut_the_new_cluster_off(sim_host):
    net = ipaddress.ip_network(SUBNET)
    inner = next(net.subnets(new_prefix=28))  # holds node01's address (.11)
    subprocess.run(["ip", "route", "replace", "blackhole", str(inner), "metric", str(BLACKHOLE_METRIC)],
                   check=True)
    try:
        with cluster_up(RUN_DIR, SUBNET, 1, "a2-ubuntu2204") as c:  # waits for sshd: failed here before
            assert node_run(c, "node01", "hostname").stdout.strip() == "node01"
            routes = subprocess.run(["ip", "-o", "route", "show", "root", str(net)], capture_output=True,
                                    text=True).stdout
            assert str(inner) not in routes and f"blackhole {net}" in routes
    finally:
        subprocess.run(["ip", "route", "del", "blackhole", str(inner)], capture_output=True)
