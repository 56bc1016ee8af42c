"""The preflight report (versioned pydantic model, JSON Schema) and its renderers: rich table, JSON,
JUnit XML and the Prometheus node_exporter textfile format."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ascend_ready.checks import textfile
from ascend_ready.checks.registry import Remediation

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "CheckResult",
    "HostStatus",
    "Report",
    "Series",
    "exit_code",
    "render_junit",
    "render_prometheus",
    "render_table",
    "report_json_schema",
]

#: 2: tier, selection and coverage recorded (select, skip, selected_checks, each host's training_checks);
#: a report of schema 1 still reads;
#: 3: the burn-in tier (tier "burn-in") and each result's time series (`series`, None before); 1 and 2 read
REPORT_SCHEMA_VERSION = 3
Status = Literal["pass", "fail", "warn", "error", "skip"]
STATUSES: tuple[Status, ...] = ("pass", "warn", "fail", "error", "skip")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Series(_Model):
    """One curve a check judged (burn-in): a metric of one subject over the check's window."""

    metric: str = Field(description="what was sampled: temperature_c, aicore_cur_freq_mhz, matmul_tflops...")
    unit: str = Field(description="its unit: C, W, %, MHz, TFLOPS, GB/s, count")
    subject: str = Field(description="whose: `npu 0 chip 0` (npu-smi), `device 3` (torch, hccn_tool)")
    t_s: list[float] = Field(description="seconds into the window of each value")
    values: list[float | None] = Field(description="the values (None: the tool printed none then)")


class CheckResult(_Model):
    """One check on one host."""

    check_id: str = Field(description="stable id, e.g. pcie.link_width")
    host: str
    status: Status = Field(
        description="pass; warn (off but not failing); fail; error (could not judge: "
        "a probe failed or its output did not parse); skip (does not apply)"
    )
    severity: Literal["critical", "major", "minor"]
    tier: Literal["quick", "full", "burn-in"]
    title: str
    message: str = Field("", description="what is wrong (empty on pass)")
    evidence: list[str] = Field(default_factory=list, description="the raw lines the verdict is based on")
    remediation: Remediation | None = None
    duration_s: float = 0.0
    series: list[Series] | None = Field(
        None, description="the time series the verdict is based on (burn-in; None: none, or schema < 3)"
    )


class HostStatus(_Model):
    name: str
    address: str | None = None
    reachable: bool = True
    error: str | None = Field(
        None, description="why the host could not be reached or its batch was cut short"
    )
    collect_s: float = Field(0.0, description="seconds the probe batch took")
    training_checks: list[str] | None = Field(
        None, description="the checks the host's profile requires judged before training starts there "
        "(None: a report of schema 1, which did not record them)"
    )


class Report(_Model):
    schema_version: int = REPORT_SCHEMA_VERSION
    tool_version: str = ""
    created_at: str = ""
    tier: Literal["quick", "full", "burn-in"] = "quick"
    profile: str = ""
    source: str = Field("live", description="'live' or the snapshot directory the checks ran on")
    duration_s: float = 0.0
    select: list[str] = Field(default_factory=list, description="--select globs of the run (empty: all)")
    skip: list[str] = Field(default_factory=list, description="--skip globs of the run")
    selected_checks: list[str] | None = Field(
        None, description="ids of the checks the run's tier and selection chose (None: schema 1)"
    )
    hosts: list[HostStatus] = Field(default_factory=list)
    results: list[CheckResult] = Field(default_factory=list)

    def judged(self, host: str) -> set[str]:
        """Ids of the checks this report holds a result of for `host` (skip included: the check ran and
        found it does not apply)."""
        return {r.check_id for r in self.results if r.host == host}

    @property
    def counts(self) -> Counter:
        return Counter(r.status for r in self.results)

    @property
    def unreachable(self) -> list[HostStatus]:
        return [h for h in self.hosts if not h.reachable]


def exit_code(report: Report) -> int:
    """0 all pass (warnings allowed), 1 a check failed or errored, 3 a host unreachable and none failed."""
    from ascend_ready.errors import ExitCode

    counts = report.counts
    if counts["fail"] or counts["error"]:
        return ExitCode.FAILED
    if report.unreachable:
        return ExitCode.UNREACHABLE
    return ExitCode.OK


