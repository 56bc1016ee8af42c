"""Byte-exact renderer of the `npu-smi info` main table from the npu-smi model (docs/design/simulator.md §3).

Stdlib only (it runs inside simulated nodes). Its LAYOUTS table is also what the parser
(`ascend_ready.checks.parsers.npu_smi_info`) checks headers against, so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COLUMNS", "LAYOUTS", "Column", "Geometry", "Layout", "health_rank", "render", "worst_health"]


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

_PROCESS_KEY_WIDTH = 8  # "NPU     Chip" in every known process table

#: Health words in order of severity; a word not listed ranks above all of them.
HEALTH_ORDER = ("OK", "Warning", "Alarm", "Critical")


def health_rank(health: str) -> int:
    """Severity of a health word: OK 0 < Warning < Alarm < Critical < any unknown word."""
    return HEALTH_ORDER.index(health) if health in HEALTH_ORDER else len(HEALTH_ORDER)


def worst_health(healths: list[str]) -> str:
    """The most severe of the chips' health words (the first one on ties)."""
    return max(healths, key=health_rank)


def _cell(fields: list[str], widths: tuple[int, ...], inner: int) -> str:
    # npu-smi pads every sub-column but the last to a fixed width; an over-long value keeps one
    # space so the columns stay readable (and parseable) instead of running together.
    out = " "
    for i, text in enumerate(fields[:-1]):
        out += text + " " * max(widths[i] - len(text), 1)
    return (out + fields[-1]).ljust(inner)


def _row(cells: list[str]) -> str:
    return "|" + "|".join(cells) + "|"


def _rule(fill: str, cells: tuple[int, ...]) -> str:
    return "+" + "+".join(fill * w for w in cells) + "+"


def _text(value: object, null: str = "NA") -> str:
    if value is None:
        return null
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def _number(value: object, kind: str) -> object:
    # State builders may hand 96 for a power or 36.0 for a temperature; print what npu-smi would.
    if kind == "float" and isinstance(value, int):
        return float(value)
    if kind == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _values(chip: dict, columns: tuple[str, ...], layout: Layout) -> list[str]:
    out = []
    for header in columns:
        col = COLUMNS[header]
        if len(col.keys) == 1:
            # A3 prints `-` for the power of a chip that does not report its own; 310 cards print NA.
            null = "-" if col.keys[0] == "power_w" and layout.family == "910" else "NA"
            out.append(_text(_number(chip.get(col.keys[0]), col.kind), null))
        else:
            width = layout.geometry.hugepages_used_width if col.keys[0] == "hugepages_used" else 5
            used, total = (_text(_number(chip.get(k), col.kind)) for k in col.keys)
            out.append(f"{used:<{width}}/ {total}")
    return out


def _check_columns(model: dict, layout: Layout) -> None:
    present = {k for h in layout.row1 + layout.row2 for k in COLUMNS[h].keys}
    absent = [k for c in COLUMNS.values() for k in c.keys if k not in present]
    for npu in model["npus"]:
        for chip in npu["chips"]:
            for key in absent:
                if chip.get(key) is not None:
                    raise ValueError(f"layout {layout.id} has no column for {key} "
                                     f"(NPU {npu['id']} chip {chip['chip_id']})")


def _second_key(model: dict) -> tuple[str, str | None]:
    used = {key for key in SECOND_KEYS.values()
            for npu in model["npus"] for chip in npu["chips"] if chip.get(key) is not None}
    if len(used) > 1:
        raise ValueError("a table shows either Phy-ID or Device ids, not both")
    for header, key in SECOND_KEYS.items():
        if key in used:
            return header, key
    return "", None


