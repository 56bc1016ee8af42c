"""HCCL device-NIC resources: one `hccn_tool -i N ... -g` query per device and `/etc/hccn.conf`, each
with the probe it runs. The devices are the node's /dev/davinciN (the logic ids hccn_tool takes).

A device whose query printed nothing is listed in `missing`, never read as a healthy answer.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar, Generic, TypeVar

from ascend_ready.checks.parsers.base import ParsedModel
from ascend_ready.checks.parsers.hccn import (
    HccnIp,
    HccnLink,
    HccnNetHealth,
    HccnPing,
    HccnTls,
    parse_hccn_ip,
    parse_hccn_link,
    parse_hccn_net_health,
    parse_hccn_ping,
    parse_hccn_tls,
)
from ascend_ready.checks.parsers.hccn_conf import HccnConf, parse_hccn_conf
from ascend_ready.checks.resources.base import ProbeDef, Resource, probe
from ascend_ready.checks.resources.npu import DeviceNodes

__all__ = [
    "HccnConfFile",
    "NicIp",
    "NicLink",
    "NicNetHealth",
    "NicPing",
    "NicReading",
    "NicTls",
    "same_subnet",
]

M = TypeVar("M", bound=ParsedModel)

HCCN_LINK = probe("hccn-link", argv=("hccn_tool", "-i", "{1}", "-link", "-g"), foreach="davinci")
HCCN_NET_HEALTH = probe(
    "hccn-net-health", argv=("hccn_tool", "-i", "{1}", "-net_health", "-g"), foreach="davinci"
)
HCCN_IP = probe("hccn-ip", argv=("hccn_tool", "-i", "{1}", "-ip", "-g"), foreach="davinci")
HCCN_TLS = probe("hccn-tls", argv=("hccn_tool", "-i", "{1}", "-tls", "-g"), foreach="davinci")
HCCN_CONF = probe("hccn-conf", argv=("cat", "/etc/hccn.conf"))
HCCN_PING = probe(
    "hccn-ping",
    shell=(
        'g=$(sed -n "s/^gateway_$1=//p" /etc/hccn.conf); '
        '[ -n "$g" ] || { echo "no gateway_$1 in /etc/hccn.conf" >&2; exit 2; }; '
        'hccn_tool -i "$1" -ping -g address "$g"'
    ),
    foreach="davinci",
    timeout_s=20,
    tool="hccn_tool",  # a hung hccn_tool stops the other hccn_tool probes of the batch, this one too
    description="ping each device's gateway from the device NIC (full tier)",
)


@dataclass
class NicReading(Generic[M]):
    """One device's answer to one hccn_tool query, and its output lines (evidence)."""

    device_id: int
    value: M
    evidence: list[str] = field(default_factory=list)


class _PerDevice(Resource, Generic[M]):
    """One hccn_tool query on every device NIC."""

    requires = (DeviceNodes,)
    probe_def: ClassVar[ProbeDef]
    parse: ClassVar[Callable[[str], ParsedModel]]
    ok_rc: ClassVar[tuple[int, ...]] = (0,)

    @cached_property
    def devices(self) -> dict[int, NicReading[M]]:
        """Device id -> its answer, for every device that answered (see `missing`)."""
        out: dict[int, NicReading[M]] = {}
        base = self.probe_def.id
        for key in self.host.instances(base):
            text = self.host.stdout(f"{base}.{key}", ok_rc=self.ok_rc)
            dev = int(key)
            lines = [f"[device {dev}] {line}" for line in text.splitlines() if line.strip()]
            out[dev] = NicReading(dev, type(self).parse(text), lines)  # type: ignore[arg-type]
        return out

    @cached_property
    def missing(self) -> list[int]:
        """Devices with a /dev/davinciN that printed no answer to this query."""
        ids = self.host.resource(DeviceNodes).ids
        return [d for d in ids if d not in self.devices]

    def command(self, device_id: int) -> str:
        return self.probe_def(self.host.profile).command_for(str(device_id))


class NicLink(_PerDevice[HccnLink]):
    """`hccn_tool -i N -link -g`: the device NIC's link (UP/DOWN)."""

    probes = (HCCN_LINK,)
    probe_def = HCCN_LINK
    parse = staticmethod(parse_hccn_link)


class NicNetHealth(_PerDevice[HccnNetHealth]):
    """`hccn_tool -i N -net_health -g`: the NIC's probe of its netdetect address."""

    probes = (HCCN_NET_HEALTH,)
    probe_def = HCCN_NET_HEALTH
    parse = staticmethod(parse_hccn_net_health)


class NicIp(_PerDevice[HccnIp]):
    """`hccn_tool -i N -ip -g`: the NIC's address and netmask."""

    probes = (HCCN_IP,)
    probe_def = HCCN_IP
    parse = staticmethod(parse_hccn_ip)
    # "Get ipconf failed, because no ip was preset there!" exits 1: a fact (no IP), not a failed probe.
    ok_rc = (0, 1)


class NicTls(_PerDevice[HccnTls]):
    """`hccn_tool -i N -tls -g`: the TLS switch."""

    probes = (HCCN_TLS,)
    probe_def = HCCN_TLS
    parse = staticmethod(parse_hccn_tls)


class NicPing(_PerDevice[HccnPing]):
    """`hccn_tool -i N -ping -g address GATEWAY` with the gateway of /etc/hccn.conf."""

    probes = (HCCN_PING,)
    probe_def = HCCN_PING
    parse = staticmethod(parse_hccn_ping)
    ok_rc = (0, 1)  # 100 % loss exits 1: a fact, judged by the check


class HccnConfFile(Resource):
    """`/etc/hccn.conf`: the addresses, netmasks and gateways the devices should run."""

    probes = (HCCN_CONF,)

    @cached_property
    def conf(self) -> HccnConf | None:
        """Parsed /etc/hccn.conf, or None when the file does not exist."""
        text = self.host.file("hccn-conf")
        return None if text is None else parse_hccn_conf(text)


def same_subnet(address: str, netmask: str, other: str) -> bool:
    net = ipaddress.ip_network(f"{address}/{netmask}", strict=False)
    return ipaddress.ip_address(other) in net
