"""Parsers of npu-smi's key/value views: `npu-smi info -t board|health|usages|temp|power|common|memory`,
`npu-smi info -m` (chip mapping) and `npu-smi info -l` (card list).

npu-smi prints these with `printf("\\t%-30s : %s\\n", key, value)` (a TAB, the key padded to 30 columns,
` : `, the value); copies often carry 8 spaces instead of the TAB, and key spellings move between
driver versions (`NPU Temperature (C)` vs `Temperature(C)`), so keys are matched with spaces and case
ignored. A view is a list of sections separated by blank lines (or by a key that repeats); the section
that holds `Chip ID` is that chip's, one that holds `Chip Name : mcu|MCU|3559` without a `Chip ID` is
an on-board MCU/CPU section (on some views the `Chip ID` line ends its section, on others it starts it,
so a section is identified by what it contains, not by where the line is). Continuation lines (empty
key, as in multi-line `Error Information`) belong to the previous key, even across blank lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import Field

from ascend_ready.checks.parsers._common import (
    NA_VALUES,
    is_prompt,
    opt_float,
    opt_int,
    strip_preamble,
    text_lines,
    to_int,
)
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, parser

_KV_RE = re.compile(r"^[\t ]*(?P<key>[^:]*?)[\t ]*:(?:[\t ]+(?P<value>.*?))?[\t ]*$")

#: npu-smi's own error lines, with what the user should do about them.
_TOOL_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^\s*Invalid (card|chip|device) id", re.I),
     "the NPU/chip id does not exist on this host: list the valid ids with `npu-smi info -l` / `-m`"),
    (re.compile(r"dcmi model initialized failed|DrvMngGetConsoleLogLevel failed", re.I),
     "npu-smi could not talk to the driver (device busy, not mounted into the container, or driver "
     "not loaded): run it on the host as root and check `lsmod | grep drv_davinci`"),
    (re.compile(r"^\s*(There is no NPU|This device do(es|se) not support|.*not support)", re.I),
     "this npu-smi view is not available for this device or product"),
    (re.compile(r"^\s*(Usage|Options|Commands)\b", re.I),
     "npu-smi printed its usage text: the command line was rejected"),
)


#: a command line typed without a prompt above the output (`/usr/local/bin/npu-smi info -i 0 -t board`)
_COMMANDS = ("npu-smi",)


def _norm(key: str) -> str:
    return re.sub(r"\s+", "", key).lower()


Entry = tuple[str, list[str], Line]  # key, value lines (continuations appended), line of the key


def _sections(kind: str, text: str) -> list[list[Entry]]:
    """The key/value sections of an npu-smi view (see module docstring)."""
    sections: list[list[Entry]] = [[]]
    last: Entry | None = None
    for line in strip_preamble(text_lines(kind, text), _COMMANDS):
        if not line.strip():
            if sections[-1]:
                sections.append([])
            continue
        if is_prompt(line):
            continue
        match = _KV_RE.match(line)
        if not match or _norm(match["key"]) in {"usage", "options", "commands"}:
            for pattern, hint in _TOOL_ERRORS:
                if pattern.search(line):
                    raise fail(kind, "npu-smi reported an error instead of data", line, hint=hint)
            raise fail(kind, "expected 'Key : value'", line)
        key, value = match["key"], (match["value"] or "")
        if not key:
            if last is None:
                raise fail(kind, "continuation line before any key", line)
            last[1].append(value)
            continue
        if any(_norm(k) == _norm(key) for k, _v, _l in sections[-1]):
            sections.append([])
        last = (key, [value], line)
        sections[-1].append(last)
    sections = [section for section in sections if section]
    if not sections:
        raise fail(kind, "no 'Key : value' lines (only prompts)", hint="pass the npu-smi output itself")
    return sections


def _find(section: list[Entry], *keys: str) -> Entry | None:
    wanted = {_norm(k) for k in keys}
    return next((entry for entry in section if _norm(entry[0]) in wanted), None)


def _value(entry: Entry) -> str:
    return " ".join(v for v in entry[1] if v)


def _fields(section: list[Entry]) -> dict[str, str]:
    return {key: " ".join(v for v in values if v) for key, values, _line in section}


def _pci_id(kind: str, value: str, line: Line) -> str | None:
    """`0x19E5` -> "19e5" (the spelling lspci and sysfs use)."""
    if value in NA_VALUES:
        return None
    if not re.fullmatch(r"0x[0-9A-Fa-f]{1,4}", value):
        raise fail(kind, f"PCI id is not a 0xHHHH hex number: {value!r}", line)
    return f"{int(value, 16):04x}"


def _text(kind: str, value: str, line: Line) -> str | None:
    return None if value in NA_VALUES else value


Conv = Callable[[str, str, Line], Any]
_INT: Conv = opt_int
_FLOAT: Conv = opt_float


def _typed(kind: str, section: list[Entry], spec: dict[str, tuple[Conv, tuple[str, ...]]]) -> dict[str, Any]:
    """Typed attributes from a section: attr -> converter(first present key's value), None if absent."""
    out: dict[str, Any] = {}
    for attr, (conv, keys) in spec.items():
        entry = _find(section, *keys)
        out[attr] = None if entry is None else conv(kind, _value(entry), entry[2])
    return out


# -- per-chip metrics (usages / temp / power / common / memory) -------------------------------------

_CHIP_SPEC: dict[str, tuple[Conv, tuple[str, ...]]] = {
    "temperature_c": (_INT, ("NPU Temperature (C)", "Temperature (C)", "NPU Real-time Temperature(C)",
                             "Chip Temperature(C)")),
    "power_w": (_FLOAT, ("NPU Real-time Power(W)", "Power Dissipation(W)", "Rated Power Dissipation(W)",
                         "Power(W)", "Chip Power(W)")),
    "hbm_capacity_mb": (_INT, ("HBM Capacity(MB)",)),
    "hbm_usage_pct": (_INT, ("HBM Usage Rate(%)",)),
    "hbm_bandwidth_usage_pct": (_INT, ("HBM Bandwidth Usage Rate(%)",)),
    "hbm_clock_mhz": (_INT, ("HBM Clock Speed(MHz)",)),
    "hbm_temperature_c": (_INT, ("HBM Temperature(C)",)),
    "ddr_capacity_mb": (_INT, ("DDR Capacity(MB)", "Memory Capacity(MB)", "Capacity(MB)")),
    "ddr_usage_pct": (_INT, ("DDR Usage Rate(%)",)),
    "ddr_clock_mhz": (_INT, ("DDR Clock Speed(MHz)", "Clock Speed(MHz)")),
    "memory_usage_pct": (_INT, ("Memory Usage Rate(%)",)),
    "hugepages_total": (_INT, ("DDR Hugepages Total(page)", "Hugepages Total(page)")),
    "hugepages_usage_pct": (_INT, ("DDR Hugepages Usage Rate(%)", "Hugepages Usage Rate(%)")),
    "aicore_usage_pct": (_INT, ("Aicore Usage Rate(%)",)),
    "aivector_usage_pct": (_INT, ("Aivector Usage Rate(%)",)),
    "aicube_usage_pct": (_INT, ("Aicube Usage Rate(%)",)),
    "aicpu_usage_pct": (_INT, ("Aicpu Usage Rate(%)",)),
    "ctrlcpu_usage_pct": (_INT, ("Ctrlcpu Usage Rate(%)",)),
    "npu_utilization_pct": (_INT, ("NPU Utilization(%)",)),
    "aicore_freq_mhz": (_INT, ("Aicore Freq(MHZ)",)),
    "aicore_cur_freq_mhz": (_INT, ("Aicore curFreq(MHZ)",)),
    "aicore_count": (_INT, ("Aicore Count",)),
    # `npu-smi info -t ecc` (Atlas npu-smi reference, "querying ECC information"): counts since the last
    # `npu-smi clear -t ecc-info`, and the HBM pages isolated for them
    "hbm_single_bit_errors": (_INT, ("HBM Single Bit Error Count",)),
    "hbm_double_bit_errors": (_INT, ("HBM Double Bit Error Count",)),
    "hbm_single_bit_isolated_pages": (_INT, ("HBM Single Bit Isolated Pages Count",)),
    "hbm_double_bit_isolated_pages": (_INT, ("HBM Double Bit Isolated Pages Count",)),
    "ddr_single_bit_errors": (_INT, ("DDR Single Bit Error Count",)),
    "ddr_double_bit_errors": (_INT, ("DDR Double Bit Error Count",)),
}


class ChipMetrics(ParsedModel):
    """One chip's (or on-board MCU/CPU's) values from an `npu-smi info -t ...` view; None = not shown/NA."""

    chip_id: int | None
    chip_name: str | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    hbm_capacity_mb: int | None = None
    hbm_usage_pct: int | None = None
    hbm_bandwidth_usage_pct: int | None = None
    hbm_clock_mhz: int | None = None
    hbm_temperature_c: int | None = None
    ddr_capacity_mb: int | None = None
    ddr_usage_pct: int | None = None
    ddr_clock_mhz: int | None = None
    memory_usage_pct: int | None = None
    hugepages_total: int | None = None
    hugepages_usage_pct: int | None = None
    aicore_usage_pct: int | None = None
    aivector_usage_pct: int | None = None
    aicube_usage_pct: int | None = None
    aicpu_usage_pct: int | None = None
    ctrlcpu_usage_pct: int | None = None
    npu_utilization_pct: int | None = None
    aicore_freq_mhz: int | None = None
    aicore_cur_freq_mhz: int | None = None
    aicore_count: int | None = None
    hbm_single_bit_errors: int | None = None
    hbm_double_bit_errors: int | None = None
    hbm_single_bit_isolated_pages: int | None = None
    hbm_double_bit_isolated_pages: int | None = None
    ddr_single_bit_errors: int | None = None
    ddr_double_bit_errors: int | None = None
    #: board sensors of an MCU section, e.g. {"LM75A_TE (C)": 36}
    sensors_c: dict[str, int | None] = Field(default_factory=dict)
    #: every key of the section as printed, for values this model does not name
    fields: dict[str, str]


class NpuSmiChipView(ParsedModel):
    """`npu-smi info -t usages|temp|power|common|memory [-i N [-c C]]`."""

    view: str
    npu_id: int | None
    chip_count: int | None
    chips: list[ChipMetrics]
    #: MCU / CPU sections (board sensors), not NPU chips
    aux: list[ChipMetrics]


_AUX_NAMES = {"mcu", "3559"}
_SENSOR_RE = re.compile(r"^(?!NPU |HBM |Chip )\S+\s*\(C\)$")

_TEMPS = _CHIP_SPEC["temperature_c"][1]
_POWERS = _CHIP_SPEC["power_w"][1]
_RATES = ("Aicore Usage Rate(%)", "Memory Usage Rate(%)", "HBM Usage Rate(%)")
_CPU_RATES = ("Aicpu Usage Rate(%)", "Ctrlcpu Usage Rate(%)")
_CLOCKS = ("HBM Clock Speed(MHz)", "DDR Clock Speed(MHz)", "Clock Speed(MHz)")
_ECC = ("HBM Single Bit Error Count", "DDR Single Bit Error Count")

#: view -> (groups of keys: each chip section has one key of every group, keys it never has). The views
#: share keys (common repeats usages' rates and temp's temperature), so a view is told by the
#: combination; passing one view's output as another's kind is a ParseError, not a half-empty model.
_VIEW_KEYS: dict[str, tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]] = {
    "usages": ((_CPU_RATES,), _TEMPS + _CLOCKS),
    "temp": ((_TEMPS,), _RATES + _CPU_RATES + _POWERS + _CLOCKS),
    "power": ((_POWERS,), _RATES + _CPU_RATES + _TEMPS + _CLOCKS),
    "common": ((_TEMPS, _RATES), _CPU_RATES + _CLOCKS),
    "memory": ((_CLOCKS,), _RATES + _CPU_RATES),
    "ecc": ((_ECC,), _RATES + _CPU_RATES + _TEMPS + _CLOCKS),
}


