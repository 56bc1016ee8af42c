"""The log scanner: streams files in fixed-size chunks, prefilters lines with a few literal-led regexes
run over the raw bytes, and matches only the surviving lines against the knowledge base and the vendor's
code lists; then merges the lines of one error into one finding and orders the findings by which came first.

Memory is bounded by the chunk size plus at most 20 evidence lines per finding; nothing is sent anywhere.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import lzma
import os
import re
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ascend_ready.checks.diagnose.literals import required_literal as _required_literal
from ascend_ready.checks.diagnose.model import (
    LAYER_ORDER,
    CodeBook,
    CodeFamily,
    DiagnoseReport,
    Entry,
    Evidence,
    Finding,
    KnowledgeBase,
    load_code_book,
    load_knowledge_base,
)
from ascend_ready.checks.diagnose.vendor import VendorGraph, load_vendor_graph
from ascend_ready.errors import ConfigError

__all__ = ["LOG_SUFFIXES", "NotALogError", "Scanner", "diagnose_paths", "iter_log_files"]

CHUNK_BYTES = 4 << 20
#: A "line" longer than this (a log without newlines) is cut into pieces of this size.
MAX_LINE_BYTES = 1 << 20
MAX_EVIDENCE = 20
MAX_TEXT = 2000
#: How many lines after a timestamp-less match a timestamp may come from (the `[ERROR] <time> (PID..)` line
#: torch_npu prints right after its RuntimeError).
TS_LOOKAHEAD = 5
#: Lines of one process's output this close together belong to one error report (a RuntimeError, the
#: CANN error lines and the TraceBack CANN prints under them): ordered by layer, merged by code.
BLOCK_LINES = 30
#: A CANN stack line (`        rtStreamSynchronize execute failed...[FUNC:x][FILE:y][LINE:n]`) this close to
#: a finding's last line is more of its evidence.
STACK_GAP = 8
#: The first bytes of a file that decide whether it is a log: a NUL byte there means binary (as git and
#: grep decide), as do the magic numbers of compressed files, which get their own hint.
SNIFF_BYTES = 8192
_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ": "xz", b"\x28\xb5\x2f\xfd": "zstd",
               b"PK\x03\x04": "zip"}
#: The compressed forms the standard library reads: a rotated log is read through them.
_READABLE = {b"\x1f\x8b": lambda fh: gzip.GzipFile(fileobj=fh), b"BZh": bz2.BZ2File,
             b"\xfd7zXZ": lzma.LZMAFile}
#: Progress: the first line after this many seconds of scanning, then one every PROGRESS_EVERY_S.
PROGRESS_AFTER_S = 1.0
PROGRESS_EVERY_S = 5.0

#: Files a directory walk reads: logs and captured outputs. Named files are always read.
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
_LOG_NAME_RE = re.compile(r"^(?:plog|device|dmesg|stdout|stderr)")
#: Rotated and compressed logs a walk also reads: train.log.1, plog-1.log.gz, stdout.log.2.xz.
_ROTATED_RE = re.compile(r"\.(?:log|txt|out|err)(?:\.\d+)?(?:\.(?:gz|bz2|xz|zst))?$")

# Who wrote a line. torch prefixes a rank's traceback with `[rank3]:` (vllm-ascend#486), torchrun `--tee`
# with `[default3]:` (role + local rank); torch_npu's PTA line says `(PID:1292363, Device:1, RankID:1)`;
# the watchdog `[Rank 1]`; vLLM workers `rank=1`; HCCL plog lines `rank[1]`; CANN plogs `RUNTIME(42,proc)`.
_RANK_PREFIX_RE = re.compile(r"^\s*\[(?:rank|default)(\d+)\]:")
_RANK_RES = (
    re.compile(r"RankID:(\d+)"),
    re.compile(r"\[Rank (\d+)\]"),
    re.compile(r"\brank=(\d+)\b"),
    re.compile(r"\brank\[(\d+)\]"),
)
_DEVICE_RE = re.compile(r"\bDevice:(\d+)\b")
_PID_RES = (
    re.compile(r"\(PID:\s*(\d+)"),
    re.compile(r"\[PID:\s*(\d+)\]"),
    re.compile(r"^\[(?:ERROR|WARNING|INFO|DEBUG|EVENT|TRACE)\] [A-Z_]+\((\d+),"),
    re.compile(r"^\([\w.-]+ pid=(\d+)\)"),  # a vLLM worker's or Ray actor's prefix: (Worker_TP1 pid=961)
)
# A per-rank file from `torchrun --log-dir`: <dir>/<run>/attempt_N/<local rank>/{stdout,stderr}.log
_PATH_ACTOR_RES = (
    (re.compile(r"attempt_\d+[/\\](\d+)[/\\](?:stdout|stderr)\.log$"), "rank"),
    (re.compile(r"(?:^|[/\\])plog-(\d+)_\d+\.log$"), "pid"),
    (re.compile(r"(?:^|[/\\])device-(\d+)[/\\]"), "device"),
)
# 2025-11-18-09:33:13.673.818 (CANN), 2025-04-08-18:07:20, 2025-11-19 11:14:59.028, 2025-11-19T11:14:59,028
_TS_RE = re.compile(r"(\d{4})-(\d\d)-(\d\d)[-T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6})(?:\.(\d{3}))?)?")
# Without a year: glog and torch's c10 logging `E1201 10:51:32.852000`, `[E324 13:00:25.428029551`;
# vLLM `ERROR 05-09 08:06:34 [engine.py:448]`.
_GLOG_TS_RE = re.compile(r"(?:^|[\[\s:])[EWIF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,9})\b")
_VLLM_TS_RE = re.compile(r"\b(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")
# The lines CANN prints under an error: `        TraceBack (most recent call last):` and the stack
# `        <what failed>[FUNC:name][FILE:file.cc][LINE:n]`.
_STACK_RE = re.compile(
    r"^\s*(?:\(\S+ pid=\d+\)\s+)?(?:\S+ \d\d-\d\d [\d:]+ \[\S+\]\s+)?\s+.*\[FUNC:\w+\]\[FILE:"
)
# The documented codes as logs print them: `EZ9999: Inner Error!`, `EZ9999[PID: 1176]`, `(EL0004):`,
# `module_name=EE8888`, `Invalid_Argument(EE1001)`, inside a JSON-escaped string (`...failed\nE30006: ...`);
# never inside a word, a path or a hex number.
_CANN_CODE_RE = re.compile(
    r"(?:(?<=\\[nrt\"])|(?<![\w./\\-]))(E[0-9A-Z]\d{4})(?=[:\[(\]),]|\s|\\[nrt\"]|\.(?!\w)|$)"
)
_ACL_NAME_RE = re.compile(r"\b(ACL_ERROR_[A-Z0-9_]+)\b")
#: A line the vendor graph is tried on says it is an error or a failure (`in` tests: cheaper than a regex).
_ERROR_WORDS = ("rror", "ail", "xception", "[ERROR]", "ERROR ", "FAIL", "nvalid", "refused", "enied")

_ts_key = tuple[int, ...]
Actor = tuple[str, "int | str"]


def _parse_ts(text: str) -> tuple[_ts_key, str] | None:
    """(year or 0, month, day, hour, minute, second, microsecond), and the text it was read from."""
    m = _TS_RE.search(text)
    if m:
        frac = 0
        if m[7]:
            frac = int(m[7]) * 1000 + int(m[8]) if m[8] else int(m[7].ljust(6, "0"))
        return (*(int(g) for g in m.groups()[:6]), frac), m[0]
    m = _GLOG_TS_RE.search(text)
    if m:
        key = (0, *(int(g) for g in m.groups()[:5]), int(m[6][:6].ljust(6, "0")))
        return key, f"{key[1]:02d}-{key[2]:02d} {m[3]}:{m[4]}:{m[5]}.{m[6]}"
    m = _VLLM_TS_RE.search(text)
    if m:
        return (0, *(int(g) for g in m.groups()), 0), m[0]
    return None


def _ts_cmp(a: _ts_key | None, b: _ts_key | None) -> int:
    """-1/1 when both stamps exist and differ (a yearless stamp compares from the month on), else 0."""
    if a is None or b is None:
        return 0
    if not (a[0] and b[0]):
        a, b = a[1:], b[1:]
    return -1 if a < b else (1 if a > b else 0)


class _Defaults(dict):
    def __missing__(self, key: str) -> str:
        return "?"


@dataclass(eq=False)  # compared by identity: two hits are never "equal"
class _Hit:
    """A finding while the scan runs: keyed by entry, code and the actor as the line named it."""

    entry: Entry
    code: str
    title: str
    actor: Actor | None
    file_idx: int
    seq: int
    kind: str
    layer: str
    node: str | None = None
    evidence: list[Evidence] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # scan sequence of each evidence line
    lines: list[int] = field(default_factory=list)  # line number of each evidence line
    matches: int = 0
    ts: _ts_key | None = None
    ts_text: str | None = None
    first_line: int = 0
    last_line: int = 0

    def add(self, ev: Evidence, seq: int) -> None:
        self.matches += 1
        self.last_line = max(self.last_line, ev.line)
        if len(self.evidence) < MAX_EVIDENCE:
            at = len(self.order)
            while at and self.order[at - 1] > seq:  # a line given later (a wrapper's) keeps log order
                at -= 1
            self.evidence.insert(at, ev)
            self.order.insert(at, seq)
            self.lines.insert(at, ev.line)

    def absorb(self, other: _Hit) -> None:
        """Take another hit's lines (the same error seen from another line or file); a line both matched
        is counted once."""
        have = {(e.file, e.line) for e in self.evidence}
        theirs = [t for t in zip(other.order, other.evidence, other.lines, strict=True)
                  if (t[1].file, t[1].line) not in have]
        mine = zip(self.order, self.evidence, self.lines, strict=True)
        triples = sorted([*mine, *theirs], key=lambda t: t[0])
        self.order = [t[0] for t in triples[:MAX_EVIDENCE]]
        self.evidence = [t[1] for t in triples[:MAX_EVIDENCE]]
        self.lines = [t[2] for t in triples[:MAX_EVIDENCE]]
        self.matches += other.matches - (len(other.evidence) - len(theirs))
        self.last_line = max(self.last_line, other.last_line)
        if other.ts is not None and (self.ts is None or _ts_cmp(other.ts, self.ts) < 0):
            self.ts, self.ts_text = other.ts, other.ts_text
        self.node = self.node or other.node


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


class _Catalog:
    """The vendor's code lists as matchers: a documented code not named by a signature entry gets a
    finding from its family; an undocumented one is still reported, as an unknown code."""

    def __init__(self, book: CodeBook, rt_macro: str):
        self.book = book
        self._acl_re = re.compile(rt_macro + r"([1-5]\d{5})\b")
        self._names = {name: code for fam in book.acl for code, name in fam.codes.items() if name}
        self._entries: dict[tuple[str, str], Entry] = {}

    def codes_in(self, text: str) -> list[str]:
        found = _CANN_CODE_RE.findall(text)
        m = self._acl_re.search(text)
        if m is not None:
            # another number after `error code is` (HCCL's own codes) is no ACL code
            found += [n for n in self._acl_re.findall(text) if self.book.family(n) is not None]
        if "ACL_ERROR_" in text:
            found += [self._names[n] for n in _ACL_NAME_RE.findall(text) if n in self._names]
        return list(dict.fromkeys(found)) if len(found) > 1 else found

    def describe(self, code: str) -> tuple[Entry, str, str]:
        """(the family's entry, the finding's title, its kind) for a code."""
        fam = self.book.family(code)
        cann = code.startswith("E")
        documented = fam is not None and code in fam.codes
        meaning = self.book.meaning(fam.codes[code]) if documented else None
        entry = self._entry(fam, cann) if meaning is None else self._meant(fam, cann, meaning)
        if documented:
            name = fam.codes[code]
            what = name.replace("_", " ") if name else "documented code"
            title = f"{fam.name} error {code}: {what}" if cann else f"{name}: {what_acl(name)} ({fam.name})"
            kind = "remote" if code in fam.remote else "fault"
        else:
            where = f" ({fam.name})" if fam else ""
            title = f"unknown CANN code {code}{where}" if cann else f"unknown ACL return code {code}{where}"
            kind = "fault"
        return entry, title, kind

    def _meant(self, fam: CodeFamily, cann: bool, meaning) -> Entry:
        """The family's entry with the causes and fix of what the code's own name says it means."""
        key = (fam.id, "cann" if cann else "acl", meaning.match)
        if key not in self._entries:
            base = self._entry(fam, cann)
            self._entries[key] = base.model_copy(update={
                "causes": [f"{meaning.meaning} (the message after the code names what)", *meaning.causes],
                "fix": meaning.fix, "check_ids": list(meaning.check_ids),
            })
        return self._entries[key]

    def _entry(self, fam: CodeFamily | None, cann: bool) -> Entry:
        key = (fam.id if fam else "unknown", "cann" if cann else "acl")
        if key not in self._entries:
            if fam is not None:
                causes = [f"{fam.meaning} (the message after the code names what failed)", *fam.causes]
                self._entries[key] = Entry.model_construct(
                    id=f"code-{fam.id}", code="{code}", family="code", kind="fault", title="", patterns=[],
                    causes=causes, fix=fam.fix, check_ids=list(fam.check_ids), sources=list(fam.sources),
                    examples=[], layer=fam.layer, explained_by=[],
                )
            else:
                index = self.book.cann[0].sources if cann else self.book.acl[0].sources
                self._entries[key] = Entry.model_construct(
                    id=f"code-unknown-{key[1]}", code="{code}", family="code", kind="fault", title="",
                    patterns=[],
                    causes=["a code missing from the vendor lists this tool was built from (a newer or older "
                            "CANN version); the message printed with it says what failed"],
                    fix="Read the message after the code and look the code up in the error code reference of "
                    "the installed CANN version (the sources below), or in `grep -r CODE` of its plogs.",
                    check_ids=[], sources=list(index), examples=[], layer="runtime", explained_by=[],
                )
        return self._entries[key]


def what_acl(name: str) -> str:
    """ACL_ERROR_RT_VECTOR_CORE_TIMEOUT -> 'vector core timeout'."""
    words = name.removeprefix("ACL_ERROR_").removeprefix("RT_").removeprefix("GE_").lower().split("_")
    return " ".join(words)


ProgressFn = Callable[[str], None]


class Scanner:
    """Feed it files or byte streams, then take `report()`."""

    def __init__(self, kb: KnowledgeBase | None = None, codes: CodeBook | None = None, *,
                 progress: ProgressFn | None = None, total_bytes: int = 0, vendor: VendorGraph | None = None):
        self.kb = kb or load_knowledge_base()
        self._kg = vendor or load_vendor_graph()
        self._catalog = _Catalog(codes or load_code_book(), self.kb.macros.get("RT", r"error code is\s*"))
        self._prefilter = [re.compile(p.encode()) for p in self.kb.prefilter]
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

    def scan_stream(self, fh: BinaryIO, name: str, *, node: str | None = None) -> None:
        state = _FileState(len(self.files), name, _path_actor(name), node)
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
        spans: dict[int, int] = {}
        for rx in self._prefilter:
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
        prev, line = 0, lineno
        for start in sorted(spans):
            line += block.count(b"\n", prev, start)
            prev = start
            raw = block[start : spans[start]]
            self._line(_decode(raw).rstrip("\r"), line + 1, state)
        return line + block.count(b"\n", prev) - lineno

    # ------------------------------------------------------------ matching

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
        matched = False
        candidates = set(self._always)
        for literal in [lit for lit in self._literals if lit in text]:
            candidates |= self._by_literal[literal]
        for i in sorted(candidates):
            entry, patterns = self._entries[i]
            for literal, rx in patterns:
                if literal is not None and literal not in text:
                    continue
                m = rx.search(text)
                if m:
                    break
            else:
                continue
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
            matched = True
        for code in self._catalog.codes_in(text):
            if code in codes_here:
                continue  # a signature entry named it on this line
            entry, title, kind = self._catalog.describe(code)
            self._record(entry, code, title, kind, entry.layer or "runtime", text, lineno, state, ctx,
                         max(0, text.find(code)), None)
            matched = True
        if matched:
            return
        hit = state.last_hit
        if hit is not None and lineno - state.last_line <= STACK_GAP and _STACK_RE.match(text):
            self._seq += 1
            hit.add(Evidence(file=state.name, line=lineno, text=_shown(text, 0)), self._seq)
            state.last_line = lineno
            return
        if not any(w in text for w in _ERROR_WORDS):
            return  # the graph's entities are error lines; a warning that passed the prefilter is none
        last = state.last_hit
        for ent in self._kg.match(text):  # the vendor's graph, on lines none of ours knows
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


def _decode(raw: bytes) -> str:
    """A line as text: UTF-8 when it is valid UTF-8, else GB18030 (CANN's plogs and messages on a Chinese
    locale are GBK, a subset), else UTF-8 with the bad bytes replaced."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("gb18030")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")


