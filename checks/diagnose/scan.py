"""The log scanner: streams files in fixed-size chunks, prefilters lines with a few literal-led regexes
run over the raw bytes, and matches only the surviving lines against the knowledge base.

Memory is bounded by the chunk size plus at most 20 evidence lines per finding; nothing is sent anywhere.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ascend_ready.checks.diagnose.model import (
    DiagnoseReport,
    Entry,
    Evidence,
    Finding,
    KnowledgeBase,
    load_knowledge_base,
)
from ascend_ready.errors import ConfigError

__all__ = ["LOG_SUFFIXES", "Scanner", "diagnose_paths", "iter_log_files"]

CHUNK_BYTES = 4 << 20
#: A "line" longer than this (a binary file, a log without newlines) is cut into pieces of this size.
MAX_LINE_BYTES = 1 << 20
MAX_EVIDENCE = 20
MAX_TEXT = 2000
#: How many lines after a timestamp-less match a timestamp may come from (the `[ERROR] <time> (PID..)` line
#: torch_npu prints right after its RuntimeError).
TS_LOOKAHEAD = 5

#: Files a directory walk reads: logs and captured outputs. Named files are always read.
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
_LOG_NAME_RE = re.compile(r"^(?:plog|device|dmesg|stdout|stderr)")

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
)
# A per-rank file from `torchrun --log-dir`: <dir>/<run>/attempt_N/<local rank>/{stdout,stderr}.log
_PATH_ACTOR_RES = (
    (re.compile(r"attempt_\d+[/\\](\d+)[/\\](?:stdout|stderr)\.log$"), "rank"),
    (re.compile(r"(?:^|[/\\])plog-(\d+)_\d+\.log$"), "pid"),
    (re.compile(r"(?:^|[/\\])device-(\d+)[/\\]"), "device"),
)
# 2025-11-18-09:33:13.673.818 (CANN), 2025-04-08-18:07:20, 2025-11-19 11:14:59.028, 2025-11-19T11:14:59,028
_TS_RE = re.compile(r"(\d{4})-(\d\d)-(\d\d)[-T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6})(?:\.(\d{3}))?)?")

Actor = tuple[str, int]


def _parse_ts(text: str) -> tuple[tuple[int, ...], str] | None:
    m = _TS_RE.search(text)
    if not m:
        return None
    frac = 0
    if m[7]:
        frac = int(m[7]) * 1000 + int(m[8]) if m[8] else int(m[7].ljust(6, "0"))
    return (*(int(g) for g in m.groups()[:6]), frac), m[0]


def _required_literal(pattern: str) -> str | None:
    """The longest run of literal characters every match of `pattern` contains (None if under 3): a
    substring test that skips the regex on lines that cannot match. Read from the regex's parse tree."""
    try:
        from re import _parser as sre_parse  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse  # type: ignore[no-redef]

    runs: list[str] = []
    current: list[str] = []

    def walk(items) -> None:
        for op, arg in items:
            name = op.name
            if name == "LITERAL":
                current.append(chr(arg))
            elif name == "SUBPATTERN" and arg[1] == 0 and arg[2] == 0:  # a plain group: its items in line
                walk(arg[3])
            elif name == "AT":  # \b, ^, $: zero width, the literals around it stay adjacent
                continue
            else:
                runs.append("".join(current))
                current.clear()

    walk(sre_parse.parse(pattern))
    runs.append("".join(current))
    best = max(runs, key=len)
    return best if len(best) >= 3 else None


class _Defaults(dict):
    def __missing__(self, key: str) -> str:
        return "?"


@dataclass
class _Hit:
    """A finding while the scan runs: keyed by entry, code and the actor as the line named it."""

    entry: Entry
    code: str
    title: str
    actor: Actor | None
    file_idx: int
    seq: int
    evidence: list[Evidence] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # scan sequence of each evidence line
    matches: int = 0
    ts: tuple[int, ...] | None = None
    ts_text: str | None = None
    first_line: int = 0