def _is_view(section: list[Entry], view: str) -> bool:
    required, forbidden = _VIEW_KEYS[view]
    return all(_find(section, *group) for group in required) and _find(section, *forbidden) is None


def _sensor(kind: str, entry: Entry) -> int | None:
    # a board sensor that could not be read prints `Failed` (npu-smi's TEMP_VALUE_INVALID)
    value = _value(entry)
    return None if value == "Failed" else opt_int(kind, value, entry[2], what=entry[0])


def _chip_view(view: str) -> Callable[[str], NpuSmiChipView]:
    kind = f"npu-smi-{view}"

    def parse(text: str) -> NpuSmiChipView:
        npu_id = chip_count = None
        chips: list[ChipMetrics] = []
        aux: list[ChipMetrics] = []
        for section in _sections(kind, text):
            npu = _find(section, "NPU ID")
            if npu is not None:
                npu_id = to_int(kind, _value(npu), npu[2], what="NPU ID")
            count = _find(section, "Chip Count")
            if count is not None:
                chip_count = to_int(kind, _value(count), count[2], what="Chip Count")
            chip = _find(section, "Chip ID")
            name = _find(section, "Chip Name")
            rest = [e for e in section if _norm(e[0]) not in {_norm("NPU ID"), _norm("Chip Count")}]
            if chip is None and name is None:
                if rest and (npu is not None or count is not None):
                    raise fail(kind, "values outside any chip section", rest[0][2])
                if rest:  # `-i N -c C` views of one chip print no Chip ID line
                    chip_entry = None
                else:
                    continue
            else:
                chip_entry = chip
            metrics = _typed(kind, section, _CHIP_SPEC)
            sensors = {entry[0]: _sensor(kind, entry) for entry in section
                       if _SENSOR_RE.match(entry[0].strip())}
            model = ChipMetrics(
                chip_id=None if chip_entry is None else to_int(kind, _value(chip_entry), chip_entry[2],
                                                               what="Chip ID"),
                chip_name=None if name is None else _value(name),
                sensors_c=sensors, fields=_fields(section), **metrics)
            is_aux = chip is None and name is not None and _value(name).lower() in _AUX_NAMES
            if not is_aux and not _is_view(section, view):
                raise fail(kind, f"not an `npu-smi info -t {view}` section (its keys differ)", section[0][2],
                           hint=f"pass the output of `npu-smi info -t {view} -i <id>`")
            (aux if is_aux else chips).append(model)
        if not chips:
            raise fail(kind, f"no chip section found in `npu-smi info -t {view}` output")
        if chip_count is not None and len(chips) != chip_count:
            raise fail(kind, f"Chip Count says {chip_count} but {len(chips)} chip sections were printed "
                             "(truncated output?)")
        return NpuSmiChipView(view=view, npu_id=npu_id, chip_count=chip_count, chips=chips, aux=aux)

    parse.__name__ = f"parse_npu_smi_{view}"
    parse.__doc__ = f"Parse `npu-smi info -t {view}` output (kind {kind!r})."
    return parser(kind)(parse)


