"""`ascend-check --html`: the self-contained page (grid, problems, escaping) on reports the real
producer judged from synthetic snapshots, and a headless-Chromium screenshot of its grid."""

from __future__ import annotations

import os
import subprocess
from html.parser import HTMLParser

import pytest
from checks_fakenode import fake_host
from click.testing import CliRunner
from html_support import chromium, png_rgb

from ascend_ready.checks.cli import main
from ascend_ready.checks.html_report import STATUS_COLOURS, render_html
from ascend_ready.checks.preflight import PreflightOptions, judge_snapshot
from ascend_ready.checks.snapshot import HostSnapshot, Snapshot, save_snapshot

CHECKS = ("hccl.link_up", "npu.count", "os.numa_balancing", "os.thp", "pcie.link_width")
SCRIPT = "<script>alert(1)</script>"
#: what a hostile node prints: a THP file with markup in it (it becomes the evidence of os.thp)
HOSTILE_THP = f"always [madvise] never {SCRIPT}\n"
GONE_ERROR = 'root@10.0.0.9:22: banner "><script>alert(3)</script><img src=x onerror=alert(4)>'


def _report():
    """node01 healthy, node02 failing os.thp with markup in its tool output, node09 unreachable."""
    hosts = {
        "node01": fake_host("node01"),
        "node02": fake_host("node02", index=1, outputs={"thp-enabled": HOSTILE_THP}),
        "node09": HostSnapshot(name="node09", reachable=False, error=GONE_ERROR),
    }
    options = PreflightOptions(select=CHECKS)
    return judge_snapshot(Snapshot(hosts=hosts), options, specs=options.checks())


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser


def test_the_page_is_a_grid_with_each_problem_its_evidence_and_fix():
    report = _report()
    assert [(r.host, r.check_id) for r in report.results if r.status == "fail"] == [("node02", "os.thp")]
    page = render_html(report)
    parsed = _parse(page)
    cells = [a.get("class") for t, a in parsed.tags if t == "td"]
    assert cells == ["s-pass"] * 5 + ["s-pass"] * 3 + ["s-fail", "s-pass"] + ["s-unreachable"] * 5
    headers = [a for t, a in parsed.tags if t == "th" and a.get("class") == "check"]
    assert len(headers) == len(CHECKS)
    text = "".join(parsed.text)
    fail = next(r for r in report.results if r.status == "fail")
    assert f"FAIL node02 os.thp: {fail.title}" in text
    assert fail.message in text and fail.remediation.text in text
    assert f"transparent_hugepage/enabled: {HOSTILE_THP.strip()}" in text  # the evidence, as printed
    # the failed cell links to its section
    link = next(a["href"] for t, a in parsed.tags if t == "a" and a.get("href", "").startswith("#"))
    assert any(t == "section" and a.get("id") == link[1:] for t, a in parsed.tags)
    assert "NOT READY" in text and "Unreachable hosts" in text


def test_nothing_a_node_printed_becomes_markup():
    page = render_html(_report())
    parsed = _parse(page)
    tags = [t for t, _a in parsed.tags]
    assert "script" not in tags and "img" not in tags
    assert not [a for _t, attrs in parsed.tags for a in attrs if a.startswith("on")]
    # it is all there, as text
    text = "".join(parsed.text) + "".join(v or "" for _t, attrs in parsed.tags for v in attrs.values())
    assert SCRIPT in text and "<img src=x onerror=alert(4)>" in text
    assert page.count("<script") == 0 and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_page_loads_nothing_from_anywhere():
    parsed = _parse(render_html(_report()))
    tags = [t for t, _a in parsed.tags]
    assert "link" not in tags and "script" not in tags and "iframe" not in tags
    urls = [v for _t, attrs in parsed.tags for k, v in attrs.items() if k in ("src", "href") and v]
    assert all(u.startswith("#") for u in urls), urls
    csp = next(a["content"] for t, a in parsed.tags if t == "meta" and a.get("http-equiv"))
    assert "default-src 'none'" in csp and "script-src" not in csp