@dataclass
class _FileState:
    idx: int
    name: str
    actor: Actor | None
    waiting: list[_Hit] = field(default_factory=list)  # hits whose first line had no timestamp


class Scanner:
    """Feed it files or byte streams, then take `report()`."""

    def __init__(self, kb: KnowledgeBase | None = None):
        self.kb = kb or load_knowledge_base()
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
        self._hits: dict[tuple[str, str, Actor | None, int], _Hit] = {}
        self._seq = 0
        self._pid_rank: dict[int, int] = {}
        self._pid_device: dict[int, int] = {}
        self._device_ranks: dict[int, set[int]] = {}
        self.files: list[str] = []
        self.lines = 0
        self.bytes = 0

    # ------------------------------------------------------------ input

    def scan_path(self, path: Path, name: str | None = None) -> None:
        name = name or str(path)
        try:
            with open(path, "rb") as fh:
                self.scan_stream(fh, name)
        except PermissionError:
            raise ConfigError(
                f"cannot read {name}: permission denied",
                hint="run as the user that wrote the logs, or with sudo",
            ) from None
        except OSError as exc:
            raise ConfigError(f"cannot read {name}: {exc.strerror or exc}") from None

    def scan_stream(self, fh: BinaryIO, name: str) -> None:
        state = _FileState(len(self.files), name, _path_actor(name))
        self.files.append(name)
        carry = b""
        lineno = 0  # complete lines before `carry`
        while True:
            data = fh.read(CHUNK_BYTES)
            if not data:
                break
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
        if carry:
            lineno += self._block(carry + b"\n", lineno, state)
        self.lines += lineno

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
            self._line(raw.decode("utf-8", "replace").rstrip("\r"), line + 1, state)
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
        actor: Actor | None = None
        actor_known = False
        for entry, patterns in self._entries:
            for literal, rx in patterns:
                if literal is not None and literal not in text:
                    continue
                m = rx.search(text)
                if m:
                    break
            else:
                continue
            if not actor_known:
                actor, actor_known = _line_actor(text) or state.actor, True
                stamp = stamp or _parse_ts(text)
            groups = _Defaults({k: v for k, v in m.groupdict().items() if v is not None})
            code = entry.code.format_map(groups)
            hit_key = (entry.id, code, actor, state.idx if actor is None else -1)
            hit = self._hits.get(hit_key)
            if hit is None:
                hit = _Hit(
                    entry,
                    code,
                    entry.title.format_map(groups),
                    actor,
                    state.idx,
                    self._seq,
                    first_line=lineno,
                )
                self._hits[hit_key] = hit
                if stamp:
                    hit.ts, hit.ts_text = stamp
                else:
                    state.waiting.append(hit)
            self._seq += 1
            hit.matches += 1
            if len(hit.evidence) < MAX_EVIDENCE:
                # an over-long line is shown around its match
                shown = text if len(text) <= MAX_TEXT else text[max(0, m.start() - 200) :][:MAX_TEXT]
                hit.evidence.append(Evidence(file=state.name, line=lineno, text=shown))
                hit.order.append(self._seq)

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
        merged: dict[tuple, _Hit] = {}
        for hit in sorted(self._hits.values(), key=lambda h: h.seq):
            actor = self._resolve(hit.actor)
            key = (hit.entry.id, hit.code, actor, hit.file_idx if actor is None else -1)
            into = merged.get(key)
            if into is None:
                hit.actor = actor
                merged[key] = hit
                continue
            pairs = sorted(
                zip(into.order + hit.order, into.evidence + hit.evidence, strict=True), key=lambda p: p[0]
            )[:MAX_EVIDENCE]
            into.order, into.evidence = [p[0] for p in pairs], [p[1] for p in pairs]
            into.matches += hit.matches
            if hit.ts is not None and (into.ts is None or hit.ts < into.ts):
                into.ts, into.ts_text = hit.ts, hit.ts_text
        hits = _drop_wrappers(list(merged.values()))
        hits.sort(key=functools.cmp_to_key(_before))
        return DiagnoseReport(
            findings=_with_roles(hits), files=list(self.files), lines=self.lines, bytes=self.bytes
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


#: A wrapper gives way to a specific finding of the same actor, the catch-all to any other finding.
_LEVEL = {"fault": 0, "remote": 0, "wrapper": 1}


def _level(hit: _Hit) -> int:
    return 2 if hit.entry.family == "python" else _LEVEL[hit.entry.kind]


def _drop_wrappers(hits: list[_Hit]) -> list[_Hit]:
    def owner(h: _Hit):
        return h.actor if h.actor is not None else ("file", h.file_idx)

    best: dict[object, int] = {}
    for h in hits:
        best[owner(h)] = min(best.get(owner(h), 9), _level(h))
    return [h for h in hits if _level(h) == best[owner(h)]]


def _before(a: _Hit, b: _Hit) -> int:
    """Log order in one file; across files the timestamps when both lines carry one, else scan order."""
    if a.file_idx != b.file_idx and a.ts is not None and b.ts is not None and a.ts != b.ts:
        return -1 if a.ts < b.ts else 1
    return -1 if a.seq < b.seq else (1 if a.seq > b.seq else 0)


def _label(hit: _Hit) -> str:
    return f"{hit.code} on {_actor_text(hit.actor)}" if hit.actor else hit.code


def _actor_text(actor: Actor | None) -> str | None:
    return f"{actor[0]} {actor[1]}" if actor else None


def _with_roles(hits: list[_Hit]) -> list[Finding]:
    """The first failure is the cause; a remote-kind finding (a timeout waiting on a peer) after it, or
    on another actor, is its consequence. With only timeouts, the first one stands for the cause."""
    first_fault = next((h for h in hits if h.entry.kind != "remote"), None)
    first_remote = next((h for h in hits if h.entry.kind == "remote"), None)
    out = []
    for i, h in enumerate(hits):
        cause: _Hit | None = None
        if h.entry.kind == "remote":
            earlier = next((g for g in hits[:i] if g.entry.kind != "remote"), None)
            if earlier is not None:
                cause = earlier
            elif first_fault is not None and first_fault.actor != h.actor:
                cause = first_fault  # its order is unknown (no timestamps across files): it is the failure
            elif first_fault is None and h is not first_remote:
                cause = first_remote
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
                actor=_actor_text(h.actor),
                first_seen=h.ts_text,
                family=e.family,
                kind=e.kind,
                sources=list(e.sources),
            )
        )
    return out


