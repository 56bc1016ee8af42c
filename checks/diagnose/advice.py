"""Advice that depends on how the run was set up, read again only when a finding calls for it: an NPU OOM
in a run whose rollout sleeps between steps gets the sleep-mode fix."""

from __future__ import annotations

import lzma
import zlib
from pathlib import Path

from ascend_ready.checks.diagnose.model import DiagnoseReport
from ascend_ready.checks.diagnose.reading import _READABLE, MAX_TEXT, _decode

#: The look-up reads in pieces of this size (the scan's chunk size).
READ_BYTES = 4 << 20

#: A run whose rollout sleeps (vLLM sleep mode in a colocated RL job: verl, ms-swift, trl, OpenRLHF):
#: literals, each searched over whole chunks at memchr speed, only when an NPU OOM was found.
_SLEEP_MARKERS = (
    b"VLLM_ENABLE_SLEEP_MODE", b"enable_sleep_mode", b"free_cache_engine=True", b"Sleep mode freed",
    b"seconds to fall asleep", b"vllm_enable_sleep", b"sleep_level",
)
_SLEEP_PROBES = (b"leep", b"SLEEP", b"free_cache_engine")  # every marker holds one: three passes, not seven
#: A run's configuration and its first sleep come early: the head of each file is read for them.
SLEEP_SCAN_BYTES = 64 << 20
_SLEEP_FIX = (
    "This run sleeps its vLLM rollout between steps (colocated RL): do NOT set "
    "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True, sleep mode cannot release virtual-memory segments "
    "(set expandable_segments:False). Lower the rollout's gpu_memory_utilization (e.g. 0.6 -> 0.4) and the "
    "actor's micro batch or max length, offload the actor's params/optimizer while the rollout runs, and "
    "stop leftover processes (npu-smi info)."
)


def _sleep_mode_evidence(paths: list[Path]) -> str | None:
    """The first line that shows the rollout sleeps, read again only when an NPU OOM was found."""
    for path in paths:
        try:
            with open(path, "rb") as fh:
                head = fh.read(6)
                fh.seek(0)
                opener = next((op for magic, op in _READABLE.items() if head.startswith(magic)), None)
                stream = opener(fh) if opener else fh
                carry, read = b"", 0
                while read < SLEEP_SCAN_BYTES and (chunk := stream.read(READ_BYTES)):
                    read += len(chunk)
                    buf = carry + chunk
                    for probe in _SLEEP_PROBES:
                        at = buf.find(probe)
                        while at != -1:
                            start = buf.rfind(b"\n", 0, at) + 1
                            end = buf.find(b"\n", at)
                            end = end if end != -1 else len(buf)
                            if any(m in buf[start:end] for m in _SLEEP_MARKERS):
                                return _decode(buf[start:end]).strip()[:MAX_TEXT]
                            at = buf.find(probe, end)
                    carry = buf[-64:]
        except (OSError, EOFError, lzma.LZMAError, zlib.error):
            continue
    return None


def _oom_advice_for_sleep_mode(report: DiagnoseReport, line: str) -> DiagnoseReport:
    findings = []
    for f in report.findings:
        if f.id == "npu-oom":
            f = f.model_copy(update={
                "fix": _SLEEP_FIX,
                "causes": [*f.causes, f"the rollout sleeps between steps (\"{line[:200]}\"): its memory "
                           "must be released by sleep mode, which expandable segments break"],
            })
        findings.append(f)
    return report.model_copy(update={"findings": findings})
