"""What one log line says: who wrote it (rank, device, pid), when (its timestamp), and the documented
CANN, ACL and HCCL codes in it, with each code's family knowledge (_Catalog)."""

from __future__ import annotations

import re

from ascend_ready.checks.diagnose.model import CodeBook, CodeFamily, Entry

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
# What every match of _CANN_CODE_RE and of a return code holds: a search that starts on a literal or a
# narrow class, so the lines without either skip the lookbehind-led regexes (they try every position).
_CANN_HINT_RE = re.compile(r"E[0-9A-Z]\d{4}")
_RC_HINT_RE = re.compile(r"[1-5]\d{5}")
_ACL_NAME_RE = re.compile(r"\b(ACL_ERROR_[A-Z0-9_]+)\b")

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



# A line a terminal, a log viewer or a pasted issue cut at a fixed width: the start of a documented code
# (`EZ99`, `E`) or of a return code (`error code is 5070`) ends the line, its rest starts the next one.
_WRAP_TAIL_RE = re.compile(rb"(?:(?<![\w./\\-])E(?:[0-9A-Z]\d{0,3})?|error code(?: is)?\s*[:=]?\s*\d{0,5})$")
#: How much of the next line can complete a cut code: the rest of it and what must follow it.
_WRAP_HEAD = 8


class _Catalog:
    """The vendor's code lists as matchers: a documented code not named by a signature entry gets a
    finding from its family; an undocumented one is still reported, as an unknown code."""

    def __init__(self, book: CodeBook, rt_macro: str):
        self.book = book
        self._acl_re = re.compile(rt_macro + r"([1-5]\d{5})\b")
        self._names = {name: code for fam in book.acl for code, name in fam.codes.items() if name}
        self._entries: dict[tuple[str, str], Entry] = {}

    def codes_in(self, text: str) -> list[str]:
        found = _CANN_CODE_RE.findall(text) if _CANN_HINT_RE.search(text) else []
        m = self._acl_re.search(text) if _RC_HINT_RE.search(text) else None
        if m is not None:
            # another number after `error code is` (HCCL's own codes) is no ACL code
            found += [n for n in self._acl_re.findall(text) if self.book.family(n) is not None]
        if "ACL_ERROR_" in text:
            found += [self._names[n] for n in _ACL_NAME_RE.findall(text) if n in self._names]
        return list(dict.fromkeys(found)) if len(found) > 1 else found

    def wrapped(self, line: bytes, nxt: bytes) -> bool:
        """Whether `line` ends in the first part of a code that `nxt` completes (a line cut at a fixed width);
        a CANN code must be of a family the vendor documents, a return code follow `error code is`, so no two
        unrelated lines are joined."""
        m = _WRAP_TAIL_RE.search(line.rstrip(b"\r"))
        if m is None or not nxt:
            return False
        cut = m.end() - m.start()
        text = (m[0] + nxt[:_WRAP_HEAD]).decode("latin-1")
        for found in _CANN_CODE_RE.finditer(text):
            if found.start(1) < cut < found.end(1) and self.book.family(found[1]) is not None:
                return True
        # a return code after `error code is` (its number is whatever the call returned)
        return any(found.start(1) < cut < found.end(1) for found in self._acl_re.finditer(text))

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
