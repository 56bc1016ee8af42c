"""Parsers of `hccn_tool -i N ... -g` outputs, one module per sub-command family: link state (link,
net_health, netdetect, link_stat), addressing (ip, gateway, route), the port (fec, status, optical), tls,
counters (stat, hw_stats), lldp and ping; one device's output each.

An output may be preceded by its command echo (`$ hccn_tool -i 3 -ping -g ...`, as collection scripts
and pastes print it). Kind hccn-collection reads several echoed commands at once (`for i in 0..7`
collection scripts), dispatching each output by its option; errors keep whole-collection line numbers.
Importing this package registers every kind; the names below are its public interface.
"""

from ascend_ready.checks.parsers.hccn.address import (
    HccnGateway,
    HccnIp,
    HccnRoute,
    HccnRouteTable,
    parse_hccn_gateway,
    parse_hccn_ip,
    parse_hccn_route,
)
from ascend_ready.checks.parsers.hccn.collection import (
    CollectionEntry,
    CommandOutput,
    HccnCollection,
    parse_hccn_collection,
    parse_per_device,
    split_commands,
)
from ascend_ready.checks.parsers.hccn.link import (
    HccnLink,
    HccnLinkStat,
    HccnNetdetect,
    HccnNetHealth,
    LinkEvent,
    parse_hccn_link,
    parse_hccn_link_stat,
    parse_hccn_net_health,
    parse_hccn_netdetect,
)
from ascend_ready.checks.parsers.hccn.lldp import HccnLldp, parse_hccn_lldp
from ascend_ready.checks.parsers.hccn.ping import HccnPing, PingReply, parse_hccn_ping
from ascend_ready.checks.parsers.hccn.port import (
    HccnFec,
    HccnOptical,
    HccnStatus,
    parse_hccn_fec,
    parse_hccn_optical,
    parse_hccn_status,
)
from ascend_ready.checks.parsers.hccn.stats import HccnHwStats, HccnStat, parse_hccn_hw_stats, parse_hccn_stat
from ascend_ready.checks.parsers.hccn.tls import HccnTls, parse_hccn_tls

__all__ = [
    "CollectionEntry",
    "CommandOutput",
    "HccnCollection",
    "HccnFec",
    "HccnGateway",
    "HccnHwStats",
    "HccnIp",
    "HccnLink",
    "HccnLinkStat",
    "HccnLldp",
    "HccnNetHealth",
    "HccnNetdetect",
    "HccnOptical",
    "HccnPing",
    "HccnRoute",
    "HccnRouteTable",
    "HccnStat",
    "HccnStatus",
    "HccnTls",
    "LinkEvent",
    "PingReply",
    "parse_hccn_collection",
    "parse_hccn_fec",
    "parse_hccn_gateway",
    "parse_hccn_hw_stats",
    "parse_hccn_ip",
    "parse_hccn_link",
    "parse_hccn_link_stat",
    "parse_hccn_lldp",
    "parse_hccn_net_health",
    "parse_hccn_netdetect",
    "parse_hccn_optical",
    "parse_hccn_ping",
    "parse_hccn_route",
    "parse_hccn_stat",
    "parse_hccn_status",
    "parse_hccn_tls",
    "parse_per_device",
    "split_commands",
]
