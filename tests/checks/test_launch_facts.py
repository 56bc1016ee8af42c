"""Launch-time node facts are resources read through the preflight's Host (checks/resources/launch.py),
from one batch that checks/cluster/node_facts.py runs: here on this machine by the real /bin/sh and `ip`,
so every value is what the producers print; a probe that did not pass is an unknown fact, never a pass."""

from __future__ import annotations

import dataclasses
import getpass
import shutil
import sys

import pytest

from ascend_ready.checks.cluster.node_facts import FactQuery, fact_probes, node_facts, read_facts
from ascend_ready.checks.collect import collect_host
from ascend_ready.checks.profile import DEFAULT_PROFILE, load_profile
from ascend_ready.checks.resources import Host
from ascend_ready.fleet.transport import LOCAL, FanoutOptions, Target

ME = getpass.getuser()


def batch(query: FactQuery):
    probes, labels = fact_probes(query)
    return collect_host(Target(name="node01", address=LOCAL), probes, FanoutOptions(), user=ME), labels


@pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2's ip")
def test_the_route_login_paths_interpreter_and_marker_are_read_through_host(tmp_path):
    marker = tmp_path / ".ascend-train-shared-x"
    marker.write_text("abc123")
    paths = {"python": ("-x", sys.executable), "data.path": ("-r", str(tmp_path / "no")),
             "config": ("-r", str(marker))}
    query = FactQuery("localhost", paths, str(marker), "abc123")
    snap, labels = batch(query)
    host = Host(snap, load_profile(DEFAULT_PROFILE))
    # `localhost` resolved by the node itself (getent), then the kernel's route and address toward it
    assert host.master_route.master_ip == "127.0.0.1"
    assert "127.0.0.1" in host.master_route.route and " lo " in f" {host.master_route.route} "
    assert host.login_user.user == ME
    assert host.job_paths.missing(labels, query.paths) == {"data.path": str(tmp_path / "no")}
    assert host.job_interpreter.python == sys.executable and host.job_interpreter.ascend_ready[0] == 0
    assert host.shared_run_dir.sees("abc123") and not host.shared_run_dir.sees("other")
    facts = read_facts(snap, query, labels)
    assert (facts.master_ip, facts.login_user, facts.sees_output, facts.python) == (
        "127.0.0.1", ME, True, sys.executable)
    assert facts.missing == {"data.path": str(tmp_path / "no")}
    # one entry point for a set of nodes returns the same facts (the listening sockets read again: this
    # machine's other processes, another pytest worker among them, open and close ports in between)
    (again,) = node_facts({"node01": Target(name="node01", address=LOCAL)}, FanoutOptions(),
                          {"node01": query}, {}).items()
    assert again[0] == "node01" and again[1].listening and again[1].listening[0] == 0
    assert dataclasses.replace(again[1], listening=facts.listening) == facts


def test_a_fact_that_was_not_read_is_unknown(tmp_path):
    query = FactQuery("no-such-host.invalid", {"python": ("-x", str(tmp_path / "gone"))},
                      str(tmp_path / "no-marker"), "abc123")
    snap, labels = batch(query)
    facts = read_facts(snap, query, labels)
    assert facts.master_ip is None and facts.route is None  # a name the node cannot resolve
    assert facts.python is None and facts.missing == {"python": str(tmp_path / "gone")}
    assert facts.sees_output is False
    assert FactQuery("m").marker is None and not read_facts(snap, FactQuery("m"), {}).sees_output
