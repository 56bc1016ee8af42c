"""ansible_become on the simulated cluster: the nodes' own sshd and Debian's sudo, the sudo user
`ascend` of every node (NOPASSWD, then a rule that asks for a password)."""

from __future__ import annotations

import pytest

from ascend_ready.checks.collect import collect
from ascend_ready.checks.probes import Probe
from ascend_ready.fleet.inventory import load_inventory
from ascend_ready.fleet.transport import FanoutOptions

pytestmark = pytest.mark.sim

PROBES = [Probe("who", argv=("id", "-un")), Probe("shadow", shell="head -c0 /etc/shadow && echo readable")]
NODES = ("node01", "node02")


def sudo_rule(cluster, node: str, rule: str) -> None:
    from ascend_ready.sim.cluster import node_exec

    res = node_exec(cluster.node(node), ["sh", "-c", f"echo '{rule}' > /etc/sudoers.d/ascend"],
                    capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def run(cluster, tmp_path, *extra: str):
    """node01 and node02 as the sim's inventory lists them, but reached as `ascend` (+ `extra` vars)."""
    inventory = tmp_path / "hosts.ini"
    text = cluster.inventory_path.read_text().replace("ansible_user=root", "\n".join(["ansible_user=ascend",
                                                                                      *extra]))
    inventory.write_text(text)
    targets = [t for t in load_inventory(inventory) if t.name in NODES]
    opts = FanoutOptions(connect_timeout_s=10, host_deadline_s=30)
    return {s.name: s for s in collect(targets, lambda t: (PROBES, "root"), opts)}


def test_a_sudo_user_probes_as_root_and_a_password_rule_is_named(sim_cluster, tmp_path):
    plain = run(sim_cluster, tmp_path)
    assert plain["node01"].reachable, plain["node01"].error
    assert plain["node01"].probes["who"].stdout == "ascend\n" and plain["node01"].probes["shadow"].rc != 0
    became = run(sim_cluster, tmp_path, "ansible_become=true")
    for node in NODES:
        assert became[node].reachable, became[node].error
        assert became[node].probes["who"].stdout == "root\n"
        assert became[node].probes["shadow"].stdout == "readable\n"
    sudo_rule(sim_cluster, "node02", "ascend ALL=(ALL) ALL")
    try:
        asked = run(sim_cluster, tmp_path, "ansible_become=true")
        assert asked["node01"].reachable and asked["node01"].probes["who"].stdout == "root\n"
        bad = asked["node02"]
        assert not bad.reachable and bad.probes == {}
        assert bad.error.startswith("node02: sudo -u root as ascend failed: sudo: a password is required")
        assert "NOPASSWD" in bad.error
    finally:
        sudo_rule(sim_cluster, "node02", "ascend ALL=(ALL) NOPASSWD:ALL")
