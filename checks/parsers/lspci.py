"""Parsers of `lspci` (one line per device, with or without `-nn`/`-D`) and `lspci -vvv` (the PCIe link
capability/status of each device: LnkCap, LnkSta, LnkCtl2, AER status, driver).

`-vvv` copies from terminals have TABs expanded and lines hard-wrapped at the terminal width; a
line that is neither a device header nor indented like lspci indents (TAB or 8 spaces) continues the
previous line only when that physical line was at least 80 columns long (a wrap); otherwise it is a
ParseError.
"""

from __future__ import annotations

import re

from ascend_ready.checks.parsers._common import content, strip_preamble, text_lines, to_int
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, parser

__all__ = ["ASCEND_NPUS", "ASCEND_NPU_DEVICE_IDS", "HUAWEI_VENDOR_ID", "PciDevice", "PciLink", "PciList",
           "PciVerbose", "ascend_npu_model", "matrix_product", "npu_device_ids", "parse_lspci",
           "parse_lspci_vvv"]

HUAWEI_VENDOR_ID = "19e5"

#: PCI device id (vendor 19e5) -> the Ascend NPU it identifies. An NPU is known by its device id, never by
#: its class: the Kunpeng 920's own HiSilicon engines are Huawei devices too, and the ZIP engine (a250, VF
#: a251) sits in the same "Processing accelerators" class [1200] (SEC a255/a256 and HPRE a258/a259 are
#: encryption devices [1000]). pci.ids names none of the NPUs (`lspci` prints `Device d802`); the ids are
#: the ones Huawei's own CANN log-collection script greps for (PCIE_BDF_310 .. PCIE_BDF_910_93) and that
#: the captures in tests/parsers/ show (d801 `lspci`, d802 `npu-smi info -t board`, d500 and d803 in
#: deployment notes); see tests/parsers/real/INDEX.md.
#: With each: its product id in the compatibility matrix (provision/matrix.yml; None: not in it), which the
#: playbooks' `ascend_npu_product` filter and the hardware profiles' `pci_device_ids` read from here.
ASCEND_NPUS: dict[str, tuple[str, str | None]] = {
    "d100": ("Ascend 310", None),
    "d500": ("Ascend 310P", "310p"),
    "d801": ("Ascend 910", None),
    "d802": ("Ascend 910B", "910b"),
    "d803": ("Ascend 910_93 (A3)", "910_93"),
}
ASCEND_NPU_DEVICE_IDS: dict[str, str] = {device: name for device, (name, _) in ASCEND_NPUS.items()}


def matrix_product(device_id: str | None) -> str | None:
    """The compatibility matrix's product id of an NPU PCI device id (`d802` -> `910b`), else None."""
    return ASCEND_NPUS.get((device_id or "").lower(), (None, None))[1]


def npu_device_ids(product: str) -> list[str]:
    """The PCI device ids of the matrix product `product` (`910b` -> [`d802`])."""
    return [device for device, (_, of) in ASCEND_NPUS.items() if of == product]


def ascend_npu_model(vendor_id: str | None, device_id: str | None) -> str | None:
    """The Ascend NPU a PCI function is (`Ascend 910B`), or None for every other device (and when the
    ids are unknown: an unidentified function is not counted as an NPU)."""
    if vendor_id is None or device_id is None or vendor_id.lower() != HUAWEI_VENDOR_ID:
        return None
    return ASCEND_NPU_DEVICE_IDS.get(device_id.lower())

_HEADER_RE = re.compile(
    r"^(?P<bdf>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<cls>[^:\[]+?)(?: \[(?P<cls_id>[0-9a-fA-F]{4})\])?:\s+"
    r"(?P<desc>.*?)"
    r"(?: \[(?P<ven>[0-9a-fA-F]{4}):(?P<dev>[0-9a-fA-F]{4})\])?"
    r"(?: \(rev (?P<rev>[0-9a-fA-F]{2})\))?"
    r"(?: \(prog-if [^)]*\))?\s*$")
_DEVICE_WORD_RE = re.compile(r"\bDevice ([0-9a-fA-F]{4})$")
_NUMERIC_RE = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{4})$")
_CLASS_ID_RE = re.compile(r"^[0-9a-fA-F]{4}$")
_HUAWEI = HUAWEI_VENDOR_ID


