"""Parsers of `hccn_tool -i N ... -g` outputs: link, net_health, ip, gateway, netdetect, lldp, tls,
optical, link_stat, fec, stat, status, hw_stats, route and ping, one device's output each.

An output may be preceded by its command echo (`$ hccn_tool -i 3 -ping -g ...`, as collection scripts
and pastes print it). Kind hccn-collection reads several echoed commands at once (`for i in 0..7`
collection scripts), dispatching each output by its option; errors keep whole-collection line numbers.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import SerializeAsAny

from ascend_ready.checks.parsers._common import (
    PROMPT_PREFIX,
    content,
    is_preamble,
    key_values,
    opt_float,
    text_lines,
    to_float,
    to_host_ip,
    to_int,
    to_ip,
    to_netmask,
)
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, numbered_lines, parser
from ascend_ready.errors import ParseError

#: `hccn_tool -i 3 -ip -g` echo, with or without a prompt, a `set -x` trace mark (`+ `), sudo or a path
#: (`/usr/local/.../hccn_tool`)
_ECHO_RE = re.compile(rf"^(?:\++\s+)?(?:{PROMPT_PREFIX}\s*)?(?:sudo\s+)?\S*hccn_tool\s+-i\s+(?P<dev>\d+)"
                      r"\s+(?P<args>.*)$")


#: hccn_tool's own error lines, with what the user should do about them
_TOOL_ERRORS = (
    (re.compile(r"^Invalid device id", re.I),
     "no device NIC with that id: device ids are the `Chip Logic ID`s of `npu-smi info -m`, and inference "
     "cards (310P) have no RoCE NIC"),
    (re.compile(r"^Usage: hccn_tool", re.I), "hccn_tool rejected the command line (see its usage text)"),
    (re.compile(r"^(?:Command|Cmd) .*(?:not support|failed)|^.*is not supported", re.I),
     "this hccn_tool query is not supported on this device or driver"),
)


def _body(kind: str, text: str) -> tuple[int | None, list[Line]]:
    """(device id from the command echo, lines after it); at most one echo, and only first."""
    lines = text_lines(kind, text)
    for line in content(lines):
        for pattern, hint in _TOOL_ERRORS:
            if pattern.search(line.strip()):
                raise fail(kind, "hccn_tool reported an error instead of data", line, hint=hint)
    device = None
    body: list[Line] = []
    for line in lines:
        match = _ECHO_RE.match(line.strip())
        if match:
            if (body and any(b.strip() for b in body)) or device is not None:
                raise fail(kind, "a second hccn_tool command in one output", line,
                           hint="parse a collection of commands with kind hccn-collection")
            device = int(match["dev"])
            continue
        if not body and is_preamble(line):  # shell noise above the echo/output: `export ...`, `+ ...`
            continue
        body.append(line)
    if next(content(body), None) is None:
        raise fail(kind, "no output after the command line", lines[0])
    return device, body


class CommandOutput(ParsedModel):
    """One `hccn_tool -i N <args>` echo of a collection and the text under it (echo line included)."""

    device_id: int
    args: str
    #: 1-based line number of the echo line in the whole collection
    first_line: int
    text: str


def split_commands(text: str) -> list[CommandOutput]:
    """Cut a collection of `hccn_tool -i N <args>` echoes + outputs (as `for i in ...` scripts write
    them) into per-command texts. Lines before the first echo must be blank."""
    kind = "hccn-collection"
    out: list[tuple[int, str, int, list[str]]] = []
    for line in numbered_lines(text):
        match = _ECHO_RE.match(line.strip())
        if match:
            out.append((int(match["dev"]), match["args"].strip(), line.no, [str(line)]))
        elif out:
            out[-1][3].append(str(line))
        elif line.strip():
            raise fail(kind, "output before the first hccn_tool command line", line)
    if not out:
        raise fail(kind, "no `hccn_tool -i N ...` command lines", hint="collect with the commands echoed")
    return [CommandOutput(device_id=dev, args=args, first_line=no, text="\n".join(lines) + "\n")
            for dev, args, no, lines in out]


def _shifted(error: ParseError, block: CommandOutput) -> ParseError:
    """The error of a block's parser, with its line number counted in the whole collection."""
    line_no = None if error.line_no is None else error.line_no + block.first_line - 1
    return ParseError(error.kind, error.reason, line_no=line_no, line=error.line, hint=error.hint)


