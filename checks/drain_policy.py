"""What the Slurm health check may do to a partition, beyond one node's verdict: a drain breaker and the
return-to-service rule, and the node's drain history.

- **Breaker.** A check that goes wrong (a bad profile, a driver update, a broken shared file system) fails
  every node at once; draining them all turns a false alarm into an outage. So ascend-check never drains
  more than `max_share` of a partition (default 50 %) in one `window_s` (NVIDIA NVSentinel's circuit
  breaker, NVSentinel PR #1852, https://github.com/NVIDIA/NVSentinel/pull/1852). The count comes from
  Slurm's own state (`sinfo -h -N -o '%N|%P|%T|%u|%H|%E'`: every node, its partition, its drain reason and
  the reason's time), not from a file: it is the one view every node's health check shares, it survives
  a node's reinstall, and a reason an administrator set is never counted as ours. Two nodes judging at the
  same second can both drain; each then reads the partition again, and the ones past the limit, in the
  order Slurm timed their reasons (then by name), undo their own drain, so the limit holds without a
  lock. A drain held back is said: a log line, a line in the node's history file, and the textfile metric
  `ascend_check_drain_held_back` (alert AscendCheckDrainHeldBack).
- **Cannot judge.** A check that could not judge (`error`) says nothing about the hardware; a hung
  npu-smi on every node must not drain them. It drains only when `drain_on_error` is set.
- **Return to service.** A node ascend-check drained is resumed only by a run of an active tier
  (`resume_tiers`: the full tier or burn-in by default, burn-in alone if so configured) that passes,
  never by the quick health check alone: a flapping fault (a link, an ECC burst) passes a quick look
  between failures (NVSentinel#1427, its users' ask for an active re-check before a node comes back).
  An administrator's drain is never touched.
- **History.** Slurm keeps only the current reason; the node keeps every drain, hold-back, quick pass and
  resume in `drain-history.jsonl` beside its report, one JSON object a line.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from ascend_ready.checks import textfile
from ascend_ready.errors import RemoteError

__all__ = [
    "PARTITION_FORMAT",
    "BreakerVerdict",
    "DrainPolicy",
    "PartitionNode",
    "breaker_verdict",
    "history_path",
    "parse_partition_nodes",
    "record",
]

#: `sinfo -h -N -o FORMAT`: one line per node and partition; the reason last, so a `|` in it stays in it.
#: %H is the time the reason was set ("Unknown" when none), in SLURM_TIME_FORMAT's standard form
PARTITION_FORMAT = "%N|%P|%T|%u|%H|%E"
#: every drain reason ascend-check sets starts so; only a drain with it is ever counted or resumed by us
REASON_PREFIX = "ascend-check:"
#: the history file's name, beside the node's report
HISTORY_NAME = "drain-history.jsonl"
#: the history keeps its last lines only (a node checked every 5 min for a year stays small)
HISTORY_KEEP = 2000


@dataclass(frozen=True)
class DrainPolicy:
    """The breaker's and return-to-service's settings (ascend-check node --drain-max-share ...)."""

    max_share: float = 0.5
    window_s: float = 3600.0
    drain_on_error: bool = False
    resume_tiers: tuple[str, ...] = ("full", "burn-in")  # burn-in runs the full tier and more

    @classmethod
    def resuming_from(cls, tier: str, **fields) -> DrainPolicy:
        """The policy whose drained nodes come back after a pass of `tier` or a tier above it."""
        return cls(resume_tiers=("burn-in",) if tier == "burn-in" else ("full", "burn-in"), **fields)

    def limit(self, total: int) -> int:
        """How many of `total` nodes ascend-check may hold drained in one window: at least one (a
        partition of one node can still lose its broken node), never all of a partition of two or more."""
        allowed = math.floor(self.max_share * total + 1e-9)
        return max(1, min(allowed, total - 1)) if total > 1 else 1


@dataclass(frozen=True)
class PartitionNode:
    """One line of `sinfo -h -N -o '%N|%P|%T|%u|%H|%E'`."""

    name: str
    partition: str  # the default partition's name without sinfo's trailing "*"
    state: str
    reason_user: str
    reason_time: datetime | None  # None: no reason set ("Unknown")
    reason: str

    @property
    def drained_by_us(self) -> bool:
        return "drain" in self.state and self.reason.startswith(REASON_PREFIX)


def parse_partition_nodes(text: str) -> list[PartitionNode]:
    """sinfo's lines in PARTITION_FORMAT; RemoteError naming the line that does not read so (fail closed:
    a breaker that cannot count must not drain)."""
    nodes = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|", 5)
        if len(parts) != 6 or not parts[0] or not parts[1]:
            raise RemoteError(
                f"sinfo line {n} is not '%N|%P|%T|%u|%H|%E': {line[:200]!r}",
                hint="run `sinfo -h -N -o '%N|%P|%T|%u|%H|%E'` on the node; a Slurm older than 17.02?",
            )
        when = parts[4].strip()
        try:
            ts = None if when in ("Unknown", "N/A", "") else datetime.fromisoformat(when)
        except ValueError:
            raise RemoteError(
                f"sinfo line {n}: reason time {when!r} is not YYYY-MM-DDTHH:MM:SS",
                hint="unset SLURM_TIME_FORMAT for the health check (the breaker reads the standard form)",
            ) from None
        nodes.append(
            PartitionNode(
                name=parts[0].strip(),
                partition=parts[1].strip().rstrip("*"),
                state=parts[2].strip(),
                reason_user=parts[3].strip(),
                reason_time=ts,
                reason=parts[5].strip(),
            )
        )
    return nodes


@dataclass(frozen=True)
class BreakerVerdict:
    """Whether `node` may be (or stay) drained by ascend-check now, and the partition figures that say so."""

    allowed: bool
    partition: str
    total: int
    limit: int
    drained: list[str] = field(default_factory=list)  # ours, in the window, in drain order (self included)
    note: str = ""


def breaker_verdict(
    node: str, rows: Sequence[PartitionNode], policy: DrainPolicy, now: datetime, *, drained_self: bool
) -> BreakerVerdict:
    """Whether `node` may be drained (drained_self False: before draining) or keep the drain it just set
    (True: after draining, the re-read), judged in each partition the node is in; the tightest decides."""
    parts = sorted({r.partition for r in rows if r.name == node})
    if not parts:
        raise RemoteError(
            f"sinfo lists node {node!r} in no partition",
            hint="the node name must be Slurm's (NodeName= in slurm.conf): give --node-name",
        )
    worst: BreakerVerdict | None = None
    for part in parts:
        members = [r for r in rows if r.partition == part]
        total = len({r.name for r in members})
        limit = policy.limit(total)
        ours = sorted(
            (r for r in members if r.drained_by_us and _in_window(r, now, policy.window_s)),
            key=lambda r: (r.reason_time or now, r.name),
        )
        order = [r.name for r in ours]
        if drained_self:
            # keep the drain when the drains timed at or before ours (ties included: two nodes drained in
            # the same second both count the other) fit the limit; a later drain read after ours counts it
            mine = next((r.reason_time for r in ours if r.name == node), None)
            rank = sum(1 for r in ours if mine is None or r.reason_time is None or r.reason_time <= mine)
            allowed = node not in order or rank <= limit
        else:
            order = [n for n in order if n != node]
            allowed = len(order) < limit
            order.append(node)
        verdict = BreakerVerdict(allowed, part, total, limit, order)
        if worst is None or (worst.allowed and not allowed):
            worst = verdict
    assert worst is not None
    others = [n for n in worst.drained if n != node]
    note = (
        f"partition {worst.partition}: {len(others)} of {worst.total} nodes already drained by "
        f"ascend-check within {policy.window_s:g} s ({', '.join(others) or 'none'}); the breaker allows "
        f"{worst.limit} ({policy.max_share:.0%})"
    )
    return BreakerVerdict(worst.allowed, worst.partition, worst.total, worst.limit, worst.drained, note)


def _in_window(row: PartitionNode, now: datetime, window_s: float) -> bool:
    if row.reason_time is None:  # drained with our reason but no time: count it (fail towards not draining)
        return True
    return (now - row.reason_time).total_seconds() <= window_s


def history_path(report_file: str | os.PathLike) -> Path:
    return Path(report_file).parent / HISTORY_NAME


def record(path: Path, **event) -> None:
    """Append one event to the node's drain history (best effort: the Slurm action stands without it; a
    failure is said on stderr by the caller)."""
    event = {"time": datetime.now().astimezone().isoformat(timespec="seconds"), **event}
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text().splitlines() if path.is_file() else []
    lines.append(json.dumps(event, sort_keys=True))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines[-HISTORY_KEEP:]) + "\n")
    os.replace(tmp, path)


def read_history(path: Path) -> list[dict]:
    """The node's drain history, oldest first (lines that do not parse are skipped: it is a log)."""
    try:
        text = path.read_text() if path.is_file() else ""
    except OSError:  # unreadable: as if empty (the history is a log; the Slurm action stands without it)
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


#: the Slurm actions the textfile reports, one series each (1 for this run's)
ACTIONS = ("drain", "resume", "held", "recheck", "unjudged", "none")


def render_metrics(node: str, action) -> str:
    """node_exporter textfile lines for the health check's Slurm action (appended to the report's)."""
    held = textfile.gauge(
        "ascend_check_drain_held_back",
        "1 when the node fails a check but the drain breaker kept it in service (too many of its partition "
        "already drained by ascend-check).",
        ["host"],
    )
    held.add_metric([node], int(action.action == "held"))
    done = textfile.gauge(
        "ascend_check_slurm_action", "1 for what this health-check run did to the node in Slurm.",
        ["host", "action"],
    )
    for a in ACTIONS:
        done.add_metric([node, a], int(action.action == a))
    return textfile.render([held, done])


def as_dict(v: BreakerVerdict) -> dict:
    return asdict(v)