def _shown(text: str, at: int) -> str:
    """The line as evidence: an over-long one is shown around its match."""
    return text if len(text) <= MAX_TEXT else text[max(0, at - 200) :][:MAX_TEXT]


class NotALogError(ConfigError):
    """The input is binary or compressed: refused when named, skipped when a directory walk found it."""


def _refuse_binary(head: bytes, name: str) -> None:
    for magic, kind in _COMPRESSED.items():
        if head.startswith(magic):
            raise NotALogError(
                f"{name}: a {kind}-compressed file, not a log",
                hint=f"decompress it first, e.g. {'zcat' if kind == 'gzip' else kind + ' -dc'} {name} | "
                "ascend-check diagnose -",
            )
    if b"\x00" in head[:SNIFF_BYTES]:
        raise NotALogError(
            f"{name}: binary file (NUL bytes in its first {SNIFF_BYTES} bytes), not a log",
            hint="give the job's text logs, CANN plogs (~/ascend/log) or saved dmesg output; "
            "a core dump or model file has nothing diagnose can read",
        )


def _line_actor(text: str) -> Actor | None:
    m = _RANK_PREFIX_RE.match(text)
    if m:
        return ("rank", int(m[1]))
    for rx in _RANK_RES:
        m = rx.search(text)
        if m:
            return ("rank", int(m[1]))
    m = _DEVICE_RE.search(text)
    if m:
        return ("device", int(m[1]))
    for rx in _PID_RES:
        m = rx.search(text)
        if m:
            return ("pid", int(m[1]))
    return None


