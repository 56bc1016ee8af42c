"""Parser of the kernel log (`dmesg`, `dmesg -T`, `dmesg --time-format iso`) for the PCIe events a
preflight judges: AER error reports, PCIe bus errors, link down/up, and Ascend driver (devdrv/drv_pcie)
messages. Other lines are kept as kind "other": the kernel log is free text.

What is not a kernel log fails: every non-blank line must start with a timestamp in one of the three
formats (so `dmesg -t` without timestamps, binary data or another tool's output is a ParseError), and
an empty log is one too (dmesg printing nothing usually means it was not allowed to read the ring
buffer: kernel.dmesg_restrict).
"""

from __future__ import annotations

import re
from typing import Literal

from ascend_ready.checks.parsers._common import text_lines
from ascend_ready.checks.parsers.base import ParsedModel, fail, parser

_TS_RE = re.compile(
    r"^(?:<\d+>)?(?:"
    r"\[\s*(?P<mono>\d+\.\d+)\]"                                   # [   12.345678]
    r"|\[(?P<ctime>\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\]"    # [Wed Aug  2 03:09:26 2022]  (-T)
    r"|(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[,.]\d+[+-]\d\d:?\d\d)"  # --time-format iso
    r")\s?(?P<msg>.*)$")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f]")
_DEV_RE = re.compile(r"^(?P<driver>[\w-]+) (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): ")
_SOURCE_RE = re.compile(r"error received: (?:id=\w+ )?"
                        r"(?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_BUS_ERR_RE = re.compile(r"PCIe Bus Error: severity=(?P<sev>[\w ()-]+?), type=(?P<type>[\w ]+?)(?:, \(|$)")

EventKind = Literal["aer_corrected", "aer_uncorrected", "pcie_bus_error", "link_down", "link_up",
                    "ascend_driver", "other"]


class KernelEvent(ParsedModel):
    line_no: int
    #: seconds since boot (`[  12.345678]`), or the wall-clock text of -T / iso output
    time: str
    kind: EventKind
    #: the PCI function the message is about (`0000:00:00.0`), when it names one
    device: str | None
    #: Corrected / Uncorrected (Non-Fatal) / Uncorrected (Fatal) for AER and bus errors
    severity: str | None
    message: str


class KernelLog(ParsedModel):
    """`dmesg`: PCIe-relevant events classified; everything else kept as kind "other"."""

    events: list[KernelEvent]

    def of_kind(self, *kinds: str) -> list[KernelEvent]:
        return [event for event in self.events if event.kind in kinds]


def _classify(msg: str) -> tuple[EventKind, str | None]:
    if "PCIe Bus Error" in msg:
        match = _BUS_ERR_RE.search(msg)
        return "pcie_bus_error", (match["sev"] if match else None)
    if re.search(r"AER: (Multiple )?Corrected error", msg):
        return "aer_corrected", "Corrected"
    if re.search(r"AER: (Multiple )?Uncorrected", msg):
        match = re.search(r"Uncorrected \((Non-Fatal|Fatal)\)", msg)
        return "aer_uncorrected", f"Uncorrected ({match[1]})" if match else "Uncorrected"
    if re.search(r"\bLink Down\b|link down|Link is down", msg):
        return "link_down", None
    if re.search(r"\bLink Up\b|link up|Link is up", msg):
        return "link_up", None
    if re.search(r"\b(devdrv|drv_pcie|drv_davinci|davinci|ascend_|hdcdrv|devmm)\w*", msg):
        return "ascend_driver", None
    return "other", None


@parser("dmesg")
def parse_dmesg(text: str) -> KernelLog:
    kind = "dmesg"
    events = []
    for line in text_lines(kind, text):
        if not line.strip():
            continue
        match = _TS_RE.match(line)
        if not match:
            raise fail(kind, "kernel log line without a timestamp", line,
                       hint="pass `dmesg` output with timestamps (not `dmesg -t`)")
        msg = match["msg"]
        if _CONTROL_RE.search(msg):
            raise fail(kind, "control characters in a kernel log line", line)
        event_kind, severity = _classify(msg)
        # `pcieport <port>: AER: Corrected error received: <source>` is about <source>, not the port
        source = _SOURCE_RE.search(msg) or _DEV_RE.match(msg)
        events.append(KernelEvent(line_no=line.no, time=match["mono"] or match["ctime"] or match["iso"],
                                  kind=event_kind, device=source["bdf"].lower() if source else None,
                                  severity=severity, message=msg))
    return KernelLog(events=events)
