"""The log scanner: streams files in fixed-size chunks, prefilters lines with a few literal-led regexes
run over the raw bytes, and matches only the surviving lines against the knowledge base and the vendor's
code lists; then merges the lines of one error into one finding and orders the findings by which came first.

Memory is bounded by the chunk size plus at most 20 evidence lines per finding; nothing is sent anywhere.
The parts: reading.py (which files, compressed and binary input, bytes to text), extract.py (what one line
says: actor, timestamp, documented codes), merge.py (one finding per cause, the first failure, the roles),
advice.py (advice read again when a finding calls for it); this module streams and matches.
"""

from __future__ import annotations

import functools
import gzip
import lzma
import os
import re
import stat
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ascend_ready.checks.diagnose import split
from ascend_ready.checks.diagnose.advice import _oom_advice_for_sleep_mode, _sleep_mode_evidence
from ascend_ready.checks.diagnose.extract import (
    _DEVICE_RE,
    _PID_RES,
    _RANK_PREFIX_RE,
    _STACK_RE,
    Actor,
    _Catalog,
    _line_actor,
    _parse_ts,
    _path_actor,
    what_acl,
)
from ascend_ready.checks.diagnose.literals import ERROR_WORDS
from ascend_ready.checks.diagnose.literals import required_literal as _required_literal
from ascend_ready.checks.diagnose.merge import (
    MAX_EVIDENCE,
    _before,
    _drop_envelopes,
    _drop_named_by_entries,
    _Hit,
    _is_vendor,
    _merge_unattributed,
    _with_roles,
)
from ascend_ready.checks.diagnose.model import (
    CodeBook,
    DiagnoseReport,
    Entry,
    Evidence,
    KnowledgeBase,
    load_code_book,
    load_knowledge_base,
)
from ascend_ready.checks.diagnose.reading import (
    _READABLE,
    LOG_SUFFIXES,
    MAX_TEXT,
    SNIFF_BYTES,
    NotALogError,
    _decode,
    _node_of,
    _refuse_binary,
    _size,
    _walk,
    is_plog,
    iter_log_files,
)
from ascend_ready.checks.diagnose.vendor import VendorGraph, load_vendor_graph
from ascend_ready.errors import ConfigError

__all__ = [
    "LOG_SUFFIXES", "MAX_EVIDENCE", "MAX_TEXT", "SNIFF_BYTES", "NotALogError", "Scanner", "diagnose_paths",
    "iter_log_files", "what_acl",
]

CHUNK_BYTES = 4 << 20
#: A "line" longer than this (a log without newlines) is cut into pieces of this size.
MAX_LINE_BYTES = 1 << 20
#: How many lines after a timestamp-less match a timestamp may come from (the `[ERROR] <time> (PID..)` line
#: torch_npu prints right after its RuntimeError).
TS_LOOKAHEAD = 5
#: A CANN stack line (`        rtStreamSynchronize execute failed...[FUNC:x][FILE:y][LINE:n]`) this close to
#: a finding's last line is more of its evidence.
STACK_GAP = 8
#: Progress: the first line after this many seconds of scanning, then one every PROGRESS_EVERY_S.
PROGRESS_AFTER_S = 1.0
PROGRESS_EVERY_S = 5.0


