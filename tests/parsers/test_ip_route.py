"""`ip -o route get` and `ip -o addr show` on real captures (iproute2 6.1 on a simulated node and on its
Debian 12 host), as the multi-node launcher reads them to pick each node's NIC toward the master."""

from __future__ import annotations

import pytest

from ascend_ready.checks.parsers.base import get_parser
from ascend_ready.checks.parsers.ip_route import parse_ip_addr, parse_ip_route_get
from ascend_ready.errors import ParseError

# `ascend-sim exec node01 -- ip -o route get 10.251.199.12` (byte-exact, the trailing space included)
ROUTE_PEER = "10.251.199.12 dev eth0 src 10.251.199.11 uid 0 \\    cache \n"
# the master's own address, asked on the master: local, through lo
ROUTE_SELF = "local 10.251.199.11 dev lo src 10.251.199.11 uid 0 \\    cache <local> \n"
# the host: off-link, through a gateway
ROUTE_VIA = "8.8.8.8 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0 \\    cache \n"
# `ip -o -6 route get ::1`
ROUTE_V6 = "local ::1 from :: dev lo table local proto kernel src ::1 metric 0 pref medium\n"
# `ascend-sim exec node01 -- ip -o addr show to 10.251.199.11`
ADDR_SELF = ("2: eth0    inet 10.251.199.11/24 scope global eth0\\       valid_lft forever "
             "preferred_lft forever\n")
# `ascend-sim exec node01 -- ip -o addr`
ADDR_ALL = (
    "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
    "1: lo    inet6 ::1/128 scope host \\       valid_lft forever preferred_lft forever\n"
    "2: eth0    inet 10.251.199.11/24 scope global eth0\\       valid_lft forever preferred_lft forever\n"
    "2: eth0    inet6 fe80::b0b7:7cff:fed6:54c1/64 scope link \\       valid_lft forever "
    "preferred_lft forever\n"
)


def test_route_to_a_peer_names_the_nic_and_source():
    r = parse_ip_route_get(ROUTE_PEER)
    assert (r.destination, r.dev, r.src, r.via) == ("10.251.199.12", "eth0", "10.251.199.11", None)
    assert not r.is_local


def test_route_to_an_own_address_is_local_through_lo():
    r = parse_ip_route_get(ROUTE_SELF)
    assert r.is_local and r.dev == "lo" and r.src == "10.251.199.11"
    v6 = parse_ip_route_get(ROUTE_V6)
    assert v6.is_local and v6.dev == "lo" and v6.src == "::1"


def test_route_through_a_gateway():
    r = parse_ip_route_get(ROUTE_VIA)
    assert (r.dev, r.src, r.via) == ("eth0", "192.0.2.2", "192.0.2.1")


def test_addr_shows_the_nic_holding_an_address():
    held = parse_ip_addr(ADDR_SELF).holding("10.251.199.11")
    assert (held.dev, held.family, held.prefix) == ("eth0", "inet", 24)
    everything = parse_ip_addr(ADDR_ALL)
    assert [a.dev for a in everything.addresses] == ["lo", "lo", "eth0", "eth0"]
    assert everything.holding("10.251.199.12") is None


@pytest.mark.parametrize("text, reason", [
    ("RTNETLINK answers: Network is unreachable\n", "is not an IP address"),
    ("10.9.9.9 via 10.0.0.1 src 10.0.0.2\n", "no `dev NIC`"),
    (ROUTE_PEER + ROUTE_PEER, "expected one route line, got 2"),
    ("10.0.0.1 dev\n", "`dev` without a value"),
])
def test_unreadable_routes_fail_closed(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_ip_route_get(text)


def test_both_kinds_are_registered():
    assert get_parser("ip-route-get") is parse_ip_route_get and get_parser("ip-addr") is parse_ip_addr
    with pytest.raises(ParseError, match="not `N: NIC inet"):
        parse_ip_addr("eth0 UP 10.0.0.1/24\n")
