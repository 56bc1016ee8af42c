"""The HCCL rank table: the vendor's documented shapes, exclusions, and bad input refused."""

from __future__ import annotations

import json

import pytest

from ascend_ready.checks.cluster.ranktable import RankTableHost, build_rank_table, hostfile
from ascend_ready.errors import ConfigError


def _hosts(n=2, devices=2):
    return [RankTableHost(f"node_{i}", f"10.0.0.{i + 1}",
                          {d: f"192.168.{i + 1}.{8 + d}" for d in range(devices)}) for i in range(n)]


def test_version_1_0_matches_the_hccl_guide_example():
    # ../shared/REFERENCE.md 3.8 (hiascend hcclug_000014), plus host_ip (an optional field).
    table = build_rank_table(_hosts())
    assert table == {
        "status": "completed", "version": "1.0", "server_count": "2",
        "server_list": [
            {"server_id": "node_0", "host_ip": "10.0.0.1",
             "device": [{"device_id": "0", "device_ip": "192.168.1.8", "rank_id": "0"},
                        {"device_id": "1", "device_ip": "192.168.1.9", "rank_id": "1"}]},
            {"server_id": "node_1", "host_ip": "10.0.0.2",
             "device": [{"device_id": "0", "device_ip": "192.168.2.8", "rank_id": "2"},
                        {"device_id": "1", "device_ip": "192.168.2.9", "rank_id": "3"}]},
        ]}
    json.dumps(table)
    assert hostfile(table) == "10.0.0.1 slots=2\n10.0.0.2 slots=2\n"


def test_excluded_devices_and_hosts_leave_no_gap_in_the_ranks():
    table = build_rank_table(_hosts(3, 8), exclude=["node_1:5", "node_2"])
    assert table["server_count"] == "2"
    devices = [d for s in table["server_list"] for d in s["device"]]
    assert [d["rank_id"] for d in devices] == [str(i) for i in range(15)]
    assert "5" not in [d["device_id"] for d in table["server_list"][1]["device"]]


def test_version_1_2_has_super_device_ids_and_the_super_pod_list():
    hosts = [RankTableHost("a3-01", "10.0.0.1", {0: "192.168.1.8"}, {0: "37748736"})]
    table = build_rank_table(hosts, version="1.2")
    assert table["server_list"][0]["device"][0]["super_device_id"] == "37748736"
    assert table["super_pod_list"] == [{"super_pod_id": "0", "server_list": [{"server_id": "a3-01"}]}]
    with pytest.raises(ConfigError, match="super_device_id"):
        build_rank_table(_hosts(1, 1), version="1.2")


@pytest.mark.parametrize(("exclude", "message"), [
    (["node_9"], "no host 'node_9'"),
    (["node_0:7"], "has no device '7'"),
    (["node_0", "node_1"], "no device"),
])
def test_bad_exclusions_are_refused(exclude, message):
    with pytest.raises(ConfigError, match=message):
        build_rank_table(_hosts(), exclude=exclude)


def test_a_device_ip_on_two_nodes_is_refused():
    hosts = _hosts()
    hosts[1].devices = {0: "192.168.1.8", 1: "192.168.2.9"}
    with pytest.raises(ConfigError, match=r"192\.168\.1\.8 of node_1 device 0 is also node_0 device 0"):
        build_rank_table(hosts)