class PciDevice(ParsedModel):
    """One `lspci` line."""

    #: with domain, lower case: `0000:01:00.0`
    bdf: str
    class_name: str
    class_id: str | None
    #: vendor + device text as printed: `Huawei Technologies Co., Ltd. Device d802`
    description: str
    #: lower-case hex ids: from `-nn` brackets, else from an unnamed `Device d802`, else None
    vendor_id: str | None
    device_id: str | None
    revision: str | None
    #: an Ascend NPU: Huawei (19e5) with a device id of ASCEND_NPU_DEVICE_IDS (not every Huawei accelerator)
    is_ascend_npu: bool
    #: which NPU (`Ascend 910B`), from the device id; None for other devices
    npu_model: str | None = None


def _bdf(raw: str) -> str:
    raw = raw.lower()
    return raw if raw.count(":") == 2 else f"0000:{raw}"


def _device(kind: str, line: Line) -> PciDevice:
    match = _HEADER_RE.match(line.rstrip())
    if not match:
        raise fail(kind, "expected 'BB:DD.F Class: Vendor Device'", line)
    desc = match["desc"].strip()
    vendor = match["ven"].lower() if match["ven"] else None
    device = match["dev"].lower() if match["dev"] else None
    if vendor is None and desc.startswith("Huawei Technologies"):
        vendor = _HUAWEI
    if device is None and (word := _DEVICE_WORD_RE.search(desc)):
        device = word[1].lower()
    cls, cls_id = match["cls"].strip(), match["cls_id"]
    if vendor is None and (numeric := _NUMERIC_RE.match(desc)) and _CLASS_ID_RE.match(cls):
        # `lspci -n`: `c1:00.0 1200: 19e5:d802 (rev 20)`, ids only (the playbooks' stack probe reads it)
        vendor, device, cls_id = numeric[1].lower(), numeric[2].lower(), cls
    model = ascend_npu_model(vendor, device)
    return PciDevice(bdf=_bdf(match["bdf"]), class_name=cls, class_id=cls_id, description=desc,
                     vendor_id=vendor, device_id=device, revision=match["rev"],
                     is_ascend_npu=model is not None, npu_model=model)


#: `lspci | grep ZIP` typed without a prompt above the output (the KAE README's capture)
_COMMANDS = ("lspci",)


class PciList(ParsedModel):
    """`lspci [-n | -nn] [-D]` (any filter, e.g. `| grep acce`)."""

    devices: list[PciDevice]

    @property
    def ascend_npus(self) -> list[PciDevice]:
        return [device for device in self.devices if device.is_ascend_npu]


@parser("lspci")
def parse_lspci(text: str) -> PciList:
    kind = "lspci"
    devices = []
    for line in content(strip_preamble(text_lines(kind, text), _COMMANDS)):
        if line[:1].isspace():
            raise fail(kind, "indented line: this looks like `lspci -v` output (use kind lspci-vvv)", line)
        devices.append(_device(kind, line))
    return PciList(devices=devices)


# -- lspci -vvv ----------------------------------------------------------------------------------------

class PciLink(ParsedModel):
    """One device of `lspci -vvv`; link fields None when the device has no PCIe capability shown."""

    device: PciDevice
    subsystem: str | None
    numa_node: int | None
    #: LnkCap: what the device can do
    cap_speed_gts: float | None
    cap_width: int | None
    #: LnkSta: what the link trained to
    speed_gts: float | None
    width: int | None
    #: lspci's own verdicts, `(downgraded)` / `(ok)`; None when this lspci prints none
    speed_downgraded: bool | None
    width_downgraded: bool | None
    #: LnkCtl2 `Target Link Speed`
    target_speed_gts: float | None
    #: Advanced Error Reporting capability present, and its status flags that are set (`+`)
    aer: bool
    uncorrectable_errors: list[str]
    correctable_errors: list[str]
    driver: str | None
    kernel_modules: list[str]
    #: the judged lines as printed, for evidence (LnkCap/LnkSta/LnkCtl2)
    evidence: list[str]


class PciVerbose(ParsedModel):
    """`lspci -vvv [-s BDF]`."""

    devices: list[PciLink]

    def by_bdf(self, bdf: str) -> PciLink | None:
        return next((d for d in self.devices if d.device.bdf == _bdf(bdf)), None)


_SPEED_RE = r"Speed (?P<speed>[\d.]+GT/s|unknown)(?P<sflag> \((?:ok|downgraded)\))?"
_WIDTH_RE = r"Width x(?P<width>\d+)(?P<wflag> \((?:ok|downgraded)\))?"
_LNKCAP_RE = re.compile(rf"^LnkCap:\s+Port #\d+, {_SPEED_RE}, {_WIDTH_RE}")
_LNKSTA_RE = re.compile(rf"^LnkSta:\s+{_SPEED_RE}, {_WIDTH_RE}")
_TARGET_RE = re.compile(r"^LnkCtl2:\s+Target Link Speed: (?P<speed>[\d.]+GT/s|unknown)")
_WRAP_WIDTH = 80


