"""Parser of `/etc/hccn.conf`, the per-device NIC settings `hccn_tool` applies at boot.

Real files carry more keys than the documented `address_N`/`netmask_N`/`gateway_N`/`netdetect_N`/
`send_arp_status_N`, so any `<word>_<N>=value` is accepted (kept in `extra`); the address keys are
checked as IPs. Lines that are not `key=value`, comments or blank are a ParseError. A line `...` is the
elision mark of a pasted excerpt; it is accepted and recorded in `elided`, because a file with it is
known to be incomplete.
"""

from __future__ import annotations

import re

from pydantic import Field

from ascend_ready.checks.parsers._common import content, text_lines, to_host_ip, to_int, to_netmask
from ascend_ready.checks.parsers.base import ParsedModel, fail, parser

_KEY_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_]*?)_(?P<dev>\d+)$")
_IP_KEYS = ("address", "netmask", "gateway", "netdetect")


class HccnConfDevice(ParsedModel):
    address: str | None = None
    netmask: str | None = None
    gateway: str | None = None
    netdetect: str | None = None
    send_arp_status: int | None = None
    #: further `<name>_<N>` keys as written (`bitmap_N`, `dscp_tc_N`, `arp_N`, ...)
    extra: dict[str, str] = Field(default_factory=dict)


class HccnConf(ParsedModel):
    """`/etc/hccn.conf` by device id."""

    devices: dict[int, HccnConfDevice]
    #: keys without a `_<N>` device suffix
    globals: dict[str, str]
    #: the text had a `...` elision line (an excerpt, not a whole file)
    elided: bool


@parser("hccn-conf")
def parse_hccn_conf(text: str) -> HccnConf:
    kind = "hccn-conf"
    raw: dict[int, dict[str, object]] = {}
    globals_: dict[str, str] = {}
    seen: set[str] = set()
    elided = False
    for line in content(text_lines(kind, text)):
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        if stripped == "...":
            elided = True
            continue
        key, sep, value = stripped.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key):
            raise fail(kind, "expected 'key=value' (a comment starts with #)", line)
        if key in seen:
            raise fail(kind, f"{key} set twice", line)
        seen.add(key)
        match = _KEY_RE.match(key)
        if not match:
            globals_[key] = value
            continue
        name, dev = match["name"], int(match["dev"])
        device = raw.setdefault(dev, {"extra": {}})
        if name == "netmask":
            device[name] = to_netmask(kind, value, line, what=key)
        elif name in _IP_KEYS:
            device[name] = to_host_ip(kind, value, line, what=key)
        elif name == "send_arp_status":
            device[name] = to_int(kind, value, line, what=key)
        else:
            device["extra"][name] = value  # type: ignore[index]
    if not raw:
        raise fail(kind, "no per-device '<name>_<N>=' setting: not /etc/hccn.conf",
                   hint="hccn.conf sets address_N, netmask_N, ... for every NPU N")
    return HccnConf(devices={dev: HccnConfDevice(**values) for dev, values in sorted(raw.items())},
                    globals=globals_, elided=elided)