# ---------------------------------------------------------------- paths


def iter_log_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path | None, str]]:
    """(path, display name) of every file to read: named files as given, directories walked for logs.
    `-` is standard input (path None)."""
    for raw in paths:
        if str(raw) == "-":
            yield None, "<stdin>"
            continue
        path = Path(raw).expanduser()
        if path.is_dir():
            found = False
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for fname in sorted(files):
                    if fname.endswith(LOG_SUFFIXES) or _LOG_NAME_RE.match(fname):
                        found = True
                        full = Path(root, fname)
                        yield full, str(full)
            if not found:
                raise ConfigError(
                    f"no log files under {raw}",
                    hint=f"a directory is searched for *{', *'.join(LOG_SUFFIXES)}, plog-* and dmesg* "
                    "files; name any other file to read it",
                )
        elif path.exists():
            yield path, str(raw)
        else:
            raise ConfigError(
                f"{raw}: no such file or directory",
                hint="give training or inference logs, plog directories (~/ascend/log) or saved dmesg output",
            )


def diagnose_paths(paths: Sequence[str | Path], kb: KnowledgeBase | None = None) -> DiagnoseReport:
    """Every known error signature in these logs, ordered, with causes, fixes and evidence."""
    if not paths:
        raise ConfigError("no log given", hint="ascend-check diagnose PATH... (files or directories)")
    scanner = Scanner(kb)
    for path, name in iter_log_files(paths):
        if path is None:
            scanner.scan_stream(sys.stdin.buffer, name)
        else:
            scanner.scan_path(path, name)
    return scanner.report()
