"""The physical port of a device NIC: `-fec` (FEC mode), `-status` (ethtool of the device NIC) and
`-optical` (its QSFP module)."""

from __future__ import annotations

import re

from ascend_ready.checks.parsers._common import content, key_values, to_float
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, parser
from ascend_ready.checks.parsers.hccn._output import one_line, output_body


class HccnFec(ParsedModel):
    """`hccn_tool -i N -fec -g`."""

    device_id: int | None
    #: as printed: `no FEC mode`, `rs FEC mode`, `base-r FEC mode`, ...
    mode: str
    enabled: bool


@parser("hccn-fec")
def parse_hccn_fec(text: str) -> HccnFec:
    kind = "hccn-fec"
    device, lines = output_body(kind, text)
    match, _line = one_line(kind, lines, re.compile(r"^fec mode:\s*(\S.*?\bFEC mode)$", re.I),
                            "fec mode: ... FEC mode")
    mode = match[1]
    return HccnFec(device_id=device, mode=mode, enabled=not mode.lower().startswith("no "))


class HccnStatus(ParsedModel):
    """`hccn_tool -i N -status -g`: `ethtool ethN` run on the device, behind `Netdev status:`."""

    device_id: int | None
    #: the device-side interface (`eth3`)
    interface: str
    #: `Speed: 200000Mb/s`; None when ethtool prints `Unknown!` (no link)
    speed_mbps: int | None
    #: `Full`, `Half`; None for `Unknown! (255)`
    duplex: str | None
    auto_negotiation: bool | None
    #: `Direct Attach Copper`, `FIBRE`, ...
    port: str | None
    link_detected: bool
    supported_link_modes: list[str]
    supported_fec_modes: list[str]
    advertised_fec_modes: list[str]
    #: every key as printed, continuation lines joined by a space
    fields: dict[str, str]


_STATUS_HEAD_RE = re.compile(r"^(?:Netdev status:)?Settings for (?P<iface>\S+):$")
_STATUS_KV_RE = re.compile(r"^(?P<key>[A-Za-z][\w ./-]*?):(?:\s+(?P<value>.*?))?\s*$")
_SPEED_RE = re.compile(r"^(?P<mbps>\d+)Mb/s$")


def _indent(line: str) -> int:
    return len(line.expandtabs(8)) - len(line.expandtabs(8).lstrip())


@parser("hccn-status")
def parse_hccn_status(text: str) -> HccnStatus:
    """Parse `-status -g`; the `Settings for ethN:` head and the closing `Link detected:` are required
    (a capture without them was cut), and every line is `Key: value` or a deeper-indented continuation."""
    kind = "hccn-status"
    device, lines = output_body(kind, text)
    rows = list(content(lines))
    head = _STATUS_HEAD_RE.match(rows[0].strip())
    if not head or rows[0][:1].isspace():
        raise fail(kind, "expected 'Netdev status:Settings for ethN:' first", rows[0])
    fields: dict[str, list[str]] = {}
    where: dict[str, Line] = {}
    key_indent: int | None = None
    last: str | None = None
    for line in rows[1:]:
        indent = _indent(line)
        if key_indent is not None and indent > key_indent and last is not None:
            fields[last].append(line.strip())  # `Supported link modes:` lists one mode per line
            continue
        match = _STATUS_KV_RE.match(line.strip())
        if not match or indent == 0 or (key_indent is not None and indent != key_indent):
            raise fail(kind, "expected an indented 'Key: value' line of ethtool", line)
        key_indent, last = indent, match["key"]
        if last in fields:
            raise fail(kind, f"{last!r} printed twice", line)
        fields[last] = [match["value"] or ""]
        where[last] = line
    for key in ("Speed", "Link detected"):
        if key not in fields:
            raise fail(kind, f"no '{key}:' line (output cut off?)", rows[-1],
                       hint="pass the whole output of `hccn_tool -i N -status -g`")

    def one(key: str) -> str | None:
        return " ".join(v for v in fields[key] if v) if key in fields else None

    speed_text = one("Speed") or ""
    speed = _SPEED_RE.match(speed_text)
    if not speed and not speed_text.startswith("Unknown"):
        raise fail(kind, f"unreadable speed {speed_text!r} (expected 'NMb/s' or 'Unknown!')", where["Speed"])
    link = one("Link detected")
    if link not in ("yes", "no"):
        raise fail(kind, f"'Link detected' is {link!r}, not yes/no", where["Link detected"])
    duplex = one("Duplex")
    autoneg = one("Auto-negotiation")
    if autoneg not in (None, "on", "off"):
        raise fail(kind, f"'Auto-negotiation' is {autoneg!r}, not on/off", where["Auto-negotiation"])

    def words(key: str) -> list[str]:
        return [w for v in fields.get(key, []) for w in v.split()]

    return HccnStatus(
        device_id=device, interface=head["iface"], speed_mbps=int(speed["mbps"]) if speed else None,
        duplex=None if duplex is None or duplex.startswith("Unknown") else duplex,
        auto_negotiation=None if autoneg is None else autoneg == "on", port=one("Port"),
        link_detected=link == "yes", supported_link_modes=words("Supported link modes"),
        supported_fec_modes=words("Supported FEC modes"), advertised_fec_modes=words("Advertised FEC modes"),
        fields={key: " ".join(v for v in values if v) for key, values in fields.items()})


