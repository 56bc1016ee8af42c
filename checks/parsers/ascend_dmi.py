"""Parsers of Ascend DMI (MindCluster ToolBox `ascend-dmi`) performance tests: FLOPS (`-f`), bandwidth
(`--bw -t h2d|d2h|d2d`) and the P2P matrix (`--bw -t p2p`), in their `normal` (table) format.

Layouts, from real captures (tests/parsers/real/INDEX.md):

* `ascend-dmi -f`: a rule of dashes, a header `Device  Execute Times  Duration(ms)  TFLOPS@FP16  Power(W)`
  (`TOPS@INT8` for int8; BF16/FP32/HF32 likewise), a rule, one row per device (`0`, `0/1` for both dies of
  an A3 NPU, `all` for `--all`; execute times with thousands commas), a rule. Without `-q` the tool first
  asks `... Do you want to continue?(Y/N)` and may echo the answer on a line of its own; several runs may
  follow each other. (FlagRT/FlagPerf A3 fixture, DMI 26.1; a 310P capture, CANN 8.5.0.)
* `ascend-dmi --bw -t h2d|d2h|d2d`: an optional title (`Bandwidth Test`), a header
  `ID  Size(Bytes)  Execute Times  Bandwidth(GB/s)  Elapsed Time(us)` and one row per device (and size, in
  the step mode without `-s`); rules of dashes may frame it. (FlagRT/FlagPerf fixture, DMI 26.1.)
* `ascend-dmi --bw -t p2p`: `Unidirectional Peer to Peer Test` and `Bidirectional Peer to Peer Test`
  sections, each a matrix: a header of destination ids, then one row per source id (0 on the diagonal).
  (FlagRT/FlagPerf fixture, `-m card`, DMI 26.1.)

Header cells are read by name (two or more spaces part them), row cells by position under them. Anything
else, a missing column or a value that is not a finite number is a ParseError naming the line.
"""

from __future__ import annotations

import re

from ascend_ready.checks.parsers._common import text_lines, to_float, to_int
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, parser

__all__ = [
    "BW_KIND",
    "FLOPS_KIND",
    "P2P_KIND",
    "DmiBandwidth",
    "DmiBandwidthRow",
    "DmiFlops",
    "DmiFlopsRow",
    "DmiP2p",
    "parse_dmi_bandwidth",
    "parse_dmi_flops",
    "parse_dmi_p2p",
]

FLOPS_KIND = "ascend-dmi-flops"
BW_KIND = "ascend-dmi-bw"
P2P_KIND = "ascend-dmi-p2p"

_RULE_RE = re.compile(r"^\s*-{10,}\s*$")
#: the confirmation ascend-dmi asks without -q, with the answer typed or piped behind it
_PROMPT_RE = re.compile(r"^This test will affect .*\(Y/N\)\s*[YyNn]?\s*$")
_ANSWER_RE = re.compile(r"^\s*[YyNn]\s*$")
_CELLS_RE = re.compile(r"\S+(?: \S+)*")
_UNIT_RE = re.compile(r"^(?P<unit>TFLOPS|TOPS)@(?P<dtype>FP16|BF16|FP32|HF32|INT8)$")
_DEVICE_RE = re.compile(r"^(?:\d+(?:/\d+)*|all)$")


def _cells(line: str) -> list[tuple[int, str]]:
    """(column, text) of each cell of a header line: runs of words separated by single spaces."""
    return [(m.start(), m.group()) for m in _CELLS_RE.finditer(line)]


def _skippable(line: Line) -> bool:
    return not line.strip() or bool(_RULE_RE.match(line))


class DmiFlopsRow(ParsedModel):
    device: str  # "0", "0/1" (the two dies of an A3 NPU) or "all"
    execute_times: int
    duration_ms: float
    value: float
    unit: str  # TFLOPS or TOPS
    dtype: str  # fp16, bf16, fp32, hf32, int8
    power_w: float


class DmiFlops(ParsedModel):
    """`ascend-dmi -f`: one row per device and run (several runs may follow each other)."""

    rows: list[DmiFlopsRow]


_FLOPS_HEADER = ("Device", "Execute Times", "Duration(ms)", None, "Power(W)")


