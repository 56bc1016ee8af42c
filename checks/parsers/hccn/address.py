"""Addressing of a device NIC: `-ip` (address/netmask), `-gateway` and `-route` (its routing table)."""

from __future__ import annotations

import ipaddress
import re

from ascend_ready.checks.parsers._common import content, key_values, to_host_ip, to_int, to_ip, to_netmask
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, parser
from ascend_ready.checks.parsers.hccn._output import one_line, output_body


class HccnGateway(ParsedModel):
    """`hccn_tool -i N -gateway -g`: `default gateway:<ip>, Iface:eth<N>`; None when none is set."""

    device_id: int | None
    gateway: str | None
    interface: str | None


@parser("hccn-gateway")
def parse_hccn_gateway(text: str) -> HccnGateway:
    kind = "hccn-gateway"
    device, lines = output_body(kind, text)
    match, line = one_line(kind, lines, re.compile(r"^default gateway:\s*(\S*?),?\s*(?:Iface:\s*(\S+))?$"),
                           "default gateway:<ip>, Iface:eth<N>")
    gateway = to_host_ip(kind, match[1], line, what="gateway") if match[1] else None
    return HccnGateway(device_id=device, gateway=gateway, interface=match[2])


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
    device, lines = output_body(kind, text)
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
    device, lines = output_body(kind, text)
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