def parse_per_device(kind: str, text: str) -> dict[int, ParsedModel]:
    """Parse each device's output of a one-command collection (`hccn_tool -i $i -ip -g` for every i)."""
    from ascend_ready.checks.parsers.base import get_parser

    parse = get_parser(kind)
    results: dict[int, ParsedModel] = {}
    for block in split_commands(text):
        if block.device_id in results:
            raise fail(kind, f"device {block.device_id} appears twice", line_no=block.first_line)
        try:
            results[block.device_id] = parse(block.text)
        except ParseError as error:
            raise _shifted(error, block) from None
    return results


#: the option of an echoed command line -> the kind that reads its output
_OPTION_KINDS = {"-ip": "hccn-ip", "-link": "hccn-link", "-net_health": "hccn-net-health",
                 "-gateway": "hccn-gateway", "-netdetect": "hccn-netdetect",
                 "-link_stat": "hccn-link-stat", "-stat": "hccn-stat", "-optical": "hccn-optical",
                 "-fec": "hccn-fec", "-tls": "hccn-tls", "-lldp": "hccn-lldp", "-ping": "hccn-ping",
                 "-status": "hccn-status", "-hw_stats": "hccn-hw-stats", "-route": "hccn-route"}


class CollectionEntry(ParsedModel):
    device_id: int
    #: the arguments as echoed: `-ip -g`
    command: str
    kind: str
    result: SerializeAsAny[ParsedModel]


class HccnCollection(ParsedModel):
    """Several `hccn_tool -i N <option> -g` outputs, each under its echoed command line."""

    entries: list[CollectionEntry]

    def get(self, kind: str, device_id: int) -> ParsedModel | None:
        return next((e.result for e in self.entries if e.kind == kind and e.device_id == device_id), None)


@parser("hccn-collection")
def parse_hccn_collection(text: str) -> HccnCollection:
    """Parse a collection of echoed hccn_tool commands, each output with the kind its option names."""
    from ascend_ready.checks.parsers.base import get_parser

    entries = []
    for block in split_commands(text):
        option = next((arg for arg in block.args.split() if arg in _OPTION_KINDS), None)
        if option is None:
            raise fail("hccn-collection", f"no parser for `hccn_tool {block.args}`",
                       line_no=block.first_line, line=block.text.splitlines()[0])
        kind = _OPTION_KINDS[option]
        try:
            result = get_parser(kind)(block.text)
        except ParseError as error:
            raise _shifted(error, block) from None
        entries.append(CollectionEntry(device_id=block.device_id, command=block.args, kind=kind,
                                       result=result))
    return HccnCollection(entries=entries)


def _one_line(kind: str, lines: list[Line], pattern: re.Pattern[str],
              expected: str) -> tuple[re.Match[str], Line]:
    rows = list(content(lines))
    if len(rows) != 1:
        raise fail(kind, f"expected exactly one line {expected!r}", rows[1] if len(rows) > 1 else None)
    match = pattern.match(rows[0].strip())
    if not match:
        raise fail(kind, f"expected {expected!r}", rows[0])
    return match, rows[0]


# -- link / net_health / fec / tls -------------------------------------------------------------------

class HccnLink(ParsedModel):
    """`hccn_tool -i N -link -g`."""

    device_id: int | None
    status: Literal["UP", "DOWN"]


