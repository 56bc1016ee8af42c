"""Counters of a device NIC: `-stat` (packets) and `-hw_stats` (the RoCE engine's resources and events)."""

from __future__ import annotations

import re

from ascend_ready.checks.parsers._common import content, key_values, to_int
from ascend_ready.checks.parsers.base import ParsedModel, fail, parser
from ascend_ready.checks.parsers.hccn._output import output_body


class HccnStat(ParsedModel):
    """`hccn_tool -i N -stat -g`: packet counters by name."""

    device_id: int | None
    counters: dict[str, int]


@parser("hccn-stat")
def parse_hccn_stat(text: str) -> HccnStat:
    kind = "hccn-stat"
    device, lines = output_body(kind, text)
    counters: dict[str, int] = {}
    for key, value, line in key_values(kind, lines, ":", allow=re.compile(r"^packet statistics:$")):
        if not re.fullmatch(r"[A-Za-z0-9_]+", key):
            raise fail(kind, f"unexpected counter name {key!r}", line)
        counters[key] = to_int(kind, value, line, what=key)
    if not counters:
        raise fail(kind, "no counters", lines[0])
    return HccnStat(device_id=device, counters=counters)


class HccnHwStats(ParsedModel):
    """`hccn_tool -i N -hw_stats -g`: the RoCE engine's resource and event counters
    (`[devid 3] qp_alloc: 1`)."""

    device_id: int | None
    counters: dict[str, int]


_HW_STAT_RE = re.compile(r"^\[(?:devid|device)\s+(?P<dev>\d+)\]\s*(?P<name>[A-Za-z][\w]*):\s*(?P<value>\S+)$")


@parser("hccn-hw-stats")
def parse_hccn_hw_stats(text: str) -> HccnHwStats:
    kind = "hccn-hw-stats"
    device, lines = output_body(kind, text)
    counters: dict[str, int] = {}
    for line in content(lines):
        match = _HW_STAT_RE.match(line.strip())
        if not match:
            raise fail(kind, "expected '[devid N] counter: value'", line)
        if device is not None and int(match["dev"]) != device:
            raise fail(kind, f"counter of device {match['dev']} in the output of device {device}", line)
        device = int(match["dev"])
        if match["name"] in counters:
            raise fail(kind, f"{match['name']!r} printed twice", line)
        counters[match["name"]] = to_int(kind, match["value"], line, what=match["name"])
    return HccnHwStats(device_id=device, counters=counters)
