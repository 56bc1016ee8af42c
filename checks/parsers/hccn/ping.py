"""`-ping -g address IP [pkt N]`: reachability of a peer from a device NIC."""

from __future__ import annotations

import re

from ascend_ready.checks.parsers._common import content, opt_float, to_float, to_ip
from ascend_ready.checks.parsers.base import ParsedModel, fail, parser
from ascend_ready.checks.parsers.hccn._output import output_body


class PingReply(ParsedModel):
    seq: int
    time_ms: float | None


class HccnPing(ParsedModel):
    """`hccn_tool -i N -ping -g address IP [pkt N]`: device-NIC to peer reachability."""

    device_id: int | None
    target: str
    replies: list[PingReply]
    transmitted: int
    received: int
    loss_pct: float


_PING_HEAD = re.compile(r"^device (\d+) PING (\S+)$")
_PING_RECV = re.compile(r"^recv seq=(\d+),\s*time=(\d+(?:\.\d+)?)\s*ms$")
_PING_LOST = re.compile(r"^(?:seq=(\d+),?\s*)?(?:time out|timeout|request timeout|no reply)\b.*$", re.I)
_PING_SUM = re.compile(r"^(\d+) packets? transmitted, (\d+) received, (\d+(?:\.\d+)?)% packet loss$")


@parser("hccn-ping")
def parse_hccn_ping(text: str) -> HccnPing:
    """Parse ping output; the summary line is required (a cut-off run is not a result)."""
    kind = "hccn-ping"
    device, lines = output_body(kind, text)
    target = summary = None
    replies: list[PingReply] = []
    for line in content(lines):
        stripped = line.strip()
        if (m := _PING_HEAD.match(stripped)) is not None:
            if target is not None:
                raise fail(kind, "second 'device N PING' line", line)
            if device is not None and int(m[1]) != device:
                raise fail(kind, f"ping from device {m[1]} in the output of device {device}", line)
            device, target = int(m[1]), to_ip(kind, m[2], line, what="ping target")
        elif target is None:
            raise fail(kind, "expected 'device N PING <address>' first", line)
        elif summary is not None:
            raise fail(kind, "line after the ping summary", line)
        elif (m := _PING_RECV.match(stripped)) is not None:
            replies.append(PingReply(seq=int(m[1]), time_ms=opt_float(kind, m[2], line)))
        elif (m := _PING_LOST.match(stripped)) is not None:
            replies.append(PingReply(seq=int(m[1]) if m[1] else len(replies), time_ms=None))
        elif (m := _PING_SUM.match(stripped)) is not None:
            summary = (int(m[1]), int(m[2]), to_float(kind, m[3], line), line)
        else:
            raise fail(kind, "unrecognised ping line", line)
    if target is None or summary is None:
        raise fail(kind, "no 'N packets transmitted, M received' summary (ping cut off?)", lines[-1])
    transmitted, received, loss, line = summary
    if received > transmitted:
        raise fail(kind, "more packets received than transmitted", line)
    return HccnPing(device_id=device, target=target, replies=replies, transmitted=transmitted,
                    received=received, loss_pct=loss)
