"""Parsers of PCI sysfs attributes: single values (`current_link_speed` = `16.0 GT/s PCIe`) and the
batch form `grep -H . /sys/bus/pci/devices/<bdf>/{current_link_speed,...}` that checks read in one go.

Batch lines are `<path>/<bdf>/<attr>:<value>` (grep -H) or `<path>/<bdf>/<attr>=<value>`; multi-line
AER counter files come out as one line per counter (`.../aer_dev_correctable:RxErr 0`).
"""

from __future__ import annotations

import re

from pydantic import Field

from ascend_ready.checks.parsers._common import content, strip_preamble, text_lines, to_int
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, parser
from ascend_ready.checks.parsers.lspci import HUAWEI_VENDOR_ID, ascend_npu_model

_SPEED_RE = re.compile(r"^(?P<gts>\d+(?:\.\d+)?) GT/s(?: PCIe)?$")
_HEX_RE = re.compile(r"^0x[0-9a-fA-F]{1,6}$")
_LINE_RE = re.compile(r"^(?P<path>\S*?/(?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])/"
                      r"(?P<attr>[a-z_0-9]+))[:=](?P<value>.*)$")
_AER_FILES = ("aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal")


def link_speed(kind: str, value: str, line: Line) -> float | None:
    """`16.0 GT/s PCIe` / `8.0 GT/s` -> 16.0 / 8.0; `Unknown` (link down) -> None."""
    value = value.strip()
    if value.lower() == "unknown":
        return None
    match = _SPEED_RE.match(value)
    if not match:
        raise fail(kind, f"unreadable link speed {value!r} (expected 'N.N GT/s [PCIe]' or 'Unknown')", line)
    return float(match["gts"])


def link_width(kind: str, value: str, line: Line) -> int | None:
    """`16` -> 16; 0 or 255 (link down / unknown on some kernels) -> None."""
    width = to_int(kind, value, line, what="link width")
    return None if width in (0, 255) else width


def hex_id(kind: str, value: str, line: Line) -> str:
    """`0x19e5` -> `19e5` (lspci's spelling); class ids keep all 6 digits."""
    value = value.strip()
    if not _HEX_RE.match(value):
        raise fail(kind, f"expected a 0x-prefixed hex id, got {value!r}", line)
    digits = value[2:].lower()
    return digits.zfill(6 if len(digits) > 4 else 4)


class SysfsPciDevice(ParsedModel):
    """The sysfs attributes read for one PCI function; None = not read."""

    bdf: str
    current_link_speed_gts: float | None = None
    current_link_width: int | None = None
    max_link_speed_gts: float | None = None
    max_link_width: int | None = None
    #: the link reported `Unknown` speed (down or not trained)
    link_down: bool = False
    vendor_id: str | None = None
    device_id: str | None = None
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    class_id: str | None = None
    numa_node: int | None = None
    #: AER counters by file then counter (`{"aer_dev_correctable": {"RxErr": 0, "TOTAL_ERR_COR": 0}}`)
    aer: dict[str, dict[str, int]] = Field(default_factory=dict)

    @property
    def npu_model(self) -> str | None:
        """Which Ascend NPU this function is (lspci.ASCEND_NPU_DEVICE_IDS), by its device id; None for any
        other device, the Kunpeng's own HiSilicon accelerators (class 12xx too) included. When `vendor`
        was not read, a device id of the table in the processing-accelerator class (0x12xxxx) counts."""
        vendor = self.vendor_id
        if vendor is None and (self.class_id or "").startswith("12"):
            vendor = HUAWEI_VENDOR_ID
        return ascend_npu_model(vendor, self.device_id)

    @property
    def is_ascend_npu(self) -> bool:
        return self.npu_model is not None


class SysfsPci(ParsedModel):
    """Batch sysfs read (kind sysfs-link) keyed by BDF."""

    devices: dict[str, SysfsPciDevice]

    @property
    def ascend_npus(self) -> dict[str, SysfsPciDevice]:
        """The Ascend NPU functions by BDF (identified by device id, see SysfsPciDevice.npu_model)."""
        return {bdf: dev for bdf, dev in self.devices.items() if dev.is_ascend_npu}


@parser("sysfs-link")
def parse_sysfs_link(text: str) -> SysfsPci:
    kind = "sysfs-link"
    raw: dict[str, dict] = {}
    seen: set[tuple[str, str]] = set()
    for line in content(strip_preamble(text_lines(kind, text), ("grep", "cat"))):
        match = _LINE_RE.match(line.strip())
        if not match:
            raise fail(kind, "expected '/sys/.../<bdf>/<attribute>:<value>' (grep -H output)", line)
        bdf, attr, value = match["bdf"].lower(), match["attr"], match["value"].strip()
        device = raw.setdefault(bdf, {"bdf": bdf, "aer": {}})
        if attr in _AER_FILES:
            name, _sep, count = value.rpartition(" ")
            if not name:
                raise fail(kind, "expected '<counter> <count>' in an AER counter file", line)
            device["aer"].setdefault(attr, {})[name] = to_int(kind, count, line, what=name)
            continue
        if (bdf, attr) in seen:
            raise fail(kind, f"{attr} of {bdf} printed twice", line)
        seen.add((bdf, attr))
        if attr in ("current_link_speed", "max_link_speed"):
            device[f"{attr}_gts"] = link_speed(kind, value, line)
            if attr == "current_link_speed" and device[f"{attr}_gts"] is None:
                device["link_down"] = True
        elif attr in ("current_link_width", "max_link_width"):
            device[attr] = link_width(kind, value, line)
        elif attr in ("vendor", "device", "subsystem_vendor", "subsystem_device"):
            device[f"{attr}_id"] = hex_id(kind, value, line)
        elif attr == "class":
            device["class_id"] = hex_id(kind, value, line)
        elif attr == "numa_node":
            device["numa_node"] = to_int(kind, value, line, what="numa_node")
        else:
            raise fail(kind, f"unsupported sysfs attribute {attr!r}", line)
    return SysfsPci(devices={bdf: SysfsPciDevice(**values) for bdf, values in sorted(raw.items())})
