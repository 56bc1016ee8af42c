"""Link state of a device NIC: `-link` (up/down), `-net_health` (the probe of its `-netdetect` address)
and `-link_stat` (the link flap history)."""

from __future__ import annotations

import re
from typing import Literal

from ascend_ready.checks.parsers._common import content, to_host_ip, to_int
from ascend_ready.checks.parsers.base import ParsedModel, fail, parser
from ascend_ready.checks.parsers.hccn._output import one_line, output_body


class HccnLink(ParsedModel):
    """`hccn_tool -i N -link -g`."""

    device_id: int | None
    status: Literal["UP", "DOWN"]


@parser("hccn-link")
def parse_hccn_link(text: str) -> HccnLink:
    kind = "hccn-link"
    device, lines = output_body(kind, text)
    match, _line = one_line(kind, lines, re.compile(r"^link status:\s*(UP|DOWN)$", re.I),
                            "link status: UP|DOWN")
    return HccnLink(device_id=device, status=match[1].upper())


class HccnNetHealth(ParsedModel):
    """`hccn_tool -i N -net_health -g`: the device NIC's probe of its `netdetect` address."""

    device_id: int | None
    #: Success, Init, Fault, Socket failed, Receive timeout, Unreachable, Detect ip set, ...
    status: str
    healthy: bool


@parser("hccn-net-health")
def parse_hccn_net_health(text: str) -> HccnNetHealth:
    kind = "hccn-net-health"
    device, lines = output_body(kind, text)
    match, _line = one_line(kind, lines, re.compile(r"^net health status:\s*([A-Za-z][A-Za-z ]*?)\s*$"),
                            "net health status: <status>")
    return HccnNetHealth(device_id=device, status=match[1], healthy=match[1] == "Success")


class HccnNetdetect(ParsedModel):
    """`hccn_tool -i N -netdetect -g`: the address `-net_health` probes; None when none is set."""

    device_id: int | None
    address: str | None


@parser("hccn-netdetect")
def parse_hccn_netdetect(text: str) -> HccnNetdetect:
    kind = "hccn-netdetect"
    device, lines = output_body(kind, text)
    # drivers' hccn_tool prints `netdetect address:`; the open-source hccn_tool (2026) `netdetect addr:`
    match, line = one_line(kind, lines, re.compile(r"^netdetect addr(?:ess)?:\s*(\S*)$"),
                           "netdetect address: <ip>")
    address = to_host_ip(kind, match[1], line, what="netdetect address") if match[1] else None
    return HccnNetdetect(device_id=device, address=address)


class LinkEvent(ParsedModel):
    #: as printed, e.g. `Tue Aug  1 14:43:40 2022` (the device clock; no time zone)
    time: str
    status: Literal["UP", "DOWN"]


class HccnLinkStat(ParsedModel):
    """`hccn_tool -i N -link_stat -g`: link flap history (records newest first, as printed)."""

    device_id: int | None
    #: as printed (asctime: `Wed Aug  2 03:09:26 2022`, two spaces before a one-digit day)
    current_time: str
    link_up_count: int
    link_down_count: int | None
    records: list[LinkEvent]


_PREFIX_RE = re.compile(r"^\[(?:devid|device)\s+(\d+)\]")
_DATE = r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}"


@parser("hccn-link-stat")
def parse_hccn_link_stat(text: str) -> HccnLinkStat:
    kind = "hccn-link-stat"
    device, lines = output_body(kind, text)
    current = up = down = None
    records: list[LinkEvent] = []
    in_records = False
    for line in content(lines):
        prefix = _PREFIX_RE.match(line)
        if prefix:
            if device is not None and int(prefix[1]) != device:
                raise fail(kind, f"line of device {prefix[1]} in the output of device {device}", line)
            device = int(prefix[1])
        rest = line[prefix.end():] if prefix else str(line)
        record = re.fullmatch(rf"\s+({_DATE})\s+LINK (UP|DOWN)\s*", rest)
        if record and in_records:
            records.append(LinkEvent(time=record[1], status=record[2]))
            continue
        key, sep, value = rest.partition(":")
        key, value = key.strip(), value.strip()
        if not sep:
            raise fail(kind, "expected 'key : value' or a 'LINK UP|DOWN' record", line)
        if key == "current time" and re.fullmatch(_DATE, value):
            current = value
        elif key == "link up count":
            up = to_int(kind, value, line, what=key)
        elif key == "link down count":
            down = to_int(kind, value, line, what=key)
        elif key == "link change records" and not value:
            in_records = True
        elif key == "link change records" and value == "NA":
            pass  # hccn_tool prints `: NA` when it holds no record (after `-link_stat -c`); none may follow
        else:
            raise fail(kind, f"unexpected line in link_stat output ({key!r})", line)
    if current is None or up is None:
        raise fail(kind, "missing 'current time' or 'link up count'", lines[-1])
    return HccnLinkStat(device_id=device, current_time=current, link_up_count=up, link_down_count=down,
                        records=records)
