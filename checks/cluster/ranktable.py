"""The HCCL rank table (`RANK_TABLE_FILE`, hccl.json) and the torchrun host list, from healthy devices only.

Formats: version 1.0 for Atlas 800T A2 and Atlas training servers (hiascend HCCL guide hcclug_000014,
canncommercial 800), version 1.2 for A3 SuperPoD servers (Ascend/mind-cluster
docs/zh/scheduling/06_api/14_hccl.json_file_description.md); see ../shared/REFERENCE.md 3.8.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ascend_ready.errors import ConfigError

__all__ = ["RankTableHost", "build_rank_table", "hostfile"]


@dataclass
class RankTableHost:
    """One server of the table: its name (server_id), host IP, and physical device id -> device IP."""

    name: str
    host_ip: str
    devices: Mapping[int, str]
    super_device_ids: Mapping[int, str] = field(default_factory=dict)  # A3 (version 1.2) only
    super_pod_id: str = "0"


def build_rank_table(
    hosts: Sequence[RankTableHost],
    *,
    version: str = "1.0",
    exclude: Iterable[str] = (),
) -> dict:
    """The rank table as a JSON-ready dict; ranks are global, in host order then device order.

    `exclude` takes host names (`node03`) and devices (`node03:5`), e.g. those the preflight failed.
    Every string value is a string, as HCCL expects (`"server_count": "2"`).
    """
    if version not in ("1.0", "1.2"):
        raise ConfigError(f"rank table version {version!r} is not supported",
                          hint="1.0 for Atlas 800T A2 / training servers, 1.2 for A3 SuperPoD")
    drop_hosts, drop_devices = _exclusions(exclude, hosts)
    servers, rank, seen_ips = [], 0, {}
    for host in hosts:
        if host.name in drop_hosts:
            continue
        devices = []
        for dev in sorted(host.devices):
            if (host.name, dev) in drop_devices:
                continue
            ip = str(ipaddress.ip_address(host.devices[dev]))
            if ip in seen_ips:
                raise ConfigError(f"device IP {ip} of {host.name} device {dev} is also {seen_ips[ip]}'s",
                                  hint="give every device NIC its own address (hccn_tool -i N -ip -s) or "
                                       "exclude one of them")
            seen_ips[ip] = f"{host.name} device {dev}"
            entry = {"device_id": str(dev), "device_ip": ip, "rank_id": str(rank)}
            if version == "1.2":
                if dev not in host.super_device_ids:
                    raise ConfigError(
                        f"{host.name} device {dev} has no super_device_id",
                        hint="read it with `npu-smi info -t spod-info -i N -c C` on the A3 node")
                entry = {"device_id": str(dev), "device_ip": ip,
                         "super_device_id": str(host.super_device_ids[dev]), "rank_id": str(rank)}
            devices.append(entry)
            rank += 1
        if devices:
            server = {"server_id": host.name, "host_ip": host.host_ip, "device": devices}
            servers.append(server)
    if not servers:
        raise ConfigError("no device is left for the rank table", hint="fewer exclusions, or fix the devices")
    table: dict = {"status": "completed", "version": version, "server_count": str(len(servers)),
                   "server_list": servers}
    if version == "1.2":
        pods: dict[str, list[dict]] = {}
        by_name = {h.name: h for h in hosts}
        for server in servers:
            pods.setdefault(by_name[server["server_id"]].super_pod_id, []).append(
                {"server_id": server["server_id"]})
        table["super_pod_list"] = [{"super_pod_id": pid, "server_list": members}
                                   for pid, members in sorted(pods.items())]
    return table


def hostfile(table: Mapping, *, slots: bool = True) -> str:
    """A host list with one line per server (`HOST slots=N`, as DeepSpeed/MPI hostfiles read it)."""
    lines = []
    for server in table["server_list"]:
        n = len(server["device"])
        lines.append(f"{server['host_ip']} slots={n}" if slots else server["host_ip"])
    return "\n".join(lines) + "\n"


def _exclusions(
    exclude: Iterable[str], hosts: Sequence[RankTableHost]
) -> tuple[set[str], set[tuple[str, int]]]:
    names = {h.name: h for h in hosts}
    drop_hosts, drop_devices = set(), set()
    for item in exclude:
        name, sep, dev = item.partition(":")
        if name not in names:
            raise ConfigError(f"cannot exclude {item!r}: no host {name!r} in the table",
                              hint=f"hosts: {', '.join(names)}")
        if not sep:
            drop_hosts.add(name)
            continue
        if not dev.isdigit() or int(dev) not in names[name].devices:
            raise ConfigError(f"cannot exclude {item!r}: {name} has no device {dev!r}",
                              hint=f"devices of {name}: {', '.join(map(str, sorted(names[name].devices)))}")
        drop_devices.add((name, int(dev)))
    return drop_hosts, drop_devices
