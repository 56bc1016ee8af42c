"""One node (a loopback master): HCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME name the NIC of the default route,
picked as the multi-node path picks the NIC toward the master (nic_toward), not the first NIC by name."""

from __future__ import annotations

import pytest
from test_bad_inputs_train import fake_nics

from ascend_ready.training import launch

# `ip -o route show default` and `ip -o route get 10.251.199.1` (the gateway) on a node whose NICs by
# name are bond0 (a bond with no default route), docker0, eth1
DEFAULT = "default via 10.251.199.1 dev eth1 proto static metric 100 \n"
TO_GATEWAY = "10.251.199.1 dev eth1 src 10.251.199.11 uid 0 \\    cache \n"


@pytest.fixture
def nics(monkeypatch):
    fake_nics(monkeypatch, ("lo", "bond0", "docker0", "eth1"))


def ip_of(default: str | None, route: str | None):
    calls = []

    def ip(*args):
        calls.append(args)
        return default if args[:2] == ("route", "show") else route if args[:2] == ("route", "get") else None

    ip.calls = calls
    return ip


def test_one_node_takes_the_default_routes_nic(monkeypatch, nics):
    ip = ip_of(DEFAULT, TO_GATEWAY)
    assert launch.detect_host_nic("127.0.0.1", ip=ip) == "eth1"  # the first by name would be bond0
    assert ip.calls == [("route", "show", "default"), ("route", "get", "10.251.199.1")]
    monkeypatch.setattr(launch, "_ip", ip_of(DEFAULT, TO_GATEWAY))
    env = launch.hccl_env(launch.LaunchConfig(), environ={})  # master 127.0.0.1: one node
    assert env["HCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth1"


def test_a_default_route_without_a_gateway_names_its_nic(nics):
    assert launch.default_route_nic(ip_of("default dev ppp0 scope link \n", None)) == "ppp0"


def test_no_default_route_falls_back_to_the_first_plain_nic(nics):
    assert launch.detect_host_nic("127.0.0.1", ip=ip_of("", None)) == "bond0"
