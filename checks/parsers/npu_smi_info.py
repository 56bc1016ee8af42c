"""Parser of the `npu-smi info` main table, every known layout, into the model of docs/design/simulator.md §3.

It reads the table by its structure (rules, `|` cells, header words), never by one sample's offsets,
and fails closed: anything it cannot place raises ParseError naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import field_validator

from ascend_ready.checks.parsers._common import is_preamble
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, numbered_lines, parser
from ascend_ready.errors import ParseError
from ascend_ready.npu_smi_layout import (
    COLUMNS,
    LAYOUTS,
    PROCESS_HEADERS,
    SECOND_KEYS,
    Layout,
    worst_health,
)

__all__ = ["KIND", "NpuSmiChip", "NpuSmiInfo", "NpuSmiNpu", "NpuSmiProcess", "parse_npu_smi_info"]

KIND = "npu-smi-info"


class NpuSmiChip(ParsedModel):
    """One chip (logical device): the two table rows that start with its NPU id and its chip id."""

    chip_id: int
    phy_id: int | None  # A3 "Phy-ID" column
    device_id: int | None  # 310/310P "Device" column (logical device id)
    name: str
    health: str  # as printed: OK, Warning, Alarm, Critical, or another word npu-smi chose
    power_w: float | None
    temp_c: int | None
    bus_id: str | None
    aicore_pct: int | None
    memory_used_mb: int | None
    memory_total_mb: int | None
    hbm_used_mb: int | None
    hbm_total_mb: int | None
    hugepages_used: int | None
    hugepages_total: int | None


class NpuSmiNpu(ParsedModel):
    """One NPU (card); name/power_w/temp_c are its first chip's, health the worst of its chips'.

    Severity: OK < Warning < Alarm < Critical < any other word, so an unknown state is never
    masked by a known one; a checker treats everything but OK as unhealthy.
    """

    id: int
    name: str
    health: str
    power_w: float | None
    temp_c: int | None
    chips: list[NpuSmiChip]


class NpuSmiProcess(ParsedModel):
    """One row of the process table."""

    npu_id: int
    chip_id: int
    pid: int
    name: str  # "" when npu-smi printed no name (process in another PID namespace)
    memory_mb: int | None
    container_pid: int | None  # 26.x "Process id in container"; None when NA or not printed


class NpuSmiInfo(ParsedModel):
    """The whole `npu-smi info` output."""

    layout: str  # an id of ascend_ready.npu_smi_layout.LAYOUTS
    tool_version: str  # "npu-smi X" on the version row
    driver_version: str  # "Version: Y" on the version row (differs from X on old tools)
    npus: list[NpuSmiNpu]
    process_table: Literal["absent", "present"]
    processes: list[NpuSmiProcess]
    truncated: bool = False  # the capture stops right after a complete row (closing rule missing)

    @field_validator("layout")
    @classmethod
    def _known_layout(cls, value: str) -> str:
        if value not in LAYOUTS:
            raise ValueError(f"unknown layout {value!r} (known: {', '.join(LAYOUTS)})")
        return value


_NULL_WORDS = {"NA", "-"}
_INT = re.compile(r"\d+")
_FLOAT = re.compile(r"\d+(?:\.\d+)?")
_BUS_ID = re.compile(r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
_VALUE_TOKEN = re.compile(r"\S+?\s*/\s*\S+|\S+")
# Any status word is kept (a checker treats all but OK as unhealthy); only non-words are garbage.
_HEALTH = re.compile(r"[A-Za-z][A-Za-z0-9_ -]*")
_VERSION = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
_NO_PROCS = re.compile(r"No running processes found in NPU (\d+)")
_RULE = re.compile(r"\+[-+]*\+|\+[=+]*\+")
# Text a person's paste may carry around the table: the prompt + command, sudo's password prompt.
_PROMPT_RE = r"(?:\([^)]*\)\s*)?(?:\[[^\]]*\]|\S*@\S*|\S*:\S*)?\s*[$#>]"  # (env) [u dir]$, u@h:~#, $
_PROMPT = re.compile(_PROMPT_RE + r"\s*")
_COMMAND = re.compile(rf"(?:{_PROMPT_RE}\s*)?(?:sudo\s+)?(?:\S*/)?npu-smi\s+info\s*")
_SUDO = re.compile(r"\[sudo\] password for .*")
_TOOL_FAILURE = re.compile(r"dcmi .*failed|ret is -?\d+|Invalid card id|device is used|"
                           r"command not found|No such file or directory|Permission denied", re.IGNORECASE)


_TOOL_FAILURE_HINT = ("npu-smi could not reach the devices: check that the driver is loaded, that the "
                      "davinci devices are mounted into this container and that no other container holds "
                      "them (dcmi -8020 or -8005: device in use)")


@dataclass
class _Tok:
    """A table line: a rule (`fill` '-' or '='), a row (`cells`), or text."""

    line: Line
    kind: str
    fill: str = ""
    cells: list[str] = field(default_factory=list)
    width: int = 0


def _tokenize(line: Line, indent: str) -> _Tok:
    text = line.rstrip()
    if not text.startswith(indent):
        return _Tok(line, "text")
    text = text[len(indent):]
    if _RULE.fullmatch(text):
        fill = "=" if "=" in text else "-"
        return _Tok(line, "rule", fill=fill, width=len(text))
    if len(text) >= 2 and text[0] == "|" and text[-1] == "|":
        return _Tok(line, "row", cells=text[1:-1].split("|"), width=len(text))
    return _Tok(line, "text")


def _int(tok: str, what: str, line: Line, *, nullable: bool = True) -> int | None:
    if nullable and tok in _NULL_WORDS:
        return None
    if not _INT.fullmatch(tok):
        raise fail(KIND, f"{what} {tok!r} is not a whole number", line)
    return int(tok)


def _float(tok: str, what: str, line: Line) -> float | None:
    if tok in _NULL_WORDS:
        return None
    if not _FLOAT.fullmatch(tok):
        raise fail(KIND, f"{what} {tok!r} is not a number", line)
    return float(tok)


def _split_key_cell(cell: str, count: int, what: str, line: Line) -> list[str]:
    words = cell.strip().split(None, count - 1)
    if len(words) != count:
        raise fail(KIND, f"expected {count} value(s) ({what}) in the first cell, found {len(words)}", line)
    return words


class _Table:
    """A cursor over the table lines, with the checks every step shares."""

    def __init__(self, toks: list[_Tok], width: int):
        self.toks, self.pos, self.width = toks, 0, width
        self.truncated = False  # the input stopped right after a complete row

    def peek(self) -> _Tok | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def last_line(self) -> Line:
        return self.toks[self.pos - 1].line

    def take(self, kind: str, what: str, *, fill: str = "", cells: int = 0) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise fail(KIND, f"output ends before {what} (cut off?)", self.last_line())
        if tok.kind != kind or (fill and tok.fill != fill):
            raise fail(KIND, f"expected {what}", tok.line)
        if kind == "rule" and tok.width != self.width:
            raise fail(KIND, f"rule is {tok.width} columns wide, the table {self.width}", tok.line)
        if cells and len(tok.cells) != cells:
            raise fail(KIND, f"{what} has {len(tok.cells)} cells, expected {cells}", tok.line)
        self.pos += 1
        return tok


def _is_prompt(line: str) -> bool:
    return bool(_PROMPT.fullmatch(line.rstrip())) and not set(line) & set("|+")


def _is_paste_noise(line: str) -> bool:
    """What a shell, a container entrypoint or a paste prints above the table: a blank line, a shell
    prompt (with the npu-smi command), the command alone, sudo's password prompt, a `set -x` trace
    (`+ npu-smi info`) or an `export`/`source` echo."""
    text = line.strip()
    return (not text or bool(_COMMAND.fullmatch(text) or _SUDO.fullmatch(text)) or _is_prompt(text)
            or is_preamble(text, ("npu-smi",)))


def _preamble_error(lines: list[Line]) -> ParseError:
    for line in lines:
        if _TOOL_FAILURE.search(line):
            return ParseError(KIND, "npu-smi printed an error instead of its table", line_no=line.no,
                              line=str(line), hint=_TOOL_FAILURE_HINT)
    for line in lines:
        if not _is_paste_noise(line):
            return fail(KIND, "unexpected text before the table", line)
    return fail(KIND, "no npu-smi table found", lines[-1] if lines else None)


def _header(tbl: _Table, layout: Layout) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    h1 = tbl.take("row", "the first header row (NPU Name | Health | Power...)", cells=3)
    h2 = tbl.take("row", "the second header row (Chip | Bus-Id | AICore...)", cells=3)
    row1, row2 = h1.cells[2].split(), h2.cells[2].split()
    if h1.cells[0].split() != ["NPU", "Name"] or h1.cells[1].split() != ["Health"]:
        raise fail(KIND, "unknown header (expected 'NPU Name | Health | ...')", h1.line)
    keys = h2.cells[0].split()
    if keys[:1] != ["Chip"] or len(keys) > 2 or (len(keys) == 2 and keys[1] not in SECOND_KEYS) \
            or h2.cells[1].split() != ["Bus-Id"]:
        raise fail(KIND, "unknown header (expected 'Chip [Phy-ID|Device] | Bus-Id | ...')", h2.line)
    for words, expected, tok in ((row1, layout.row1, h1), (row2, layout.row2, h2)):
        unknown = [w for w in words if w not in COLUMNS]
        if unknown:
            raise fail(KIND, f"unknown column header {unknown[0]!r}", tok.line)
        if tuple(words) != expected:
            raise fail(KIND, f"columns {' '.join(words)!r} do not match the {layout.width}-column layout "
                             f"{layout.id} ({' '.join(expected)})", tok.line)
    tbl.take("rule", "the '+===' rule under the header", fill="=")
    return (SECOND_KEYS[keys[1]] if len(keys) == 2 else None), tuple(row1), tuple(row2)


def _values(cell: str, columns: tuple[str, ...], line: Line) -> dict:
    tokens = _VALUE_TOKEN.findall(cell)
    if len(tokens) != len(columns):
        raise fail(KIND, f"expected {len(columns)} values ({', '.join(columns)}), found {len(tokens)}", line)
    out: dict = {}
    for tok, header in zip(tokens, columns, strict=True):
        col = COLUMNS[header]
        parts = [p.strip() for p in tok.split("/")] if len(col.keys) == 2 else [tok]
        if len(parts) != len(col.keys):
            raise fail(KIND, f"{header} value {tok!r} is not " + ("'used / total'" if len(col.keys) == 2
                                                                    else "a single value"), line)
        for key, part in zip(col.keys, parts, strict=True):
            out[key] = _float(part, header, line) if col.kind == "float" else _int(part, header, line)
    return out


def _chip(tbl: _Table, second: str | None, row1: tuple[str, ...], row2: tuple[str, ...]) -> tuple[int, dict]:
    a = tbl.take("row", "a device row (NPU id, name, health ...)", cells=3)
    npu_word, name = _split_key_cell(a.cells[0], 2, "NPU id, name", a.line)
    npu_id = _int(npu_word, "NPU id", a.line, nullable=False)
    health = a.cells[1].strip()
    if not _HEALTH.fullmatch(health):
        raise fail(KIND, f"Health {health!r} is not a status word", a.line)
    chip: dict = {"name": name.strip(), "health": health, **_values(a.cells[2], row1, a.line)}
    b = tbl.take("row", f"the chip row of NPU {npu_id}", cells=3)
    what = "Chip" + (f", {second}" if second else "")
    words = _split_key_cell(b.cells[0], 2 if second else 1, what, b.line)
    chip["chip_id"] = _int(words[0], "chip id", b.line, nullable=False)
    for key in SECOND_KEYS.values():
        chip[key] = _int(words[1], key, b.line) if key == second else None
    bus = b.cells[1].strip()
    if bus not in _NULL_WORDS and not _BUS_ID.fullmatch(bus):
        raise fail(KIND, f"Bus-Id {bus!r} is not a PCI address", b.line)
    chip["bus_id"] = None if bus in _NULL_WORDS else bus
    chip.update(_values(b.cells[2], row2, b.line))
    for col in COLUMNS.values():
        for key in col.keys:
            chip.setdefault(key, None)
    chip["_lines"] = (a.line, b.line)
    return npu_id, chip


def _devices(tbl: _Table, second: str | None, row1: tuple[str, ...], row2: tuple[str, ...]) -> list[dict]:
    npus: list[dict] = []
    while (tok := tbl.peek()) is not None and tok.kind == "row":
        if len(tok.cells) == 1 and _NO_PROCS.fullmatch(tok.cells[0].strip()):
            raise fail(KIND, "process-table row where a device row belongs: the process-table header is "
                             "missing (an edited or cut paste?)", tok.line)
        npu_id, chip = _chip(tbl, second, row1, row2)
        line, chip_line = chip.pop("_lines")
        if npus and npus[-1]["open"]:
            if npu_id != npus[-1]["id"]:
                raise fail(KIND, f"NPU {npu_id} follows a chip rule inside NPU {npus[-1]['id']}", line)
        else:
            if any(n["id"] == npu_id for n in npus):
                raise fail(KIND, f"duplicate NPU id {npu_id}", line)
            npus.append({"id": npu_id, "chips": [], "open": False})
        npu = npus[-1]
        if any(c["chip_id"] == chip["chip_id"] for c in npu["chips"]):
            raise fail(KIND, f"duplicate chip id {chip['chip_id']} in NPU {npu_id}", chip_line)
        for key in SECOND_KEYS.values():
            if chip[key] is not None and any(c[key] == chip[key] for n in npus for c in n["chips"]):
                raise fail(KIND, f"duplicate {key} {chip[key]}", chip_line)
        npu["chips"].append(chip)
        if tbl.peek() is None:
            tbl.truncated = True
            break
        npu["open"] = tbl.take("rule", "a '+---' or '+===' rule after the chip rows").fill == "-"
    if npus and npus[-1]["open"] and not tbl.truncated:
        raise fail(KIND, f"output ends inside NPU {npus[-1]['id']} (after a chip rule)", tbl.last_line())
    return npus


def _processes(tbl: _Table, layout: Layout, npus: list[dict]) -> list[dict]:
    header = tbl.take("row", "the process-table header")
    expected = PROCESS_HEADERS if layout.container_pid else PROCESS_HEADERS[:4]
    if tuple(" ".join(c.split()) for c in header.cells) != expected:
        raise fail(KIND, "unknown process-table header (expected '" + " | ".join(expected) + "')",
                   header.line)
    tbl.take("rule", "the '+===' rule under the process header", fill="=")
    chips = {n["id"]: {c["chip_id"] for c in n["chips"]} for n in npus}
    procs: list[dict] = []
    idle: set[int] = set()
    after_row = False
    while (tok := tbl.peek()) is not None:
        if tok.kind == "rule" and tok.fill == "=" and tok.width == tbl.width and after_row:
            tbl.pos, after_row = tbl.pos + 1, False
            continue
        if tok.kind == "rule" and tok.fill == "-" and tok.width == tbl.width and after_row:
            # a `+----+` closing rule after the last process row: the table ends here (a row after it
            # is refused by the trailer check)
            tbl.pos, after_row = tbl.pos + 1, False
            break
        if tok.kind != "row":
            break
        tbl.pos, after_row = tbl.pos + 1, True
        if len(tok.cells) == 1:
            m = _NO_PROCS.fullmatch(tok.cells[0].strip())
            if not m:
                raise fail(KIND, "unknown one-cell row in the process table", tok.line)
            npu_id = int(m.group(1))
            if npu_id not in chips:
                raise fail(KIND, f"NPU {npu_id} is not in the device table", tok.line)
            idle.add(npu_id)
        elif len(tok.cells) == len(expected):
            procs.append(_process(tok, chips))
        else:
            raise fail(KIND, f"process row has {len(tok.cells)} cells, expected {len(expected)}", tok.line)
    # Cut: no closing rule after the last row, no row at all under the header, or (cut at a row boundary)
    # an NPU of the device table missing: npu-smi prints every NPU's processes or its `No running
    # processes found in NPU N` row. A device table without NPUs has nothing to list.
    listed = idle | {p["npu_id"] for p in procs}
    tbl.truncated = after_row or (bool(chips) and (not listed or not set(chips) <= listed))
    for proc in procs:
        line = proc.pop("_line")
        if proc["npu_id"] in idle:
            raise fail(KIND, f"NPU {proc['npu_id']} has a process but also 'No running processes'", line)
    return procs


def _process(tok: _Tok, chips: dict[int, set[int]]) -> dict:
    words = _split_key_cell(tok.cells[0], 2, "NPU, Chip", tok.line)
    npu_id = _int(words[0], "NPU id", tok.line, nullable=False)
    chip_id = _int(words[1], "chip id", tok.line, nullable=False)
    if chip_id not in chips.get(npu_id, ()):
        raise fail(KIND, f"NPU {npu_id} chip {chip_id} is not in the device table", tok.line)
    cells = [c.strip() for c in tok.cells[1:]]
    return {"npu_id": npu_id, "chip_id": chip_id,
            "pid": _int(cells[0], "process id", tok.line, nullable=False),
            "name": cells[1], "memory_mb": _int(cells[2], "process memory", tok.line),
            "container_pid": _int(cells[3], "process id in container", tok.line) if len(cells) > 3 else None,
            "_line": tok.line}


def _npu_model(npu: dict) -> NpuSmiNpu:
    chips = [NpuSmiChip(**c) for c in npu["chips"]]
    first = chips[0]
    return NpuSmiNpu(id=npu["id"], name=first.name, health=worst_health([c.health for c in chips]),
                     power_w=first.power_w, temp_c=first.temp_c, chips=chips)


@parser(KIND)
def parse_npu_smi_info(text: str) -> NpuSmiInfo:
    """Parse the output of `npu-smi info` (a prompt line before or after the table is allowed)."""
    lines = list(numbered_lines(text))
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, "empty output (npu-smi printed nothing)",
                         hint="run `npu-smi info` by hand and check its exit status and stderr")
    # the top rule opens the table (`+ npu-smi info`, bash's `set -x` trace of the command, does not)
    start = next((i for i, line in enumerate(lines)
                  if line.lstrip().startswith("+") and not line.lstrip().startswith(("+ ", "++"))), None)
    if start is None or not all(_is_paste_noise(line) for line in lines[:start]):
        raise _preamble_error(lines[:start] if start is not None else lines)
    first = lines[start]
    indent = first[:len(first) - len(first.lstrip())]
    last = max(i for i, line in enumerate(lines) if line.strip())
    toks = [_tokenize(line, indent) for line in lines[start:last + 1]]
    top = toks[0]
    if top.kind != "rule" or top.fill != "-":
        raise fail(KIND, "expected the table's top rule", top.line)
    layout = next((lay for lay in LAYOUTS.values() if lay.width == top.width), None)
    if layout is None:
        raise fail(KIND, f"unknown table width {top.width} (known: "
                         + ", ".join(f"{lay.width} ({lay.id})" for lay in LAYOUTS.values()) + ")", top.line)
    tbl = _Table(toks, top.width)
    tbl.take("rule", "the top rule", fill="-")
    ver = tbl.take("row", "the version row 'npu-smi X  Version: Y'", cells=1)
    m = _VERSION.fullmatch(ver.cells[0].strip())
    if not m:
        raise fail(KIND, "version row is not 'npu-smi X  Version: Y'", ver.line)
    tbl.take("rule", "the '+---' rule above the header", fill="-")
    second, row1, row2 = _header(tbl, layout)
    npus = _devices(tbl, second, row1, row2)
    process_table, procs = "absent", []
    _skip_blank_before_process_table(tbl)
    if not tbl.truncated and tbl.peek() is not None and tbl.peek().kind == "rule" and tbl.peek().fill == "-":
        tbl.take("rule", "the process table's top rule", fill="-")
        process_table, procs = "present", _processes(tbl, layout, npus)
    _check_trailer(tbl)
    return NpuSmiInfo(layout=layout.id, tool_version=m.group(1), driver_version=m.group(2),
                      npus=[_npu_model(n) for n in npus], process_table=process_table,
                      processes=[NpuSmiProcess(**p) for p in procs], truncated=tbl.truncated)


def _skip_blank_before_process_table(tbl: _Table) -> None:
    # A paste may carry blank lines between the device table and the process table (the MindFormers
    # 910ProB capture in tests/parsers/real/); only there are blank lines skipped, never inside a table.
    pos = tbl.pos
    while pos < len(tbl.toks) and tbl.toks[pos].kind == "text" and not tbl.toks[pos].line.strip():
        pos += 1
    if pos > tbl.pos and pos < len(tbl.toks) and tbl.toks[pos].kind == "rule" and tbl.toks[pos].fill == "-":
        tbl.pos = pos


def _check_trailer(tbl: _Table) -> None:
    # After a closed table only blank lines and one final shell prompt (a paste's next prompt) may
    # follow; trailing blank lines were dropped before tokenizing.
    rest = [t for t in tbl.toks[tbl.pos:] if t.line.strip()]
    if not rest:
        return
    line = rest[0].line
    if len(rest) == 1 and _is_prompt(line) and not tbl.truncated:
        return
    if rest[0].kind != "text" or line.lstrip()[:1] in ("|", "+") or tbl.truncated:
        raise fail(KIND, "table line out of place, or cut or garbled", line)
    raise fail(KIND, "unexpected line after the table", line)
