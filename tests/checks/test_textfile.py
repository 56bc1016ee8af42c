"""The node_exporter textfiles ascend-check writes read back with Prometheus' own text parser
(prometheus_client's): every series of a report, of a run that judged nothing and of a Slurm action,
with label values that need escaping kept as they were."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from ascend_ready.checks import drain_policy
from ascend_ready.checks.node_unjudged import render_unjudged
from ascend_ready.checks.report import CheckResult, HostStatus, Report, render_prometheus
from ascend_ready.checks.slurm_health import SlurmAction


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_a_reports_textfile_reads_back_series_by_series():
    report = Report(
        hosts=[HostStatus(name='node"01\\a', collect_s=1.2345), HostStatus(name="node02", reachable=False)],
        results=[CheckResult(check_id="npu.count", host='node"01\\a', status="fail", severity="critical",
                             tier="quick", title="t")],
        created_at="2026-12-02T13:00:01+00:00",
    )
    got = samples(render_prometheus(report))
    host = ("host", 'node"01\\a')
    for status in ("pass", "warn", "fail", "error", "skip"):
        labels = frozenset({host, ("check", "npu.count"), ("severity", "critical"), ("status", status)})
        assert got.pop(("ascend_check_status", labels)) == (1.0 if status == "fail" else 0.0)
    assert got.pop(("ascend_check_host_reachable", frozenset({host}))) == 1.0
    assert got.pop(("ascend_check_host_reachable", frozenset({("host", "node02")}))) == 0.0
    assert got.pop(("ascend_check_collect_seconds", frozenset({host}))) == 1.234
    assert got.pop(("ascend_check_collect_seconds", frozenset({("host", "node02")}))) == 0.0
    assert got.pop(("ascend_check_last_run_timestamp_seconds", frozenset())) == 1796216401.0
    assert got == {}


def test_an_unjudged_run_and_a_slurm_action_read_back():
    got = samples(render_unjudged("node01", 'run failed: "x"\nat\\y', now=1796216401.4))
    reason = ("reason", 'run failed: "x" at\\y')  # the newline folded, the quote and backslash kept
    assert got == {
        ("ascend_check_host_reachable", frozenset({("host", "node01")})): 0.0,
        ("ascend_check_run_failed", frozenset({("host", "node01"), reason})): 1.0,
        ("ascend_check_last_run_timestamp_seconds", frozenset()): 1796216401.0,
    }
    held = SlurmAction("held", "pcie.link_width", "NOT drained: the breaker holds it back")
    got = samples(drain_policy.render_metrics("node03", held))
    assert got.pop(("ascend_check_drain_held_back", frozenset({("host", "node03")}))) == 1.0
    assert {labels: v for (_, labels), v in got.items()} == {
        frozenset({("host", "node03"), ("action", a)}): float(a == "held") for a in drain_policy.ACTIONS}
