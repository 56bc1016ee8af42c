"""Parsers of `ip -o route get ADDR` (which NIC and source address reach ADDR) and `ip -o addr show`
(the addresses each NIC holds): how ascend-train picks a node's HCCL/gloo NIC toward the master.

`ip -o route get` prints one line: `[local|broadcast|...] DEST [via GW] dev NIC src ADDR ...`, then, with
`-o`, the cache attributes behind a backslash (`\\    cache `); `ip -o addr` one line per address.
"""

from __future__ import annotations

import ipaddress

from ascend_ready.checks.parsers._common import content, strip_preamble, text_lines
from ascend_ready.checks.parsers.base import ParsedModel, fail, parser

__all__ = [
    "ADDR_KIND", "ROUTE_KIND", "IpAddress", "IpAddresses", "IpRoute", "nic_toward", "parse_ip_addr",
    "parse_ip_route_get",
]

ROUTE_KIND = "ip-route-get"
ADDR_KIND = "ip-addr"

#: route types iproute2 prints before the destination (rtnl_rtntype_n2a); "unicast" is left out
_ROUTE_TYPES = frozenset(
    {"local", "broadcast", "anycast", "multicast", "blackhole", "unreachable", "prohibit", "throw", "nat"}
)
#: keywords of `ip route get` that take one value (print_route and its cache attributes)
_VALUED = frozenset(
    {"via", "dev", "src", "from", "table", "proto", "scope", "metric", "pref", "uid", "mark", "iif",
     "oif", "tos", "dsfield", "realms", "expires", "mtu", "hoplimit", "error", "users", "age", "as",
     "to", "nhid", "rtt", "rttvar", "advmss", "initcwnd", "initrwnd", "quickack", "window", "ssthresh",
     "cwnd", "reordering", "features", "congctl", "fastopen_no_cookie", "ipid", "used"}
)


class IpRoute(ParsedModel):
    """`ip -o route get DEST`: the route the kernel would use for DEST."""

    destination: str
    #: the NIC the packets leave through (`lo` for an address of this host)
    dev: str
    #: this host's address the packets carry (HCCL_IF_IP)
    src: str | None
    #: the gateway, when DEST is not on a directly attached network
    via: str | None = None
    #: the route type iproute2 printed (`local` for an address of this host; None for unicast)
    route_type: str | None = None

    @property
    def is_local(self) -> bool:
        """DEST is one of this host's own addresses: the route goes through `lo`, not a real NIC."""
        return self.route_type == "local"


class IpAddress(ParsedModel):
    """One address line of `ip -o addr show`."""

    index: int
    dev: str
    family: str
    address: str
    prefix: int


def _address(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(text) from None


@parser(ROUTE_KIND)
def parse_ip_route_get(text: str) -> IpRoute:
    """Parse `ip -o route get DEST`; a line without `dev` (an unreachable destination) is a ParseError."""
    lines = list(content(strip_preamble(text_lines(ROUTE_KIND, text), ("ip",))))
    if len(lines) != 1:
        raise fail(ROUTE_KIND, f"expected one route line, got {len(lines)}", lines[1] if lines else None,
                   hint="pass the output of `ip -o route get ADDRESS` (with -o: one line)")
    line = lines[0]
    words = line.split("\\", 1)[0].split()  # behind the backslash: the route cache's own attributes
    route_type = None
    if words and words[0] in _ROUTE_TYPES:
        route_type = words.pop(0)
    if not words:
        raise fail(ROUTE_KIND, "no destination", line)
    try:
        destination = _address(words[0])
    except ValueError:
        raise fail(ROUTE_KIND, f"destination {words[0]!r} is not an IP address", line) from None
    fields: dict[str, str] = {}
    i = 1
    while i < len(words):
        key = words[i]
        if key in _VALUED:
            if i + 1 >= len(words):
                raise fail(ROUTE_KIND, f"`{key}` without a value", line)
            fields.setdefault(key, words[i + 1])
            i += 2
        else:  # flags without a value (`onlink`, `notify`, `<local>`)
            i += 1
    if "dev" not in fields:
        raise fail(ROUTE_KIND, "no `dev NIC`: the destination is not reachable from this host", line,
                   hint="check the node's routes to the master (`ip route`) or name the NIC in the config")
    try:
        src = _address(fields["src"]) if "src" in fields else None
        via = _address(fields["via"]) if "via" in fields else None
    except ValueError as exc:
        raise fail(ROUTE_KIND, f"{exc} is not an IP address", line) from None
    return IpRoute(destination=destination, dev=fields["dev"], src=src, via=via, route_type=route_type)


class IpAddresses(ParsedModel):
    """`ip -o addr show`: every address line."""

    addresses: list[IpAddress]

    def holding(self, address: str) -> IpAddress | None:
        """The entry of the NIC that holds `address`, or None."""
        want = str(ipaddress.ip_address(address))
        return next((a for a in self.addresses if a.address == want), None)


def nic_toward(master: str, route: IpRoute, addrs: IpAddresses | None) -> tuple[str, str | None] | None:
    """(NIC, source address) that HCCL and gloo reach `master` through: the route's NIC, or, on the
    master itself (its own address routes through lo), the NIC holding the address; None when none does.
    Never the first name in order, which is `bond0`, `br-...` or `cni0` on many nodes."""
    if not route.is_local:
        return route.dev, route.src
    held = addrs.holding(master) if addrs is not None else None
    return (held.dev, held.address) if held is not None else None


@parser(ADDR_KIND)
def parse_ip_addr(text: str) -> IpAddresses:
    """Parse `ip -o addr show [...]`: one entry per address line (inet and inet6), in order."""
    out = []
    for line in content(strip_preamble(text_lines(ADDR_KIND, text), ("ip",))):
        words = line.split("\\", 1)[0].split()
        if len(words) < 4 or not words[0].endswith(":") or words[2] not in ("inet", "inet6"):
            raise fail(ADDR_KIND, "not `N: NIC inet ADDRESS/PREFIX ...`", line,
                       hint="pass the output of `ip -o addr show` (with -o: one line per address)")
        try:
            index = int(words[0][:-1])
            iface = ipaddress.ip_interface(words[3])
        except ValueError:
            raise fail(ADDR_KIND, f"bad index or address {words[0]} {words[3]}", line) from None
        family = words[2]
        if (family == "inet") != (iface.version == 4):
            raise fail(ADDR_KIND, f"{family} with address {words[3]}", line)
        out.append(IpAddress(index=index, dev=words[1].split("@", 1)[0], family=family,
                             address=str(iface.ip), prefix=iface.network.prefixlen))
    return IpAddresses(addresses=out)
