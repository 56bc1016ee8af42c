"""Byte-exact renderer of the `npu-smi info` main table from the npu-smi model (docs/design/simulator.md §3).

Stdlib only (it runs inside simulated nodes). The layouts it draws are the neutral
`ascend_ready.npu_smi_layout` table, the same one the parser checks headers against.
"""

from __future__ import annotations

from ascend_ready.npu_smi_layout import (  # noqa: F401  (re-exported for the simulator and its tests)
    CHIP_ROW1_KEYS,
    COLUMNS,
    HEALTH_ORDER,
    LAYOUTS,
    PROCESS_HEADERS,
    PROCESS_KEY_WIDTH,
    SECOND_KEYS,
    Column,
    Geometry,
    Layout,
    health_rank,
    worst_health,
)

__all__ = ["COLUMNS", "LAYOUTS", "Column", "Geometry", "Layout", "health_rank", "render", "worst_health"]


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
    header = [_cell(["NPU", "Chip"], (PROCESS_KEY_WIDTH,), cells[0])]
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
            lines.append(_row([_cell([str(p["npu_id"]), str(p["chip_id"])], (PROCESS_KEY_WIDTH,), cells[0])]
                              + [_cell([v], (), w) for v, w in zip(values, cells[1:], strict=True)]))
        if not procs:
            lines.append(_row([_cell([f"No running processes found in NPU {npu_id}"], (), layout.width - 2)]))
        lines.append(joint_eq)
    return lines
