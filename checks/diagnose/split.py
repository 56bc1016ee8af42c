"""A big log file's prefilter split across processes: the passes over its bytes (one per prefilter pattern,
bound by the machine's memory scan: bench/README.md, "Log diagnosis") run in forked workers, each on a
range of whole lines it reads itself; the lines they pass come back in file order and are matched in this
process, by the same code and in the same order as a file read in one stream (Scanner.passing and
Scanner.emit), so the report is the same. Used for regular, uncompressed files of PARALLEL_FROM_BYTES and
more when two CPUs or more are this process's; anything else is read in one stream.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import re
import signal
import threading
from collections.abc import Sequence
from typing import Protocol

__all__ = ["PARALLEL_FROM_BYTES", "WORKERS_ENV", "ranges", "scan_split", "workers"]

#: a line a worker's prefilter passed: (its line index in its range, its text, 1 if it starts on the line
#: above)
Passed = tuple[int, str, int]


class Scanner(Protocol):
    """What a worker needs of checks/diagnose/scan.py's Scanner."""

    def passing(self, block: bytes, prefilter: Sequence[re.Pattern]) -> tuple[list[Passed], int]:
        ...

    def prefilter_for(self, plog: bool) -> list[re.Pattern]:
        ...


#: files this big and more are split (below it the workers' start costs more than they save)
PARALLEL_FROM_BYTES = 64 << 20
#: at most this many workers: the passes are bound by memory bandwidth, which a few cores fill
MAX_WORKERS = 4

#: how many workers instead (0 or 1: one stream), for a benchmark's baseline or a host shared with other work
WORKERS_ENV = "ASCEND_READY_DIAGNOSE_WORKERS"

#: the Scanner the forked workers inherit (set before the pool forks them; never pickled)
_SCANNER: Scanner | None = None


def workers() -> int:
    """How many worker processes to split a big file over here: $ASCEND_READY_DIAGNOSE_WORKERS, else the
    CPUs this process may run on (at most MAX_WORKERS); 0 if fewer than two or if another thread runs (a
    fork copies only this one)."""
    given = os.environ.get(WORKERS_ENV, "").strip()
    if given.isdigit():
        return int(given) if int(given) >= 2 and threading.active_count() == 1 else 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    if cpus < 2 or threading.active_count() > 1:
        return 0
    return min(cpus, MAX_WORKERS)


def ranges(fd: int, size: int, chunk: int, max_line: int) -> list[tuple[int, int]] | None:
    """[start, end) byte ranges of about `chunk` bytes covering the first `size` bytes of `fd`, each ending
    after a newline (the last at `size`); None when a line is longer than `max_line` (read in one stream,
    which cuts such a line)."""
    cuts = [0]
    pos = chunk
    while pos < size:
        tail = os.pread(fd, min(max_line, size - pos), pos)
        nl = tail.find(b"\n")
        if nl == -1:
            if pos + len(tail) >= size:
                break  # the last line, without a newline: the last range ends at `size`
            return None
        pos += nl + 1
        if pos < size:
            cuts.append(pos)
        pos += chunk
    cuts.append(size)
    return list(itertools.pairwise(cuts))


def _work(job: tuple[str, int, int, bool]) -> tuple[list[Passed], int, int]:
    path, start, end, plog = job
    scanner = _SCANNER
    assert scanner is not None  # set by scan_split before the fork
    fd = os.open(path, os.O_RDONLY)
    try:
        block = os.pread(fd, end - start, start)
    finally:
        os.close(fd)
    size = len(block)
    if not block.endswith(b"\n"):
        block += b"\n"  # the file's last line, as a stream reads it
    lines, count = scanner.passing(block, scanner.prefilter_for(plog))
    return lines, count, size


def _worker_start() -> None:
    """A worker leaves Ctrl-C to its parent, which ends the pool (a worker interrupted in its queue would
    print a traceback). A worker whose parent died sees its task queue closed and ends too."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def scan_split(scanner: Scanner, path: str, fd: int, size: int, *, plog: bool, chunk: int, max_line: int,
               count: int, emit) -> int | None:
    """Read the first `size` bytes of `path` (open as `fd`) with `count` workers; `emit(lines, lineno, n,
    nbytes)` matches each range's passed lines in order (the range follows line `lineno` and holds `n` lines,
    `nbytes` bytes). Returns the file's line count, or None when it cannot be split (a line longer than
    `max_line`, or no worker could start), before anything was emitted. The workers are ended however this
    returns (an exception, Ctrl-C)."""
    global _SCANNER
    spans = ranges(fd, size, chunk, max_line)
    if spans is None or len(spans) < 2:
        return None
    _SCANNER = scanner
    try:
        try:
            pool = multiprocessing.get_context("fork").Pool(count, initializer=_worker_start)
        except (OSError, ImportError, NotImplementedError):  # no semaphores here (/dev/shm): one stream
            return None
        try:
            lineno = 0
            for lines, n, nbytes in pool.imap(_work, [(path, a, b, plog) for a, b in spans], chunksize=1):
                emit(lines, lineno, n, nbytes)
                lineno += n
            pool.close()
            return lineno
        finally:
            pool.terminate()
            pool.join()
    finally:
        _SCANNER = None
