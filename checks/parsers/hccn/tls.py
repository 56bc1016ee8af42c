"""`-tls`: the TLS switch of a device NIC, which HCCL requires to match on every device of a job."""

from __future__ import annotations

import re

from ascend_ready.checks.parsers._common import content
from ascend_ready.checks.parsers.base import ParsedModel, fail, parser
from ascend_ready.checks.parsers.hccn._output import output_body


class HccnTls(ParsedModel):
    """`hccn_tool -i N -tls -g`: the TLS switch HCCL requires to match on every device of a job."""

    device_id: int | None
    tls_enabled: bool
    preconfigured: bool | None
    alarm_threshold_days: int | None
    #: further lines of the full output (certificate details), kept as printed
    other_lines: list[str]


_TLS_RE = re.compile(r"^dev_id:\s*(?P<dev>\d+),\s*tls switch\[(?P<switch>[01])\]\(0:disable, 1:enable\)"
                     r"(?:,\s*tls preconfigured\[(?P<pre>[01])\]\([^)]*\))?"
                     r"(?:,\s*tls alarm time threshold\[(?P<days>\d+)\]days)?\s*$")


@parser("hccn-tls")
def parse_hccn_tls(text: str) -> HccnTls:
    """Parse `-tls -g` output; exactly one `dev_id:N, tls switch[0|1]...` line is required."""
    kind = "hccn-tls"
    device, lines = output_body(kind, text)
    found: re.Match[str] | None = None
    other = []
    for line in content(lines):
        if "tls switch" in line:
            match = _TLS_RE.match(line.strip())
            if not match:
                raise fail(kind, "unreadable 'tls switch[...]' line", line)
            if found is not None:
                raise fail(kind, "two 'tls switch' lines", line)
            found = match
        else:
            other.append(line.strip())
    if found is None:
        raise fail(kind, "no 'dev_id:N, tls switch[0|1]' line",
                   hint="pass the output of `hccn_tool -i N -tls -g`")
    if device is not None and int(found["dev"]) != device:
        raise fail(kind, f"TLS line of device {found['dev']} in the output of device {device}")
    return HccnTls(device_id=int(found["dev"]), tls_enabled=found["switch"] == "1",
                   preconfigured=None if found["pre"] is None else found["pre"] == "1",
                   alarm_threshold_days=None if found["days"] is None else int(found["days"]),
                   other_lines=other)
