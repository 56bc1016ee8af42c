"""The continuous-health pieces without Slurm: the Prometheus alert rules fire on series recorded from the
textfile `ascend-check node --prometheus` really writes (promtool test rules), and the node_health role's
systemd units pass `systemd-analyze verify`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml
from checks_fakenode import REPO, fake_host

from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.report import HostStatus, Report, render_prometheus
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import Snapshot

ROLE = REPO / "playbooks/roles/node_health"
RULES = ROLE / "files/ascend-check-alerts.yml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian package prometheus; scripts/system-deps.sh)"
)
#: minutes of recorded series, one sample a minute
MINUTES = 30
_SERIES = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")


def _textfile(node: str, **fake) -> tuple[Report, str]:
    """The textfile of one node's quick tier, as `ascend-check node --prometheus` renders it."""
    host = fake_host(node, **fake)
    prof = load_profile("atlas-800t-a2")
    report = run_checks(Snapshot(hosts={node: host}), {node: prof}, select_checks("quick", (), ("fleet.*",)))
    return report, render_prometheus(report)


def _series(text: str, instance: str, *, fresh: bool) -> list[dict]:
    """promtool input series of a textfile as node_exporter serves it (instance and job labels added);
    the last-run timestamp follows time() on a fresh node and stands still on a stale one."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _SERIES.match(line)
        assert m, f"textfile line promtool would not read: {line!r}"
        labels = m["labels"] or ""
        labels = f'{labels},instance="{instance}",job="node"'.lstrip(",")
        if m["name"] == "ascend_check_last_run_timestamp_seconds":
            values = f"0+60x{MINUTES}" if fresh else f"0x{MINUTES}"
        else:
            values = f"{m['value']}x{MINUTES}"
        out.append({"series": f"{m['name']}{{{labels}}}", "values": values})
    return out


def _labels(line_labels: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line_labels))


def _annotations(alert: str, labels: dict[str, str]) -> dict[str, str]:
    """The rule's annotations with {{ $labels.x }} filled in, as Prometheus renders them."""
    rules = {r["alert"]: r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    return {
        k: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m[1], ""), v)
        for k, v in rules[alert].get("annotations", {}).items()
    }


def _expected(alert: str, labels: dict[str, str], **extra: str) -> dict:
    labels = {**labels, **extra}
    return {"exp_labels": labels, "exp_annotations": _annotations(alert, labels)}


def test_rules_file_is_valid_and_names_every_alert():
    rules = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    assert {"AscendCheckFailing", "AscendCheckCannotJudge", "AscendCheckTextfileStale"} <= rules
    if PROMTOOL:
        proc = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "SUCCESS: 6 rules found" in proc.stdout


@needs_promtool
def test_each_alert_fires_from_recorded_textfiles_and_a_healthy_node_fires_none(tmp_path):
    healthy, healthy_text = _textfile("node01", index=0)
    assert {r.status for r in healthy.results} <= {"pass", "skip"}
    failing, failing_text = _textfile("node02", index=1, faults=[("pcie-width", {"npu": 2, "width": 8})])
    # npu-smi hung: the batch cut it at its timeout, so its checks could not judge
    unjudged, unjudged_text = _textfile("node03", index=2, drop=("npu-smi-info",))
    unprobed = Report(
        hosts=[HostStatus(name="node04", reachable=False, error="the probe batch did not finish")],
        created_at=healthy.created_at,
    )
    series = (
        _series(healthy_text, "node01:9100", fresh=True)
        + _series(failing_text, "node02:9100", fresh=True)
        + _series(unjudged_text, "node03:9100", fresh=True)
        + _series(render_prometheus(unprobed), "node04:9100", fresh=False)
        + [
            {
                "series": 'node_textfile_scrape_error{instance="node05:9100",job="node"}',
                "values": f"1x{MINUTES}",
            }
        ]
    )
    node = {"job": "node"}
    fails = [r for r in failing.results if r.status == "fail"]
    assert [r.check_id for r in fails] == ["pcie.link_width"]
    errors = [r for r in unjudged.results if r.status == "error"]
    assert {"npu.health", "npu.count"} <= {r.check_id for r in errors}

    def status_labels(r, instance):
        return {
            **node,
            "instance": instance,
            "host": r.host,
            "check": r.check_id,
            "severity": r.severity,
            "status": r.status,
        }

    def case(alert, expected):
        return {"eval_time": "10m", "alertname": alert, "exp_alerts": expected}

    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    case(
                        "AscendCheckFailing",
                        [
                            _expected(
                                "AscendCheckFailing",
                                status_labels(r, "node02:9100"),
                                ascend_severity=r.severity,
                            )
                            for r in fails
                        ],
                    ),
                    case(
                        "AscendCheckCannotJudge",
                        [
                            _expected("AscendCheckCannotJudge", status_labels(r, "node03:9100"))
                            for r in errors
                        ],
                    ),
                    case(
                        "AscendCheckNodeNotProbed",
                        [
                            _expected(
                                "AscendCheckNodeNotProbed",
                                {**node, "instance": "node04:9100", "host": "node04"},
                            )
                        ],
                    ),
                    # older than 20 minutes only from minute 20 on (the fresh nodes never)
                    case("AscendCheckTextfileStale", []),
                    {
                        "eval_time": "25m",
                        "alertname": "AscendCheckTextfileStale",
                        "exp_alerts": [
                            _expected("AscendCheckTextfileStale", {**node, "instance": "node04:9100"})
                        ],
                    },
                    case(
                        "AscendCheckTextfileUnreadable",
                        [_expected("AscendCheckTextfileUnreadable", {**node, "instance": "node05:9100"})],
                    ),
                    # `for: 1m`: nothing yet at the first sample
                    {"eval_time": "0m", "alertname": "AscendCheckFailing", "exp_alerts": []},
                ],
            }
        ],
    }
    path = tmp_path / "ascend-check-alerts.test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    proc = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


