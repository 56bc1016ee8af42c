"""No launch waits forever (issue 25 item 6): with the master at an IPv6 address, a node that has no IPv6
route toward it is not startable in the spec (it was `ip: null, nic: null` and "2 of 2 host(s) may start"),
the launcher refuses a node whose pre-start probe finds no route, torchrun's rendezvous has a deadline,
and a rendezvous that ran into it names the node that did not join.

Every `ip` output here is real iproute2's, printed in a private network namespace (unshare -n) set up as
the two nodes were: node01 holding fd77::11 on its NIC, node02 with IPv4 only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from ascend_ready.checks.cluster.launch_routes import nothing_passed, refuse_unrouted, refuse_unrouted_nodes
from ascend_ready.checks.cluster.launchspec import spec_from_report
from ascend_ready.errors import ConfigError
from ascend_ready.fleet.job import NodeOutcome, first_error
from ascend_ready.fleet.plan import NodeFacts
from ascend_ready.fleet.transport import Target
from ascend_ready.training import reach
from ascend_ready.training.config import LaunchConfig
from ascend_ready.training.launch import torchrun_command

NETNS = os.geteuid() == 0 and shutil.which("unshare") is not None and shutil.which("ip") is not None
MASTER = "fd77::11"


def _in_netns(setup: str, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["unshare", "-n", "sh", "-c", f"ip link set lo up; {setup}; {command}"],
                          capture_output=True, text=True)


NODE01 = ("ip link add v0 type veth peer name v1; ip link set v0 up; ip link set v1 up; "
          f"ip -6 addr add {MASTER}/64 dev v0 nodad")
NODE02 = ("ip link add v0 type veth peer name v1; ip link set v0 up; ip link set v1 up; "
          "ip -4 addr add 10.9.0.2/24 dev v0")


@pytest.mark.skipif(not NETNS, reason="needs root, unshare and ip for a private network namespace")
def test_a_node_without_a_route_in_the_masters_family_is_not_startable_in_the_spec():
    route1 = _in_netns(NODE01, f"ip -o route get {MASTER}")
    addr1 = _in_netns(NODE01, f"ip -o addr show to {MASTER}")
    route2 = _in_netns(NODE02, f"ip -o route get {MASTER}")
    assert route1.returncode == 0 and route2.returncode != 0, (route1, route2)
    targets = [Target("node01", address=MASTER), Target("node02", address="10.9.0.2")]
    spec = spec_from_report(None, targets, master_addr=MASTER, routes={"node01": route1.stdout},
                            addrs={"node01": addr1.stdout})
    # what the spec said before: both startable, node02 with no NIC and no address
    assert spec.hosts["node02"].nic is None and set(spec.startable_hosts()) == {"node01", "node02"}
    lines = refuse_unrouted(spec, {"node02": route2.stderr})
    assert set(spec.startable_hosts()) == {"node01"}
    assert spec.hosts["node01"].nic == "v0" and spec.hosts["node01"].ip == MASTER
    want = (f"no IPv6 route and address toward the master {MASTER}: `ip -o route get {MASTER}` said "
            "'RTNETLINK answers: Network is unreachable'")
    assert lines == [f"node02: {want}"]
    assert spec.hosts["node02"].verdict == "error"
    assert spec.hosts["node02"].failed_checks == [f"launch.route: {want}"]


@pytest.mark.skipif(not NETNS, reason="needs root, unshare and ip for a private network namespace")
def test_the_launcher_refuses_a_node_its_probe_found_no_route_on_naming_it():
    route1 = _in_netns(NODE01, f"ip -o route get {MASTER}").stdout
    facts = {"node01": NodeFacts(master_ip=MASTER, route=route1), "node02": NodeFacts(master_ip=MASTER)}
    with pytest.raises(ConfigError) as err:
        refuse_unrouted_nodes(facts, MASTER)
    assert err.value.message.splitlines()[1:] == [
        f"  node02: no IPv6 route and address toward the master {MASTER}"]
    refuse_unrouted_nodes({"node01": facts["node01"]}, MASTER)  # the master itself is fine


def test_torchrun_across_nodes_gets_a_rendezvous_deadline():
    cmd = torchrun_command(LaunchConfig(nnodes=2, rendezvous_timeout_s=45), ["grpo"])
    assert "--rdzv-conf=timeout=45" in cmd
    assert not any(a.startswith("--rdzv-conf") for a in torchrun_command(LaunchConfig(), ["grpo"]))


@pytest.mark.slow
def test_a_rendezvous_that_no_master_answers_ends_at_its_deadline_naming_the_node():
    # the real torchrun of node rank 1 with nobody at the master's port
    cmd = torchrun_command(LaunchConfig(nnodes=2, master_addr="127.0.0.1", master_port=29977,
                                        rendezvous_timeout_s=10), ["/dev/null"], module="json.tool")
    cmd[0] = sys.executable
    cmd[cmd.index("--node-rank=0")] = "--node-rank=1"
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and time.monotonic() - started < 100
    error = first_error((proc.stdout + proc.stderr).splitlines())
    outcomes = [NodeOutcome("node01", 1, None, "stopped", True, None, None),
                NodeOutcome("node02", 1, None, error, False, 1.0, None)]
    assert reach.rendezvous_failure(outcomes, "127.0.0.1", 29977) == (
        "the rendezvous did not complete: node02 could not connect to the master 127.0.0.1:29977 within 10 s "
        "(launch.rendezvous_timeout_s)")


def test_no_startable_host_says_what_the_results_are_not_failed_checks_that_did_not_fail():
    # the collective the controller recorded (tests/collective_support.py), with the worker's error on every
    # node as the stand-in torch_npu gave it, judged by ascend-check's runner: every result is `error`
    import dataclasses

    from collective_support import captured, snapshots

    from ascend_ready.checks.profile import load_profile
    from ascend_ready.checks.registry import select_checks
    from ascend_ready.checks.runner import run_checks
    from ascend_ready.checks.snapshot import Snapshot

    why = "AttributeError: module 'torch_npu.npu' has no attribute 'set_device'"
    rec = dataclasses.replace(captured(), errors={f"node0{i}": why for i in (1, 2, 3)}, measurements=[])
    snaps = snapshots(rec)
    report = run_checks(Snapshot(hosts=snaps), dict.fromkeys(snaps, load_profile("atlas-800t-a2")),
                        select_checks("full", ("npu.matmul", "hccl.allreduce")))
    assert {r.status for r in report.results} == {"error"}
    message, hint = nothing_passed(report, [Target(n) for n in snaps])
    assert "errored, i.e. not judged (node01: hccl.allreduce, npu.matmul; node02: " in message
    assert "failed (" not in message and "fix the failed checks" not in hint
    assert hint.startswith("no check failed")


@pytest.mark.parametrize(("master", "seen"), [(MASTER, MASTER), ("10.9.0.1", "10.9.0.1"),
                                              ("localhost", "127.0.0.1")])
def test_the_pre_start_probe_takes_an_ipv6_master_as_it_stands(master, seen):
    # the probe's own shell, run by /bin/sh here: an IPv6 literal was looked up as a name and came back empty
    from ascend_ready.checks.cluster.node_facts import FactQuery, fact_probes

    probe = fact_probes(FactQuery(master))[0][0]
    assert probe.id == "master"
    out = subprocess.run(["sh", "-c", probe.shell], capture_output=True, text=True, check=True).stdout
    assert out.strip() == seen


def test_an_ipv6_master_and_node_are_written_with_their_port_apart():
    """The dry run and launch.txt wrote `master fd77::11:29500` (the port read as the address's last group);
    an address with colons is bracketed as in a URL, IPv4 and names are not."""
    from ascend_ready.fleet.plan import host_port

    assert host_port(MASTER, 29500) == "[fd77::11]:29500"
    assert host_port("[fd77::11]", 22) == "[fd77::11]:22"
    assert host_port("10.0.0.1", 29500) == "10.0.0.1:29500" and host_port("node01", 22) == "node01:22"
    assert host_port(MASTER, None) == MASTER