def report_json_schema() -> dict:
    return json_schema("report")


#: The published schemas (checks/schemas/<what>.schema.json, kept equal to the models by a test).
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


def json_schema(what: str) -> dict:
    """JSON Schema of the report (`--format json`), the hardware profile file or the snapshot manifest."""
    from ascend_ready.checks.profile import HardwareProfile
    from ascend_ready.checks.snapshot import SNAPSHOT_SCHEMA_VERSION, Snapshot

    model, version = {
        "report": (Report, REPORT_SCHEMA_VERSION),
        "profile": (HardwareProfile, 1),
        "snapshot": (Snapshot, SNAPSHOT_SCHEMA_VERSION),
    }[what]
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://ascend-ready.dev/schemas/ascend-check-{what}-v{version}.json"
    return schema


def render_json(report: Report) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=1) + "\n"


# ---------------------------------------------------------------- table

_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "error": "red", "skip": "dim"}


#: hosts beyond which the pass grid folds hosts with the same counts into one row
_GRID_HOSTS = 16


def _pass_grid(report: Report, title: str):
    """Host x check group (the id's prefix: npu, pcie, hccl, os, versions, fleet): how many checks passed
    (and were skipped); above _GRID_HOSTS hosts, the hosts whose rows are the same share one."""
    from rich.table import Table

    groups = sorted({r.check_id.split(".", 1)[0] for r in report.results})
    counts = Counter((r.host, r.check_id.split(".", 1)[0], r.status) for r in report.results)
    fold = len(report.hosts) > _GRID_HOSTS
    rows: dict[tuple[str, ...], list[str]] = {}
    for host in dict.fromkeys(r.host for r in report.results):
        cells = tuple(_grid_cell(counts[(host, g, "pass")], counts[(host, g, "skip")]) for g in groups)
        rows.setdefault(cells if fold else (host, *cells), []).append(host)
    table = Table("host", *groups, title=title)
    for key, hosts in rows.items():
        if not fold:
            table.add_row(*key)
            continue
        names = ", ".join(hosts) if len(hosts) <= 3 else f"{hosts[0]}, {hosts[1]} and {len(hosts) - 2} more"
        table.add_row(names, *key)
    return table


def _grid_cell(passed: int, skipped: int) -> str:
    cell = " ".join(([f"[green]{passed} pass[/]"] if passed else []) + ([f"[dim]{skipped} skip[/]"] if skipped
                                                                         else []))
    return cell or "-"


def render_table(report: Report, console, *, verbose: bool = False) -> None:
    """Per host and check, the status; failures, errors and warnings with message, evidence and fix."""
    from rich.table import Table

    narrowed = " ".join([*(f"--select {g}" for g in report.select),
                         *(f"--skip {g}" for g in report.skip)])
    # a narrowed run says so where it is read: it judged less than a whole preflight
    title = f"ascend-check ({report.tier} tier, profile {report.profile}"
    title += f", {narrowed})" if narrowed else ")"
    shown = [r for r in report.results if verbose or r.status != "pass"]
    if report.results and not shown and not report.unreachable:
        console.print(_pass_grid(report, title))  # all passed: what was checked, not an empty table
    else:
        table = Table(show_lines=False, title=title)
        for col in ("host", "check", "status", "message"):
            table.add_column(col, overflow="fold")
        for h in report.unreachable:
            table.add_row(h.name, "(host)", "[bold red]unreachable[/]", h.error or "")
        for r in shown:
            table.add_row(r.host, r.check_id, f"[{_STYLE[r.status]}]{r.status}[/]", r.message)
        console.print(table)
    for r in report.results:
        if r.status not in ("fail", "error", "warn"):
            continue
        if not r.evidence and not (r.remediation and r.status != "error"):
            continue
        console.print(f"[{_STYLE[r.status]}]{r.status.upper()}[/] {r.host} {r.check_id}", highlight=False)
        for line in r.evidence[:12]:
            console.print(f"    | {line}", highlight=False, markup=False)
        if len(r.evidence) > 12:
            console.print(f"    | ... {len(r.evidence) - 12} more line(s) in --format json", highlight=False)
        if r.remediation and r.status != "error":
            fix = r.remediation
            console.print(
                f"    fix: {fix.text}" + (" [disrupts running jobs]" if fix.disruptive else ""),
                highlight=False,
                markup=False,
            )
            if fix.command:
                console.print(f"    run: {fix.command}", highlight=False, markup=False)
    counts = report.counts
    summary = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
    hosts = len(report.hosts)
    console.print(
        f"{hosts} host(s), {len(report.unreachable)} unreachable; {summary or 'no checks run'} "
        f"in {report.duration_s:.2f} s",
        highlight=False,
    )