@parser(FLOPS_KIND)
def parse_dmi_flops(text: str) -> DmiFlops:
    lines = text_lines(FLOPS_KIND, text)
    rows: list[DmiFlopsRow] = []
    header: tuple[str, str] | None = None  # (unit, dtype) of the table being read
    for line in lines:
        if _skippable(line) or _PROMPT_RE.match(line.strip()) or (header is None and _ANSWER_RE.match(line)):
            continue
        words = line.split()
        if words and words[0] == "Device":
            names = [c for _, c in _cells(line)]
            if len(names) != 5 or any(want and got != want
                                      for want, got in zip(_FLOPS_HEADER, names, strict=True)):
                raise fail(FLOPS_KIND, "not the FLOPS header (Device, Execute Times, Duration(ms), "
                           "TFLOPS@<type>, Power(W))", line)
            m = _UNIT_RE.match(names[3])
            if m is None:
                raise fail(FLOPS_KIND, f"unknown result column {names[3]!r} (TFLOPS@FP16, TOPS@INT8 ...)",
                           line)
            header = (m["unit"], m["dtype"].lower())
            continue
        if header is None:
            raise fail(FLOPS_KIND, "a line before the FLOPS table's header", line)
        if len(words) != 5 or not _DEVICE_RE.match(words[0]):
            raise fail(FLOPS_KIND, "not a FLOPS row (device, execute times, duration, value, power)", line)
        times = words[1].replace(",", "")
        if not re.fullmatch(r"\d{1,3}(?:,\d{3})*|\d+", words[1]):
            raise fail(FLOPS_KIND, f"execute times is not a count: {words[1]!r}", line)
        rows.append(DmiFlopsRow(
            device=words[0], execute_times=int(times),
            duration_ms=to_float(FLOPS_KIND, words[2], line, what="duration"),
            value=_positive(FLOPS_KIND, words[3], line, header[0]),
            unit=header[0], dtype=header[1],
            power_w=to_float(FLOPS_KIND, words[4], line, what="power"),
        ))
    if not rows:
        raise fail(FLOPS_KIND, "no FLOPS row", lines[-1],
                   hint="ascend-dmi printed no result: run it by hand (ascend-dmi -f -d N -q) and read "
                   "its log in /var/log/ascend-dmi/")
    return DmiFlops(rows=rows)


def _positive(kind: str, value: str, line: Line, what: str) -> float:
    number = to_float(kind, value, line, what=what)
    if number < 0:
        raise fail(kind, f"{what} is negative: {value!r}", line)
    return number


class DmiBandwidthRow(ParsedModel):
    device: int
    size_bytes: int
    execute_times: int
    bandwidth_gbps: float
    elapsed_us: float


class DmiBandwidth(ParsedModel):
    """`ascend-dmi --bw -t h2d|d2h|d2d`: one row per device (and transfer size, in step mode)."""

    title: str
    rows: list[DmiBandwidthRow]

    def largest(self, device: int) -> DmiBandwidthRow | None:
        """The device's row at its largest transfer size (what a step-mode sweep is judged by)."""
        mine = [r for r in self.rows if r.device == device]
        return max(mine, key=lambda r: r.size_bytes) if mine else None


_BW_COLUMNS = {"ID": "device", "Size(Bytes)": "size_bytes", "Execute Times": "execute_times",
               "Bandwidth(GB/s)": "bandwidth_gbps", "Elapsed Time(us)": "elapsed_us"}


