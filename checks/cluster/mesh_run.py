"""The device-NIC ping mesh run for real: `hccn_tool -i P -ping -g address PEER` over SSH, round by round.

Each round of `mesh.rounds()` is one probe batch per pinging node, all nodes at once, with that node's
pings (one per plane) running in parallel on it, the whole round bounded in time. A ping whose output
cannot be parsed, that timed out or never ran is a failure with its raw output as evidence, never a
pass. Device IPs two ends share are reported before any ping and those ends are left out.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ascend_ready.checks.cluster.mesh import (
    DuplicateIp,
    MeshResult,
    Ping,
    PingOutcome,
    duplicate_ips,
    isolate,
    rounds,
)
from ascend_ready.checks.collect import collect
from ascend_ready.checks.parsers.hccn import parse_hccn_ping
from ascend_ready.checks.probes import Probe
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.snapshot import HostSnapshot
from ascend_ready.errors import AscendReadyError, ParseError
from ascend_ready.fleet.transport import FanoutOptions, Target

__all__ = ["PING_PACKETS", "MeshRun", "judge_ping", "mesh", "ping_probe", "read_device_ips", "run_mesh"]

#: packets per ping (`pkt`), as hccn_tool sends by default
PING_PACKETS = 3
#: seconds of a round kept beyond the pings' own limit: the batch watchdog's half-second tick, the 2 s
#: between its TERM and KILL of a ping that does not stop, and the batch's last output
_ROUND_MARGIN_S = 3.0

End = tuple[str, int]  # (node, plane): one device NIC


@dataclass
class MeshRun(MeshResult):
    """A MeshResult of a real run, with what was found before pinging and how long each round took.

    Ends that could not take part (a device IP two ends share, no IP, a node whose IPs could not be
    read) are in `culprits` with why, and were not pinged."""

    duplicates: list[DuplicateIp] = field(default_factory=list)
    #: wall seconds of each batch round, the schedule's first, then the re-tests' (isolate's order)
    round_wall_s: list[float] = field(default_factory=list)
    ping_timeout_s: float = 0.0

    def lines(self) -> list[str]:
        """The findings, one sentence each, culprits first."""
        out = [f"{node} device {plane}: " + "; ".join(ev)
               for (node, plane), ev in sorted(self.culprits.items())]
        out += [f"link {a} - {b} on plane {p}: " + "; ".join(e for e in ev if e)
                for (a, b, p), ev in sorted(self.bad_links.items())]
        out += [f"{a} - {b} on plane {p} unresolved: " + "; ".join(e for e in ev if e)
                for (a, b, p), ev in sorted(self.unresolved.items())]
        return out


def ping_probe(probe_id: str, plane: int, address: str, *, packets: int = PING_PACKETS,
               timeout_s: float) -> Probe:
    """One ping as a probe that runs beside the batch's others (a node pings all its planes at once)."""
    return Probe(probe_id, argv=("hccn_tool", "-i", str(plane), "-ping", "-g", "address", address,
                                 "pkt", str(packets)),
                 timeout_s=timeout_s, background=True,
                 tool="",  # one hung ping must not keep the node's other pings from starting
                 description=f"ping {address} from device {plane}")


def judge_ping(ping: Ping, address: str, snap: HostSnapshot, probe_id: str) -> PingOutcome:
    """The outcome of one ping from the pinging node's snapshot: only a complete, parsed reply of every
    packet from the expected address passes."""
    head = f"{ping.src} device {ping.plane} -> {ping.dst} {address}"
    if not snap.reachable:
        return PingOutcome(False, f"{head}: {ping.src} unreachable: {snap.error}")
    res = snap.probes.get(probe_id)
    if res is None:
        return PingOutcome(False, f"{head}: no result ({snap.error or 'the batch did not report it'})")
    raw = (res.stdout + res.stderr).strip()
    if res.not_run:
        return PingOutcome(False, f"{head}: `{res.command}` not run: {res.not_run}")
    if res.timed_out:
        return PingOutcome(False, f"{head}: `{res.command}` timed out after {res.timeout_s:g} s; "
                                  f"output: {raw!r}")
    try:
        parsed = parse_hccn_ping(res.stdout)
    except ParseError as exc:
        return PingOutcome(False, f"{head}: unreadable output of `{res.command}` (exit {res.rc}): "
                                  f"{exc.message}; output: {raw!r}")
    summary = res.stdout.strip().splitlines()[-1]
    if parsed.target != address or parsed.device_id not in (None, ping.plane):
        return PingOutcome(False, f"{head}: the output is of device {parsed.device_id} pinging "
                                  f"{parsed.target}: {raw!r}")
    ok = res.rc == 0 and parsed.transmitted > 0 and parsed.received == parsed.transmitted
    return PingOutcome(ok, f"{head}: {summary}" + ("" if res.rc == 0 else f" (exit {res.rc})"))