@needs_promtool
def test_a_drain_the_breaker_held_back_fires_its_alert_and_a_drained_node_does_not(tmp_path):
    """The textfile `ascend-check node --slurm-health --prometheus` writes on the node the breaker kept in
    service (three of four failing: tests/checks/test_drain_policy.py) and on one it drained."""
    from slurm_fake import FakeSlurm

    from ascend_ready.checks.drain_policy import render_metrics
    from ascend_ready.checks.slurm_health import act_on_verdict, drain_reason

    slurm = FakeSlurm()
    series = []
    for i, node in enumerate(("node01", "node02", "node03")):
        report, text = _textfile(node, index=i, faults=[("pcie-width", {"npu": 2, "width": 8})])
        action = act_on_verdict(node, drain_reason(report, node), run=slurm, now=slurm.clock)
        series += _series(text + render_metrics(node, action), f"{node}:9100", fresh=True)
    assert [n.state for n in slurm.nodes.values()] == ["drained", "drained", "idle", "idle"]
    labels = {"job": "node", "instance": "node03:9100", "host": "node03"}
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "0m", "alertname": "AscendCheckDrainHeldBack", "exp_alerts": []},
                    {
                        "eval_time": "5m",
                        "alertname": "AscendCheckDrainHeldBack",
                        "exp_alerts": [
                            _expected("AscendCheckDrainHeldBack", labels, ascend_severity="critical")
                        ],
                    },
                ],
            }
        ],
    }
    path = tmp_path / "held-back.test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    proc = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_promtool
def test_promtool_test_rules_fails_when_an_alert_does_not_fire(tmp_path):
    """The harness above can fail: a failing check with no alert expected is a promtool failure."""
    _, text = _textfile("node02", index=1, faults=[("pcie-width", {"npu": 2, "width": 8})])
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _series(text, "node02:9100", fresh=True),
                "alert_rule_test": [
                    {"eval_time": "10m", "alertname": "AscendCheckFailing", "exp_alerts": []}
                ],
            }
        ],
    }
    path = tmp_path / "t.yml"
    path.write_text(yaml.safe_dump(tests))
    proc = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "pcie.link_width" in proc.stdout + proc.stderr


def _render(name: str, **overrides) -> str:
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    values = {**defaults, "node_health_venv": str(REPO / ".venv"), **overrides}
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["quote"] = __import__("shlex").quote
    return env.from_string((ROLE / "templates" / f"{name}.j2").read_text()).render(**values)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_accepts_the_timer_and_its_service(tmp_path):
    for name in ("ascend-check-node.service", "ascend-check-node.timer"):
        (tmp_path / name).write_text(
            _render(
                name,
                node_health_fleet_fingerprints="/etc/ascend-ready/fleet.json",
                node_health_skip=["os.disk_free"],
            )
        )
    service = (tmp_path / "ascend-check-node.service").read_text()
    assert f"ExecStart={REPO}/.venv/bin/ascend-check node --format json" in service
    assert "--fleet-fingerprints /etc/ascend-ready/fleet.json --skip os.disk_free" in service
    units = [str(tmp_path / "ascend-check-node.timer"), str(tmp_path / "ascend-check-node.service")]
    proc = subprocess.run(["systemd-analyze", "verify", *units], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    # and it can fail: a service whose ascend-check is not there
    (tmp_path / "ascend-check-node.service").write_text(
        _render("ascend-check-node.service", node_health_venv="/nonexistent/venv")
    )
    bad = subprocess.run(["systemd-analyze", "verify", *units], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "/nonexistent/venv/bin/ascend-check" in bad.stderr


def test_the_units_run_the_command_the_cli_has():
    """Every option the service passes is one `ascend-check node` takes (a renamed flag breaks the unit)."""
    from ascend_ready.checks.node_mode import node_command

    service = _render(
        "ascend-check-node.service", node_health_fleet_fingerprints="/f.json", node_health_skip=["x"]
    )
    exec_line = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    given = {w for w in exec_line.split() if w.startswith("--")}
    known = {o for p in node_command.params for o in p.opts}
    assert given and given <= known, given - known
    # a failed, timed-out or killed run replaces the textfile at once (issue 25): systemd's result read
    # in sh ($$ is systemd's escape for one $), the same textfile as ExecStart's
    post = next(line for line in service.splitlines() if line.startswith("ExecStopPost="))
    assert '"$$SERVICE_RESULT" != success' in post and "--unjudged" in post
    assert {w for w in post.split() if w.startswith("--")} <= known
    prom = next(w for w in exec_line.split() if w.endswith(".prom"))
    assert f"--prometheus {prom}" in post
    assert Path(REPO / ".venv/bin/ascend-check").exists()
