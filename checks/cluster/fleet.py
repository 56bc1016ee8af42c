"""Fleet consistency: nodes grouped by fingerprint, and the odd ones out named with the majority value.

Pure logic over per-node fingerprints (field -> value as the node reported it). No golden file is
needed: the majority of the fleet is the reference. A field without a strict majority is a tie,
reported as such rather than guessed. An optional golden mapping pins expected values instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MISSING", "Deviation", "Tie", "compare", "groups"]

#: the value of a field a node did not report (its probe failed or printed nothing)
MISSING = "(not read)"


@dataclass(frozen=True)
class Deviation:
    """`node` has `value` for `field`, where the reference (majority or golden) is `expected`."""

    node: str
    field: str
    value: str
    expected: str
    reference: str  # "majority (5 of 6 nodes)", "golden file" or what pinned the value

    def __str__(self) -> str:
        if self.expected == MISSING:  # no reference: nothing read on most nodes, or a tie
            return f"{self.node}: {self.field} is {self.value}, so it cannot be compared with the fleet"
        return f"{self.node}: {self.field} is {self.value}, the {self.reference} has {self.expected}"


@dataclass(frozen=True)
class Tie:
    """No value of `field` is held by more than half of the fleet: who has what."""

    field: str
    holders: tuple[tuple[str, tuple[str, ...]], ...]  # value -> nodes

    def __str__(self) -> str:
        parts = "; ".join(f"{value} on {', '.join(nodes)}" for value, nodes in self.holders)
        return f"{self.field}: no majority ({parts})"


def groups(fingerprints: Mapping[str, Mapping[str, str]]) -> list[tuple[dict[str, str], list[str]]]:
    """Nodes with identical fingerprints together, largest group first (ties: by first node name)."""
    buckets: dict[tuple, list[str]] = {}
    for node in sorted(fingerprints):
        key = tuple(sorted(fingerprints[node].items()))
        buckets.setdefault(key, []).append(node)
    ordered = sorted(buckets.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    return [(dict(key), nodes) for key, nodes in ordered]


def compare(
    fingerprints: Mapping[str, Mapping[str, str]],
    golden: Mapping[str, str] | None = None,
    *,
    pinned_by: str = "golden file",
) -> tuple[list[Deviation], list[Tie]]:
    """Every node's deviations from the golden value of a field, or else from the fleet's strict majority.

    A field some nodes did not report counts as MISSING for them, so a node whose probe failed is named
    too (never silently left out of the vote), and MISSING is never a reference: a field no node
    reported names every node rather than passing what nobody read.
    """
    nodes = sorted(fingerprints)
    fields = sorted({f for fp in fingerprints.values() for f in fp} | set(golden or {}))
    deviations: list[Deviation] = []
    ties: list[Tie] = []
    for field in fields:
        values = {n: str(fingerprints[n].get(field, MISSING)) for n in nodes}
        if golden and field in golden:
            expected, reference = str(golden[field]), pinned_by
        else:
            read = Counter(v for v in values.values() if v != MISSING)
            top, top_n = read.most_common(1)[0] if read else (MISSING, 0)
            if top_n * 2 > len(nodes):
                expected, reference = top, f"majority ({top_n} of {len(nodes)} nodes)"
            else:  # no strict majority: a tie among what was read, never a guess
                expected, reference = MISSING, "fleet"
                if len(read) > 1:
                    holders = sorted(
                        ((v, tuple(n for n in nodes if values[n] == v)) for v in read),
                        key=lambda h: (-len(h[1]), h[0]),
                    )
                    ties.append(Tie(field, tuple(holders)))
        deviations += [Deviation(n, field, values[n], expected, reference) for n in nodes
                       if values[n] == MISSING or (expected != MISSING and values[n] != expected)]
    return deviations, ties