#: The level tag of a CANN plog's error lines (read in plog files only: a training log holds none).
_PLOG_ERROR_TAG = rb"\[ERROR\] "
#: The bytes a documented code can be cut after (its first part ends a line) and before (its rest starts the
#: next): single bytes, tested before the wrap regex runs.
_CODE_HEAD = _CODE_TAIL = frozenset(bytes([c]) for c in b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")


class _Defaults(dict):
    def __missing__(self, key: str) -> str:
        return "?"




@dataclass
class _FileState:
    idx: int
    name: str
    actor: Actor | None
    node: str | None
    waiting: list[_Hit] = field(default_factory=list)  # hits whose first line had no timestamp
    anonymous: list[_Hit] = field(default_factory=list)  # hits whose first line named no actor
    last_hit: _Hit | None = None  # the hit the last matched line went to (CANN stack lines join it)
    last_line: int = 0
    prefilter: list = field(default_factory=list)  # the patterns this file's lines must pass



ProgressFn = Callable[[str], None]
_Passed = split.Passed
#: a line its logger marked a warning (logging's WARNING / WARN, torch's and glog's `[W ...]` / `W1204 `, a
#: Python warning category such as UserWarning): what it reports the program went on from, so neither a rule
#: by structure alone (an entry marked `general`: an errno and its path, a missing module) nor a wrapper (the
#: bare Python exception) names it, and the vendor graph reads it as a line that says no error
_WARNING_LINE = re.compile(r"\bWARN(?:ING)?\b|\[W[ \d]|^\s*W\d{4} |\b[A-Z][A-Za-z]*Warning\b")


class Scanner:
    """Feed it files or byte streams, then take `report()`."""

    def __init__(self, kb: KnowledgeBase | None = None, codes: CodeBook | None = None, *,
                 progress: ProgressFn | None = None, total_bytes: int = 0, vendor: VendorGraph | None = None):
        self.kb = kb or load_knowledge_base()
        self._kg = vendor or load_vendor_graph()
        self._catalog = _Catalog(codes or load_code_book(), self.kb.macros.get("RT", r"error code is\s*"))
        self._prefilter = [re.compile(p.encode()) for p in self.kb.prefilter]
        # a CANN plog's error lines say so in their level tag (`[ERROR] HCCL(1234,python):...`): in a plog
        # file every one is read, so the vendor graph's plog entities are found whatever their wording
        self._plog_prefilter = [*self._prefilter, re.compile(_PLOG_ERROR_TAG)]
        self._plain = self._kg.plain_buckets(tuple(self.kb.prefilter))
        self._entries = [
            (
                e,
                [
                    (_required_literal(self.kb.expand(p)), rx)
                    for p, rx in zip(e.patterns, self.kb.compiled(e), strict=True)
                ],
            )
            for e in self.kb.entries
        ]
        # Which entries a line can match, from the literals their patterns require: one `in` test per
        # distinct literal, and the entries of the literals found (in knowledge-base order); an entry with a
        # pattern that requires none is always tried.
        self._by_literal: dict[str, set[int]] = {}
        self._always: set[int] = set()
        for i, (_e, patterns) in enumerate(self._entries):
            for literal, _rx in patterns:
                if literal is None:
                    self._always.add(i)
                else:
                    self._by_literal.setdefault(literal, set()).add(i)
        self._literals = tuple(self._by_literal)
        self._hits: dict[tuple, _Hit] = {}
        self._seq = 0
        self._pid_rank: dict[int, int] = {}
        self._pid_device: dict[int, int] = {}
        self._device_ranks: dict[int, set[int]] = {}
        self.files: list[str] = []
        self.skipped: list[str] = []
        self.lines = 0
        self.bytes = 0
        self._progress = progress
        self._total = total_bytes
        self._started = time.monotonic()
        self._next_progress = self._started + PROGRESS_AFTER_S
        self._progressed = False

    # ------------------------------------------------------------ input

    def scan_path(self, path: Path, name: str | None = None, *, node: str | None = None) -> None:
        name = name or str(path)
        try:
            with open(path, "rb") as fh:
                head = fh.read(6)
                fh.seek(0)
                opener = next((op for magic, op in _READABLE.items() if head.startswith(magic)), None)
                if opener is None:
                    if not self._scan_split(fh, path, name, node):
                        self.scan_stream(fh, name, node=node)
                else:  # a rotated or bundled log (plog-1.log.gz, train.log.1.gz): read through it
                    with opener(fh) as inner:
                        self.scan_stream(inner, name, node=node)
        except PermissionError:
            raise ConfigError(
                f"cannot read {name}: permission denied",
                hint="run as the user that wrote the logs, or with sudo",
            ) from None
        except IsADirectoryError:
            raise ConfigError(f"cannot read {name}: is a directory") from None
        except (EOFError, lzma.LZMAError, zlib.error) as exc:
            raise NotALogError(f"{name}: a damaged or truncated compressed file ({exc})",
                               hint=f"check the file (gzip -t {name}) or give the uncompressed log") from None
        except OSError as exc:
            if isinstance(exc, gzip.BadGzipFile):
                raise NotALogError(f"{name}: a damaged compressed file ({exc})",
                                   hint=f"check the file (gzip -t {name})") from None
            raise ConfigError(f"cannot read {name}: {exc.strerror or exc}") from None

    def _scan_split(self, fh: BinaryIO, path: Path, name: str, node: str | None) -> bool:
        """A big regular file with its prefilter split over worker processes (checks/diagnose/split.py);
        False (nothing read) where that does not apply: the caller reads it in one stream."""
        info = os.fstat(fh.fileno())
        count = split.workers() if info.st_size >= split.PARALLEL_FROM_BYTES else 0
        if not count or not stat.S_ISREG(info.st_mode):
            return False
        head = fh.read(SNIFF_BYTES)
        fh.seek(0)
        _refuse_binary(head, name)
        plog = is_plog(name)
        state = _FileState(len(self.files), name, _path_actor(name), node, prefilter=self.prefilter_for(plog))
        self.files.append(name)

        def emit(lines: list[_Passed], lineno: int, n: int, nbytes: int) -> None:
            self.emit(lines, lineno, state)
            self.bytes += nbytes
            self._tick(lineno + n)

        done = split.scan_split(self, str(path), fh.fileno(), info.st_size, plog=plog,
                                chunk=CHUNK_BYTES, max_line=MAX_LINE_BYTES, count=count, emit=emit)
        if done is None:
            self.files.pop()
            return False
        self.lines += done
        return True

    def prefilter_for(self, plog: bool) -> list[re.Pattern]:
        """The patterns a line of a file must pass: a CANN plog's, or any other log's."""
        return self._plog_prefilter if plog else self._prefilter

    def scan_stream(self, fh: BinaryIO, name: str, *, node: str | None = None) -> None:
        state = _FileState(len(self.files), name, _path_actor(name), node,
                           prefilter=self.prefilter_for(is_plog(name)))
        carry = b""
        lineno = 0  # complete lines before `carry`
        first = True
        while True:
            data = fh.read(CHUNK_BYTES)
            if not data:
                break
            if first:
                _refuse_binary(data, name)
                self.files.append(name)
                first = False
            self.bytes += len(data)
            buf = carry + data if carry else data
            cut = buf.rfind(b"\n")
            if cut == -1:
                if len(buf) < MAX_LINE_BYTES:
                    carry = buf
                    continue
                # one over-long line: match this piece, the rest continues the same line number
                self._block(buf + b"\n", lineno, state)
                carry = b""
                continue
            carry = buf[cut + 1 :]
            lineno += self._block(buf[: cut + 1], lineno, state)
            self._tick(lineno)
        if first:
            self.files.append(name)  # an empty file was read
        if carry:
            lineno += self._block(carry + b"\n", lineno, state)
        self.lines += lineno

    def _tick(self, lines_in_file: int) -> None:
        if self._progress is None:
            return
        now = time.monotonic()
        if now < self._next_progress:
            return
        self._next_progress = now + PROGRESS_EVERY_S
        self._progressed = True
        of = f" of {self._total / (1 << 20):,.1f} MiB" if self._total else ""
        files = f"{len(self.files)} file{'s' if len(self.files) != 1 else ''}"
        self._progress(
            f"diagnose: {self.bytes / (1 << 20):,.1f} MiB{of} read ({files}, {self.lines + lines_in_file:,} "
            f"lines), {now - self._started:.0f} s"
        )

    def finish_progress(self) -> None:
        if self._progress is not None and self._progressed:
            took = time.monotonic() - self._started
            self._progress(f"diagnose: done, {self.bytes / (1 << 20):,.1f} MiB in {took:.1f} s")

    def _block(self, block: bytes, lineno: int, state: _FileState) -> int:
        """Match the lines of `block` (whole lines, ending in a newline); returns its line count."""
        lines, count = self.passing(block, state.prefilter)
        self.emit(lines, lineno, state)
        return count

    def passing(self, block: bytes, prefilter: Sequence[re.Pattern]) -> tuple[list[_Passed], int]:
        """The lines of `block` (whole lines) that `prefilter` passes, each (its line index in the block, its
        text, 1 if it starts on the line above: a cut code joined), and the block's line count. Reads
        nothing but the block and the code book, so a worker process can run it (checks/diagnose/split.py)."""
        spans: dict[int, int] = {}
        for rx in prefilter:
            pos = 0
            search = rx.search
            while True:
                m = search(block, pos)
                if m is None:
                    break
                start = block.rfind(b"\n", 0, m.start()) + 1
                end = block.find(b"\n", m.start())
                spans[start] = end
                pos = end + 1
        out: list[_Passed] = []
        prev, line, joined = 0, 0, -1
        for start in sorted(spans):
            line += block.count(b"\n", prev, start)
            prev = start
            if start == joined:
                continue  # the rest of a cut line, read with the line above
            raw, up, down = self._unwrap(block, start, spans[start])
            if down:
                joined = spans[start] + 1
            out.append((line, _decode(raw).rstrip("\r"), up))
        return out, line + block.count(b"\n", prev)

    def emit(self, lines: list[_Passed], lineno: int, state: _FileState) -> None:
        """Match the lines `passing` found in a block whose first line follows line `lineno`."""
        for line, text, up in lines:
            self._line(text, lineno + line + 1 - up, state)

    def _unwrap(self, block: bytes, start: int, end: int) -> tuple[bytes, int, bool]:
        """The line at block[start:end], joined with the line above or below when a fixed-width cut split a
        documented code between them: (the text, 1 if it starts on the line above, whether it took the line
        below). Two byte tests keep the regex off the lines that cannot be cut inside a code."""
        raw = block[start:end]
        if start > 0 and raw[:1] in _CODE_HEAD:
            above = block.rfind(b"\n", 0, start - 1) + 1
            if self._catalog.wrapped(block[max(above, start - 33) : start - 1], raw):
                return block[above : start - 1].rstrip(b"\r") + raw, 1, False
        tail = raw[-32:].rstrip(b"\r")
        if end + 1 < len(block) and (tail[-1:] in _CODE_TAIL or b"code" in tail) and \
                self._catalog.wrapped(tail, block[end + 1 : end + 17]):
            below = block.find(b"\n", end + 1)
            return raw.rstrip(b"\r") + block[end + 1 : below if below != -1 else len(block)], 0, True
        return raw, 0, False

    # ------------------------------------------------------------ matching

    def _matches(self, text: str) -> list[tuple[Entry, re.Match]]:
        """(entry, match) of every entry whose pattern matches the line, in the knowledge base's order: a
        general rule only where no specific entry matched, neither it nor a wrapper on a warning line."""
        candidates = set(self._always)
        for literal in [lit for lit in self._literals if lit in text]:
            candidates |= self._by_literal[literal]
        found = []
        for i in sorted(candidates):
            entry, patterns = self._entries[i]
            for literal, rx in patterns:
                if literal is not None and literal not in text:
                    continue
                m = rx.search(text)
                if m:
                    found.append((entry, m))
                    break
        if any(e.general for e, _ in found):  # a general rule yields to a specific entry on its line
            named = any(not e.general and e.kind != "wrapper" for e, _ in found)
            found = [(e, m) for e, m in found if not (e.general and named)]
        if found and _WARNING_LINE.search(text):  # neither it nor a wrapper names what a warning went on from
            found = [(e, m) for e, m in found if not (e.general or e.kind == "wrapper")]
        return found

    def _line(self, text: str, lineno: int, state: _FileState) -> None:
        if "PID" in text or "Device:" in text:
            self._learn_ids(text)
        stamp = _parse_ts(text) if state.waiting else None
        if state.waiting and stamp:
            for hit in state.waiting:
                if lineno - hit.first_line <= TS_LOOKAHEAD and hit.ts is None:
                    hit.ts, hit.ts_text = stamp
            state.waiting.clear()
        elif state.waiting:
            state.waiting = [h for h in state.waiting if lineno - h.first_line < TS_LOOKAHEAD]
        ctx: dict = {}
        if state.anonymous:
            # torch_npu prints its RuntimeError first and the `(PID:p, Device:d, RankID:r)` line under it;
            # a `[rankN]:` line is another stream (torchrun prefixes every line of a rank)
            named = None if _RANK_PREFIX_RE.match(text) else _line_actor(text)
            if named is not None:
                for hit in state.anonymous:
                    if lineno - hit.first_line <= TS_LOOKAHEAD:
                        hit.actor = named
                state.anonymous.clear()
            else:
                state.anonymous = [h for h in state.anonymous if lineno - h.first_line < TS_LOOKAHEAD]
        codes_here: set[str] = set()
        matched = specific = False  # a line only wrappers matched is still the vendor graph's to read
        for entry, m in self._matches(text):
            groups = _Defaults({k: v for k, v in m.groupdict().items() if v is not None})
            if "rc" in groups:  # an HCCL call's return code, named (HcclResult)
                rc = groups["rc"]
                if rc[:2] in ("0x", "0X"):  # HCCL's errNo form: 0x05000002 is module 5 (HCCL), result 2
                    rc = str(int(rc, 16) & 0xFFFF)
                name = self._catalog.book.hccl_results.codes.get(rc)
                groups["hccl_result"] = f" = {name}" if name else ""
            code = entry.code.format_map(groups)
            if entry.kind != "wrapper":
                codes_here.add(code)  # the catalog leaves this code to the entry that named it
            self._record(entry, code, entry.title.format_map(groups), entry.kind, entry.effective_layer,
                         text, lineno, state, ctx, m.start(), groups.get("node"))
            matched, specific = True, specific or entry.kind != "wrapper"
        for code in self._catalog.codes_in(text):
            if code in codes_here:
                continue  # a signature entry named it on this line
            entry, title, kind = self._catalog.describe(code)
            self._record(entry, code, title, kind, entry.layer or "runtime", text, lineno, state, ctx,
                         max(0, text.find(code)), None)
            matched = specific = True
        if specific:
            return
        hit = None if matched else state.last_hit
        if hit is not None and lineno - state.last_line <= STACK_GAP and _STACK_RE.match(text):
            self._seq += 1
            hit.add(Evidence(file=state.name, line=lineno, text=_shown(text, 0)), self._seq)
            state.last_line = lineno
            return
        # a line that says no error is tried only against the graph's groups that say none either, and so
        # is a warning's (its "Error" is what the program went on from: a UserWarning quoting an OSError)
        error_line = any(w in text for w in ERROR_WORDS) and not _WARNING_LINE.search(text)
        last = state.last_hit
        found = self._kg.match(text) if error_line else self._kg.match_plain(text, self._plain)
        for ent in found:  # the vendor's graph, on lines none of ours knows
            entry = self._kg.entry(ent.family)
            self._record(entry, ent.code, self._kg.title(ent), "fault", entry.effective_layer, text, lineno,
                         state, ctx, 0, None)
        if last is not None and state.last_hit is not last and _is_vendor(state.last_hit):
            state.last_hit = last  # CANN's stack lines still join our finding above

    def _record(self, entry: Entry, code: str, title: str, kind: str, layer: str, text: str, lineno: int,
                state: _FileState, ctx: dict, at: int, node: str | None) -> None:
        if "actor" not in ctx:
            ctx["actor"] = _line_actor(text) or state.actor
            ctx["stamp"] = _parse_ts(text)
        actor = ("node", node) if node else ctx["actor"]
        hit_key = (entry.id, code, actor, state.idx if actor is None else -1)
        hit = self._hits.get(hit_key)
        if hit is None:
            hit = _Hit(entry, code, title, actor, state.idx, self._seq, kind, layer, node=state.node,
                       first_line=lineno)
            self._hits[hit_key] = hit
            if ctx["stamp"]:
                hit.ts, hit.ts_text = ctx["stamp"]
            else:
                state.waiting.append(hit)
            if actor is None:
                state.anonymous.append(hit)
        self._seq += 1
        hit.add(Evidence(file=state.name, line=lineno, text=_shown(text, at)), self._seq)
        state.last_hit, state.last_line = hit, lineno

    def _learn_ids(self, text: str) -> None:
        """Which pid is which rank and device, from torch_npu's `(PID:p, Device:d, RankID:r)` lines."""
        pid = next((int(m[1]) for rx in _PID_RES if (m := rx.search(text))), None)
        dev = _DEVICE_RE.search(text)
        rank = re.search(r"RankID:(\d+)", text)
        if pid is not None and dev:
            self._pid_device[pid] = int(dev[1])
        if rank:
            if pid is not None:
                self._pid_rank[pid] = int(rank[1])
            if dev:
                self._device_ranks.setdefault(int(dev[1]), set()).add(int(rank[1]))

    # ------------------------------------------------------------ the report

    def _resolve(self, actor: Actor | None) -> Actor | None:
        if actor is None:
            return None
        kind, value = actor
        if kind == "pid":
            if value in self._pid_rank:
                return ("rank", self._pid_rank[value])
            if value in self._pid_device:
                kind, value = "device", self._pid_device[value]
        if kind == "device":
            ranks = self._device_ranks.get(value, set())
            if len(ranks) == 1:
                return ("rank", next(iter(ranks)))
        return (kind, value)

    def report(self) -> DiagnoseReport:
        self.finish_progress()
        merged: dict[tuple, _Hit] = {}
        for hit in sorted(self._hits.values(), key=lambda h: h.seq):
            actor = self._resolve(hit.actor)
            key = (hit.entry.id, hit.code, actor, hit.file_idx if actor is None else -1)
            into = merged.get(key)
            if into is None:
                hit.actor = actor
                merged[key] = hit
            else:
                into.absorb(hit)
        hits = _merge_unattributed(sorted(merged.values(), key=lambda h: h.seq))
        hits = _drop_named_by_entries(hits)
        hits = _drop_envelopes(hits)
        hits.sort(key=functools.cmp_to_key(_before))
        return DiagnoseReport(
            findings=_with_roles(hits), files=list(self.files), lines=self.lines, bytes=self.bytes,
            skipped=list(self.skipped),
        )



def _shown(text: str, at: int) -> str:
    """The line as evidence: an over-long one is shown around its match."""
    return text if len(text) <= MAX_TEXT else text[max(0, at - 200) :][:MAX_TEXT]




def diagnose_paths(paths: Sequence[str | Path], kb: KnowledgeBase | None = None, *,
                   hosts: Sequence[str] = (), progress: ProgressFn | None = None) -> DiagnoseReport:
    """Every known error signature and documented code in these logs, one finding per cause, ordered by
    which came first, with causes, fixes and evidence. `hosts`: the nodes of a launcher's log directory
    (their <host>.log files name the node); `progress` gets a line every few seconds of a long scan."""
    if not paths:
        raise ConfigError("no log given", hint="ascend-check diagnose PATH... (files or directories)")
    inputs = list(_walk(paths))  # every path checked before anything is read
    total = sum(_size(p) for p, _n, _named in inputs if p is not None)
    scanner = Scanner(kb, progress=progress, total_bytes=total)
    for path, name, named in inputs:
        try:
            if path is None:
                scanner.scan_stream(sys.stdin.buffer, name)
            else:
                scanner.scan_path(path, name, node=_node_of(path, hosts))
        except NotALogError as exc:
            if named:
                raise
            scanner.skipped.append(name)  # a binary file a directory walk found: not a log
            if progress is not None:
                progress(f"diagnose: skipped {exc.message}")
    report = scanner.report()
    if any(f.id == "npu-oom" for f in report.findings):
        sleeping = _sleep_mode_evidence([p for p, _n, _named in inputs if p is not None])
        if sleeping:
            report = _oom_advice_for_sleep_mode(report, sleeping)
    return report