class HccnOptical(ParsedModel):
    """`hccn_tool -i N -optical -g`: the QSFP module of the device NIC. Lane lists are in lane order."""

    device_id: int | None
    present: bool
    vendor_name: str | None
    vendor_part_number: str | None
    temperature_c: float | None
    vcc_mv: float | None
    tx_power_mw: list[float | None]
    rx_power_mw: list[float | None]
    tx_bias_ma: list[float | None]
    media_snr_db: list[float | None]
    tx_power_low_mw: float | None
    tx_power_high_mw: float | None
    rx_power_low_mw: float | None
    rx_power_high_mw: float | None
    temp_high_c: float | None
    rx_los_flag: str | None
    tx_los_flag: str | None
    #: every key as printed
    fields: dict[str, str]


_UNIT_RE = re.compile(r"^(?P<num>-?\d+(?:\.\d+)?)\s*(?P<unit>mW|mV|mA|C|dB|dBm|nm)?$")
_NOT_A_NUMBER = {"not supported", "NA", "N/A", "-", "", "unknown"}


def _measure(kind: str, value: str, line: Line, unit: str) -> float | None:
    if value.strip() in _NOT_A_NUMBER:
        return None
    match = _UNIT_RE.match(value.strip())
    if not match or (match["unit"] not in (unit, None)):
        raise fail(kind, f"expected a number in {unit}: {value!r}", line)
    return to_float(kind, match["num"], line)


@parser("hccn-optical")
def parse_hccn_optical(text: str) -> HccnOptical:
    kind = "hccn-optical"
    device, lines = output_body(kind, text)
    rows = list(content(lines))
    if len(rows) == 1 and "unreachable" in rows[0].lower():
        raise fail(kind, "the optical module could not be read", rows[0],
                   hint="the device's control link is down: check the NIC with `hccn_tool -i N -link -g`")
    fields: dict[str, tuple[str, Line]] = {}
    for key, value, line in key_values(kind, rows, ":", allow=re.compile(r"^optical info:$")):
        if key in fields:
            raise fail(kind, f"{key!r} printed twice", line)
        fields[key] = (value, line)
    if "present" not in fields:
        raise fail(kind, "no 'present' line: not `hccn_tool -optical -g` output", rows[0])

    def one(key: str, unit: str) -> float | None:
        return _measure(kind, *fields[key], unit) if key in fields else None

    def lanes(prefix: str, unit: str) -> list[float | None]:
        out = []
        lane = 0
        while f"{prefix}{lane}" in fields:
            out.append(one(f"{prefix}{lane}", unit))
            lane += 1
        return out

    def text_of(key: str) -> str | None:
        return fields[key][0] if key in fields and fields[key][0] not in _NOT_A_NUMBER else None

    present_value, present_line = fields["present"]
    if present_value not in ("present", "not present"):
        raise fail(kind, f"unknown 'present' value {present_value!r}", present_line)
    return HccnOptical(
        device_id=device, present=present_value == "present",
        vendor_name=text_of("vendor name"), vendor_part_number=text_of("vendor part number"),
        temperature_c=one("temperature", "C"), vcc_mv=one("Vcc", "mV"),
        tx_power_mw=lanes("Tx Power", "mW"), rx_power_mw=lanes("Rx Power", "mW"),
        tx_bias_ma=lanes("Tx Bias", "mA"), media_snr_db=lanes("Media SNR Lane", "dB"),
        tx_power_low_mw=one("TxPower Low Thres", "mW"), tx_power_high_mw=one("TxPower High Thres", "mW"),
        rx_power_low_mw=one("RxPower Low Thres", "mW"), rx_power_high_mw=one("RxPower High Thres", "mW"),
        temp_high_c=one("Temp High Thres", "C"),
        rx_los_flag=text_of("Rx Los Flag"), tx_los_flag=text_of("Tx Los Flag"),
        fields={key: value for key, (value, _line) in fields.items()})