def _path_actor(name: str) -> Actor | None:
    for rx, kind in _PATH_ACTOR_RES:
        m = rx.search(name)
        if m:
            return (kind, int(m[1]))
    return None


# ---------------------------------------------------------------- one finding per cause


def _near(a: _Hit, b: _Hit) -> bool:
    """Some line of a and some line of b are in one error report of one file."""
    if a.file_idx != b.file_idx:
        return False
    return any(abs(x - y) <= BLOCK_LINES for x in a.lines for y in b.lines)


def _merge_unattributed(hits: list[_Hit]) -> list[_Hit]:
    """A line that names no actor (CANN's `EZ9999: Inner Error!` header) joins the same code's finding
    whose lines name one (the `EZ9999[PID: 1176] ...` detail under it)."""
    out: list[_Hit] = []
    for h in hits:
        if h.actor is None:
            into = next((g for g in hits if g is not h and g.actor is not None and g.entry.id == h.entry.id
                         and g.code == h.code and _near(g, h)), None)
            if into is not None:
                into.absorb(h)
                into.seq = min(into.seq, h.seq)
                continue
        out.append(h)
    return out


def _is_vendor(h: _Hit) -> bool:
    return h.entry.id.startswith("kg-")


def _drop_named_by_entries(hits: list[_Hit]) -> list[_Hit]:
    """A finding of the vendor's graph whose line an entry of ours (or a documented code) also named is that
    entry's finding again: only the graph's findings on lines nothing else knows stand."""
    named = {(e.file, e.line) for h in hits if not _is_vendor(h) for e in h.evidence}
    ours = [h for h in hits if not _is_vendor(h)]
    kept = []
    for h in hits:
        if not _is_vendor(h):
            kept.append(h)
            continue
        if any((e.file, e.line) in named for e in h.evidence):
            continue
        # in the error report of one of our findings the graph says the same again, less precisely
        if any(_compatible(g.actor, h.actor) and _near(g, h) for g in ours):
            continue
        kept.append(h)
    return kept


