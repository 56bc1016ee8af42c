"""Straggler sniffing during training (`--sniff-every N`): every N steps each rank times a short matmul and an
all-reduce on the job's own process group; rank 0 names a rank more than 10 % and more than one standard
deviation off the mean, with its host (Megatron-LM's straggler rule, NVIDIA/Megatron-LM PR #4662).

A matmul shows a slow device or a starved CPU (a rank under a CPU quota, the simulator's cpu-throttle);
the all-reduce's time is the slowest rank's for all, so its spread names who arrives late: each rank's
time from a common barrier to the end of the collective.
"""

from __future__ import annotations

import socket
import statistics
import sys
import time
from dataclasses import dataclass

__all__ = ["Sample", "measure", "outliers", "report_lines", "sniff", "sniff_model"]

#: Megatron-LM PR #4662: off the mean by more than both of these
PCT, SIGMAS = 0.10, 1.0


@dataclass(frozen=True)
class Sample:
    rank: int
    host: str
    matmul_ms: float
    allreduce_ms: float


def outliers(values: dict[int, float], *, pct: float = PCT, sigmas: float = SIGMAS,
             ) -> list[tuple[int, float, float, float]]:
    """(rank, value, mean, stdev) of every rank more than `pct` x the mean and `sigmas` standard
    deviations off the mean (population stdev; fewer than 3 ranks: nothing is an outlier)."""
    if len(values) < 3:
        return []
    mean = statistics.fmean(values.values())
    sd = statistics.pstdev(values.values())
    return sorted((r, v, mean, sd) for r, v in values.items()
                  if abs(v - mean) > pct * mean and abs(v - mean) > sigmas * sd)


def report_lines(step: int, samples: list[Sample]) -> list[str]:
    """What rank 0 prints: the spread of each timing, and every outlier with its rank and host."""
    lines = []
    hosts = {s.rank: s.host for s in samples}
    for what, values in (("matmul", {s.rank: s.matmul_ms for s in samples}),
                         ("all-reduce", {s.rank: s.allreduce_ms for s in samples})):
        if not values:
            continue
        mean = statistics.fmean(values.values())
        lo, hi = min(values.values()), max(values.values())
        lines.append(f"sniff step {step}: {what} {lo:.3g}-{hi:.3g} ms over {len(values)} ranks "
                     f"(mean {mean:.3g} ms)")
        for rank, v, mean, sd in outliers(values):
            side = "slower" if v > mean else "faster"
            lines.append(f"sniff step {step}: rank {rank} on {hosts[rank]} is a {what} outlier: {v:.3g} ms, "
                         f"{100 * abs(v - mean) / mean:.0f} % {side} than the mean {mean:.3g} ms "
                         f"({abs(v - mean) / sd:.1f} sigma)")
    return lines


def _sync(device) -> None:
    import torch  # heavy optional dependency (train extra)

    if device.type == "npu":
        torch.npu.synchronize()
    elif device.type == "cuda":
        torch.cuda.synchronize()


def measure(device, dtype, *, n: int = 256, iters: int = 8, numel: int = 1 << 18) -> tuple[float, float]:
    """(matmul ms, all-reduce ms) of this rank: `iters` n x n matmuls, then `iters` all-reduces of `numel`
    floats on the default process group, timed from a common barrier."""
    import torch  # heavy optional dependency (train extra)
    import torch.distributed as dist

    a = torch.randn(n, n, device=device, dtype=dtype)
    (a @ a).sum().item()  # warm-up
    _sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        a = a @ a / n
    _sync(device)
    matmul = (time.perf_counter() - start) / iters * 1e3
    x = torch.ones(numel, device=device, dtype=torch.float32)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    _sync(device)
    return matmul, (time.perf_counter() - start) / iters * 1e3


def sniff(step: int, device, dtype, *, rank: int, host: str | None = None, n: int = 256,
          iters: int = 8) -> list[Sample]:
    """Measure on every rank, gather on all; rank 0 prints report_lines to stderr. Collective: every rank
    of the default group must call it at the same step."""
    import torch.distributed as dist  # heavy optional dependency (train extra)

    mm, ar = measure(device, dtype, n=n, iters=iters)
    mine = Sample(rank, host or socket.gethostname(), mm, ar)
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    samples = [s for s in everyone if s is not None]
    if rank == 0:
        for line in report_lines(step, samples):
            print(line, file=sys.stderr, flush=True)
    return samples


def sniff_model(step: int, model, rank: int) -> list[Sample]:
    """`sniff` on the device and dtype of `model`'s parameters; nothing outside a process group."""
    import torch.distributed as dist  # heavy optional dependency (train extra)

    if not (dist.is_available() and dist.is_initialized()):
        return []
    param = next(getattr(model, "module", model).parameters())
    return sniff(step, param.device, param.dtype, rank=rank)
