"""`-lldp`: the switch port a device NIC is cabled to, as the LLDP TLVs the switch sends."""

from __future__ import annotations

import re

from ascend_ready.checks.parsers._common import content
from ascend_ready.checks.parsers.base import ParsedModel, fail, parser
from ascend_ready.checks.parsers.hccn._output import output_body


class HccnLldp(ParsedModel):
    """`hccn_tool -i N -lldp -g`: the switch port the device NIC is cabled to (lldptool-style TLVs)."""

    device_id: int | None
    #: TLV name (`Chassis ID TLV`, `Port ID TLV`, ...) -> its value lines (stripped, blank lines dropped)
    tlvs: dict[str, list[str]]
    chassis_id: str | None
    port_id: str | None
    system_name: str | None
    #: the System Description lines joined by newlines; a Huawei VRP switch sends several lines
    #: (`Huawei Versatile Routing Platform Software` / `VRP (R) software, Version 8.180 (...)` / ...), and
    #: hccn_tool prints only the first one indented
    system_description: str | None = None


def _tlv_value(tlvs: dict[str, list[str]], name: str) -> str | None:
    values = tlvs.get(name)
    if not values:
        return None
    # lldptool prefixes the subtype: `MAC: 00:11:...`, `Ifname: 200GE1/0/1`, `Local: 7`
    return re.sub(r"^(MAC|Ifname|Local|IPv4|IPv6|Interface Name|Port Component):\s*", "", values[0])


@parser("hccn-lldp")
def parse_hccn_lldp(text: str) -> HccnLldp:
    kind = "hccn-lldp"
    if not text.strip():  # what hccn_tool prints when no LLDPDU arrived
        raise fail(kind, "no LLDP data (empty output)",
                   hint="no LLDPDU received: the port is down or the switch does not send LLDP")
    device, lines = output_body(kind, text)
    tlvs: dict[str, list[str]] = {}
    current: list[str] | None = None
    name = ""
    for line in content(lines):
        if not line[:1].isspace():
            text_line = line.strip()
            if text_line in ("LLDP Information", "LLDP information"):
                continue
            if not _TLV_HEADER_RE.fullmatch(text_line):
                # the switch's multi-line System Description: hccn_tool indents only its first line
                if name in _MULTILINE_TLVS and current:
                    current.append(text_line)
                    continue
                raise fail(kind, "expected a '<Name> TLV' header or an indented value", line)
            name = text_line
            if name in tlvs:
                raise fail(kind, f"{name!r} printed twice", line)
            current = tlvs[name] = []
        elif current is None:
            raise fail(kind, "value line before any TLV header", line)
        else:
            current.append(line.strip())
    if "Chassis ID TLV" not in tlvs and "Port ID TLV" not in tlvs:
        raise fail(kind, "neither 'Chassis ID TLV' nor 'Port ID TLV': no LLDP neighbour data", lines[0],
                   hint="the switch sends no LLDP on this port, or LLDP is disabled on the device NIC")
    description = tlvs.get("System Description TLV")
    return HccnLldp(device_id=device, tlvs=tlvs, chassis_id=_tlv_value(tlvs, "Chassis ID TLV"),
                    port_id=_tlv_value(tlvs, "Port ID TLV"), system_name=_tlv_value(tlvs, "System Name TLV"),
                    system_description="\n".join(description) if description else None)


#: an LLDP TLV header as hccn_tool prints it: `Chassis ID TLV`, `Maximum Frame Size TLV`, `End of LLDPDU TLV`
_TLV_HEADER_RE = re.compile(r"[A-Z][\w/.() -]* TLV")
#: TLVs whose free-text value may span lines (the switch's own line breaks)
_MULTILINE_TLVS = frozenset({"System Description TLV"})