# ---------------------------------------------------------------- junit


def render_junit(report: Report) -> str:
    """JUnit XML: one testsuite per host, one testcase per check (warn as a passing case with system-out).

    An unreachable host is one `host.reachable` testcase with an error; every count (root and suite)
    is the number of testcase elements it describes, as junitparser and CI servers count them."""
    counts = report.counts
    root = ET.Element(
        "testsuites",
        name="ascend-check",
        tests=str(len(report.results) + len(report.unreachable)),
        failures=str(counts["fail"]),
        errors=str(counts["error"] + len(report.unreachable)),
        skipped=str(counts["skip"]),
        time=f"{report.duration_s:.3f}",
    )
    by_host: dict[str, list[CheckResult]] = {h.name: [] for h in report.hosts}
    for r in report.results:
        by_host.setdefault(r.host, []).append(r)
    for host in report.hosts:
        results = by_host.get(host.name, [])
        c = Counter(r.status for r in results)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=host.name,
            tests=str(len(results) + (not host.reachable)),
            failures=str(c["fail"]),
            errors=str(c["error"] + (not host.reachable)),
            skipped=str(c["skip"]),
            time=f"{host.collect_s:.3f}",
        )
        if not host.reachable:
            case = ET.SubElement(suite, "testcase", classname=host.name, name="host.reachable")
            ET.SubElement(case, "error", message=host.error or "unreachable").text = host.error or ""
        for r in results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"{host.name}.{r.check_id.split('.')[0]}",
                name=r.check_id,
                time=f"{r.duration_s:.3f}",
            )
            body = "\n".join(
                [
                    *r.evidence,
                    *([f"fix: {r.remediation.text}"] if r.remediation else []),
                    *([f"run: {r.remediation.command}"] if r.remediation and r.remediation.command else []),
                ]
            )
            if r.status == "fail":
                ET.SubElement(case, "failure", message=r.message, type=r.severity).text = body
            elif r.status == "error":
                ET.SubElement(case, "error", message=r.message).text = body
            elif r.status == "skip":
                ET.SubElement(case, "skipped", message=r.message)
            elif r.status == "warn":
                ET.SubElement(case, "system-out").text = f"WARNING: {r.message}\n{body}"
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# ---------------------------------------------------------------- prometheus


def render_prometheus(report: Report) -> str:
    """node_exporter textfile collector format (write to a *.prom file in its directory)."""
    status = textfile.gauge(
        "ascend_check_status", "1 for the check's current status (pass, warn, fail, error, skip).",
        ["host", "check", "severity", "status"],
    )
    for r in report.results:
        for s in STATUSES:
            status.add_metric([r.host, r.check_id, r.severity, s], int(r.status == s))
    collect = textfile.gauge("ascend_check_collect_seconds", "Seconds the host's probe batch took.", ["host"])
    for h in report.hosts:
        collect.add_metric([h.name], round(h.collect_s, 3))
    try:
        ts = datetime.fromisoformat(report.created_at).timestamp()
    except ValueError:
        ts = 0.0
    return textfile.render([
        status, textfile.host_reachable((h.name, h.reachable) for h in report.hosts), collect,
        textfile.last_run(ts),
    ])


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file so node_exporter never reads a half-written file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except BaseException:  # a full disk or a signal: no half-written temporary file left behind
        tmp.unlink(missing_ok=True)
        raise
