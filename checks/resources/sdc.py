"""The silent-data-corruption probe (full tier): sdc_worker.py run by the training interpreter on every device
of the node, its output parsed for npu.sdc (checks/cluster/sdc.py judges it)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from ascend_ready.checks.cluster import sdc_worker
from ascend_ready.checks.cluster.sdc import SDC_HEADER, SdcRun, parse_sdc
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.resources.base import ProbeDef, Resource, profile_probe
from ascend_ready.checks.resources.versions import _python

__all__ = ["NPU_SDC", "SDC_CODE", "SdcProbe"]

#: the worker's own source, run as `python -c` (the node needs torch, not ascend-ready)
SDC_CODE = Path(sdc_worker.__file__).read_text()


@profile_probe("npu-sdc")
def NPU_SDC(profile: HardwareProfile) -> dict:
    # not in the background: it holds every device, as ascend-dmi's tests do, so it runs in their turn
    return {**_python(profile.python, SDC_CODE), "as_user": True, "timeout_s": 300,
            "description": "fixed seeded matmuls and an all-reduce on every device, digests of their bits"}


class SdcProbe(Resource):
    """What the SDC worker printed: per device, kernel and dtype the digest of the result's bits."""

    probes: tuple[ProbeDef, ...] = (NPU_SDC,)

    @cached_property
    def run(self) -> SdcRun:
        res = self.host.result("npu-sdc")
        if res.rc != 0 and not res.stdout.startswith(SDC_HEADER):
            self.host.stdout("npu-sdc")  # raises ProbeFailed naming the command and its last line
        return parse_sdc(res.stdout)
