"""The device-NIC ping mesh: which pairs to ping in which round, and who is to blame for a failure.

Pure logic (no I/O): `rounds()` schedules every pair of nodes on every device plane so that no
device NIC is used twice in a round; `isolate()` turns the failed pairs into culprits, asking for a few
re-tests against peers known to be good; `duplicate_ips()` finds device IPs that two nodes share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "DuplicateIp",
    "MeshResult",
    "Ping",
    "PingOutcome",
    "duplicate_ips",
    "isolate",
    "round_robin",
    "rounds",
]


@dataclass(frozen=True, order=True)
class Ping:
    """Device `plane` of node `src` pings device `plane` of node `dst` (its device IP)."""

    plane: int
    src: str
    dst: str

    @property
    def pair(self) -> frozenset[str]:
        return frozenset((self.src, self.dst))


@dataclass(frozen=True)
class PingOutcome:
    ok: bool
    evidence: str = ""


def round_robin(nodes: Sequence[str]) -> list[list[tuple[str, str]]]:
    """The circle method: N-1 rounds for an even N (N for an odd one), each a set of disjoint pairs.

    Every pair of nodes appears in exactly one round, and in a round every node is in at most one
    pair (an odd N gives one node a bye per round).
    """
    names = list(dict.fromkeys(nodes))
    if len(names) != len(nodes):
        raise ValueError("node names must be unique")
    if len(names) < 2:
        return []
    if len(names) % 2:
        names.append("")  # the bye
    n = len(names)
    fixed, rest = names[0], names[1:]
    out = []
    for r in range(n - 1):
        ring = [fixed, *rest[r:], *rest[:r]]
        pairs = [(ring[i], ring[n - 1 - i]) for i in range(n // 2)]
        out.append([(a, b) if a < b else (b, a) for a, b in pairs if a and b])
    return out


def rounds(nodes: Sequence[str], planes: Iterable[int]) -> list[list[Ping]]:
    """Every pair on every plane; each round pings all planes of its pairs at once (all in parallel)."""
    planes = sorted(set(planes))
    return [[Ping(p, a, b) for a, b in pairs for p in planes] for pairs in round_robin(nodes)]


@dataclass(frozen=True)
class DuplicateIp:
    address: str
    holders: tuple[tuple[str, int], ...]  # (node, device)

    def __str__(self) -> str:
        who = ", ".join(f"{n} device {d}" for n, d in self.holders)
        return f"device IP {self.address} is held by {who}"


def duplicate_ips(device_ips: Mapping[str, Mapping[int, str]]) -> list[DuplicateIp]:
    """Device IPs held by more than one (node, device): a ping to them reaches whichever answers first."""
    holders: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for node, devices in device_ips.items():
        for dev, ip in devices.items():
            holders[ip].append((node, dev))
    return [DuplicateIp(ip, tuple(sorted(h))) for ip, h in sorted(holders.items()) if len(h) > 1]


@dataclass
class MeshResult:
    """What the mesh found, per plane: culprit devices, bad links between two good ends, and the rest."""

    rounds: int = 0
    pings: int = 0
    retests: int = 0
    culprits: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # (node, plane) -> evidence
    bad_links: dict[tuple[str, str, int], list[str]] = field(default_factory=dict)  # (a, b, plane)
    unresolved: dict[tuple[str, str, int], list[str]] = field(default_factory=dict)
    transient: list[Ping] = field(default_factory=list)  # failed once, passed when re-tested

    @property
    def ok(self) -> bool:
        return not (self.culprits or self.bad_links or self.unresolved)


Runner = Callable[[list[Ping]], Mapping[Ping, PingOutcome]]


def isolate(
    schedule: list[list[Ping]],
    run_round: Runner,
    *,
    skip: Iterable[tuple[str, int]] = (),
) -> MeshResult:
    """Run the schedule, then narrow every failure down to a culprit (node, plane) or a bad link.

    An end is *proven* on a plane when one of its pings there succeeded. A failed pair between two
    proven ends is a bad link (e.g. a plane cut between two nodes), re-tested once to rule out a
    transient loss. An unproven end is re-tested against a proven peer: if that fails too, the end is
    the culprit, and its other failed pairs are explained by it (reported once, not as N-1 pairs).
    `skip` are (node, plane) ends already known bad (a device down, a duplicated IP): their pairs are
    not pinged and they are not blamed again.
    """
    skipped = set(skip)
    result = MeshResult()
    outcomes: dict[Ping, PingOutcome] = {}
    for planned in schedule:
        todo = [p for p in planned if (p.src, p.plane) not in skipped and (p.dst, p.plane) not in skipped]
        if not todo:
            continue
        result.rounds += 1
        result.pings += len(todo)
        outcomes.update(_checked(run_round(todo), todo))

    proven: set[tuple[str, int]] = set()
    for ping, out in outcomes.items():
        if out.ok:
            proven.update({(ping.src, ping.plane), (ping.dst, ping.plane)})
    failed = sorted(p for p, out in outcomes.items() if not out.ok)

    def retest(pings: list[Ping]) -> Mapping[Ping, PingOutcome]:
        result.retests += len(pings)
        return _checked(run_round(pings), pings) if pings else {}

    # 1. Failures between two proven ends: the path between them, unless it was a passing blip.
    links = [p for p in failed if (p.src, p.plane) in proven and (p.dst, p.plane) in proven]
    again = retest(links)
    for p in links:
        if again[p].ok:
            result.transient.append(p)
        else:
            result.bad_links[(p.src, p.dst, p.plane)] = [outcomes[p].evidence, again[p].evidence]

    # 2. Unproven ends: one re-test each against a proven peer, all in one round (each end once).
    suspects: dict[tuple[str, int], list[Ping]] = defaultdict(list)
    for p in failed:
        for end in ((p.src, p.plane), (p.dst, p.plane)):
            if end not in proven:
                suspects[end].append(p)
    peers_by_plane: dict[int, list[str]] = defaultdict(list)
    for node, plane in sorted(proven):
        peers_by_plane[plane].append(node)
    probes: dict[tuple[str, int], Ping] = {}
    busy: set[tuple[str, int]] = set()
    for end in sorted(suspects):
        node, plane = end
        peer = next((g for g in peers_by_plane[plane] if g != node and (g, plane) not in busy), None)
        if peer is None:  # every proven peer is busy this round, or there is none
            peer = next((g for g in peers_by_plane[plane] if g != node), None)
        if peer is None:
            for p in suspects[end]:
                result.unresolved[(p.src, p.dst, p.plane)] = [
                    outcomes[p].evidence,
                    f"no device on plane {plane} is known good to re-test {node} against",
                ]
            continue
        busy.add((peer, plane))
        probes[end] = Ping(plane, peer, node)
    answers = retest(list(probes.values()))
    for end, probe in probes.items():
        node, plane = end
        if answers[probe].ok:
            # Reachable from a good peer now: its failures were transient or belong to the other end.
            result.transient += [p for p in suspects[end] if _other(p, node) in proven]
            continue
        evidence = [answers[probe].evidence]
        evidence += [outcomes[p].evidence for p in suspects[end]]
        result.culprits[end] = [e for e in evidence if e]
    # A pair whose two ends are both unproven and both reachable from good peers stays unexplained.
    for p in failed:
        src, dst = (p.src, p.plane), (p.dst, p.plane)
        if src in result.culprits or dst in result.culprits or (p.src, p.dst, p.plane) in result.bad_links:
            continue
        if src in proven and dst in proven:
            continue
        if (p.src, p.dst, p.plane) not in result.unresolved and src in probes and dst in probes:
            result.unresolved[(p.src, p.dst, p.plane)] = [outcomes[p].evidence,
                                                          "both ends answer a known-good peer"]
    return result


def _other(p: Ping, node: str) -> tuple[str, int]:
    return (p.dst if p.src == node else p.src, p.plane)


def _checked(answers: Mapping[Ping, PingOutcome], asked: list[Ping]) -> dict[Ping, PingOutcome]:
    """Every asked ping has an outcome; one the runner did not report is a failure, never a pass."""
    return {p: answers.get(p, PingOutcome(False, f"no result for {p.src} -> {p.dst} plane {p.plane}"))
            for p in asked}
