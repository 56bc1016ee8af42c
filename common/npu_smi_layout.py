"""The `npu-smi info` main-table layouts: columns, geometries and headers of every known tool version.

A neutral module: the parser (`ascend_ready.checks.parsers.npu_smi_info`) checks headers against it and
the simulator's renderer (`ascend_ready.sim.render.npu_smi_table`) draws with it, so the two cannot drift
apart and the product never imports the simulator. Stdlib only (the renderer runs inside simulated nodes).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CHIP_ROW1_KEYS",
    "COLUMNS",
    "HEALTH_ORDER",
    "LAYOUTS",
    "PROCESS_HEADERS",
    "PROCESS_KEY_WIDTH",
    "SECOND_KEYS",
    "Column",
    "Geometry",
    "Layout",
    "health_rank",
    "worst_health",
]


@dataclass(frozen=True)
class Column:
    """A value sub-column of the third table cell: one key (a scalar) or two (printed `used / total`)."""

    header: str
    keys: tuple[str, ...]
    kind: str  # "float" or "int"


#: Every value sub-column npu-smi is known to print, by its header word.
COLUMNS: dict[str, Column] = {c.header: c for c in (
    Column("Power(W)", ("power_w",), "float"),
    Column("Temp(C)", ("temp_c",), "int"),
    Column("Hugepages-Usage(page)", ("hugepages_used", "hugepages_total"), "int"),
    Column("AICore(%)", ("aicore_pct",), "int"),
    Column("Memory-Usage(MB)", ("memory_used_mb", "memory_total_mb"), "int"),
    Column("HBM-Usage(MB)", ("hbm_used_mb", "hbm_total_mb"), "int"),
)}

#: Row-1 fields of a chip (the line that carries the NPU id); the model keeps them per chip.
CHIP_ROW1_KEYS = ("name", "health", "power_w", "temp_c", "hugepages_used", "hugepages_total")


@dataclass(frozen=True)
class Geometry:
    """Where a layout puts things, measured on real captures (see the layout comments in LAYOUTS)."""

    cells: tuple[int, int, int]  # inner widths of the three device-table cells (between the `|`)
    key_width: int  # width of the NPU / Chip sub-column in the first cell
    value_widths: tuple[int, ...]  # widths of the value sub-columns of the third cell but the last
    version_at: int  # offset of "Version:" after the version cell's leading space
    process_cells: tuple[int, ...] | None  # inner widths of the process-table cells; None: not known
    hugepages_used_width: int = 5  # `%-Nd/ %d`: a 5-digit used value eats the space before `/`


@dataclass(frozen=True)
class Layout:
    """One table layout npu-smi has printed: its width, its columns and, where known, its geometry."""

    id: str
    width: int
    family: str  # "910": chips of one NPU split by a full-width rule; "310": by a rule with joints
    row1: tuple[str, ...]  # value sub-columns of the third cell, first row of a chip
    row2: tuple[str, ...]  # ... second row
    container_pid: bool = False  # the process table has a "Process id in container" column
    geometry: Geometry | None = None  # None: parsed only (no verified capture to copy it from)


_P, _T, _H = "Power(W)", "Temp(C)", "Hugepages-Usage(page)"
_A, _M, _B = "AICore(%)", "Memory-Usage(MB)", "HBM-Usage(MB)"

LAYOUTS: dict[str, Layout] = {lay.id: lay for lay in (
    # Atlas 300I (310 x4), npu-smi 20.2 (gpustack fixture copied from the Huawei manual).
    Layout("310-80", 80, "310", (_P, _T), (_A, _M),
           geometry=Geometry((19, 17, 40), 8, (18,), 37, None)),
    # 310 with a hugepages column (INDEX.md; no verified capture).
    Layout("310-102", 102, "310", (_P, _T, _H), (_A, _M)),
    # First-gen 910A, tool 1.8.x/1.9.x (GUOEHI slurm doc).
    Layout("910a-86", 86, "910", (_P, _T), (_A, _M, _B),
           geometry=Geometry((22, 15, 45), 6, (11, 18), 33, None)),
    # 910A 22.0.x / 24.1.RC2 docs (INDEX.md; no verified capture).
    Layout("910-93", 93, "910", (_P, _T, _H), (_A, _M, _B)),
    # 910B / A2 and A3 (Ascend910_93), drivers 23.0 - 25.x (vllm-ascend issues 362, 2666, 6299).
    Layout("910-98", 98, "910", (_P, _T, _H), (_A, _M, _B),
           geometry=Geometry((27, 15, 52), 6, (12, 18), 33, (27, 15, 26, 25))),
    # 310P / 310B (nputop fixtures, HAMi blog); hugepages `0     / 0` as printed by 23.0 - 25.5.
    Layout("310p-106", 106, "310", (_P, _T, _H), (_A, _M),
           geometry=Geometry((31, 17, 54), 8, (13, 18), 49, (31, 17, 26, 27), hugepages_used_width=6)),
    # 26.x drivers (triton-ascend docs, 26.0.rc1); process rows inferred from the header geometry.
    Layout("910-116", 116, "910", (_P, _T, _H), (_A, _M, _B), container_pid=True,
           geometry=Geometry((27, 15, 70), 6, (21, 24), 44, (27, 15, 20, 23, 25))),
)}

#: Chip-row-2 key headers: which id (if any) follows the chip id.
SECOND_KEYS = {"Phy-ID": "phy_id", "Device": "device_id"}

PROCESS_HEADERS = ("NPU Chip", "Process id", "Process name", "Process memory(MB)", "Process id in container")

PROCESS_KEY_WIDTH = 8  # "NPU     Chip" in every known process table

#: Health words in order of severity; a word not listed ranks above all of them.
HEALTH_ORDER = ("OK", "Warning", "Alarm", "Critical")


def health_rank(health: str) -> int:
    """Severity of a health word: OK 0 < Warning < Alarm < Critical < any unknown word."""
    return HEALTH_ORDER.index(health) if health in HEALTH_ORDER else len(HEALTH_ORDER)


def worst_health(healths: list[str]) -> str:
    """The most severe of the chips' health words (the first one on ties)."""
    return max(healths, key=health_rank)
