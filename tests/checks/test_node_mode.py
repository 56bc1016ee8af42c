"""`ascend-check node`: a node judged alone against the fleet fingerprints the controller recorded, its
outputs (exit code, textfile, report file), and Slurm acting on its verdict (drain, resume, an admin's
drain left alone) through sinfo/scontrol stand-ins that print what Slurm 22.05 prints."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import slurm_fake
from checks_fakenode import fake_host
from click.testing import CliRunner

from ascend_ready.checks import node_mode, slurm_health
from ascend_ready.checks.cli import main
from ascend_ready.checks.cluster.fleet_file import load_fleet_fingerprints, write_fleet_fingerprints
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.report import Report
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.slurm_health import REASON_MAX, act_on_verdict, drain_reason, parse_node_state
from ascend_ready.checks.snapshot import Snapshot
from ascend_ready.errors import ConfigError, RemoteError

A2 = load_profile("atlas-800t-a2")


def _fleet_snapshot(n: int = 4, toolkit_of: dict[str, str] | None = None) -> Snapshot:
    hosts = {}
    for i in range(n):
        name = f"node{i + 1:02d}"
        host = fake_host(name, index=i)
        if name in (toolkit_of or {}):
            text = host.probes["toolkit-version"].stdout
            old = next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("version="))
            host.probes["toolkit-version"] = host.probes["toolkit-version"].model_copy(
                update={"stdout": text.replace(old, toolkit_of[name])}
            )
        host.profile = A2
        hosts[name] = host
    return Snapshot(hosts=hosts)


def _judge_alone(host, reference):
    snap = Snapshot(hosts={host.name: host})
    report = run_checks(snap, {host.name: A2}, select_checks("quick", ["fleet.*"]), fleet_reference=reference)
    return {r.check_id: r for r in report.results}


def test_a_node_judged_alone_is_compared_with_the_recorded_fleet(tmp_path):
    path = tmp_path / "fleet.json"
    write_fleet_fingerprints(_fleet_snapshot(), path)
    reference = load_fleet_fingerprints(path).fingerprints
    assert set(reference["fleet.stack:Atlas 800T A2"]) == {"node01", "node02", "node03", "node04"}
    # node03 now runs another CANN than the one the controller recorded for it and its peers
    drifted = _fleet_snapshot(toolkit_of={"node03": "8.0.0"}).hosts["node03"]
    results = _judge_alone(drifted, reference)
    stack = results["fleet.stack"]
    assert stack.status == "fail"
    assert "node03: cann is 8.0.0, the majority (3 of 4 nodes) has" in stack.message
    assert any("fleet fingerprint file" in line for line in stack.evidence)
    assert results["fleet.os"].status == "pass"
    healthy = _judge_alone(_fleet_snapshot().hosts["node02"], reference)
    assert {r.status for r in healthy.values()} == {"pass"}, {k: r.message for k, r in healthy.items()}


def test_a_node_judged_alone_without_a_fingerprint_file_skips_the_fleet_checks_saying_how():
    results = _judge_alone(_fleet_snapshot(1).hosts["node01"], None)
    assert {r.status for r in results.values()} == {"skip"}
    assert "--fleet-fingerprints FILE" in results["fleet.stack"].message


def test_the_controller_writes_the_fingerprint_file_from_its_run(tmp_path):
    from ascend_ready.checks.snapshot import save_snapshot

    save_snapshot(_fleet_snapshot(3), tmp_path / "snap")
    path = tmp_path / "fleet.json"
    result = CliRunner().invoke(
        main, ["--snapshot", str(tmp_path / "snap"), "--fleet-fingerprints", str(path)]
    )
    assert result.exit_code == 0, result.output
    recorded = load_fleet_fingerprints(path).fingerprints
    assert set(recorded) == {f"fleet.{c}:Atlas 800T A2" for c in ("stack", "os", "hardware", "hccn")} | {
        "npu.sdc:Atlas 800T A2"}  # the golden-digest votes of the SDC probe (checks/suite/test_sdc.py)
    assert set(recorded["fleet.hardware:Atlas 800T A2"]) == {"node01", "node02", "node03"}
    assert recorded["fleet.hardware:Atlas 800T A2"]["node02"]["npu_count"] == "8"


def test_a_launch_spec_serves_as_the_stack_reference(tmp_path):
    from ascend_ready.checks.cluster.launchspec import LaunchSpec, LaunchSpecHost, fingerprint_hosts

    snap = _fleet_snapshot()
    prints = fingerprint_hosts(snap, {n: A2 for n in snap.hosts})
    hosts = {n: LaunchSpecHost(address=n, verdict="pass", fingerprint=fp) for n, fp in prints.items()}
    path = tmp_path / "spec.json"
    path.write_text(LaunchSpec(profile=A2.product, hosts=hosts).model_dump_json())
    reference = load_fleet_fingerprints(path).fingerprints
    assert list(reference) == [f"fleet.stack:{A2.product}"]
    drifted = _fleet_snapshot(toolkit_of={"node03": "8.0.0"}).hosts["node03"]
    results = _judge_alone(drifted, reference)
    assert results["fleet.stack"].status == "fail" and "cann is 8.0.0" in results["fleet.stack"].message
    assert results["fleet.os"].status == "skip"  # a spec fingerprints the stack only
    path.write_text(LaunchSpec(profile=A2.product, hosts={}, checked=False).model_dump_json())
    with pytest.raises(ConfigError, match="no stack fingerprints"):
        load_fleet_fingerprints(path)


@pytest.mark.parametrize(
    "text, what",
    [
        ("{", "Invalid JSON"),
        ('{"fingerprints": [1]}', "fingerprints"),
        ('{"schema_version": 9}', "schema_version 9"),
    ],
)
def test_a_bad_fingerprint_file_is_refused_naming_it(tmp_path, text, what):
    path = tmp_path / "fleet.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=what):
        load_fleet_fingerprints(path)


# ---------------------------------------------------------------- the CLI, with the local batch's snapshot


@pytest.fixture
def node_run(monkeypatch):
    """`ascend-check node` judging a rendered node instead of this machine (which has no NPU)."""
    faults: list = []

    def fake(name, options, fleet):
        host = fake_host(name, faults=faults)
        host.profile = A2
        snap = Snapshot(hosts={name: host})
        return run_checks(
            snap, {name: A2}, options.checks(), tier=options.tier,
            fleet_reference=fleet and fleet.fingerprints,
        ), snap

    monkeypatch.setattr(node_mode, "run_node", fake)
    return faults


def test_node_writes_its_report_and_textfile_and_exits_by_the_verdict(node_run, tmp_path):
    prom, report = tmp_path / "tf" / "ascend_check.prom", tmp_path / "state" / "node.json"
    prom.parent.mkdir()
    args = [
        "node",
        "--node-name",
        "node01",
        "--prometheus",
        str(prom),
        "--report",
        str(report),
        "--format",
        "json",
    ]
    ok = CliRunner().invoke(main, args)
    assert ok.exit_code == 0, ok.output
    assert (
        'ascend_check_status{check="pcie.link_width",host="node01",severity="critical",status="pass"} 1.0\n'
        in (prom.read_text())
    )
    assert Report.model_validate_json(report.read_text()).hosts[0].name == "node01"
    node_run.append(("pcie-width", {"npu": 2, "width": 8}))
    bad = CliRunner().invoke(main, args)
    assert bad.exit_code == 1
    status = {r["check_id"]: r["status"] for r in json.loads(bad.stdout)["results"]}
    assert status["pcie.link_width"] == "fail"
    assert 'check="pcie.link_width",host="node01",severity="critical",status="fail"} 1.0\n' in (
        prom.read_text()
    )
    assert not list(prom.parent.glob(".*tmp"))  # written through a temporary file, renamed into place


def test_node_refuses_both_roles_and_a_bad_output_path_before_probing(node_run, tmp_path):
    both = CliRunner().invoke(main, ["node", "--slurm-health", "--prolog"])
    assert both.exit_code == 2 and "two roles" in both.output
    (tmp_path / "dir").mkdir()
    bad = CliRunner().invoke(main, ["node", "--prometheus", str(tmp_path / "dir")])
    assert bad.exit_code == 2 and "--prometheus" in bad.output


# ---------------------------------------------------------------- Slurm


class FakeSlurm(slurm_fake.FakeSlurm):
    """A partition of node01-node04 (tests/checks/slurm_fake.py, Slurm 22.05.8's output) where `node` is in
    `state` with `reason` (an idle node: `node02|main*|idle|Unknown|Unknown|none`)."""

    def __init__(self, state="idle", user="Unknown", reason="none", node="node02"):
        nodes = {f"node{i:02d}": slurm_fake.Node() for i in range(1, 5)}
        nodes[node] = slurm_fake.Node(state, user, "Unknown" if reason == "none" else "2026-12-02T06:30:00",
                                      reason)
        super().__init__(nodes)
        self.node = node

    state = property(lambda self: self.nodes[self.node].state)
    user = property(lambda self: self.nodes[self.node].user)
    reason = property(lambda self: self.nodes[self.node].reason)


def _report(statuses: dict[str, str], node="node02") -> Report:
    from ascend_ready.checks.report import CheckResult, HostStatus

    results = [
        CheckResult(check_id=c, host=node, status=s, severity="critical", tier="quick", title=c)
        for c, s in statuses.items()
    ]
    return Report(hosts=[HostStatus(name=node)], results=results)


def test_a_failing_node_is_drained_with_the_failing_and_unjudged_ids():
    reason = drain_reason(
        _report({"pcie.link_width": "fail", "npu.health": "error", "os.thp": "warn", "npu.count": "pass"}),
        "node02",
    )
    assert reason == "ascend-check: pcie.link_width; cannot judge npu.health"
    slurm = FakeSlurm()
    action = act_on_verdict("node02", reason, run=slurm, judged=True)
    assert action.action == "drain"
    assert slurm.updates == [["scontrol", "update", "NodeName=node02", "State=DRAIN", f"Reason={reason}"]]
    again = act_on_verdict("node02", reason, run=slurm, judged=True)
    assert again.action == "none" and len(slurm.updates) == 1  # already drained with that reason


def test_a_passing_node_is_resumed_only_from_our_own_drain():
    ours = FakeSlurm("drained", "root", "ascend-check: pcie.link_width")
    quick = act_on_verdict("node02", None, run=ours)  # the health check's quick tier: not a re-check
    assert quick.action == "recheck" and not ours.updates and "--tier full" in quick.note
    assert act_on_verdict("node02", None, run=ours, tier="full").action == "resume"
    assert ours.updates == [["scontrol", "update", "NodeName=node02", "State=RESUME"]]
    admin = FakeSlurm("drained", "admin", "replace DIMM B3")
    passed = act_on_verdict("node02", None, run=admin)
    assert passed.action == "none" and not admin.updates and "replace DIMM B3" in passed.note
    failing = act_on_verdict("node02", "ascend-check: npu.health", run=admin)
    assert failing.action == "none" and not admin.updates and admin.reason == "replace DIMM B3"
    busy = FakeSlurm("draining", "root", "ascend-check: npu.health")
    assert act_on_verdict("node02", None, run=busy, tier="full").action == "resume"


def test_an_unreachable_batch_and_a_long_reason_drain_short_and_say_so():
    from ascend_ready.checks.report import HostStatus

    report = Report(hosts=[HostStatus(name="n1", reachable=False, error="the probe batch did not finish")])
    assert drain_reason(report, "n1") == "ascend-check: cannot judge: the probe batch did not finish"
    many = _report({f"npu.check_{i:02d}": "fail" for i in range(30)}, "n1")
    reason = drain_reason(many, "n1")
    assert len(reason) <= REASON_MAX and reason.startswith("ascend-check: npu.check_00, ")
    assert reason.endswith(" more")


def test_sinfo_without_the_node_or_a_failing_scontrol_is_an_error_saying_what_to_do():
    with pytest.raises(RemoteError, match="does not list node 'node09'"):
        parse_node_state("node01|idle|Unknown|none\n", "node09")

    def refusing(argv, timeout):
        if argv[0] == "sinfo" and "-n" in argv:
            return subprocess.CompletedProcess(argv, 0, "n1|idle|Unknown|none\n", "")
        if argv[0] == "sinfo":
            return subprocess.CompletedProcess(argv, 0, "n1|main*|idle|Unknown|Unknown|none\n", "")
        return subprocess.CompletedProcess(argv, 1, "", "slurm_update error: Invalid user id\n")

    with pytest.raises(RemoteError, match="Invalid user id"):
        act_on_verdict("n1", "ascend-check: npu.health", run=refusing)


def test_slurm_health_cli_drains_and_leaves_the_full_report_on_the_node(node_run, tmp_path, monkeypatch):
    slurm = FakeSlurm()
    monkeypatch.setattr(slurm_health, "_run", slurm)
    node_run.append(("pcie-width", {"npu": 2, "width": 8}))
    report = tmp_path / "node.json"
    result = CliRunner().invoke(
        main, ["node", "--slurm-health", "--node-name", "node02", "--report", str(report)]
    )
    assert result.exit_code == 0, result.output
    assert slurm.reason == "ascend-check: pcie.link_width"
    assert "node02 drained: ascend-check: pcie.link_width" in result.stderr
    judged = {r.check_id for r in Report.model_validate_json(report.read_text()).results}
    assert "pcie.link_width" in judged and not judged & set(node_mode.BUSY_STATE_CHECKS)
    node_run.clear()
    quick = CliRunner().invoke(
        main, ["node", "--slurm-health", "--node-name", "node02", "--report", str(report)]
    )
    assert quick.exit_code == 0 and slurm.state == "drained" and "until an active re-check" in quick.stderr
    healed = CliRunner().invoke(
        main, ["node", "--slurm-health", "--tier", "full", "--node-name", "node02", "--report", str(report)]
    )
    assert healed.exit_code == 0, healed.stderr
    assert slurm.state == "idle" and "resumed" in healed.stderr
    history = [json.loads(line) for line in (tmp_path / "drain-history.jsonl").read_text().splitlines()]
    assert [(e["action"], e["tier"]) for e in history] == [("drain", "quick"), ("recheck", "quick"),
                                                           ("resume", "full")]
    assert history[0]["reason"] == "ascend-check: pcie.link_width"


def test_the_prolog_runs_its_fast_subset_and_refuses_a_job_on_a_busy_npu(node_run, tmp_path):
    report = tmp_path / "node.json"
    node_run.append(("stray-process", {}))
    result = CliRunner().invoke(main, ["node", "--prolog", "--node-name", "node01", "--report", str(report)])
    assert result.exit_code == 1
    judged = {r.check_id: r.status for r in Report.model_validate_json(report.read_text()).results}
    assert set(judged) == set(node_mode.PROLOG_CHECKS)
    assert judged["npu.processes"] == "fail"


def test_the_watchdog_acts_and_ends_a_run_that_passes_its_deadline(tmp_path):
    script = tmp_path / "hang.py"
    marker = tmp_path / "acted"
    script.write_text(
        "import time\nfrom pathlib import Path\nfrom ascend_ready.checks.node_mode import _Watchdog\n"
        f"with _Watchdog(0.3, lambda msg: Path({str(marker)!r}).write_text(msg)):\n    time.sleep(30)\n"
    )
    import sys

    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 1
    assert "passed its deadline of 0.3 s" in proc.stderr
    assert Path(marker).read_text().startswith("ascend-check node: the run passed its deadline")


def test_gres_line_names_the_healthy_npus_in_slurm_ranges(node_run):
    from ascend_ready.checks.slurm_health import gres_conf_line

    assert gres_conf_line("n1", [0, 1, 2, 3, 5, 6, 7]) == "NodeName=n1 Name=npu File=/dev/davinci[0-3,5-7]"
    assert gres_conf_line("n1", [4]) == "NodeName=n1 Name=npu File=/dev/davinci4"
    with pytest.raises(RemoteError, match="no healthy NPU"):
        gres_conf_line("n1", [])
    node_run.append(("chip-health", {"npu": 5, "level": "Critical"}))
    result = CliRunner().invoke(main, ["node", "--gres-line", "--select", "npu.*", "--node-name", "node01"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "NodeName=node01 Name=npu File=/dev/davinci[0-4,6-7]\n"


# ---------------------------------------------------------------- judged as the controller judges (issue 25)


def _recorded_profile(tmp_path, monkeypatch, **named) -> Path:
    """/etc/ascend-ready/profile.yml as python_env writes it (its filter), here in a temp dir."""
    import importlib.util

    plugin = Path(__file__).resolve().parents[2] / "playbooks/plugins/filter/ascend.py"
    spec = importlib.util.spec_from_file_location("ascend_filters", plugin)
    filters = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(filters)
    path = tmp_path / "profile.yml"
    path.write_text(filters.node_profile("", ["ascend_nodes"], **named))
    from ascend_ready.checks import profile as profiles

    monkeypatch.setattr(profiles, "NODE_PROFILE", str(path))
    return path


def test_node_judges_the_training_user_and_venv_provisioning_recorded(tmp_path, monkeypatch):
    from ascend_ready.checks.preflight import profiles_for
    from ascend_ready.fleet.transport import LOCAL, Target

    venv_python = "/home/ascend/venvs/ascend-cann-8.2.RC1-torch-2.6.0/bin/python"
    _recorded_profile(tmp_path, monkeypatch, training_user="ascend", python=venv_python)
    seen = []

    def fake(name, options, fleet):
        seen.append(options)
        raise ConfigError("stop here")

    monkeypatch.setattr(node_mode, "run_node", fake)
    CliRunner().invoke(main, ["node", "--node-name", "node01", "--no-report"])
    (prof,) = profiles_for([Target(name="node01", address=LOCAL)], seen[0].profile).values()
    assert (prof.training_user, prof.python) == ("ascend", venv_python)
    # --profile and --training-user still win over the recorded file
    CliRunner().invoke(main, ["node", "--profile", "atlas-800t-a2", "--training-user", "bob", "--no-report"])
    (given,) = profiles_for(
        [Target(name="n", address=LOCAL)], seen[1].profile, training_user=seen[1].training_user
    ).values()
    assert given.training_user == "bob" and seen[1].profile == "atlas-800t-a2"


def test_node_without_a_recorded_profile_judges_by_the_default(tmp_path, monkeypatch):
    from ascend_ready.checks import profile as profiles

    monkeypatch.setattr(profiles, "NODE_PROFILE", str(tmp_path / "absent.yml"))
    assert node_mode.recorded_profile() is None


def test_another_user_than_root_keeps_its_report_under_its_home(monkeypatch, tmp_path):
    monkeypatch.setattr(node_mode.os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert node_mode.default_report() == str(tmp_path / "state/ascend-ready/node-check.json")
    monkeypatch.setattr(node_mode.os, "geteuid", lambda: 0)
    assert node_mode.default_report() == node_mode.DEFAULT_REPORT


@pytest.mark.parametrize("deadline", ["2", "4", "6", "9.9"])
def test_a_deadline_too_short_to_judge_is_refused_naming_the_minimum(node_run, deadline, monkeypatch):
    slurm = FakeSlurm()
    monkeypatch.setattr(slurm_health, "_run", slurm)
    result = CliRunner().invoke(main, ["node", "--slurm-health", "--deadline", deadline, "--no-report"])
    assert result.exit_code == 2, result.output
    assert f"--deadline {deadline}: a run needs at least 10 s" in result.output
    assert "hint: give --deadline 10 or more" in result.output
    assert slurm.calls == []  # nothing judged, nothing drained


def test_the_shortest_deadline_gives_the_batch_a_share_that_judges(node_run, tmp_path):
    result = CliRunner().invoke(
        main, ["node", "--deadline", "10", "--node-name", "node01", "--report", str(tmp_path / "r.json")]
    )
    assert result.exit_code == 0, result.output
    statuses = {r.status for r in Report.model_validate_json((tmp_path / "r.json").read_text()).results}
    assert "error" not in statuses and "pass" in statuses


# ---------------------------------------------------------------- a run that could not judge (issue 25)


def _prom_after_a_good_run(node_run, tmp_path) -> Path:
    prom = tmp_path / "ascend_check.prom"
    ok = CliRunner().invoke(main, ["node", "--node-name", "node01", "--prometheus", str(prom), "--no-report"])
    assert ok.exit_code == 0 and 'status="pass"} 1.0\n' in prom.read_text()
    return prom


def test_a_failed_run_replaces_the_last_verdict_with_could_not_judge(node_run, tmp_path, monkeypatch):
    prom = _prom_after_a_good_run(node_run, tmp_path)

    def broken(name, options, fleet):
        raise ConfigError("hardware profile 'x': no such file")

    monkeypatch.setattr(node_mode, "run_node", broken)
    bad = CliRunner().invoke(
        main, ["node", "--node-name", "node01", "--prometheus", str(prom), "--no-report"]
    )
    assert bad.exit_code == 2
    text = prom.read_text()
    assert "ascend_check_status" not in text  # the all-pass of the run before is gone
    assert 'ascend_check_host_reachable{host="node01"} 0.0\n' in text
    assert (
        'ascend_check_run_failed{host="node01",reason="run failed: hardware profile \'x\': no such file"} '
        '1.0\n' in text
    )


def test_a_killed_run_is_reported_by_the_units_exec_stop_post(node_run, tmp_path):
    prom = _prom_after_a_good_run(node_run, tmp_path)
    # what ExecStopPost runs after SIGKILL (roles/node_health/templates/ascend-check-node.service.j2)
    res = CliRunner().invoke(
        main,
        [
            "node",
            "--node-name",
            "node01",
            "--prometheus",
            str(prom),
            "--unjudged",
            "systemd: signal (killed KILL)",
        ],
    )
    assert res.exit_code == 0, res.output
    assert 'reason="systemd: signal (killed KILL)"} 1.0\n' in prom.read_text()
    assert "ascend_check_status" not in prom.read_text()
    needs = CliRunner().invoke(main, ["node", "--unjudged", "x"])
    assert needs.exit_code == 2 and "--prometheus" in needs.output


def test_a_run_past_its_deadline_leaves_could_not_judge(tmp_path):
    prom = tmp_path / "ascend_check.prom"
    prom.write_text(
        'ascend_check_status{host="node01",check="npu.count",severity="critical",status="pass"} 1\n'
    )
    script = tmp_path / "slow.py"
    script.write_text(
        "import sys, time\nfrom ascend_ready.checks import node_mode\n"
        "from ascend_ready.checks.cli import main\n"
        "node_mode.MIN_DEADLINE_S = 0.5\nnode_mode._JUDGE_MARGIN_S = 0.1\n"
        "node_mode.run_node = lambda *a: time.sleep(30)\n"
        f"sys.argv = ['ascend-check', 'node', '--node-name', 'node01', '--deadline', '1', '--no-report', "
        f"'--prometheus', {str(prom)!r}]\nmain()\n"
    )
    import sys

    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1, proc.stderr
    text = prom.read_text()
    assert "ascend_check_status" not in text
    assert 'reason="run passed its 1 s deadline"} 1.0\n' in text


def test_slurm_health_cli_holds_back_past_the_breaker_and_exports_it(node_run, tmp_path, monkeypatch):
    slurm = FakeSlurm()
    for other in ("node01", "node03"):  # half of the partition already drained by ascend-check
        slurm.nodes[other] = slurm_fake.Node("drained", "root", "2026-12-02T06:30:00",
                                             "ascend-check: npu.health")
    monkeypatch.setattr(slurm_health, "_run", slurm)
    monkeypatch.setattr(slurm_health, "datetime", type("D", (), {"now": staticmethod(lambda: slurm.clock)}))
    node_run.append(("pcie-width", {"npu": 2, "width": 8}))
    prom = tmp_path / "ascend_check_slurm.prom"
    args = ["node", "--slurm-health", "--node-name", "node02", "--report", str(tmp_path / "node.json"),
            "--slurm-textfile", str(prom)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert slurm.state == "idle" and "NOT drained" in result.stderr and "node01, node03" in result.stderr
    assert slurm.nodes["node02"].comment.startswith("ascend-check: drain held back by the breaker")
    assert 'ascend_check_drain_held_back{host="node02"} 1.0\n' in prom.read_text()
    again = CliRunner().invoke(main, args)  # still held: the history says it once
    assert again.exit_code == 0
    history = (tmp_path / "drain-history.jsonl").read_text().splitlines()
    assert [json.loads(line)["action"] for line in history] == ["held"]
    node_run.clear()  # repaired: the breaker's Comment goes, the metric drops to 0
    CliRunner().invoke(main, args)
    assert slurm.nodes["node02"].comment == ""
    assert 'ascend_check_drain_held_back{host="node02"} 0.0\n' in prom.read_text()


# ---------------------------------------------------------------- node-local burn-in (issue 30)


def test_a_node_local_burn_in_loads_for_its_duration_within_a_deadline_that_holds_it(node_run, monkeypatch):
    """`ascend-check node --tier burn-in --duration D` (a return-to-service re-check under Slurm, a new
    node's acceptance on the node itself) runs the burn-in checks, and its deadline grows by D and the
    load's last round unless one is given."""
    seen = []
    fake = node_mode.run_node
    monkeypatch.setattr(node_mode, "run_node", lambda name, options, fleet: (seen.append(options),
                                                                          fake(name, options, fleet))[1])
    result = CliRunner().invoke(main, ["node", "--tier", "burn-in", "--duration", "90s", "--node-name",
                                       "node01", "--format", "json", "--no-report"])
    report = Report.model_validate_json(result.stdout)
    burn_in = {r.check_id: r.status for r in report.results if r.check_id.startswith("burn_in.")}
    assert set(burn_in) == {"burn_in.load", "burn_in.thermal", "burn_in.throttle", "burn_in.ecc",
                            "burn_in.links"}, burn_in
    assert burn_in["burn_in.thermal"] == "pass" and report.tier == "burn-in"
    (options,) = seen
    assert options.duration_s == 90
    assert options.fanout.host_deadline_s == node_mode.DEFAULT_DEADLINE_S + 90 + node_mode.MARGIN_S - 4


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tier", "burn-in"], "--tier burn-in needs --duration D"),
        (["--duration", "60s"], "--duration 60s is the burn-in's, not the quick tier's"),
        (["--tier", "burn-in", "--duration", "60s", "--deadline", "120"],
         "--deadline 120 is shorter than the burn-in it must hold"),
        (["--tier", "burn-in", "--duration", "60s", "--prolog"], "--prolog runs before every job"),
    ],
)
def test_a_node_local_burn_in_without_its_duration_or_room_for_it_is_refused(node_run, args, says):
    result = CliRunner().invoke(main, ["node", "--no-report", *args])
    assert result.exit_code == 2, result.output
    assert says in result.output and "hint: " in result.output