@parser(BW_KIND)
def parse_dmi_bandwidth(text: str) -> DmiBandwidth:
    lines = text_lines(BW_KIND, text)
    title = ""
    columns: list[str] | None = None
    rows: list[DmiBandwidthRow] = []
    for line in lines:
        if _skippable(line) or _PROMPT_RE.match(line.strip()) or (columns is None and _ANSWER_RE.match(line)):
            continue
        if columns is None:
            names = [c for _, c in _cells(line)]
            if names and names[0] == "ID":
                if sorted(names) != sorted(_BW_COLUMNS):
                    raise fail(BW_KIND, "not the bandwidth header (ID, Size(Bytes), Execute Times, "
                               "Bandwidth(GB/s), Elapsed Time(us))", line)
                columns = [_BW_COLUMNS[n] for n in names]
                continue
            if not title and "Bandwidth" in line and not any(ch.isdigit() for ch in line):
                title = line.strip()
                continue
            raise fail(BW_KIND, "a line before the bandwidth table's header", line)
        words = line.split()
        if len(words) != len(columns):
            raise fail(BW_KIND, f"a row of {len(words)} cells under a header of {len(columns)}", line)
        raw = dict(zip(columns, words, strict=True))
        rows.append(DmiBandwidthRow(
            device=to_int(BW_KIND, raw["device"], line, what="device id"),
            size_bytes=to_int(BW_KIND, raw["size_bytes"], line, what="size"),
            execute_times=to_int(BW_KIND, raw["execute_times"], line, what="execute times"),
            bandwidth_gbps=_positive(BW_KIND, raw["bandwidth_gbps"], line, "bandwidth"),
            elapsed_us=_positive(BW_KIND, raw["elapsed_us"], line, "elapsed time"),
        ))
    if not rows:
        raise fail(BW_KIND, "no bandwidth row", lines[-1],
                   hint="ascend-dmi printed no result: run it by hand (ascend-dmi --bw -t h2d -d N -q)")
    return DmiBandwidth(title=title, rows=rows)


class DmiP2p(ParsedModel):
    """`ascend-dmi --bw -t p2p`: direction -> source id -> destination id -> GB/s (no diagonal)."""

    matrices: dict[str, dict[int, dict[int, float]]]

    def pairs(self, direction: str = "unidirectional") -> dict[tuple[int, int], float]:
        return {(s, d): v for s, row in self.matrices.get(direction, {}).items() for d, v in row.items()}


_SECTIONS = {"Unidirectional Peer to Peer Test": "unidirectional",
             "Bidirectional Peer to Peer Test": "bidirectional"}


@parser(P2P_KIND)
def parse_dmi_p2p(text: str) -> DmiP2p:
    lines = text_lines(P2P_KIND, text)
    matrices: dict[str, dict[int, dict[int, float]]] = {}
    section: str | None = None
    header: list[int] | None = None
    headers: dict[str, list[int]] = {}
    for line in lines:
        stripped = line.strip()
        if _skippable(line) or _PROMPT_RE.match(stripped) or (section is None and _ANSWER_RE.match(line)):
            continue
        if stripped in _SECTIONS:
            section, header = _SECTIONS[stripped], None
            if section in matrices:
                raise fail(P2P_KIND, f"a second {stripped!r} section", line)
            matrices[section] = {}
            continue
        if section is None:
            raise fail(P2P_KIND, "a line before the first 'Peer to Peer Test' section", line)
        words = stripped.split()
        if header is None:
            ids = [to_int(P2P_KIND, w, line, what="destination id") for w in words]
            if not ids or ids != sorted(set(ids)):
                raise fail(P2P_KIND, "the destination ids are not ascending", line)
            header = headers[section] = ids
            continue
        if len(words) != len(header) + 1:
            raise fail(P2P_KIND, f"a row of {len(words) - 1} values under {len(header)} destinations", line)
        src = to_int(P2P_KIND, words[0], line, what="source id")
        if src not in header or src in matrices[section]:
            raise fail(P2P_KIND, f"source {src} is not a destination of the header, or repeats", line)
        row = {}
        for dst, word in zip(header, words[1:], strict=True):
            value = _positive(P2P_KIND, word, line, "bandwidth")
            if dst != src:
                row[dst] = value
        matrices[section][src] = row
    if not matrices or any(not m for m in matrices.values()):
        raise fail(P2P_KIND, "no P2P matrix", lines[-1],
                   hint="ascend-dmi printed no result: run it by hand (ascend-dmi --bw -t p2p -q)")
    for name, m in matrices.items():
        if sorted(m) != headers[name]:
            missing = sorted(set(headers[name]) - set(m))
            raise fail(P2P_KIND, f"the {name} matrix has no row for source(s) {missing}", lines[-1])
    return DmiP2p(matrices=matrices)