parse_npu_smi_usages = _chip_view("usages")
parse_npu_smi_temp = _chip_view("temp")
parse_npu_smi_power = _chip_view("power")
parse_npu_smi_common = _chip_view("common")
parse_npu_smi_memory = _chip_view("memory")
parse_npu_smi_ecc = _chip_view("ecc")


# -- board -------------------------------------------------------------------------------------------

_BOARD_SPEC: dict[str, tuple[Conv, tuple[str, ...]]] = {
    "npu_id": (_INT, ("NPU ID",)),
    "chip_id": (_INT, ("Chip ID",)),
    "chip_count": (_INT, ("Chip Count",)),
    "chip_name": (_text, ("Chip Name",)),
    "chip_type": (_text, ("Chip Type",)),
    "product_name": (_text, ("Product Name",)),
    "model": (_text, ("Model",)),
    "serial_number": (_text, ("Serial Number",)),
    "software_version": (_text, ("Software Version",)),
    "firmware_version": (_text, ("Firmware Version",)),
    "compatibility": (_text, ("Compatibility",)),
    "board_id": (_text, ("Board ID",)),
    "pcie_bus_id": (_text, ("PCIe Bus Info",)),
    "slot_id": (_INT, ("Slot ID",)),
    "pci_vendor_id": (_pci_id, ("PCI Vendor ID",)),
    "pci_device_id": (_pci_id, ("PCI Device ID",)),
    "subsystem_vendor_id": (_pci_id, ("Subsystem Vendor ID",)),
    "subsystem_device_id": (_pci_id, ("Subsystem Device ID",)),
}


