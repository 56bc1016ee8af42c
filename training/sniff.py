"""Straggler sniffing during training (`--sniff-every N`): every N steps each rank times a short matmul and an
all-reduce on the job's own process group; rank 0 names a rank more than 10 % and more than one standard
deviation off the mean, with its host (Megatron-LM's straggler rule, NVIDIA/Megatron-LM PR #4662).

A matmul shows a slow device or a starved CPU (a rank under a CPU quota, the simulator's cpu-throttle);
the all-reduce's time is the slowest rank's for all, so its spread names who arrives late: each rank's
time from a common barrier to the end of the collective. Rank 0 appends every sniff (each rank's figures and
the outliers, named by rank and host) to `sniff.jsonl` in the run dir; the run's closing JSON line carries
`summarize`'s account of it.
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ascend_ready.training.metrics import read_jsonl

__all__ = ["SNIFF_FILE", "Sample", "measure", "named", "outliers", "read_sniffs", "record", "report_lines",
           "sniff", "sniff_model", "summarize", "summary_lines"]

#: Megatron-LM PR #4662: off the mean by more than both of these
PCT, SIGMAS = 0.10, 1.0
#: rank 0's record of every sniff, one JSON object a line, in the run dir
SNIFF_FILE = "sniff.jsonl"
#: matmuls a CPU rank times: a CPU quota (CFS bandwidth control, the simulator's cpu-throttle) only slows
#: work longer than its share of a 100 ms period; 64 of 256 x 256 are ~60 ms of one core
CPU_ITERS = 64


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


def _timings(samples: list[Sample]) -> list[tuple[str, dict[int, float]]]:
    return [("matmul", {s.rank: s.matmul_ms for s in samples}),
            ("all-reduce", {s.rank: s.allreduce_ms for s in samples})]


def named(samples: list[Sample]) -> list[dict]:
    """Every outlier of either timing as a record: rank, host, what, ms, mean_ms, pct, sigma, side."""
    hosts = {s.rank: s.host for s in samples}
    return [{"rank": rank, "host": hosts[rank], "what": what, "ms": round(v, 3), "mean_ms": round(mean, 3),
             "pct": round(100 * abs(v - mean) / mean, 1), "sigma": round(abs(v - mean) / sd, 2),
             "side": "slower" if v > mean else "faster"}
            for what, values in _timings(samples) for rank, v, mean, sd in outliers(values)]


def report_lines(step: int, samples: list[Sample]) -> list[str]:
    """What rank 0 prints: the spread of each timing, and every outlier with its rank and host."""
    lines = []
    found = named(samples)
    for what, values in _timings(samples):
        if not values:
            continue
        mean = statistics.fmean(values.values())
        lo, hi = min(values.values()), max(values.values())
        lines.append(f"sniff step {step}: {what} {lo:.3g}-{hi:.3g} ms over {len(values)} ranks "
                     f"(mean {mean:.3g} ms)")
        lines += [f"sniff step {step}: rank {o['rank']} on {o['host']} is a {what} outlier: "
                  f"{o['ms']:.3g} ms, {o['pct']:.0f} % {o['side']} than the mean {o['mean_ms']:.3g} ms "
                  f"({o['sigma']:.1f} sigma)" for o in found if o["what"] == what]
    return lines


def record(path: Path, step: int, samples: list[Sample]) -> dict:
    """Append one sniff to `path` (sniff.jsonl): every rank's figures and the outliers it named."""
    entry = {"step": step, "time": round(time.time(), 3), "ranks": [asdict(s) for s in samples],
             "outliers": named(samples)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(json.dumps(entry) + "\n")
    return entry


def read_sniffs(path: Path) -> list[dict]:
    """The records of a sniff.jsonl; ConfigError naming the file, or the line, that is not one."""
    return read_jsonl(path, hint="a run with --sniff-every N writes sniff.jsonl, one JSON record a line",
                      what="a sniff record (step, ranks, outliers)",
                      valid=lambda e: isinstance(e, dict) and isinstance(e.get("step"), int)
                      and isinstance(e.get("ranks"), list) and isinstance(e.get("outliers"), list))


def summarize(path: Path) -> dict | None:
    """The run's account of its sniffs (None: the run did not sniff): how many, and every rank named, with
    its host, what was off, at which steps and by how much at worst."""
    if not Path(path).is_file():
        return None
    entries = read_sniffs(path)
    seen: dict[tuple, dict] = {}
    for entry in entries:
        for o in entry["outliers"]:
            key = (o["rank"], o["host"], o["what"], o["side"])
            got = seen.setdefault(key, {"rank": o["rank"], "host": o["host"], "what": o["what"],
                                        "side": o["side"], "steps": [], "worst_pct": 0.0})
            got["steps"].append(entry["step"])
            got["worst_pct"] = max(got["worst_pct"], o["pct"])
    return {"file": str(path), "sniffs": len(entries), "steps": [e["step"] for e in entries],
            "outliers": sorted(seen.values(), key=lambda o: (o["rank"], o["what"], o["side"]))}


def summary_lines(summary: dict) -> list[str]:
    """The end-of-run lines of `summarize`'s account: every rank named, or that none was."""
    if not summary["outliers"]:
        return [f"sniff: {summary['sniffs']} sniff(s), no rank more than {100 * PCT:.0f} % and {SIGMAS:g} "
                "sigma off the mean"]
    return [f"sniff: rank {o['rank']} on {o['host']} was a {o['what']} outlier in {len(o['steps'])} of "
            f"{summary['sniffs']} sniff(s) (steps {', '.join(map(str, o['steps']))}), up to "
            f"{o['worst_pct']:.0f} % {o['side']} than the mean" for o in summary["outliers"]]


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
          iters: int | None = None, output_dir: Path | None = None) -> list[Sample]:
    """Measure on every rank, gather on all; rank 0 prints report_lines to stderr and appends the sniff to
    `output_dir`/sniff.jsonl. Collective: every rank of the default group must call it at the same step.
    `iters`: 8 matmuls on a device, CPU_ITERS on a CPU."""
    import torch.distributed as dist  # heavy optional dependency (train extra)

    mm, ar = measure(device, dtype, n=n, iters=iters or (CPU_ITERS if device.type == "cpu" else 8))
    mine = Sample(rank, host or socket.gethostname(), mm, ar)
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    samples = [s for s in everyone if s is not None]
    if rank == 0:
        for line in report_lines(step, samples):
            print(line, file=sys.stderr, flush=True)
        if output_dir is not None:
            record(Path(output_dir) / SNIFF_FILE, step, samples)
    return samples


def sniff_model(step: int, model, rank: int, output_dir: Path | None = None) -> list[Sample]:
    """`sniff` on the device and dtype of `model`'s parameters; nothing outside a process group."""
    import torch.distributed as dist  # heavy optional dependency (train extra)

    if not (dist.is_available() and dist.is_initialized()):
        return []
    param = next(getattr(model, "module", model).parameters())
    return sniff(step, param.device, param.dtype, rank=rank, output_dir=output_dir)