def run_mesh(
    targets: Sequence[Target],
    fanout_options: FanoutOptions,
    device_ips: Mapping[str, Mapping[int, str]],
    planes: Iterable[int],
    *,
    round_timeout_s: float = 20.0,
    packets: int = PING_PACKETS,
    known_bad: Mapping[End, Sequence[str]] | None = None,
) -> MeshRun:
    """Ping every pair of `targets` on every plane and isolate the culprits.

    `device_ips`: node -> device (= plane) -> its device IP, as `hccn_tool -ip -g` printed it.
    `known_bad`: ends already known broken (why), left out like duplicated IPs and missing ones.
    Each round takes at most `round_timeout_s` (the SSH connect included)."""
    planes = sorted(set(planes))
    names = [t.name for t in targets]
    by_name = {t.name: t for t in targets}
    bad: dict[End, list[str]] = {end: list(why) for end, why in (known_bad or {}).items()}
    duplicates = duplicate_ips({n: {d: ip for d, ip in device_ips.get(n, {}).items() if d in planes}
                                for n in names})
    for dup in duplicates:
        for end in dup.holders:
            bad.setdefault(end, []).append(f"{dup}: not pinged (a ping reaches whichever holder answers)")
    for name in names:
        for plane in planes:
            if (name, plane) not in bad and not device_ips.get(name, {}).get(plane):
                bad[(name, plane)] = [f"no device IP on device {plane} (hccn_tool -i {plane} -ip -g)"]

    connect_s = min(fanout_options.connect_timeout_s, round_timeout_s / 4)
    ping_timeout_s = max(1.0, round_timeout_s - connect_s - _ROUND_MARGIN_S)
    options = dataclasses.replace(
        fanout_options, host_deadline_s=round_timeout_s, probe_timeout_s=ping_timeout_s,
        connect_timeout_s=connect_s, concurrency=max(fanout_options.concurrency, 1))
    walls: list[float] = []

    def run_round(pings: list[Ping]) -> dict[Ping, PingOutcome]:
        by_src: dict[str, list[tuple[str, Ping, str]]] = {}
        for k, ping in enumerate(pings):
            address = device_ips[ping.dst][ping.plane]
            by_src.setdefault(ping.src, []).append((f"mesh-ping-{k}", ping, address))

        def plan(target: Target) -> tuple[list[Probe], str]:
            return [ping_probe(pid, p.plane, ip, packets=packets, timeout_s=ping_timeout_s)
                    for pid, p, ip in by_src[target.name]], "root"

        started = time.monotonic()
        snaps = collect([by_name[s] for s in by_src], plan, options)
        walls.append(round(time.monotonic() - started, 3))
        out = {}
        for snap in snaps:
            for pid, ping, address in by_src[snap.name]:
                out[ping] = judge_ping(ping, address, snap, pid)
        return out

    result = isolate(rounds(names, planes), run_round, skip=bad)
    run = MeshRun(**{f.name: getattr(result, f.name) for f in dataclasses.fields(MeshResult)},
                  duplicates=duplicates, round_wall_s=walls, ping_timeout_s=ping_timeout_s)
    for end, why in sorted(bad.items()):
        run.culprits.setdefault(end, []).extend(why)
    return run