class NpuSmiBoard(ParsedModel):
    """`npu-smi info -t board -i N [-c C]`: card (or, with -c, chip) identity and versions."""

    npu_id: int
    chip_id: int | None
    chip_count: int | None
    chip_name: str | None
    chip_type: str | None
    product_name: str | None
    model: str | None
    serial_number: str | None
    #: the driver version the card reports (`Software Version`)
    software_version: str | None
    firmware_version: str | None
    compatibility: str | None
    board_id: str | None
    #: `0000:C1:00.0` as printed
    pcie_bus_id: str | None
    slot_id: int | None
    pci_vendor_id: str | None
    pci_device_id: str | None
    subsystem_vendor_id: str | None
    subsystem_device_id: str | None
    fields: dict[str, str]


@parser("npu-smi-board")
def parse_npu_smi_board(text: str) -> NpuSmiBoard:
    """Parse `npu-smi info -t board` output."""
    kind = "npu-smi-board"
    sections = _sections(kind, text)
    if len(sections) != 1:
        raise fail(kind, "expected one block of board values", sections[1][0][2])
    section = sections[0]
    if _find(section, "NPU ID") is None:
        raise fail(kind, "no 'NPU ID' line: not `npu-smi info -t board` output", section[0][2])
    required = _BOARD_CHIP_KEYS if _find(section, "Chip ID") is not None else _BOARD_CARD_KEYS
    _require_keys(kind, section, required, "npu-smi info -t board")
    return NpuSmiBoard(fields=_fields(section), **_typed(kind, section, _BOARD_SPEC))