def test_html_option_writes_the_page_and_refuses_an_unwritable_place_before_collecting(tmp_path, monkeypatch):
    snap = tmp_path / "snap"
    save_snapshot(Snapshot(hosts={"node01": fake_host("node01", outputs={"thp-enabled": HOSTILE_THP})}), snap)
    out = tmp_path / "report.html"
    r = CliRunner().invoke(main, ["--snapshot", str(snap), "--select", "os.thp", "--html", str(out)])
    assert r.exit_code == 1, r.output
    assert 'class="s-fail"' in out.read_text() and "&lt;script&gt;" in out.read_text()

    def no_probing(*args, **kwargs):
        raise AssertionError("hosts were probed before --html was checked")

    monkeypatch.setattr("ascend_ready.checks.cli._collect_with_progress", no_probing)
    for where, why in (
        (tmp_path / "no" / "such" / "r.html", "does not exist"),
        (tmp_path, "is a directory"),
    ):
        r = CliRunner().invoke(main, ["--hosts", "192.0.2.1", "--html", str(where)])
        assert r.exit_code == 2, r.output
        assert f"error: --html {where}" in r.output and why in r.output and "hint:" in r.output


# ---------------------------------------------------------------- what a browser shows


def _colour_table(tolerance: int = 2) -> dict[bytes, str]:
    """RGB bytes -> status, for each status colour and its near neighbours (rounding in the compositor)."""
    table = {}
    steps = range(-tolerance, tolerance + 1)
    for status, (bg, _fg) in STATUS_COLOURS.items():
        r, g, b = (int(bg[i : i + 2], 16) for i in (1, 3, 5))
        for dr in steps:
            for dg in steps:
                for db in steps:
                    near = (min(255, max(0, v)) for v in (r + dr, g + dg, b + db))
                    table[bytes(near)] = status
    return table


def _grid_rows(width: int, rows: list[bytes], cells: int) -> list[list[str]]:
    """The statuses of each row of `cells` coloured cells, top to bottom, as the screenshot shows them.

    A row band is a run of pixel lines with status colours in them (a cell's text cuts its colour into
    shorter pieces, so a piece of 8 px counts); its cells are the runs of one status colour along a
    line just below the band's top edge, above the text.
    """
    colours = _colour_table()
    memo: dict[int, list[tuple[str, int]]] = {}

    def line_runs(y: int) -> list[tuple[str, int]]:
        if y not in memo:
            runs: list[list] = []
            prev = None
            line = rows[y]
            for x in range(width):
                status = colours.get(line[3 * x : 3 * x + 3])
                if status is not None and status == prev:
                    runs[-1][1] += 1
                elif status is not None:
                    runs.append([status, 1])
                prev = status
            memo[y] = [(s, n) for s, n in runs if n >= 8]  # not a glyph stroke or a border
        return memo[y]

    found, y = [], 0
    while y < len(rows):
        if not line_runs(y):
            y += 1
            continue
        band_top = y
        while y < len(rows) and line_runs(y):
            y += 1
        if y - band_top >= 15:  # grid cells are 26 px high; the legend's swatches are thinner
            top = [status for status, n in line_runs(band_top + 2) if n >= 20]  # a whole cell wide
            if len(top) == cells:
                found.append(top)
    return found


@pytest.mark.skipif(
    chromium() is None, reason="chromium is not installed (scripts/system-deps.sh installs it, as root)"
)
def test_a_browser_shows_the_failed_cell_in_the_failure_colour(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_html(_report()))
    shot = tmp_path / "report.png"  # kept with the test's tmp dir: the CI artefact
    result = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,800",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert shot.exists(), result.stdout + result.stderr
    width, height, rows = png_rgb(shot)
    assert (width, height) == (1200, 800)
    grid = _grid_rows(width, rows, cells=len(CHECKS))
    # node01, node02 (os.thp, the 4th column, failed), node09 unreachable
    assert grid == [["pass"] * 5, ["pass", "pass", "pass", "fail", "pass"], ["unreachable"] * 5], grid