def read_device_ips(
    targets: Sequence[Target], fanout_options: FanoutOptions, profiles: Mapping[str, HardwareProfile]
) -> tuple[dict[str, dict[int, str]], dict[End | str, list[str]]]:
    """Every node's device IPs (`hccn_tool -i N -ip -g` on each /dev/davinciN, the preflight's own probe
    and parser), in one fan-out: (node -> device -> IP, problems). A problem is keyed by (node, device)
    for one device without a readable IP, or by the node's name when none of its IPs could be read.
    `profiles`: each host's resolved profile (preflight.profiles_for)."""
    from ascend_ready.checks.resources import Host, NicIp
    from ascend_ready.checks.resources.base import resource_closure


    def plan(target: Target) -> tuple[list[Probe], str]:
        prof = profiles[target.name]
        return [d(prof) for cls in resource_closure([NicIp]) for d in cls.probes], "root"

    ips: dict[str, dict[int, str]] = {}
    problems: dict[End | str, list[str]] = {}
    for snap in collect(list(targets), plan, fanout_options):
        if not snap.reachable:
            problems[snap.name] = [f"unreachable: {snap.error}"]
            continue
        host = Host(snap, profiles[snap.name])
        try:
            nic_ip = host.resource(NicIp)
            devices, missing = nic_ip.devices, nic_ip.missing
        except AscendReadyError as exc:  # a probe that failed or an output that does not parse
            problems[snap.name] = [f"device IPs not read: {exc.message}"]
            continue
        ips[snap.name] = {}
        for dev, reading in devices.items():
            if reading.value.address is None:
                problems[(snap.name, dev)] = [f"no device IP: {' / '.join(reading.evidence)}"]
            else:
                ips[snap.name][dev] = reading.value.address
        for dev in missing:
            problems[(snap.name, dev)] = [f"`{nic_ip.command(dev)}` printed nothing"]
    return ips, problems


def mesh(
    targets: Sequence[Target],
    fanout_options: FanoutOptions,
    profiles: Mapping[str, HardwareProfile],
    *,
    planes: Iterable[int] | None = None,
    round_timeout_s: float = 20.0,
    packets: int = PING_PACKETS,
) -> MeshRun:
    """The whole mesh, end to end: read every node's device IPs, then ping (what `ascend-check` calls).

    `profiles`: each host's resolved profile (preflight.profiles_for); `planes` default: every device
    index some node has an IP on."""
    ips, problems = read_device_ips(targets, fanout_options, profiles)
    chosen = sorted(set(planes) if planes is not None else {d for devs in ips.values() for d in devs})
    known_bad: dict[End, list[str]] = {}
    for key, why in problems.items():
        ends = [(key, p) for p in chosen] if isinstance(key, str) else [key] if key[1] in chosen else []
        for end in ends:
            known_bad.setdefault(end, []).extend(why)
    return run_mesh(targets, fanout_options, ips, chosen, round_timeout_s=round_timeout_s, packets=packets,
                    known_bad=known_bad)


def record(run: MeshRun, snapshots: Sequence[HostSnapshot]) -> None:
    """Put each host's part of `run` into its snapshot as the `hccl-mesh` probe (what hccl.mesh judges)."""
    import json

    from ascend_ready.checks.resources.hccn import MESH_HEADER
    from ascend_ready.checks.snapshot import ProbeResult

    names = [s.name for s in snapshots]
    mine: dict[str, list[str]] = {n: [] for n in names}
    for (node, plane), ev in sorted(run.culprits.items()):
        mine.setdefault(node, []).append(f"device {plane}: " + "; ".join(e for e in ev if e))
    for (a, b, plane), ev in sorted(run.bad_links.items()):
        for node, peer in ((a, b), (b, a)):
            mine.setdefault(node, []).append(f"device {plane} cannot reach {peer} device {plane} (both reach "
                                             "others): " + "; ".join(e for e in ev if e))
    for (a, b, plane), ev in sorted(run.unresolved.items()):
        for node, peer in ((a, b), (b, a)):
            mine.setdefault(node, []).append(f"device {plane} - {peer} device {plane} failed, not narrowed "
                                             "down: " + "; ".join(e for e in ev if e))
    for snap in snapshots:
        body = {"hosts": names, "rounds": run.rounds, "pings": run.pings, "retests": run.retests,
                "findings": mine.get(snap.name, [])}
        snap.probes["hccl-mesh"] = ProbeResult(
            command="(controller) device-NIC ping mesh", rc=0,
            stdout=f"{MESH_HEADER}\n{json.dumps(body, sort_keys=True)}\n",
            duration_s=round(sum(run.round_wall_s), 3))