@parser("hccn-link")
def parse_hccn_link(text: str) -> HccnLink:
    kind = "hccn-link"
    device, lines = _body(kind, text)
    match, _line = _one_line(kind, lines, re.compile(r"^link status:\s*(UP|DOWN)$", re.I),
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
    device, lines = _body(kind, text)
    match, _line = _one_line(kind, lines, re.compile(r"^net health status:\s*([A-Za-z][A-Za-z ]*?)\s*$"),
                             "net health status: <status>")
    return HccnNetHealth(device_id=device, status=match[1], healthy=match[1] == "Success")


class HccnGateway(ParsedModel):
    """`hccn_tool -i N -gateway -g`: `default gateway:<ip>, Iface:eth<N>`; None when none is set."""

    device_id: int | None
    gateway: str | None
    interface: str | None


@parser("hccn-gateway")
def parse_hccn_gateway(text: str) -> HccnGateway:
    kind = "hccn-gateway"
    device, lines = _body(kind, text)
    match, line = _one_line(kind, lines, re.compile(r"^default gateway:\s*(\S*?),?\s*(?:Iface:\s*(\S+))?$"),
                            "default gateway:<ip>, Iface:eth<N>")
    gateway = to_host_ip(kind, match[1], line, what="gateway") if match[1] else None
    return HccnGateway(device_id=device, gateway=gateway, interface=match[2])


class HccnNetdetect(ParsedModel):
    """`hccn_tool -i N -netdetect -g`: the address `-net_health` probes; None when none is set."""

    device_id: int | None
    address: str | None


@parser("hccn-netdetect")
def parse_hccn_netdetect(text: str) -> HccnNetdetect:
    kind = "hccn-netdetect"
    device, lines = _body(kind, text)
    # drivers' hccn_tool prints `netdetect address:`; the open-source hccn_tool (2026) `netdetect addr:`
    match, line = _one_line(kind, lines, re.compile(r"^netdetect addr(?:ess)?:\s*(\S*)$"),
                            "netdetect address: <ip>")
    address = to_host_ip(kind, match[1], line, what="netdetect address") if match[1] else None
    return HccnNetdetect(device_id=device, address=address)


class HccnFec(ParsedModel):
    """`hccn_tool -i N -fec -g`."""

    device_id: int | None
    #: as printed: `no FEC mode`, `rs FEC mode`, `base-r FEC mode`, ...
    mode: str
    enabled: bool


@parser("hccn-fec")
def parse_hccn_fec(text: str) -> HccnFec:
    kind = "hccn-fec"
    device, lines = _body(kind, text)
    match, _line = _one_line(kind, lines, re.compile(r"^fec mode:\s*(\S.*?\bFEC mode)$", re.I),
                             "fec mode: ... FEC mode")
    mode = match[1]
    return HccnFec(device_id=device, mode=mode, enabled=not mode.lower().startswith("no "))


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
    device, lines = _body(kind, text)
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


# -- ip ------------------------------------------------------------------------------------------------

class HccnIp(ParsedModel):
    """`hccn_tool -i N -ip -g`; address/netmask None when no IP was configured (a valid answer).

    The address is a usable host address of its subnet and the netmask a contiguous mask: swapped values
    (`ipaddr:255.255.255.0`, `netmask:192.168.1.10`) are a ParseError, not a configuration."""

    device_id: int | None
    address: str | None
    netmask: str | None


@parser("hccn-ip")
def parse_hccn_ip(text: str) -> HccnIp:
    kind = "hccn-ip"
    device, lines = _body(kind, text)
    rows = list(content(lines))
    if len(rows) == 1 and re.match(r"^Get ipconf failed, because no ip was preset there!?$", rows[0].strip()):
        return HccnIp(device_id=device, address=None, netmask=None)
    values: dict[str, tuple[str, Line]] = {}
    for key, value, line in key_values(kind, rows, ":"):
        if key not in ("ipaddr", "netmask"):
            raise fail(kind, f"unexpected key {key!r} (expected ipaddr:/netmask:)", line)
        if key in values:
            raise fail(kind, f"{key} printed twice", line)
        values[key] = (value, line)
    if set(values) != {"ipaddr", "netmask"}:
        raise fail(kind, "expected both 'ipaddr:' and 'netmask:' lines", rows[-1])
    to_host_ip(kind, *values["ipaddr"], what="ipaddr")  # the address slot first: it names a swap best
    netmask = to_netmask(kind, *values["netmask"])
    address = to_host_ip(kind, *values["ipaddr"], what="ipaddr", netmask=netmask)
    return HccnIp(device_id=device, address=address, netmask=netmask)


# -- stat ----------------------------------------------------------------------------------------------

class HccnStat(ParsedModel):
    """`hccn_tool -i N -stat -g`: packet counters by name."""

    device_id: int | None
    counters: dict[str, int]


@parser("hccn-stat")
def parse_hccn_stat(text: str) -> HccnStat:
    kind = "hccn-stat"
    device, lines = _body(kind, text)
    counters: dict[str, int] = {}
    for key, value, line in key_values(kind, lines, ":", allow=re.compile(r"^packet statistics:$")):
        if not re.fullmatch(r"[A-Za-z0-9_]+", key):
            raise fail(kind, f"unexpected counter name {key!r}", line)
        counters[key] = to_int(kind, value, line, what=key)
    if not counters:
        raise fail(kind, "no counters", lines[0])
    return HccnStat(device_id=device, counters=counters)


# -- status (ethtool of the device NIC) -----------------------------------------------------------------

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
    device, lines = _body(kind, text)
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


# -- hw_stats ----------------------------------------------------------------------------------------------

class HccnHwStats(ParsedModel):
    """`hccn_tool -i N -hw_stats -g`: the RoCE engine's resource and event counters
    (`[devid 3] qp_alloc: 1`)."""

    device_id: int | None
    counters: dict[str, int]


_HW_STAT_RE = re.compile(r"^\[(?:devid|device)\s+(?P<dev>\d+)\]\s*(?P<name>[A-Za-z][\w]*):\s*(?P<value>\S+)$")


@parser("hccn-hw-stats")
def parse_hccn_hw_stats(text: str) -> HccnHwStats:
    kind = "hccn-hw-stats"
    device, lines = _body(kind, text)
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


# -- route -------------------------------------------------------------------------------------------------

class HccnRoute(ParsedModel):
    """One row of the device NIC's routing table."""

    #: `0.0.0.0` for `default`, else the printed destination
    destination: str
    #: None for `*` (on-link)
    gateway: str | None
    genmask: str
    prefix_len: int
    flags: str
    metric: int
    ref: int
    use: int
    iface: str


class HccnRouteTable(ParsedModel):
    """`hccn_tool -i N -route -g`: the device's `route` table (busybox `route -n` columns)."""

    device_id: int | None
    routes: list[HccnRoute]

    @property
    def default_route(self) -> HccnRoute | None:
        return next((r for r in self.routes if r.prefix_len == 0), None)


_ROUTE_HEADER = ["Destination", "Gateway", "Genmask", "Flags", "Metric", "Ref", "Use", "Iface"]


@parser("hccn-route")
def parse_hccn_route(text: str) -> HccnRouteTable:
    """Parse `-route -g`; every row must have the 8 columns, with a contiguous Genmask that matches its
    destination (a row cut mid-way or shifted columns is a ParseError, not a route)."""
    kind = "hccn-route"
    device, lines = _body(kind, text)
    rows = list(content(lines))
    if rows[0].strip() != "Routing table:":
        raise fail(kind, "expected 'Routing table:' first", rows[0])
    if len(rows) < 2 or rows[1].split() != _ROUTE_HEADER:
        raise fail(kind, "expected the header '" + " ".join(_ROUTE_HEADER) + "'", rows[min(1, len(rows) - 1)])
    routes = []
    for line in rows[2:]:
        cells = line.split()
        if len(cells) != len(_ROUTE_HEADER):
            raise fail(kind, f"route row has {len(cells)} columns, expected {len(_ROUTE_HEADER)}", line)
        dest, gateway, genmask, flags, metric, ref, use, iface = cells
        mask = to_netmask(kind, genmask, line, what="Genmask") if genmask != "0.0.0.0" else genmask
        destination = "0.0.0.0" if dest == "default" else to_ip(kind, dest, line, what="Destination")
        try:
            prefix = ipaddress.IPv4Network(f"{destination}/{mask}").prefixlen
        except ValueError:
            raise fail(kind, f"destination {dest} does not fit Genmask {genmask}", line) from None
        if not re.fullmatch(r"[UGHRDMAC!]+", flags):
            raise fail(kind, f"unknown route flags {flags!r}", line)
        routes.append(HccnRoute(
            destination=destination,
            gateway=None if gateway == "*" else to_host_ip(kind, gateway, line, what="Gateway"),
            genmask=mask, prefix_len=prefix, flags=flags,
            metric=to_int(kind, metric, line, what="Metric"), ref=to_int(kind, ref, line, what="Ref"),
            use=to_int(kind, use, line, what="Use"), iface=iface))
    if not routes:
        raise fail(kind, "routing table without routes (output cut off?)", rows[-1])
    return HccnRouteTable(device_id=device, routes=routes)


# -- link_stat -----------------------------------------------------------------------------------------

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
    device, lines = _body(kind, text)
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


# -- optical -------------------------------------------------------------------------------------------

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
    device, lines = _body(kind, text)
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


# -- lldp ----------------------------------------------------------------------------------------------

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
    device, lines = _body(kind, text)
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


# -- ping ----------------------------------------------------------------------------------------------

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
    device, lines = _body(kind, text)
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