def _is_catch_all(h: _Hit) -> bool:
    return h.entry.family == "python" and h.kind == "wrapper"


def _drop_envelopes(hits: list[_Hit]) -> list[_Hit]:
    """A wrapper (a call that failed with a code, a plog ERROR line, a Python exception) is evidence of the
    specific finding of the same actor, or of the same error report when its line names none; the Python
    catch-all also gives way to any specific failure elsewhere in the logs. With nothing else to explain
    the log, it stands as the finding."""
    specific = [h for h in hits if h.kind != "wrapper"]
    claimed = {(e.file, e.line) for h in specific for e in h.evidence}
    wrappers = [h for h in hits if h.kind == "wrapper" and not _is_catch_all(h)]
    catch_all = [h for h in hits if _is_catch_all(h)]
    kept: list[_Hit] = []
    for w in sorted(wrappers, key=lambda h: h.seq):
        # no specific finding near: the first envelope of the error report holds the others' lines
        if not _distribute(w, specific, claimed) and not _distribute(w, kept, claimed):
            kept.append(w)
            claimed.update((e.file, e.line) for e in w.evidence)
    faults = [h for h in specific if h.kind == "fault"]
    for c in catch_all:
        if not _distribute(c, specific + kept, claimed) and not faults:
            kept.append(c)
    return specific + kept


