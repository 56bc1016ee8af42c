"""Cluster life cycle on its own run dir: `up 8` speed, the CLI, and a teardown that leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_support import own_cluster, wait_for

from ascend_ready.sim import base
from ascend_ready.sim import cluster as sim
from ascend_ready.sim.net import netns_list

pytestmark = pytest.mark.sim

ASCEND_SIM = str(Path(sys.executable).with_name("ascend-sim"))
RUN_DIR, SUBNET = own_cluster("life", 5)  # default /run/ascend-sim-pytest-life, 10.251.200.160/27


@pytest.fixture
def own_run_dir(sim_host, monkeypatch):
    """A cluster run dir and subnet of this module's own, apart from the shared session cluster."""
    monkeypatch.setenv("ASCEND_SIM_RUN_DIR", RUN_DIR)
    monkeypatch.setenv("ASCEND_SIM_SUBNET", SUBNET)
    sim.down()
    yield Path(RUN_DIR)
    sim.down()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([ASCEND_SIM, *args], capture_output=True, text=True, timeout=120, env=os.environ)


def assert_nothing_left(c: sim.Cluster) -> None:
    assert not any(n.alive() for n in c.nodes), "a recorded node PID is still alive"
    assert c.net.hub not in netns_list()
    assert not Path(f"/sys/class/net/{c.net.host_if}").exists()
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(c.run_dir) not in mounts
    assert not (c.run_dir / "nodes").exists()
    assert not (c.run_dir / "cluster.json").exists()
    # the blackhole route outlives the cluster: nothing for the subnet can leave the machine
    routes = subprocess.run(["ip", "route", "show", c.subnet], capture_output=True, text=True).stdout
    assert routes.split()[:2] == ["blackhole", c.subnet], routes


def test_up8_is_fast_and_down_leaves_nothing(own_run_dir, capsys):
    base.ensure()  # timing is about a cached base
    started = time.monotonic()
    c = sim.up(8, "a2-ubuntu2204,a2-centos76,a2-kylinv10,a3-openeuler2203")
    took = time.monotonic() - started
    with capsys.disabled():
        print(f"\n[ascend-sim] up 8 (cached base): {took:.2f} s")
    assert took < 15  # the target is < 5 s; loose here so a loaded CI machine does not flake
    assert [n.name for n in c.nodes] == [f"node{i:02d}" for i in range(1, 9)]
    assert len({n.pid for n in c.nodes}) == 8 and all(n.alive() for n in c.nodes)

    status = json.loads(_cli("status", "--format", "json").stdout)
    assert status["running"] is True
    assert [(n["name"], n["state"]) for n in status["nodes"]] == [
        (f"node{i:02d}", "running") for i in range(1, 9)]
    assert status["nodes"][5]["ip"] == c.net.node_ip(6)

    r = _cli("exec", "node06", "--", "sh", "-c", "hostname; exit 7")
    assert (r.returncode, r.stdout) == (7, "node06\n")
    r = _cli("run", "--", "sh", "-c", 'echo "$ASCEND_SIM_INVENTORY"; exit 3')
    assert (r.returncode, r.stdout) == (3, f"{RUN_DIR}/inventory.ini\n")
    r = _cli("inventory")
    assert r.returncode == 0 and r.stdout == (own_run_dir / "inventory.ini").read_text()
    assert f"node08 ansible_host={c.net.node_ip(8)}" in r.stdout

    r = _cli("up", "2")
    assert r.returncode == 2 and "already running" in r.stderr

    r = _cli("down")
    assert (r.returncode, r.stdout) == (0, "cluster stopped\n"), r.stderr
    assert_nothing_left(c)
    r = _cli("down")
    assert (r.returncode, r.stdout) == (0, "no cluster was running\n")
    r = _cli("exec", "node01", "--", "true")
    assert r.returncode == 2 and "error: no simulated cluster" in r.stderr


def test_down_cleans_a_half_dead_cluster(own_run_dir):
    c = sim.up(2)
    os.kill(c.nodes[0].pid, signal.SIGKILL)  # one node crashed
    wait_for(lambda: not c.nodes[0].alive(), 30, "the killed node to be gone")
    assert c.nodes[1].alive()
    assert sim.down() is not None
    assert_nothing_left(c)


def test_sshd_restart_does_not_kill_the_node(own_run_dir):
    c = sim.up(1)
    node = c.nodes[0]

    def sshd_pids() -> list[str]:  # the supervisor's sshd (a child of PID 1), not per-connection children
        proc = sim.node_exec(node, ["pgrep", "-x", "-P", "1", "sshd"], capture_output=True, text=True)
        return proc.stdout.split()

    first = sshd_pids()
    assert len(first) == 1
    assert sim.node_exec(node, ["kill", first[0]]).returncode == 0
    wait_for(lambda: (now := sshd_pids()) and now != first, 30, "a new sshd under PID 1")
    assert node.alive()
    # The supervisor logs the restart after it started the new sshd: wait for the line, do not race it.
    console = node.dir(c.run_dir) / "console.log"
    wait_for(lambda: console.read_text().count("supervisor: sshd started") == 2, 30,
             "the supervisor's second 'sshd started' line in console.log")
    assert console.read_text().count("supervisor: sshd started") == 2
