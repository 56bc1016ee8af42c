"""The preflight report as one self-contained HTML page (`ascend-check --html FILE`): a node x check grid
coloured by status, then each problem with its evidence and fix, then the curves of the checks that carry
time series (burn-in), as inline SVG.

Everything in a report came from the nodes (hostnames, tool output, messages) and is escaped; the page
loads nothing (inline CSS, no script, and a Content-Security-Policy that forbids both anyway).
"""

from __future__ import annotations

import html
from pathlib import Path

from ascend_ready.checks.report import STATUSES, CheckResult, Report, Series, write_atomic
from ascend_ready.errors import ConfigError

__all__ = ["CURVE_COLOURS", "STATUS_COLOURS", "check_output_path", "render_html", "write_html"]

#: status -> (cell background, text colour). Distinct enough to tell apart in print and for the
#: screenshot test; the cell also carries its status as text, for readers who cannot tell the colours.
STATUS_COLOURS: dict[str, tuple[str, str]] = {
    "pass": ("#2e7d32", "#ffffff"),
    "warn": ("#f9a825", "#000000"),
    "fail": ("#c62828", "#ffffff"),
    "error": ("#6a1b9a", "#ffffff"),
    "skip": ("#9e9e9e", "#000000"),
    "unreachable": ("#212121", "#ffffff"),
}
_NOT_RUN = "#eceff1"
_LABEL = {
    "pass": "ok",
    "warn": "warn",
    "fail": "FAIL",
    "error": "error",
    "skip": "skip",
    "unreachable": "n/r",
}
_PROBLEMS = ("fail", "error", "warn")
_CSP = "default-src 'none'; style-src 'unsafe-inline'"

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px; color: #212121; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
.meta { color: #555; margin: 0 0 12px; }
.verdict { font-weight: bold; }
table.grid { border-collapse: separate; border-spacing: 3px; }
table.grid th { font-weight: normal; text-align: left; }
table.grid th.check { vertical-align: bottom; height: 11em; padding: 0; }
table.grid th.check div { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; }
table.grid th.host { padding-right: 8px; white-space: nowrap; }
table.grid td { width: 40px; height: 26px; padding: 0; text-align: center; font-size: 11px; }
table.grid td a { display: block; line-height: 26px; color: inherit; text-decoration: none; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 6px; font-size: 12px; }
.problem { border-left: 6px solid; padding: 4px 12px; margin: 12px 0; background: #fafafa; }
.problem h3 { font-size: 14px; margin: 4px 0; }
pre { background: #f0f0f0; padding: 6px 8px; overflow-x: auto; white-space: pre-wrap; margin: 4px 0; }
.fix { margin: 4px 0; }
.disruptive { color: #c62828; font-weight: bold; }
.curves { display: inline-block; margin: 8px 16px 8px 0; vertical-align: top; }
.curves h3 { font-size: 13px; margin: 2px 0; }
.curves svg { background: #fafafa; border: 1px solid #ccc; }
"""
#: one colour per curve of a chart (subjects in their order); none of them is a status colour
CURVE_COLOURS = ("#1565c0", "#ef6c00", "#00838f", "#ad1457", "#558b2f", "#4527a0", "#6d4c41", "#37474f")
_W, _H, _PAD = 420, 150, 34


def _e(value: object) -> str:
    """Escape for text and attribute values alike (quotes included)."""
    return html.escape("" if value is None else str(value), quote=True)


def _style(status: str) -> str:
    bg, fg = STATUS_COLOURS[status]
    return f"background:{bg};color:{fg}"


def _css() -> str:
    rules = [f"td.s-{s}, .legend .s-{s} {{ {_style(s).replace(';', '; ')}; }}" for s in STATUS_COLOURS]
    rules += [f".problem.s-{s} {{ border-color: {STATUS_COLOURS[s][0]}; }}" for s in _PROBLEMS]
    rules.append(f"td.s-none {{ background: {_NOT_RUN}; }}")
    return _CSS + "\n".join(rules) + "\n"


def _summary(report: Report) -> str:
    counts = report.counts
    parts = [f"{counts[s]} {s}" for s in STATUSES if counts[s]]
    if report.unreachable:
        parts.append(f"{len(report.unreachable)} host(s) unreachable")
    return ", ".join(parts) or "no checks run"


def _verdict(report: Report) -> str:
    counts = report.counts
    if counts["fail"] or counts["error"]:
        return "NOT READY: a check failed or could not be judged"
    if report.unreachable:
        return "NOT READY: a host was unreachable"
    return "READY" + (" (with warnings)" if counts["warn"] else "")


def _problem(anchor: str, r: CheckResult) -> str:
    out = [
        f'<section class="problem s-{_e(r.status)}" id="{anchor}">',
        f"<h3>{_e(r.status.upper())} {_e(r.host)} {_e(r.check_id)}: {_e(r.title)} ({_e(r.severity)})</h3>",
    ]
    if r.message:
        out.append(f"<p>{_e(r.message)}</p>")
    if r.evidence:
        out.append("<pre>" + "\n".join(_e(line) for line in r.evidence) + "</pre>")
    fix = r.remediation
    # An error is a fact that could not be judged: the check's fix is not the answer (as in the table).
    if fix and r.status != "error":
        disruptive = ' <span class="disruptive">disrupts running jobs</span>' if fix.disruptive else ""
        out.append(f'<p class="fix">fix: {_e(fix.text)}{disruptive}</p>')
        if fix.command:
            out.append(f"<pre>{_e(fix.command)}</pre>")
    out.append("</section>")
    return "\n".join(out)


def _chart(title: str, series: list[Series]) -> str:
    """One SVG chart: a polyline per subject over seconds into the window, the value range on the axis."""
    values = [v for s in series for v in s.values if v is not None]
    times = [t for s in series for t in s.t_s]
    if not values or not times:
        return ""
    lo, hi = min(values), max(values)
    lo, hi = (lo - 1, hi + 1) if lo == hi else (lo, hi)
    t0, t1 = min(times), max(times) if max(times) > min(times) else min(times) + 1

    def xy(t: float, v: float) -> str:
        x = _PAD + (t - t0) / (t1 - t0) * (_W - 2 * _PAD)
        return f"{x:.1f},{_H - _PAD / 2 - (v - lo) / (hi - lo) * (_H - 1.5 * _PAD):.1f}"

    out = [f'<div class="curves"><h3>{_e(title)}</h3>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img">',
           f'<text x="2" y="{_PAD / 2 + 4:.0f}" font-size="10">{hi:.4g}</text>',
           f'<text x="2" y="{_H - _PAD / 2:.0f}" font-size="10">{lo:.4g}</text>',
           f'<text x="{_W - _PAD:.0f}" y="{_H - 2}" font-size="10">{t1:.0f} s</text>']
    legend = []
    for i, s in enumerate(series):
        colour = CURVE_COLOURS[i % len(CURVE_COLOURS)]
        points = " ".join(xy(t, v) for t, v in zip(s.t_s, s.values, strict=True) if v is not None)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}">'
                   f"<title>{_e(s.subject)}</title></polyline>")
        legend.append(f'<span style="color:{colour}">{_e(s.subject)}</span>')
    return "\n".join([*out, "</svg>", f"<div>{' '.join(legend)}</div></div>"])


def _plots(report: Report) -> list[str]:
    """A chart per host, check and metric of every result that carries time series."""
    out = []
    for r in report.results:
        by_metric: dict[str, list[Series]] = {}
        for s in r.series or ():
            by_metric.setdefault(s.metric, []).append(s)
        charts = [_chart(f"{r.host} {r.check_id}: {metric} ({group[0].unit})", group)
                  for metric, group in by_metric.items()]
        out += [c for c in charts if c]
    return out


def render_html(report: Report) -> str:
    """The whole page for `report` (a pure function: same report, same bytes)."""
    hosts = [h.name for h in report.hosts]
    hosts += [h for h in dict.fromkeys(r.host for r in report.results) if h not in hosts]
    # With every host unreachable nothing ran: one column still shows each host's state.
    checks = list(dict.fromkeys(r.check_id for r in report.results)) or ["(no check ran)"]
    by_cell = {(r.host, r.check_id): r for r in report.results}
    unreachable = {h.name: h for h in report.unreachable}
    anchors = {id(r): f"r{i}" for i, r in enumerate(report.results) if r.status in _PROBLEMS}

    head = ["<tr><th></th>", *(f'<th class="check"><div>{_e(c)}</div></th>' for c in checks), "</tr>"]
    rows = []
    for host in hosts:
        cells = []
        for check in checks:
            r = by_cell.get((host, check))
            if host in unreachable:
                why = unreachable[host].error or "unreachable"
                cells.append(
                    f'<td class="s-unreachable" title="{_e(host)} unreachable: {_e(why)}">'
                    f"{_LABEL['unreachable']}</td>"
                )
            elif r is None:
                cells.append(f'<td class="s-none" title="{_e(host)} {_e(check)}: not run"></td>')
            else:
                tip = f"{_e(host)} {_e(check)}: {_e(r.status)}" + (f" - {_e(r.message)}" if r.message else "")
                label = _LABEL[r.status]
                inner = f'<a href="#{anchors[id(r)]}">{label}</a>' if id(r) in anchors else label
                cells.append(f'<td class="s-{_e(r.status)}" title="{tip}">{inner}</td>')
        address = next((h.address for h in report.hosts if h.name == host and h.address), None)
        name = _e(host) + (f" <small>{_e(address)}</small>" if address and address != host else "")
        rows.append(f'<tr><th class="host">{name}</th>{"".join(cells)}</tr>')

    legend = "".join(f'<span class="s-{s}">{_LABEL[s]} = {s}</span>' for s in STATUS_COLOURS)
    problems = [_problem(anchors[id(r)], r) for r in report.results if id(r) in anchors]
    gone = [
        f"<li>{_e(h.name)}{(' (' + _e(h.address) + ')') if h.address else ''}: {_e(h.error or '')}</li>"
        for h in report.unreachable
    ]
    meta = (
        f"tier {_e(report.tier)}, profile {_e(report.profile)}, source {_e(report.source)}, "
        f"{len(hosts)} host(s), {_e(_summary(report))} in {report.duration_s:.2f} s"
        f"{', ' + _e(report.created_at) if report.created_at else ''}"
        f"{', ascend-check ' + _e(report.tool_version) if report.tool_version else ''}"
    )
    body = [
        f'<h1>ascend-check: <span class="verdict">{_e(_verdict(report))}</span></h1>',
        f'<p class="meta">{meta}</p>',
        f'<p class="legend">{legend}</p>',
        '<table class="grid">',
        *head,
        *rows,
        "</table>",
    ]
    if gone:
        body += ["<h2>Unreachable hosts</h2>", "<ul>", *gone, "</ul>"]
    body += ["<h2>Problems</h2>", *(problems or ["<p>None: every check that ran passed or was skipped.</p>"])]
    plots = _plots(report)
    if plots:
        body += ["<h2>Over time</h2>", *plots]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            # Defence in depth behind the escaping: no script, no fetch, only the inline style below.
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            f"<title>ascend-check report: {_e(_verdict(report))}</title>",
            f"<style>{_css()}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


def check_output_path(path: str | None, option: str) -> None:
    """Refuse, before any work, an output file that cannot be written (ascend_ready.paths)."""
    from ascend_ready.paths import check_output_file

    check_output_file(path, option)


def write_html(report: Report, path: str | None) -> None:
    """Write the page atomically (nothing when `path` is None)."""
    if not path:
        return
    try:
        write_atomic(Path(path), render_html(report))
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}",
                          hint="pick a file in a directory you may write") from None
