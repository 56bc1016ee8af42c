"""How a diagnosis reads: plain text (the launcher prints it after a failed job), a rich table, JSON."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path

from ascend_ready.checks.diagnose.model import DiagnoseReport, Finding
from ascend_ready.checks.diagnose.scan import diagnose_paths
from ascend_ready.errors import AscendReadyError

__all__ = ["explain_failure", "render_json", "render_table", "render_text"]

_SHOWN_EVIDENCE = 5
_SHOWN_CHARS = 240


def render_json(report: DiagnoseReport) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=1) + "\n"


def _where(f: Finding) -> str:
    return f" on {f.actor}" if f.actor else ""


def _role(f: Finding) -> str:
    return "cause" if f.role == "cause" else f"consequence of {f.caused_by}"


def _preflight(f: Finding) -> str:
    if not f.check_ids:
        return "no ascend-check check covers this"
    return "ascend-check " + " ".join(f"--select {shlex.quote(c)}" for c in f.check_ids)


def _summary(report: DiagnoseReport) -> str:
    files = f"{len(report.files)} file{'s' if len(report.files) != 1 else ''}, {report.lines} lines"
    if not report.findings:
        return f"no known error signature ({files} read)"
    n = len(report.findings)
    return f"{n} known error signature{'s' if n != 1 else ''} ({files} read), in the order they occurred:"


def render_text(report: DiagnoseReport) -> str:
    """Every finding with its causes, fix, the checks that catch it and the lines it matched."""
    out = [_summary(report)]
    if report.skipped:
        out.append(f"skipped (not read): {', '.join(report.skipped)}")
    explained: dict[str, int] = {}  # entry id -> the finding that printed its causes and fix
    for i, f in enumerate(report.findings, 1):
        out.append(f"{i}. [{_role(f)}] {f.code}{_where(f)}: {f.title}")
        if f.first_seen:
            out.append(f"   first seen: {f.first_seen}")
        if f.id in explained:
            out.append(f"   causes and fix: as {explained[f.id]}.")
        else:
            explained[f.id] = i
            out.append("   likely causes:")
            out.extend(f"     {j}) {cause}" for j, cause in enumerate(f.causes, 1))
            out.append(f"   fix: {f.fix}")
            out.append(f"   preflight: {_preflight(f)}")
        shown = f.evidence[:_SHOWN_EVIDENCE]
        more = f" (first {len(shown)} of {f.matches})" if f.matches > len(shown) else ""
        out.append(f"   evidence{more}:")
        for ev in shown:
            text = ev.text if len(ev.text) <= _SHOWN_CHARS else ev.text[:_SHOWN_CHARS] + "..."
            out.append(f"     {ev.file}:{ev.line}: {text}")
    return "\n".join(out) + "\n"


def render_table(report: DiagnoseReport, console) -> None:
    """One row per finding (the CLI prints `render_text` after it: the causes, fixes and lines)."""
    from rich.table import Table

    table = Table("#", "role", "code", "where", "what", "first line", title="ascend-check diagnose")
    for i, f in enumerate(report.findings, 1):
        ev = f.evidence[0]
        table.add_row(str(i), f.role, f.code, f.actor or "-", f.title, f"{ev.file}:{ev.line}")
    console.print(table)


def explain_failure(paths: list[Path], hosts: Sequence[str] = ()) -> str:
    """Why a job failed: the known error signatures in its logs, as text (what ascend-train prints after a
    failed job). `hosts`: the nodes of a multi-node job, whose <host>.log in the log directory names the
    node of its lines.

    Read locally; nothing is sent anywhere. A diagnosis that cannot run says so instead of raising.
    """
    try:
        report = diagnose_paths(paths, hosts=hosts)
    except AscendReadyError as exc:
        return f"diagnose: {exc.message}\n"
    where = " ".join(str(p) for p in paths)
    return f"diagnose ({where}): " + render_text(report)