def render(model: dict) -> str:
    """The `npu-smi info` output for MODEL (a dict as the parser's `model_dump()` gives), newline-ended.

    Chip rows take name/health/power_w/temp_c from the chip, falling back to the NPU's keys when the
    chip lacks them. Processes print grouped by NPU in NPU order. Raises ValueError for a layout
    without known geometry or a model the layout cannot show.
    """
    layout = LAYOUTS.get(model.get("layout", ""))
    if layout is None or layout.geometry is None:
        known = ", ".join(k for k, v in LAYOUTS.items() if v.geometry)
        raise ValueError(f"cannot render layout {model.get('layout')!r} (renderable: {known})")
    geo = layout.geometry
    _check_columns(model, layout)
    second_header, second_key = _second_key(model)
    inner = layout.width - 2
    full_dash, joint_dash, joint_eq = _rule("-", (inner,)), _rule("-", geo.cells), _rule("=", geo.cells)
    chip_rule = full_dash if layout.family == "910" else joint_dash

    version = [f"npu-smi {model['tool_version']}", f"Version: {model['driver_version']}"]
    lines = [full_dash, _row([_cell(version, (geo.version_at,), inner)]), joint_dash]
    key_w, val_w = (geo.key_width,), geo.value_widths
    lines.append(_row([_cell(["NPU", "Name"], key_w, geo.cells[0]), _cell(["Health"], (), geo.cells[1]),
                       _cell(list(layout.row1), val_w, geo.cells[2])]))
    lines.append(_row([_cell(["Chip", second_header] if second_key else ["Chip"], key_w, geo.cells[0]),
                       _cell(["Bus-Id"], (), geo.cells[1]), _cell(list(layout.row2), val_w, geo.cells[2])]))
    lines.append(joint_eq)

    for npu in model["npus"]:
        if not npu["chips"]:
            raise ValueError(f"NPU {npu['id']} has no chips")
        for i, chip in enumerate(npu["chips"]):
            row1 = {k: chip.get(k, npu.get(k)) for k in CHIP_ROW1_KEYS}
            lines.append(_row([_cell([str(npu["id"]), row1["name"]], key_w, geo.cells[0]),
                               _cell([row1["health"]], (), geo.cells[1]),
                               _cell(_values(row1, layout.row1, layout), val_w, geo.cells[2])]))
            keys = [str(chip["chip_id"])] + ([_text(chip.get(second_key))] if second_key else [])
            lines.append(_row([_cell(keys, key_w, geo.cells[0]),
                               _cell([_text(chip.get("bus_id"))], (), geo.cells[1]),
                               _cell(_values(chip, layout.row2, layout), val_w, geo.cells[2])]))
            lines.append(joint_eq if i == len(npu["chips"]) - 1 else chip_rule)

    if model.get("process_table") == "present":
        lines += _process_table(model, layout, joint_dash, joint_eq)
    if model.get("truncated"):
        lines.pop()  # the capture stopped right before the closing rule
    return "\n".join(lines) + "\n"


def _process_table(model: dict, layout: Layout, joint_dash: str, joint_eq: str) -> list[str]:
    cells = layout.geometry.process_cells
    if cells is None:
        raise ValueError(f"layout {layout.id} has no known process-table geometry")
    headers = PROCESS_HEADERS[:len(cells)]
    header = [_cell(["NPU", "Chip"], (_PROCESS_KEY_WIDTH,), cells[0])]
    header += [_cell([h], (), w) for h, w in zip(headers[1:], cells[1:], strict=True)]
    lines = [joint_dash, _row(header), joint_eq]
    chips = {npu["id"]: [c["chip_id"] for c in npu["chips"]] for npu in model["npus"]}
    processes = model.get("processes", [])
    for proc in processes:
        if proc["chip_id"] not in chips.get(proc["npu_id"], ()):
            raise ValueError(f"process {proc['pid']} runs on NPU {proc['npu_id']} chip {proc['chip_id']}, "
                             "which the table lacks")
        if proc.get("container_pid") is not None and not layout.container_pid:
            raise ValueError(f"layout {layout.id} has no column for container_pid (process {proc['pid']})")
    for npu_id in chips:
        procs = [p for p in processes if p["npu_id"] == npu_id]
        for p in procs:
            values = [str(p["pid"]), p["name"], _text(p.get("memory_mb")),
                      _text(p.get("container_pid"))][:len(cells) - 1]
            lines.append(_row([_cell([str(p["npu_id"]), str(p["chip_id"])], (_PROCESS_KEY_WIDTH,), cells[0])]
                              + [_cell([v], (), w) for v, w in zip(values, cells[1:], strict=True)]))
        if not procs:
            lines.append(_row([_cell([f"No running processes found in NPU {npu_id}"], (), layout.width - 2)]))
        lines.append(joint_eq)
    return lines