#: Keys every board view prints (910A 23.0.5 and 910B 25.5.1 captures, and npu-smi's print_board_info):
#: the card view (`-i N`) ends with `Chip Count`, the chip view (`-i N -c C`) with `Firmware Version`, so a
#: capture cut after a few lines misses one of them.
_BOARD_CARD_KEYS = ("NPU ID", "Software Version", "Firmware Version", "PCI Vendor ID", "PCI Device ID",
                    "Chip Count")
_BOARD_CHIP_KEYS = ("NPU ID", "Chip ID", "Chip Name", "Firmware Version")


def _require_keys(kind: str, section: list[Entry], keys: tuple[str, ...], command: str) -> None:
    """A ParseError naming the keys of `keys` the section lacks (a cut or partial capture)."""
    missing = [key for key in keys if _find(section, key) is None]
    if missing:
        raise fail(kind, "missing " + ", ".join(repr(k) for k in missing) + " (output cut off?)",
                   section[-1][2], hint=f"pass the whole output of `{command}`")


# -- health ------------------------------------------------------------------------------------------

class NpuSmiHealth(ParsedModel):
    """`npu-smi info -t health -i N [-c C]`."""

    #: OK, Warning, Alarm, Critical; None when the tool prints NA (vNPU in a container)
    health: str | None
    #: hex error codes as printed (`A4025021`); empty when `Error Code : NA`
    error_codes: list[str]
    #: one text per error (multi-line `Error Information` continuations)
    error_information: list[str]


