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
from ascend_ready.checks.resources.base import ProbeDef, ProbeFailed, Resource, probe
from ascend_ready.checks.resources.npu import DeviceNodes
from ascend_ready.errors import ParseError

__all__ = [
    "HCCL_MESH",
    "MESH_HEADER",
    "HccnConfFile",
    "MeshFindings",
    "MeshResult",
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


#: Filled in by the controller, not the node: after the batches, `ascend-check` runs the device-NIC ping
#: mesh across the hosts (checks/cluster/mesh_run.py) and records each host's part of the result here,
#: so a snapshot replays it. On the node the probe is the shell's no-op.
HCCL_MESH = probe("hccl-mesh", shell=":", description="the device-NIC mesh across hosts (by the controller)")
MESH_HEADER = "ascend-check mesh v1"


@dataclass
class MeshFindings:
    """This host's part of the mesh: what was run, and every finding that names this host."""

    hosts: list[str]
    rounds: int
    pings: int
    retests: int
    findings: list[str]


class MeshResult(Resource):
    """The device-NIC ping mesh result the controller recorded for this host."""

    probes = (HCCL_MESH,)

    @cached_property
    def result(self) -> MeshFindings:
        import json

        text = self.host.stdout("hccl-mesh")
        head, _, body = text.partition("\n")
        if head.strip() != MESH_HEADER:
            raise ProbeFailed(
                "the device-NIC mesh did not run for this host (it runs live across two or more hosts)",
                hint="run ascend-check --tier full on all the hosts together (-i INVENTORY)",
            )
        try:
            raw = json.loads(body)
            return MeshFindings(**raw)
        except (ValueError, TypeError) as exc:
            raise ParseError("hccl-mesh", f"not a mesh record ({exc})", line_no=2,
                             line=body.splitlines()[0] if body else "") from None


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
