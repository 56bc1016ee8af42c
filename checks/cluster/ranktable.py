"""The HCCL rank table (`RANK_TABLE_FILE`, hccl.json) and the torchrun host list, from healthy devices only.

Formats: version 1.0 for Atlas 800T A2 and Atlas training servers (hiascend HCCL guide hcclug_000014,
canncommercial 800), version 1.2 for A3 SuperPoD servers (Ascend/mind-cluster
docs/zh/scheduling/06_api/14_hccl.json_file_description.md); see ../shared/REFERENCE.md 3.8.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ascend_ready.checks.catalog import plan
from ascend_ready.checks.cluster.aliases import alias_note, snapshot_aliases
from ascend_ready.checks.collect import collect
from ascend_ready.checks.parsers.npu_smi_info import parse_npu_smi_info
from ascend_ready.checks.report import write_atomic
from ascend_ready.checks.resources import Host, MachineIdentity, NicIp, NpuSmi, probe_ids
from ascend_ready.checks.snapshot import Snapshot
from ascend_ready.errors import AscendReadyError, ConfigError

if TYPE_CHECKING:
    from ascend_ready.checks.report import Report
    from ascend_ready.checks.snapshot import HostSnapshot, Snapshot
    from ascend_ready.fleet.transport import Target

__all__ = [
    "RankTableHost",
    "build_rank_table",
    "fleet_rank_table",
    "healthy_devices",
    "hostfile",
    "parse_exclude",
    "read_device_ips",
    "table_hosts",
    "write_rank_table",
]

#: what `--exclude` takes (the same strings `build_rank_table(exclude=...)` does)
EXCLUDE_SYNTAX = "HOST (a whole node) or HOST:DEVICE (one device, by its number, e.g. node03:5)"


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
                                       f"leave one out: --exclude {host.name}:{dev}")
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


def parse_exclude(items: Iterable[str], hosts: Iterable[str] | None = None) -> list[str]:
    """`--exclude` values checked before anything runs: HOST or HOST:DEVICE, and (given `hosts`, the
    inventory's names) a host that exists. The device itself is checked once the node was read."""
    names = None if hosts is None else list(hosts)
    out = []
    for item in items:
        name, sep, dev = item.strip().partition(":")
        if not name or (sep and not dev.isdigit()) or any(c.isspace() for c in name):
            raise ConfigError(f"--exclude {item!r}: expected {EXCLUDE_SYNTAX}",
                              hint="e.g. --exclude node03 --exclude node02:5 (repeat the option for more)")
        if names is not None and name not in names:
            raise ConfigError(f"--exclude {item!r}: no host {name!r} among the hosts checked",
                              hint=f"hosts: {', '.join(names)}")
        out.append(f"{name}:{int(dev)}" if sep else name)
    return out


def read_device_ips(snap: HostSnapshot, profile) -> tuple[dict[int, str], list[str]]:
    """(device -> IP, why a device or the node has none) from the `hccn_tool -i N -ip -g` answers in the
    host's snapshot (the NicIp resource: the preflight's own probe and parser)."""

    try:
        nic_ip = Host(snap, profile).resource(NicIp)
        devices, missing = nic_ip.devices, nic_ip.missing
    except AscendReadyError as exc:  # a probe that failed or an output that does not parse
        return {}, [f"device IPs not read: {exc.message}"]
    ips, why = {}, []
    for dev, reading in sorted(devices.items()):
        if reading.value.address is None:
            why.append(f"device {dev} has no device IP")
        else:
            ips[dev] = reading.value.address
    why += [f"device {dev}: `{nic_ip.command(dev)}` printed nothing" for dev in missing]
    if not devices and not missing:
        why.append("no device NIC (no /dev/davinciN) to read an IP of")
    return ips, why


def table_hosts(
    snapshot: Snapshot, hosts: Mapping[str, tuple[str, Sequence[int]]]
) -> tuple[list[RankTableHost], dict[str, list[str]]]:
    """The rank table's servers: `hosts[name]` is (its host IP, its healthy devices); each keeps the
    healthy devices whose device IP was read. Also returns, per host, why devices (or it) were left out."""
    servers, left_out = [], {}
    for name, (host_ip, healthy) in hosts.items():
        snap = snapshot.hosts[name]
        ips, why = read_device_ips(snap, snap.profile)
        usable = {d: ip for d, ip in ips.items() if d in healthy}
        if why:
            left_out[name] = why
        if usable:
            servers.append(RankTableHost(name, host_ip, usable))
        elif not why:
            left_out[name] = ["no healthy device has a device IP"]
    return servers, left_out


def rank_table_version(profile) -> str:
    """1.2 for A3 SuperPoD servers, else 1.0 (../shared/REFERENCE.md 3.8)."""
    return "1.2" if getattr(profile, "matrix_product", None) == "910_93" else "1.0"


def healthy_devices(host: HostSnapshot) -> tuple[list[int], dict[str, str]]:
    """(device ids of the chips `npu-smi info` shows healthy, excluded id -> why) from a host snapshot.

    Device ids are logical, as ASCEND_RT_VISIBLE_DEVICES counts them: the table's Device column where it
    has one (310/310P), else the chips' position in NPU then chip order.
    A host whose table was not read has no known-good device: ([], {}) with nothing claimed.
    """

    result = host.probes.get("npu-smi-info")
    if result is None or result.rc != 0 or not result.stdout.strip():
        return [], {}
    info = parse_npu_smi_info(result.stdout)
    healthy, excluded = [], {}
    chips = [(npu.id, chip) for npu in info.npus for chip in npu.chips]
    for index, (npu_id, chip) in enumerate(sorted(chips, key=lambda c: (c[0], c[1].chip_id))):
        device = chip.device_id if chip.device_id is not None else index  # 310P prints its Device column
        if chip.health == "OK":
            healthy.append(device)
        else:
            excluded[str(device)] = f"NPU {npu_id} chip {chip.chip_id} health {chip.health} in npu-smi info"
    return healthy, excluded



def fleet_rank_table(
    snapshot: Snapshot,
    targets: Sequence[Target],
    fanout,
    *,
    exclude: Iterable[str] = (),
    failed: Mapping[str, Sequence[str]] | None = None,
    note: Callable[[str], None] = lambda line: None,
) -> dict | None:
    """The rank table `ascend-check --rank-table FILE` writes: every reachable host's devices that
    `npu-smi info` shows healthy and whose device IP was read, less `exclude` (HOST or HOST:DEVICE).

    A host without usable devices is left out, and `note` gets one line saying which and why (None, and
    a line saying so, when no host is left). What this run's probes did not read (the selected checks
    did not need it) is read now, in one more fan-out. Hosts that failed checks (`failed`: host -> check
    ids) stay in, and `note` names them: which of their devices to leave out is the operator's call
    (`--exclude node03:5` after the mesh named that device). ConfigError when `exclude` leaves no device or
    names a device a node lacks, and for an A3 fleet (its super_device_ids are not read yet).
    """

    reachable = [t for t in targets if t.name in snapshot.hosts and snapshot.hosts[t.name].reachable]
    unreachable = sorted({t.name for t in targets} - {t.name for t in reachable})
    profiles = {t.name: snapshot.hosts[t.name].profile for t in reachable}
    if any(rank_table_version(p) == "1.2" for p in profiles.values()):
        raise ConfigError("the A3 rank table (version 1.2) needs each device's super_device_id, which "
                          "ascend-check does not read yet",
                          hint="write it from `npu-smi info -t spod-info -i N -c C` on each node")
    have = Snapshot(hosts=dict(snapshot.hosts))
    # what the table reads on each node: the chips' health (npu-smi info), the device IPs, and which machine
    # it is (one listed twice would otherwise show as duplicate device IPs)
    wanted = set(probe_ids([NpuSmi, NicIp, MachineIdentity]))

    def lacks(snap: HostSnapshot) -> bool:
        return not all(any(k == p or k.startswith(f"{p}.") for k in snap.probes) for p in wanted)

    again = [t for t in reachable if lacks(snapshot.hosts[t.name])]
    if again:
        for snap in collect(again, lambda t: (plan(profiles[t.name], wanted), "root"), fanout):
            snap.profile = profiles[snap.name]
            have.hosts[snap.name] = snap
    reachable = [t for t in reachable if have.hosts[t.name].reachable]
    unreachable += sorted(t.name for t in again if not have.hosts[t.name].reachable)
    same = snapshot_aliases({t.name: have.hosts[t.name] for t in reachable})
    if same:
        raise ConfigError("; ".join(alias_note(a, n) for a, n in same.items()) + ": a rank table lists "
                          "each machine once",
                          hint="list each machine once in the inventory (or leave the other name out with "
                          f"--limit '!{next(iter(same))}')")
    health = {t.name: healthy_devices(have.hosts[t.name]) for t in reachable}
    servers, left_out = table_hosts(have, {t.name: (t.address or t.name, health[t.name][0])
                                           for t in reachable})
    for name, (healthy, unhealthy) in health.items():
        if not healthy and not unhealthy:
            res = have.hosts[name].probes.get("npu-smi-info")
            said = [] if res is None else (res.stderr or res.stdout).strip().splitlines()[-1:]
            why = "npu-smi info not read" + "".join(f" ({line})" for line in said)
            left_out.setdefault(name, []).insert(0, why)
        left_out.setdefault(name, []).extend(f"device {d}: {why}" for d, why in sorted(unhealthy.items()))
    lines = [f"{name} unreachable" for name in unreachable]
    lines += [f"{name} ({'; '.join(why)})" for name, why in left_out.items() if why]
    if lines:
        note("rank table leaves out: " + "; ".join(lines))
    # An --exclude naming what was left out already stands as it is; a device the node lacks is an error.
    kept = {s.name: s for s in servers}
    drop = []
    for item in exclude:
        name, sep, dev = item.partition(":")
        if sep and name in health:
            known = set(health[name][0]) | {int(d) for d in health[name][1]} | set(kept[name].devices
                                                                                   if name in kept else ())
            if known and int(dev) not in known:
                raise ConfigError(f"--exclude {item}: {name} has no device {dev}",
                                  hint=f"devices of {name}: {', '.join(map(str, sorted(known)))}")
        if name in kept and (not sep or int(dev) in kept[name].devices):
            drop.append(item)
    if not servers:
        note("rank table not written: no reachable host has a healthy device with a device IP")
        return None
    table = build_rank_table(servers, exclude=drop)
    kept_failed = [f"{s['server_id']} ({', '.join(failed[s['server_id']])})" for s in table["server_list"]
                   if (failed or {}).get(s["server_id"])]
    if kept_failed:
        note("rank table keeps hosts whose checks failed: " + "; ".join(kept_failed)
             + " (the report names the devices; leave them out with --exclude HOST or HOST:DEVICE)")
    return table


def write_rank_table(report: Report, snapshot: Snapshot, targets: Sequence[Target], fanout,
                     table_file: str | None, hosts_file: str | None, exclude: Iterable[str] = (), *,
                     note: Callable[[str], None] = lambda line: None) -> bool:
    """Write the rank table (`ascend-check --rank-table FILE`) and/or its host list (`--hostfile`); False
    (after a `note` saying why) when no host has a device to put in it. Hosts whose checks failed in
    `report` stay in, named (fleet_rank_table)."""


    failed: dict[str, list[str]] = {}
    for r in report.results:
        if r.status in ("fail", "error"):
            failed.setdefault(r.host, []).append(r.check_id)
    table = fleet_rank_table(snapshot, targets, fanout, exclude=exclude, failed=failed, note=note)
    if table is None:
        return False
    devices = sum(len(s["device"]) for s in table["server_list"])
    for path, text in ((table_file, json.dumps(table, indent=1) + "\n"), (hosts_file, hostfile(table))):
        if path:
            try:
                write_atomic(Path(path), text)
            except OSError as exc:
                raise ConfigError(f"cannot write {path}: {exc.strerror or exc}",
                                  hint="pick a file in a directory you may write") from None
            what = "rank table" if path == table_file else "hostfile"
            note(f"{what}: {path} ({devices} device(s) on {table['server_count']} host(s))")
    return True