@parser("npu-smi-health")
def parse_npu_smi_health(text: str) -> NpuSmiHealth:
    """Parse `npu-smi info -t health` output."""
    kind = "npu-smi-health"
    entries = [entry for section in _sections(kind, text) for entry in section]
    statuses = [e for e in entries if _norm(e[0]) in {_norm("Health Status"), _norm("Health")}]
    if not statuses:
        raise fail(kind, "no 'Health Status' line: not `npu-smi info -t health` output", entries[0][2])
    if len(statuses) > 1:
        raise fail(kind, "several chips' health in one output", statuses[1][2],
                   hint="query one chip at a time: npu-smi info -t health -i <id> -c <chip>")
    status = statuses[0]
    health = _text(kind, _value(status), status[2])
    if health is not None and not re.fullmatch(r"[A-Za-z][A-Za-z ]*", health):
        raise fail(kind, f"unknown health value {health!r}", status[2])
    codes: list[str] = []
    code = _find(entries, "Error Code")
    if code is not None and _value(code) not in NA_VALUES:
        codes = _value(code).split()
        bad = [c for c in codes if not re.fullmatch(r"(0x)?[0-9A-Fa-f]+", c)]
        if bad:
            raise fail(kind, f"error code is not hex: {bad[0]!r}", code[2])
    info_entry = _find(entries, "Error Information")
    info = [] if info_entry is None else [v for v in info_entry[1] if v and v not in NA_VALUES]
    known = {_norm(k) for k in ("Health Status", "Health", "Error Code", "Error Information", "NPU ID",
                                "Chip ID", "Chip Count", "Chip Name")}
    for key, _values, line in entries:
        if _norm(key) not in known:
            raise fail(kind, f"unexpected key {key!r} in health output", line)
    return NpuSmiHealth(health=health, error_codes=codes, error_information=info)


# -- -m (chip mapping) and -l (card list) -----------------------------------------------------------

class ChipMapping(ParsedModel):
    npu_id: int
    chip_id: int
    #: logical device id (the `/dev/davinciN` number); None for MCU/CPU rows (`-`)
    logic_id: int | None
    #: physical id (A3 `Chip Phy-ID` column); None when the column is absent
    phy_id: int | None
    chip_name: str
    #: True for rows that are not NPU chips (`Mcu`, `3559`)
    is_aux: bool


class NpuSmiMapping(ParsedModel):
    """`npu-smi info -m`."""

    columns: list[str]
    chips: list[ChipMapping]


_M_COLUMNS = {
    ("NPU ID", "Chip ID", "Chip Logic ID", "Chip Name"),
    ("NPU ID", "Chip ID", "Chip Logic ID", "Chip Phy-ID", "Chip Name"),
}


@parser("npu-smi-m")
def parse_npu_smi_m(text: str) -> NpuSmiMapping:
    """Parse `npu-smi info -m` output (4-column A2/910A layout and the 5-column A3 layout)."""
    kind = "npu-smi-m"
    rows = [line for line in strip_preamble(text_lines(kind, text), _COMMANDS)
            if line.strip() and not is_prompt(line)]
    if not rows:
        raise fail(kind, "no header line (only prompts)", hint="pass the `npu-smi info -m` output itself")
    header = rows[0]
    columns = tuple(re.split(r"\s{2,}", header.strip()))
    if columns not in _M_COLUMNS:
        if "There is no NPU card" in header:
            raise fail(kind, "npu-smi found no NPU card", header,
                       hint="check that the driver is loaded and the devices are visible (ls /dev/davinci*)")
        raise fail(kind, "expected the header 'NPU ID  Chip ID  Chip Logic ID  [Chip Phy-ID]  Chip Name'",
                   header)
    chips = []
    for line in rows[1:]:
        cells = line.split(None, len(columns) - 1)
        if len(cells) != len(columns):
            raise fail(kind, f"expected {len(columns)} columns", line)
        cell = dict(zip(columns, cells, strict=True))
        name = cell["Chip Name"].strip()
        is_aux = name.lower() in _AUX_NAMES
        chips.append(ChipMapping(
            npu_id=to_int(kind, cell["NPU ID"], line, what="NPU ID"),
            chip_id=to_int(kind, cell["Chip ID"], line, what="Chip ID"),
            logic_id=opt_int(kind, cell["Chip Logic ID"], line, what="Chip Logic ID"),
            phy_id=(opt_int(kind, cell["Chip Phy-ID"], line, what="Chip Phy-ID")
                    if "Chip Phy-ID" in cell else None),
            chip_name=name, is_aux=is_aux))
        if not is_aux and chips[-1].logic_id is None:
            raise fail(kind, f"NPU chip {name!r} without a logic id", line)
        if not is_aux and not _CHIP_NAME_RE.fullmatch(name):
            raise fail(kind, f"unknown chip name {name!r} (line cut off?)", line)
    if not chips:
        raise fail(kind, "header without chip rows", header)
    _check_mapping_complete(kind, chips, rows[1:])
    return NpuSmiMapping(columns=list(columns), chips=chips)