def _compatible(a: Actor | None, b: Actor | None) -> bool:
    """Could be one process: the same actor, an unknown one, or two names of different kinds (the pid a
    line names may be the rank another line names) - never two different ranks or devices."""
    return a is None or b is None or a == b or a[0] != b[0]


def _owners(w: _Hit, candidates: list[_Hit]) -> list[_Hit]:
    return [h for h in candidates if (w.actor is not None and h.actor == w.actor)
            or (_compatible(w.actor, h.actor) and _near(h, w))]


def _distribute(w: _Hit, candidates: list[_Hit], claimed: set[tuple[str, int]]) -> bool:
    """Give each of w's lines that no finding shows yet to the owner whose lines are nearest (the one
    before it first); False when w has no owner."""
    owners = _owners(w, candidates)
    if not owners:
        return False
    for seq, ev, line in zip(w.order, w.evidence, w.lines, strict=True):
        if (ev.file, ev.line) in claimed:
            continue
        same_file = [h for h in owners if h.evidence and h.evidence[0].file == ev.file] or owners

        def distance(h: _Hit, line: int = line) -> tuple[int, int]:
            before = [line - x for x in h.lines if x <= line]
            return (min(before), 0) if before else (min(abs(x - line) for x in h.lines), 1)

        host = min(same_file, key=lambda h: (distance(h)[1], distance(h)[0]))
        host.add(ev, seq)
        claimed.add((ev.file, ev.line))
    return True