def _speed(kind: str, value: str, line: Line) -> float | None:
    if value == "unknown":
        return None
    try:
        return float(value.removesuffix("GT/s"))
    except ValueError:
        raise fail(kind, f"unreadable link speed {value!r}", line) from None


def _flag(raw: str | None) -> bool | None:
    return None if raw is None else "downgraded" in raw


def _logical_lines(kind: str, text: str) -> list[Line]:
    """Physical lines with terminal hard-wraps joined back (see module docstring)."""
    out: list[Line] = []
    previous_width = 0
    for line in content(strip_preamble(text_lines(kind, text), _COMMANDS)):
        line = Line(line.rstrip(), line.no)
        # lspci indents with TABs (8 columns once expanded); a wrapped tail starts anywhere else
        wrapped = (out and previous_width >= _WRAP_WIDTH and not _HEADER_RE.match(line)
                   and not line.startswith(("\t", " " * 8)) and out[-1][:1].isspace())
        previous_width = len(line)
        if wrapped:
            out[-1] = Line(out[-1] + line, out[-1].no)
        else:
            out.append(line)
    return out


def _flags(value: str) -> list[str]:
    return [flag[:-1] for flag in value.split() if flag.endswith("+")]


@parser("lspci-vvv")
def parse_lspci_vvv(text: str) -> PciVerbose:
    kind = "lspci-vvv"
    blocks: list[tuple[Line, list[Line]]] = []
    for line in _logical_lines(kind, text):
        if not line[:1].isspace():
            _device(kind, line)  # validates the header
            blocks.append((line, []))
        elif not blocks:
            raise fail(kind, "indented line before the first device header", line)
        else:
            blocks[-1][1].append(line)
    devices = []
    for header, body in blocks:
        if not body:
            raise fail(kind, "device without detail lines: this is plain `lspci` output (kind lspci)", header)
        values: dict = {"subsystem": None, "numa_node": None, "cap_speed_gts": None, "cap_width": None,
                        "speed_gts": None, "width": None, "speed_downgraded": None, "width_downgraded": None,
                        "target_speed_gts": None, "aer": False, "uncorrectable_errors": [],
                        "correctable_errors": [], "driver": None, "kernel_modules": [], "evidence": []}
        for line in body:
            item = line.strip()
            key = item.split(":", 1)[0]
            if key == "LnkCap":
                match = _LNKCAP_RE.match(item)
                if not match:
                    raise fail(kind, "unreadable LnkCap line", line)
                values["cap_speed_gts"] = _speed(kind, match["speed"], line)
                values["cap_width"] = to_int(kind, match["width"], line, what="link width")
                values["evidence"].append(item)
            elif key == "LnkSta":
                match = _LNKSTA_RE.match(item)
                if not match:
                    raise fail(kind, "unreadable LnkSta line", line)
                values["speed_gts"] = _speed(kind, match["speed"], line)
                values["width"] = to_int(kind, match["width"], line, what="link width")
                values["speed_downgraded"] = _flag(match["sflag"])
                values["width_downgraded"] = _flag(match["wflag"])
                values["evidence"].append(item)
            elif key == "LnkCtl2":
                match = _TARGET_RE.match(item)
                if not match:
                    raise fail(kind, "unreadable LnkCtl2 line", line)
                values["target_speed_gts"] = _speed(kind, match["speed"], line)
                values["evidence"].append(item)
            elif key == "Subsystem":
                values["subsystem"] = item.split(":", 1)[1].strip()
            elif key == "NUMA node":
                values["numa_node"] = to_int(kind, item.split(":", 1)[1], line, what="NUMA node")
            elif item.startswith("Capabilities:") and "Advanced Error Reporting" in item:
                values["aer"] = True
            elif key == "UESta":
                values["uncorrectable_errors"] = _flags(item.split(":", 1)[1])
            elif key == "CESta":
                values["correctable_errors"] = _flags(item.split(":", 1)[1])
            elif key == "Kernel driver in use":
                values["driver"] = item.split(":", 1)[1].strip()
            elif key == "Kernel modules":
                values["kernel_modules"] = [m.strip() for m in item.split(":", 1)[1].split(",") if m.strip()]
        devices.append(PciLink(device=_device(kind, header), **values))
    return PciVerbose(devices=devices)
