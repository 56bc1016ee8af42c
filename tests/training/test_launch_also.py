"""Issue 25's "Also" list, launch side: a spec made from another inventory than the `-i` given is refused
(the -i was silently ignored), a matching pair says which decides what, and `--waive` of a check the
preflight judged and did not pass is refused with why (it was accepted and did nothing). The reports are
what the real ascend-check printed for simulator-rendered nodes; the `ip` lines real captures."""

from __future__ import annotations

from pathlib import Path

import pytest
from training_fakecheck import (
    MASTER,
    ROUTES,
    healthy,
    launch_spec,
    link_down,
    spec_file,
    train,
    write_ascend_check,
)

from ascend_ready.errors import ConfigError
from ascend_ready.training import multinode, preflight


def _spec(tmp_path: Path, *hosts) -> Path:
    return spec_file(tmp_path, launch_spec(tmp_path, *hosts))


def test_a_spec_from_another_inventory_is_refused_naming_the_hosts(tmp_path, no_ssh):
    spec = _spec(tmp_path, healthy("node01"), healthy("node02", index=1))
    other = tmp_path / "other.ini"
    other.write_text("[ascend]\ngpu01 ansible_host=10.9.0.1\nnode02 ansible_host=10.9.0.2\n")
    out = tmp_path / "r"
    result = train("--launch-spec", str(spec), "-i", str(other), "-o", str(out), "--dry-run")
    assert result.exit_code == 2, result.output
    assert f"the launch spec {spec} was not made from inventory {other}" in result.stderr
    assert "in the spec only: node01" in result.stderr
    assert f"in inventory {other} only: gpu01" in result.stderr
    assert "node02 (10.251.199.12 in the spec, 10.9.0.2 in inventory" in result.stderr
    assert not out.exists()


def test_the_spec_and_its_own_inventory_say_which_decides_what(tmp_path, no_ssh):
    spec = _spec(tmp_path, healthy("node01"), healthy("node02", index=1))
    same = tmp_path / "hosts.ini"
    same.write_text("[ascend]\nnode01 ansible_host=10.251.199.11\nnode02 ansible_host=10.251.199.12\n")
    result = train("--launch-spec", str(spec), "-i", str(same), "-o", str(tmp_path / "r"), "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"launch spec: {spec} decides which hosts start" in result.stderr
    assert f"inventory {same} how they are reached" in result.stderr


def test_waiving_a_check_the_spec_failed_is_refused_with_why(tmp_path, no_ssh):
    spec = _spec(tmp_path, healthy("node01"), link_down("node02", 1))
    result = train("--launch-spec", str(spec), "-o", str(tmp_path / "r"), "--dry-run",
                    "--waive", "hccl.link_up")
    assert result.exit_code == 2, result.output
    want = "hccl.link_up failed or errored on node02 (verdict fail): the spec leaves node02 out"
    assert want in result.stderr
    assert "never past one that was judged and did not pass" in result.stderr


def test_waiving_a_check_the_preflight_failed_is_refused_with_why(tmp_path):
    check = write_ascend_check(tmp_path, healthy("node01"), link_down("node02", 1))
    with pytest.raises(ConfigError) as err:
        preflight.gate(str(check), ["node01", "node02"], None, 120, False, log=lambda m: None,
                       waive=("hccl.link_up",))
    assert "hccl.link_up failed on node02: " in err.value.message
    assert "--skip CHECK in ascend-check and --waive it" in err.value.hint


def test_the_dry_run_binds_numa_from_the_same_fact_as_the_launch(tmp_path, monkeypatch):
    # issue 25 item 10: the dry run said "npu-smi info -t topo is not available" (it never read it) while
    # the launch bound NUMA node 6. Now a spec with NPUs makes the dry run read the nodes' facts with the
    # launch's own read-only probe; here that probe's results are what a simulated A2 node prints.
    import contextlib

    from ascend_ready.checks.cluster.ranktable import healthy_devices
    from ascend_ready.fleet.plan import NodeFacts
    from ascend_ready.sim.hw import numa as sim_numa
    from ascend_ready.sim.hw.state import NodeView, initial_state
    from ascend_ready.sim.render import npu_smi

    state = initial_state("atlas-800t-a2", node_index=0, node_name="node01")
    topo, nodes = npu_smi.topo(NodeView(state=state)), sim_numa.grep_node_cpulists(sim_numa.host_cpu(state))
    hosts = [healthy("node01"), healthy("node02", index=1)]
    spec = launch_spec(tmp_path, *hosts, devices={h.name: healthy_devices(h) for h in hosts})
    path = spec_file(tmp_path, spec)
    asked = []

    def probe_all(targets, *_a, **_k):
        asked.extend(targets)
        # the port plan's listening sockets: the first rows of a real `ss -tlnp` capture
        # (tests/training/real_sockets/), none of them a port of this job's plan
        capture = (Path(__file__).parent / "real_sockets" / "ss-tlnp_iproute2-6.1.txt").read_text()
        ss = "".join(capture.splitlines(keepends=True)[:3])
        return {n: NodeFacts(master_ip=MASTER, route=ROUTES[n], topo=topo, numa_nodes=nodes,
                             listening=(0, ss)) for n in targets}

    monkeypatch.setattr(multinode, "open_sessions", lambda targets, _f: contextlib.nullcontext(
        {t.name: object() for t in targets}))
    monkeypatch.setattr(multinode, "node_facts", probe_all)
    result = train("--launch-spec", str(path), "-o", str(tmp_path / "r"), "--dry-run",
                    "--nproc-per-node", "8")
    assert result.exit_code == 0, result.output
    assert asked == ["node01", "node02"]
    assert "not available" not in result.stdout
    assert "numa: local rank 0 (NPU 0): NUMA node 6, CPUs 144-167" in result.stdout, result.stdout