# ---------------------------------------------------------------- the first failure


def _before(a: _Hit, b: _Hit) -> int:
    """Across files: by the timestamps when both lines carry one, else by layer. In one file: log order,
    except in one error report of one process (lines close together), where the lower layer came first."""
    if a.file_idx != b.file_idx:
        by_time = _ts_cmp(a.ts, b.ts)
        if by_time:
            return by_time
        by_layer = LAYER_ORDER[a.layer] - LAYER_ORDER[b.layer]
        if by_layer:
            return by_layer
    elif _is_vendor(a) != _is_vendor(b) and _near(a, b):
        return 1 if _is_vendor(a) else -1  # in one error report our specific finding comes before the graph's
    elif a.actor == b.actor and _near(a, b):
        by_layer = LAYER_ORDER[a.layer] - LAYER_ORDER[b.layer]
        if by_layer:
            return by_layer
    return -1 if a.seq < b.seq else (1 if a.seq > b.seq else 0)


def _label(hit: _Hit) -> str:
    return f"{hit.code} on {_actor_text(hit)}" if _actor_text(hit) else hit.code


def _actor_text(hit: _Hit) -> str | None:
    if hit.actor is None:
        return hit.node
    kind, value = hit.actor
    if kind == "node":
        return str(value)
    where = f" on {hit.node}" if hit.node else ""
    return f"{kind} {value}{where}"


def _is_acl_number(h: _Hit) -> bool:
    """A numeric ACL/runtime return code the catalog named (no signature entry of its own): what a call
    returned, reported again by the CANN error message (E?xxxx) printed under it."""
    return h.entry.family == "code" and h.code.isdigit()


