"""A big log's prefilter split over worker processes (checks/diagnose/split.py) gives the report one stream
gives: the same findings, evidence lines, ranks and order, on real logs; and where it cannot split (a line
longer than a range may hold, another thread running) the file is read in one stream."""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

import pytest

from ascend_ready.checks.diagnose import scan, split

DATA = Path(__file__).parent / "data"


def _big_log(path: Path) -> Path:
    """Every real error log of the corpus's dev and held-out splits, in turn with real clean training output
    (tests/diagnose/data/clean_*), written out to about 3 MiB: many ranges of a small chunk."""
    clean = b"".join(p.read_bytes() for p in sorted(DATA.glob("clean_*.log")))
    errors = [p.read_bytes() for split_dir in ("dev", "heldout")
              for p in sorted((DATA / "corpus" / split_dir).glob("*.log"))]
    with open(path, "wb") as out:
        for i, err in enumerate(errors * 3):
            out.write((clean * 2)[(i * 4099) % len(clean):][:30000])
            out.write(err if err.endswith(b"\n") else err + b"\n")
    return path


def _scan(path: Path) -> scan.Scanner:
    s = scan.Scanner()
    s.scan_path(path)
    return s


@pytest.fixture
def small_ranges(monkeypatch):
    """Ranges of 64 KiB (both ways of reading use the same block size), split from 1 MiB."""
    monkeypatch.setattr(scan, "CHUNK_BYTES", 64 << 10)
    monkeypatch.setattr(split, "PARALLEL_FROM_BYTES", 1 << 20)
    monkeypatch.setattr(split, "workers", lambda: 2)


def test_a_split_file_gives_the_report_one_stream_gives(tmp_path, small_ranges, monkeypatch):
    log = _big_log(tmp_path / "train.log")
    assert log.stat().st_size > 2 << 20
    calls = []
    real = split.scan_split
    monkeypatch.setattr(split, "scan_split", lambda *a, **k: calls.append(1) or real(*a, **k))
    parts = _scan(log)
    assert calls == [1], "the file was not split"
    monkeypatch.setattr(split, "PARALLEL_FROM_BYTES", 1 << 62)
    whole = _scan(log)
    assert calls == [1]
    report = parts.report()
    assert len(report.findings) > 20  # the corpus's causes, found in both
    assert report.model_dump_json() == whole.report().model_dump_json()
    assert (parts.lines, parts.bytes, parts.files) == (whole.lines, whole.bytes, whole.files)
    assert parts.lines == log.read_bytes().count(b"\n")


def test_ranges_end_after_a_newline_and_cover_the_file(tmp_path):
    body = b"".join(b"line %d %s\n" % (i, b"x" * (i % 97)) for i in range(20000)) + b"last, no newline"
    path = tmp_path / "log"
    path.write_bytes(body)
    fd = os.open(path, os.O_RDONLY)
    try:
        got = split.ranges(fd, len(body), 64 << 10, 1 << 20)
        assert got is not None and len(got) > 10
        assert got[0][0] == 0 and got[-1][1] == len(body)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(got))
        assert all(body[end - 1 : end] == b"\n" for _start, end in got[:-1])
        # a line longer than a range may look for its end: not split
        assert split.ranges(fd, len(body), 64 << 10, 50) is None
    finally:
        os.close(fd)


def test_a_line_too_long_to_split_is_read_in_one_stream(tmp_path, small_ranges, monkeypatch):
    text = (DATA / "clean_ascend-train-grpo-tiny-cpu.log").read_bytes()
    err = sorted((DATA / "corpus" / "dev").glob("*.log"))[0].read_bytes()
    path = tmp_path / "train.log"
    path.write_bytes(text * 4 + b"y" * (3 << 20) + b"\n" + err + text * 4)
    monkeypatch.setattr(scan, "MAX_LINE_BYTES", 1 << 20)
    seen = []
    real = split.ranges
    monkeypatch.setattr(split, "ranges", lambda *a: seen.append(real(*a)) or seen[-1])
    s = _scan(path)
    assert seen == [None]  # asked, refused: read in one stream
    monkeypatch.setattr(split, "PARALLEL_FROM_BYTES", 1 << 62)
    assert s.report().model_dump_json() == _scan(path).report().model_dump_json()
    assert s.report().findings


def test_workers_need_two_cpus_and_no_other_thread(monkeypatch):
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    assert split.workers() == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(16)))
    assert split.workers() == split.MAX_WORKERS
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {3})
    assert split.workers() == 0
    monkeypatch.setenv(split.WORKERS_ENV, "3")  # asked for: as many as asked
    assert split.workers() == 3
    monkeypatch.setenv(split.WORKERS_ENV, "1")  # one stream
    assert split.workers() == 0
    monkeypatch.delenv(split.WORKERS_ENV)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.undo()
    # a fork copies only the thread that forks: beside another thread the file is read in one stream
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert split.workers() == 0
    finally:
        stop.set()
        other.join()


_KILLED_CHILD = """
import multiprocessing, sys, time
from ascend_ready.checks import cli
from ascend_ready.checks.diagnose import scan, split
scan.CHUNK_BYTES = 64 << 10
split.PARALLEL_FROM_BYTES = 1 << 20
split.workers = lambda: 2
def emit(self, lines, lineno, state):
    print(*(p.pid for p in multiprocessing.active_children()), flush=True)
    time.sleep(120)
scan.Scanner.emit = emit
cli.main(["diagnose", sys.argv[1], "--format", "json", "-q"])
"""


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_scan_interrupted_or_killed_leaves_no_worker_behind(tmp_path, how):
    """Ctrl-C (to the whole process group, as a terminal sends it) ends the scan as one stream's does: exit
    130, `error: interrupted` and no worker's traceback; a killed scan's workers end with it."""
    import signal
    import subprocess
    import sys

    from sim_support import wait_for

    log = _big_log(tmp_path / "train.log")
    child = subprocess.Popen([sys.executable, "-c", _KILLED_CHILD, str(log)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pids = [int(p) for p in child.stdout.readline().split()]
        assert len(pids) == 2, "the scan's two workers"
        os.killpg(child.pid, getattr(signal, how))
        _out, err = child.communicate(timeout=30)
        if how == "SIGINT":
            assert (child.returncode, err) == (130, "error: interrupted\n")
        else:
            assert child.returncode == -getattr(signal, how)

        def gone() -> bool:
            for pid in pids:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    continue
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z":  # a zombie is dead: only its parent (here init) has to reap it
                    return False
            return True

        wait_for(gone, 30, "the workers of the stopped scan to end", interval=0.1)
    finally:
        child.kill()
        child.wait()