#: NPU chip names as `npu-smi info -m` prints them: `<chip type> <chip name>` (`Ascend 910B3`, `Ascend 910A`,
#: `Ascend 310P3`), the A3 name alone (`Ascend910`), or the 310's codename (`MiniD`).
_CHIP_NAME_RE = re.compile(r"(?:Ascend ?)?\d{3}\w*|MiniD")


def _check_mapping_complete(kind: str, chips: list[ChipMapping], lines: list[Line]) -> None:
    """Fail when the list was cut: npu-smi prints every card the same way (its chips, then its MCU row),
    so a card whose rows differ from the others' lost rows, and a last chip name that is the beginning
    of another row's name was cut inside the line."""
    cards: dict[int, list[tuple[ChipMapping, Line]]] = {}
    for i, (chip, line) in enumerate(zip(chips, lines, strict=True)):
        if chip.npu_id in cards and chips[i - 1].npu_id != chip.npu_id:
            raise fail(kind, f"rows of NPU {chip.npu_id} are not together", line)
        cards.setdefault(chip.npu_id, []).append((chip, line))
    last, last_line = chips[-1], lines[-1]
    if any(c.chip_name != last.chip_name and c.chip_name.startswith(last.chip_name) for c in chips):
        raise fail(kind, f"chip name {last.chip_name!r} is cut off (the other rows print a longer name)",
                   last_line)
    shapes = {npu: [(c.chip_id, c.is_aux) for c, _l in rows] for npu, rows in cards.items()}
    common = max(shapes.values(), key=lambda shape: sum(s == shape for s in shapes.values()))
    for npu, shape in shapes.items():
        if shape != common:
            want = ", ".join(f"chip {c}" + (" (MCU)" if aux else "") for c, aux in common)
            raise fail(kind, f"NPU {npu} lists {len(shape)} row(s) where every other NPU lists {want} "
                             "(output cut off?)", cards[npu][-1][1])


class CardListEntry(ParsedModel):
    npu_id: int
    chip_count: int
    product_name: str | None
    serial_number: str | None


class NpuSmiList(ParsedModel):
    """`npu-smi info -l`."""

    total_count: int
    npus: list[CardListEntry]


@parser("npu-smi-l")
def parse_npu_smi_l(text: str) -> NpuSmiList:
    """Parse `npu-smi info -l` output; the card count must match the cards printed."""
    kind = "npu-smi-l"
    entries = [entry for section in _sections(kind, text) for entry in section]
    total = entries[0]
    if _norm(total[0]) not in {_norm("Total Count"), _norm("Card Count")}:
        raise fail(kind, "expected 'Total Count : N' first", total[2])
    npus: list[dict[str, Any]] = []
    keys = {_norm("NPU ID"): "npu_id", _norm("Chip Count"): "chip_count",
            _norm("Product Name"): "product_name", _norm("Serial Number"): "serial_number"}
    for key, _values, line in entries[1:]:
        attr = keys.get(_norm(key))
        if attr is None:
            raise fail(kind, f"unexpected key {key!r}", line)
        value = _value((key, _values, line))
        if attr == "npu_id":
            npus.append({"npu_id": to_int(kind, value, line, what="NPU ID"), "chip_count": None,
                         "product_name": None, "serial_number": None, "_line": line})
        elif not npus:
            raise fail(kind, f"{key!r} before any 'NPU ID'", line)
        elif attr == "chip_count":
            npus[-1]["chip_count"] = to_int(kind, value, line, what="Chip Count")
        else:
            npus[-1][attr] = _text(kind, value, line)
    for npu in npus:
        line = npu.pop("_line")
        if npu["chip_count"] is None:
            raise fail(kind, f"NPU {npu['npu_id']} has no 'Chip Count'", line)
    count = to_int(kind, _value(total), total[2], what="Total Count")
    if count != len(npus):
        raise fail(kind, f"Total Count says {count} but {len(npus)} NPUs were listed (truncated output?)",
                   total[2])
    return NpuSmiList(total_count=count, npus=[CardListEntry(**npu) for npu in npus])