def _explainer(h: _Hit, hits: list[_Hit]) -> _Hit | None:
    """The finding this one reports again (entry.explained_by), the same actor's first. A bare ACL return
    code is explained by a CANN error code (E?xxxx, more specific) in the same error report."""
    if _is_vendor(h):  # the graph's rules: an entity another found entity leads to is its consequence
        causes = load_vendor_graph().causes_of(h.code)
        found = [g for g in hits if g is not h and g.code in causes]
        if found:
            return found[0]
    if _is_acl_number(h):
        cann = [g for g in hits if g is not h and g.code[:1] == "E" and g.kind != "wrapper"
                and _compatible(g.actor, h.actor) and _near(g, h)]
        if cann:
            return cann[0]
    if not h.entry.explained_by:
        return None
    found = [g for g in hits if g is not h and g.entry.id in h.entry.explained_by]
    if not found:
        return None
    same = [g for g in found if g.actor == h.actor or g.actor is None or h.actor is None]
    return (same or found)[0]


def _with_roles(hits: list[_Hit]) -> list[Finding]:
    """The first failure is the cause. A finding that reports a more specific one again (explained_by) is
    its consequence, whatever the order; so is a remote-kind finding (a timeout waiting on a peer) after
    a failure, or on another actor than the first failure. With only timeouts, the first one is the cause."""
    cause_of: dict[int, _Hit] = {}  # id(hit) -> the root it follows
    explained: set[int] = set()  # consequences by explained_by: listed after their cause, whatever the order
    for h in hits:
        seen = {id(h)}
        g = _explainer(h, hits)
        while g is not None and id(g) not in seen:  # the root of a chain: what the chain started from
            seen.add(id(g))
            cause_of[id(h)] = g
            explained.add(id(h))
            g = _explainer(g, hits)
    first_fault = next((h for h in hits if h.kind != "remote" and id(h) not in cause_of), None)
    first_remote = next((h for h in hits if h.kind == "remote" and id(h) not in cause_of), None)
    for i, h in enumerate(hits):
        if id(h) in cause_of or h.kind != "remote":
            continue
        earlier = next((g for g in hits[:i] if g.kind != "remote" and id(g) not in cause_of), None)
        if earlier is not None:
            cause_of[id(h)] = earlier
        elif first_fault is not None and first_fault.actor != h.actor:
            cause_of[id(h)] = first_fault  # order unknown (no timestamps across files): it is the failure
        elif first_fault is None and h is not first_remote and first_remote is not None:
            cause_of[id(h)] = first_remote
    # a consequence is listed after what it follows
    ordered: list[_Hit] = []
    placed: set[int] = set()
    followers: dict[int, list[_Hit]] = {}
    for g in hits:
        if id(g) in explained:
            followers.setdefault(id(cause_of[id(g)]), []).append(g)
    for h in hits:
        if id(h) in placed or (id(h) in explained and id(cause_of[id(h)]) not in placed):
            continue  # placed right after its cause
        for g in (h, *followers.get(id(h), ())):
            if id(g) not in placed:
                ordered.append(g)
                placed.add(id(g))
    ordered += [h for h in hits if id(h) not in placed]
    out = []
    for h in ordered:
        cause = cause_of.get(id(h))
        e = h.entry
        out.append(
            Finding(
                id=e.id,
                code=h.code,
                title=h.title,
                causes=list(e.causes),
                fix=e.fix,
                check_ids=list(e.check_ids),
                evidence=h.evidence,
                matches=h.matches,
                role="consequence" if cause else "cause",
                caused_by=_label(cause) if cause else None,
                rank=h.actor[1] if h.actor and h.actor[0] == "rank" else None,
                actor=_actor_text(h),
                first_seen=h.ts_text,
                family=e.family,
                kind=h.kind,
                sources=list(e.sources),
                layer=h.layer,
                node=h.node or (str(h.actor[1]) if h.actor and h.actor[0] == "node" else None),
            )
        )
    return out


# ---------------------------------------------------------------- paths


