"""The Ray cluster for --engine verl: commands per node, a bounded join wait naming the node that did
not join, and a teardown that leaves no Ray process."""

from __future__ import annotations

import json
import shlex

import pytest

from ascend_ready.checks.cluster.launchspec import LaunchSpecHost
from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.training import ray_cluster as rc


class FakeNodes:
    """Nodes that run `ray start/stop` against one shared, simulated cluster state."""

    def __init__(self, ips: dict[str, str], never_joins: tuple[str, ...] = (), fails: tuple[str, ...] = ()):
        self.ips, self.never_joins, self.fails = ips, never_joins, fails
        self.running: set[str] = set()
        self.calls: list[tuple[str, str]] = []

    def __call__(self, node: str, command: str) -> tuple[int, str, str]:
        self.calls.append((node, command))
        if " start " in command:
            if node in self.fails:
                return 1, "", "ConnectionError: could not reach the GCS"
            self.running.add(node)
            return 0, "Ray runtime started.", ""
        if " stop " in command:
            self.running.discard(node)
            return 0, "Stopped all Ray processes.", ""
        if command == rc.RayCluster.LEFTOVER_COMMAND:
            return 0, "4242 raylet\n" if node in self.running else "", ""
        if "ray.nodes()" in command:
            alive = [self.ips[n] for n in sorted(self.running) if n not in self.never_joins]
            return 0, json.dumps(alive) + "\n", ""
        raise AssertionError(command)


def spec_hosts(n: int) -> dict[str, LaunchSpecHost]:
    return {f"node0{i}": LaunchSpecHost(address=f"node0{i}", verdict="pass", devices=list(range(8)),
                                        nic="enp189s0f0", ip=f"10.0.0.{i}") for i in range(1, n + 1)}


def test_head_and_workers_start_on_the_spec_nic_with_npus_as_a_resource():
    cluster = rc.cluster_from_spec(spec_hosts(2))
    head, worker = (cluster.start_command(n) for n in cluster.nodes)
    assert "start --head --port=6379" in head and "--node-ip-address=10.0.0.1" in head
    assert "start --address=10.0.0.1:6379" in worker and "--node-ip-address=10.0.0.2" in worker
    for cmd in (head, worker):
        argv = shlex.split(cmd)
        assert "HCCL_SOCKET_IFNAME=enp189s0f0" in argv and "GLOO_SOCKET_IFNAME=enp189s0f0" in argv
        assert "ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in argv
        assert "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1" in argv
        assert '--resources={"NPU": 8}' in argv and "--num-gpus=0" in argv


def test_cluster_starts_waits_for_every_node_and_tears_down_clean():
    hosts = spec_hosts(3)
    fake = FakeNodes({n: h.ip for n, h in hosts.items()})
    cluster = rc.cluster_from_spec(hosts)
    assert rc.start(cluster, fake, log=lambda m: None) == ["node01", "node02", "node03"]
    assert fake.calls[0][0] == "node01"  # the head first
    assert rc.stop(cluster, fake, log=lambda m: None) == {}
    assert fake.running == set()


def test_a_node_that_does_not_join_is_named_and_the_cluster_is_torn_down():
    hosts = spec_hosts(3)
    fake = FakeNodes({n: h.ip for n, h in hosts.items()}, never_joins=("node03",))
    now = [0.0]
    with pytest.raises(TrainingError) as exc:
        rc.start(rc.cluster_from_spec(hosts), fake, join_timeout_s=10, poll_s=2, log=lambda m: None,
                 clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert "node03 did not join 10.0.0.1:6379 within 10 s" in exc.value.message
    assert fake.running == set()  # no Ray process left anywhere


def test_a_failing_ray_start_is_named_and_what_started_is_stopped():
    hosts = spec_hosts(2)
    fake = FakeNodes({n: h.ip for n, h in hosts.items()}, fails=("node02",))
    with pytest.raises(TrainingError, match=r"ray start failed on node02 .*could not reach the GCS"):
        rc.start(rc.cluster_from_spec(hosts), fake, log=lambda m: None)
    assert fake.running == set()


def test_a_spec_host_without_the_nic_ip_is_refused():
    hosts = spec_hosts(1)
    hosts["node01"] = hosts["node01"].model_copy(update={"ip": None})
    with pytest.raises(ConfigError, match="node01: the launch spec has no IP"):
        rc.cluster_from_spec(hosts)
