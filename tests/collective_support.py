"""Collective records for the judging tests: what the controller really recorded from the worker under
torchrun (gloo, 3 local "nodes" x 2 ranks, tests/cluster/collective_captures/), and edits of its values.

Regenerate the capture (about 30 s): .venv/bin/python tests/collective_support.py
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from pathlib import Path

from ascend_ready.checks.cluster.collective import RECORD_PROBE, CollectiveRecord, Measurement
from ascend_ready.checks.snapshot import HostSnapshot, ProbeResult

CAPTURE = Path(__file__).resolve().parent / "cluster" / "collective_captures" / "local-3x2-gloo.txt"


def captured() -> CollectiveRecord:
    return CollectiveRecord.from_text(CAPTURE.read_text())


def _kind(m: Measurement) -> tuple:
    return (m.kind, m.group.split(":")[0], m.size_bytes)


def even(rec: CollectiveRecord) -> CollectiveRecord:
    """The capture with every value set to the median of its kind (matmul; all-node, per-node and pair
    all-reduce per size): a fleet without stragglers (the capture's own CPU noise removed)."""
    medians: dict[tuple, list[float]] = {}
    for m in rec.measurements:
        medians.setdefault(_kind(m), []).append(m.value)
    level = {k: statistics.median(v) for k, v in medians.items()}
    return dataclasses.replace(rec, measurements=[dataclasses.replace(m, value=level[_kind(m)])
                                                  for m in rec.measurements])


def scaled(rec: CollectiveRecord, factor: float, *, host: str | None = None, kind: str | None = None,
           group: str | None = None) -> CollectiveRecord:
    """`rec` with the values of the matching measurements multiplied by `factor`: of `host` (matmuls and
    its own devices' all-reduce) or of every pair that has it, of `kind`, of a group `group` begins."""

    def hit(m: Measurement) -> bool:
        if kind is not None and m.kind != kind:
            return False
        if group is not None and not m.group.startswith(group):
            return False
        if host is None:
            return True
        if m.group.startswith("pair:"):
            return host in m.group.removeprefix("pair:").split(",")
        return m.host == host and m.group != "all"

    return dataclasses.replace(rec, measurements=[
        dataclasses.replace(m, value=m.value * factor) if hit(m) else m for m in rec.measurements])


def snapshots(rec: CollectiveRecord | str) -> dict[str, HostSnapshot]:
    """Every host of `rec` as a snapshot holding only the recorded probe, as the controller leaves it."""
    text = rec if isinstance(rec, str) else rec.to_text()
    names = captured().hosts if isinstance(rec, str) else rec.hosts
    return {n: HostSnapshot(name=n, probes={RECORD_PROBE: ProbeResult(command="(controller)", rc=0,
                                                                       stdout=text)}) for n in names}


def _capture() -> None:
    from ascend_ready.checks.cluster.collective_run import Sweep, run_collective
    from ascend_ready.checks.profile import load_profile
    from ascend_ready.fleet.transport import FanoutOptions, Target

    prof = load_profile("atlas-800t-a2").model_copy(update={"python": sys.executable})
    targets = [Target(f"node0{i}", address="local") for i in (1, 2, 3)]
    rec = run_collective(targets, FanoutOptions(), dict.fromkeys([t.name for t in targets], prof),
                         sweep=Sweep("1K,64K,256K", 10, 2, 128, 0.2), nproc_per_node=2)
    if rec.errors:
        raise SystemExit(f"the run failed: {rec.errors}")
    CAPTURE.write_text(rec.to_text())


if __name__ == "__main__":
    _capture()