def _walk(paths: Iterable[str | Path]) -> Iterator[tuple[Path | None, str, bool]]:
    """(path, display name, named) of every file to read: named files as given, directories walked for
    logs. `-` is standard input (path None)."""
    for raw in paths:
        if str(raw) == "-":
            yield None, "<stdin>", True
            continue
        path = Path(raw).expanduser()
        if path.is_dir():
            found = False
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for fname in sorted(files):
                    if fname.endswith(LOG_SUFFIXES) or _LOG_NAME_RE.match(fname) or _ROTATED_RE.search(fname):
                        found = True
                        full = Path(root, fname)
                        yield full, str(full), False
            if not found:
                raise ConfigError(
                    f"no log files under {raw}",
                    hint=f"a directory is searched for *{', *'.join(LOG_SUFFIXES)}, plog-* and dmesg* "
                    "files; name any other file to read it",
                )
        elif path.exists():
            yield path, str(raw), True
        else:
            raise ConfigError(
                f"{raw}: no such file or directory",
                hint="give training or inference logs, plog directories (~/ascend/log) or saved dmesg output",
            )


def iter_log_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path | None, str]]:
    """(path, display name) of every file to read: named files as given, directories walked for logs.
    `-` is standard input (path None)."""
    for path, name, _named in _walk(paths):
        yield path, name


def _node_of(path: Path, hosts: Sequence[str]) -> str | None:
    """The launcher writes each node's output to <log dir>/<host>.log and its plogs to <host>-plogs.log."""
    for host in hosts:
        if path.name in (f"{host}.log", f"{host}-plogs.log"):
            return host
    return None


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


#: A run whose rollout sleeps (vLLM sleep mode in a colocated RL job: verl, ms-swift, trl, OpenRLHF):
#: literals, each searched over whole chunks at memchr speed, only when an NPU OOM was found.
_SLEEP_MARKERS = (
    b"VLLM_ENABLE_SLEEP_MODE", b"enable_sleep_mode", b"free_cache_engine=True", b"Sleep mode freed",
    b"seconds to fall asleep", b"vllm_enable_sleep", b"sleep_level",
)
_SLEEP_PROBES = (b"leep", b"SLEEP", b"free_cache_engine")  # every marker holds one: three passes, not seven
#: A run's configuration and its first sleep come early: the head of each file is read for them.
SLEEP_SCAN_BYTES = 64 << 20
_SLEEP_FIX = (
    "This run sleeps its vLLM rollout between steps (colocated RL): do NOT set "
    "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True, sleep mode cannot release virtual-memory segments "
    "(set expandable_segments:False). Lower the rollout's gpu_memory_utilization (e.g. 0.6 -> 0.4) and the "
    "actor's micro batch or max length, offload the actor's params/optimizer while the rollout runs, and "
    "stop leftover processes (npu-smi info)."
)


def _sleep_mode_evidence(paths: list[Path]) -> str | None:
    """The first line that shows the rollout sleeps, read again only when an NPU OOM was found."""
    for path in paths:
        try:
            with open(path, "rb") as fh:
                head = fh.read(6)
                fh.seek(0)
                opener = next((op for magic, op in _READABLE.items() if head.startswith(magic)), None)
                stream = opener(fh) if opener else fh
                carry, read = b"", 0
                while read < SLEEP_SCAN_BYTES and (chunk := stream.read(CHUNK_BYTES)):
                    read += len(chunk)
                    buf = carry + chunk
                    for probe in _SLEEP_PROBES:
                        at = buf.find(probe)
                        while at != -1:
                            start = buf.rfind(b"\n", 0, at) + 1
                            end = buf.find(b"\n", at)
                            end = end if end != -1 else len(buf)
                            if any(m in buf[start:end] for m in _SLEEP_MARKERS):
                                return _decode(buf[start:end]).strip()[:MAX_TEXT]
                            at = buf.find(probe, end)
                    carry = buf[-64:]
        except (OSError, EOFError, lzma.LZMAError, zlib.error):
            continue
    return None


def _oom_advice_for_sleep_mode(report: DiagnoseReport, line: str) -> DiagnoseReport:
    findings = []
    for f in report.findings:
        if f.id == "npu-oom":
            f = f.model_copy(update={
                "fix": _SLEEP_FIX,
                "causes": [*f.causes, f"the rollout sleeps between steps (\"{line[:200]}\"): its memory "
                           "must be released by sleep mode, which expandable segments break"],
            })
        findings.append(f)
    return report.model_copy(update={"findings": findings})


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
