"""Parser of `npu-smi info -t topo`: the NPU-to-NPU link matrix (HCCS, PIX, PXB, PHB, SYS, SIO, HCCS_SW, UB)
with, on most hosts, each NPU's CPU affinity, and the legend npu-smi prints under it.

npu-smi prints a header (`\\t   ` then `NPU%-8d` per device, or `Phy-ID%-5d` on A3, then `CPU Affinity`
except on ARM A3 hosts), one row per device (`%-11s` per cell, the affinity last) and `Legend:` lines.
Pastes drop the leading TAB or expand it; cells are read as words, never by column offsets.
"""

from __future__ import annotations

import re

from pydantic import Field

from ascend_ready.checks.parsers._common import content, strip_preamble, text_lines
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, parser

__all__ = ["KIND", "LINK_TYPES", "NpuTopo", "parse_npu_smi_topo"]

KIND = "npu-smi-topo"

#: the link types npu-smi's topology legend defines (print_npu_topo_type_legend; UB on Ascend 950)
LINK_TYPES = frozenset({"X", "SYS", "PHB", "PIX", "PXB", "HCCS", "SIO", "HCCS_SW", "UB", "NA"})

_DEVICE_RE = re.compile(r"NPU\d+|Phy-ID\d+")
_AFFINITY_RE = re.compile(r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*|NA")
_LEGEND_RE = re.compile(r"^\s+(?P<type>[A-Z_]+)\s*= (?P<text>\S.*?)\s*$")


class NpuTopo(ParsedModel):
    """`npu-smi info -t topo`."""

    #: the device names as printed, in order (`NPU0` .. `NPU7`; `Phy-ID12` on A3, whose ids are physical)
    devices: list[str]
    #: row device -> column device -> link type as printed (`X` on the diagonal)
    links: dict[str, dict[str, str]]
    #: device -> the CPUs npu-smi names affine (`144-167`, `0-63,128-191`); empty where the column is not
    #: printed (A3 on ARM hosts: its NPUs reach the CPUs through a switch board, no unique affinity)
    cpu_affinity: dict[str, str]
    #: device -> NUMA node; npu-smi (through 26.x) prints no NUMA column, so this stays empty: derive the
    #: node from cpu_affinity and `lscpu` where one is needed
    numa_node: dict[str, str] = Field(default_factory=dict)
    #: link type -> its legend text, as printed under the matrix (empty when the paste stops before it)
    legend: dict[str, str]

    def link(self, a: str, b: str) -> str:
        """The link type between devices `a` and `b` (`HCCS`); KeyError for a device not printed."""
        return self.links[a][b]

    @property
    def matrix(self) -> dict[tuple[str, str], str]:
        """{(a, b): link type} for every ordered pair, the diagonal (`X`) included."""
        return {(a, b): kind for a, row in self.links.items() for b, kind in row.items()}

    def pairs_not(self, link_type: str) -> list[tuple[str, str, str]]:
        """Each pair of distinct devices (once, in device order) whose link is not `link_type`, as
        (a, b, their link): `pairs_not("HCCS") == []` says every pair is HCCS-connected."""
        return [(a, b, self.links[a][b]) for i, a in enumerate(self.devices) for b in self.devices[i + 1:]
                if self.links[a][b] != link_type]


@parser(KIND)
def parse_npu_smi_topo(text: str) -> NpuTopo:
    """Parse `npu-smi info -t topo`; every device must have its row, every cell a known link type, `X`
    exactly on the diagonal and the matrix symmetric. A garbled or cut matrix is a ParseError."""
    lines = list(content(strip_preamble(text_lines(KIND, text), ("npu-smi",))))
    if not lines:
        raise fail(KIND, "no topology matrix (only prompts)",
                   hint="pass the output of `npu-smi info -t topo`")
    header = lines[0]
    devices, affinity = _header(header)
    links: dict[str, dict[str, str]] = {}
    cpu_affinity: dict[str, str] = {}
    pos = 1
    for device in devices:
        if pos >= len(lines) or lines[pos].strip() == "Legend:":
            raise fail(KIND, f"no row for {device}: the matrix has {len(links)} of {len(devices)} rows "
                             "(output cut off?)", lines[pos - 1])
        line = lines[pos]
        cells = line.split()
        if cells[0] != device:
            raise fail(KIND, f"expected the row of {device}", line)
        want = len(devices) + (1 if affinity else 0)
        if len(cells) - 1 != want:
            raise fail(KIND, f"row of {device} has {len(cells) - 1} cells, expected {want}", line)
        row = dict(zip(devices, cells[1:len(devices) + 1], strict=True))
        for other, kind in row.items():
            if kind not in LINK_TYPES:
                raise fail(KIND, f"unknown link type {kind!r} ({device} to {other})", line,
                           hint="known: " + ", ".join(sorted(LINK_TYPES)))
            if (kind == "X") != (other == device):
                raise fail(KIND, f"{device} to {other} is {kind!r}: 'X' (self) belongs on the diagonal only",
                           line)
        if affinity:
            value = cells[-1]
            if not _AFFINITY_RE.fullmatch(value):
                raise fail(KIND, f"CPU affinity {value!r} of {device} is not a CPU list", line)
            cpu_affinity[device] = value
        links[device] = row
        pos += 1
    _check_symmetric(links, devices, lines)
    legend = _legend(lines[pos:])
    return NpuTopo(devices=devices, links=links, cpu_affinity=cpu_affinity, legend=legend)


def _header(line: Line) -> tuple[list[str], bool]:
    words = line.split()
    affinity = words[-2:] == ["CPU", "Affinity"]
    names = words[:-2] if affinity else words
    if not names:
        raise fail(KIND, "expected the header 'NPU0  NPU1 ...  [CPU Affinity]'", line)
    for name in names:
        if name.startswith("NIC"):
            raise fail(KIND, f"NIC column {name!r}: this npu-smi prints NIC rows the parser does not read",
                       line, hint="report the output so the parser can learn it")
        if not _DEVICE_RE.fullmatch(name):
            raise fail(KIND, f"unknown column {name!r} (expected NPU<N> or Phy-ID<N>)", line)
    if len(set(names)) != len(names):
        raise fail(KIND, "a device column is printed twice", line)
    if len({re.sub(r"\d+$", "", n) for n in names}) != 1:
        raise fail(KIND, "NPU<N> and Phy-ID<N> columns mixed", line)
    return names, affinity


def _check_symmetric(links: dict[str, dict[str, str]], devices: list[str], lines: list[Line]) -> None:
    for i, a in enumerate(devices):
        for b in devices[i + 1:]:
            if links[a][b] != links[b][a]:
                raise fail(KIND, f"{a} to {b} is {links[a][b]} but {b} to {a} is {links[b][a]} (garbled?)",
                           lines[1 + devices.index(b)])


def _legend(lines: list[Line]) -> dict[str, str]:
    """The `Legend:` block; nothing else may follow the matrix."""
    if not lines:
        return {}
    if lines[0].strip() != "Legend:":
        raise fail(KIND, "unexpected line after the matrix (expected 'Legend:')", lines[0])
    legend: dict[str, str] = {}
    for line in lines[1:]:
        match = _LEGEND_RE.match(line)
        if not match or match["type"] not in LINK_TYPES:
            raise fail(KIND, "expected a legend line 'TYPE = meaning'", line)
        legend[match["type"]] = match["text"]
    return legend
