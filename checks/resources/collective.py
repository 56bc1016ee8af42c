"""The collective run's record for a host (npu.matmul, hccl.allreduce): filled in by the controller, which
runs the worker under torchrun across the hosts (checks/cluster/collective_run.py); a no-op on the node."""

from __future__ import annotations

from functools import cached_property

from ascend_ready.checks.cluster.collective import RECORD_HEADER, RECORD_PROBE, CollectiveRecord
from ascend_ready.checks.resources.base import ProbeFailed, Resource, probe

__all__ = ["HCCL_COLLECTIVE", "CollectiveResult"]

#: Filled in by the controller after the batches (the whole run, in every host's snapshot, so a snapshot
#: replays it); on the node the probe is the shell's no-op.
HCCL_COLLECTIVE = probe(
    RECORD_PROBE, shell=":",
    description="a matmul per device and an all-reduce sweep across the hosts under torchrun, by the "
    "controller; a device, node or node pair below the profile's straggler_ratio (0.8; at most 0.5 on CPU) "
    "of the fleet median is a straggler",
)


class CollectiveResult(Resource):
    """The matmul and all-reduce measurements of every host of the run, and why a host has none."""

    probes = (HCCL_COLLECTIVE,)

    @cached_property
    def record(self) -> CollectiveRecord:
        text = self.host.stdout(RECORD_PROBE)
        if not text.startswith(RECORD_HEADER):
            raise ProbeFailed(
                "the collective did not run for this host (it runs live across two or more hosts)",
                hint="run ascend-check --tier full on all the hosts together (-i INVENTORY)",
            )
        return CollectiveRecord.from_text(text)
