"""Collective bandwidth and stragglers: a short matmul per device and an all-reduce sweep, run under torchrun.

Run on the nodes (the `full` tier's hccl.allreduce / npu.matmul, or by hand):

    torchrun --nnodes N --node-rank R --master-addr A --master-port P --nproc-per-node K \\
        -m ascend_ready.checks.cluster.collective --sizes 1K,1M,64M --iters 20

Each rank prints one JSON line per measurement on stdout (`{"kind": "matmul", ...}`,
`{"kind": "allreduce", ...}`); the controller parses them with `parse_lines` and judges them with
`stragglers`. Bandwidth is reported as nccl-tests and hccl_test do: algorithm bandwidth = size / time, and
bus bandwidth = algbw x 2(n-1)/n for all-reduce (nccl-tests doc/PERFORMANCE.md, "AllReduce"), which is
what a link delivers independent of the rank count. Device and backend come from the environment through
the training runtime (npu/hccl, cuda/nccl, cpu/gloo).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ascend_ready.errors import ParseError

__all__ = ["Measurement", "bus_bandwidth", "main", "parse_lines", "parse_size", "stragglers"]

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_size(text: str) -> int:
    """`64M` -> bytes (binary units, as nccl-tests' -b/-e take them)."""
    t = text.strip().upper().removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS and not t[-1:].isdigit() else ""
    number = t[: len(t) - len(unit)]
    if not number.isdigit() or int(number) <= 0:
        raise ValueError(f"not a size: {text!r} (e.g. 1K, 64M, 1G)")
    return int(number) * _UNITS[unit]


def bus_bandwidth(size_bytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9) of one all-reduce of `size_bytes` over `ranks` ranks."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * (2 * (ranks - 1) / ranks if ranks > 1 else 1.0)


@dataclass(frozen=True)
class Measurement:
    kind: str  # "matmul" or "allreduce"
    rank: int
    host: str
    device: str
    value: float  # TFLOPS (matmul) or bus bandwidth GB/s (allreduce)
    size_bytes: int = 0
    seconds: float = 0.0
    algbw: float = 0.0
    ranks: int = 1


def parse_lines(text: str, *, source: str = "collective") -> list[Measurement]:
    """The JSON lines the workers printed; any other line that starts with `{` is an error naming it."""
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        # torchrun prefixes a rank's output with `[rankN]:` when asked to (--tee / -r); keep the JSON.
        if stripped.startswith("[") and "]:" in stripped:
            stripped = stripped.split("]:", 1)[1].strip()
        if not stripped.startswith("{"):
            continue
        try:
            raw = json.loads(stripped)
            out.append(Measurement(**raw))
        except (ValueError, TypeError) as exc:
            raise ParseError(source, f"not a measurement ({exc})", line_no=no, line=line) from None
    return out


def stragglers(values: dict[str, float], *, tolerance: float = 0.2) -> list[tuple[str, float, float]]:
    """(name, value, median) of every entry below (1 - tolerance) x the median of all of them.

    Higher is better (TFLOPS, GB/s). With fewer than 3 entries there is no meaningful median to be
    slower than, so the slower of two is named only when it is below tolerance x the faster one.
    """
    if len(values) < 2:
        return []
    median = statistics.median(values.values())
    if len(values) == 2:
        median = max(values.values())
    return sorted((n, v, median) for n, v in values.items() if v < (1 - tolerance) * median)


# ---------------------------------------------------------------- the worker (runs on the nodes)


def _sync(rt) -> None:
    import torch

    if rt.device_type == "npu":
        torch.npu.synchronize()
    elif rt.device_type == "cuda":
        torch.cuda.synchronize()


def _emit(m: Measurement) -> None:
    # One write per line: the ranks of a node share stdout, and print() writes the newline separately.
    os.write(sys.stdout.fileno(), (json.dumps(m.__dict__) + "\n").encode())


def _matmul(rt, host: str, n: int, iters: int) -> Measurement:
    import torch

    dtype = torch.bfloat16 if rt.bf16 else torch.float32
    a = torch.randn(n, n, device=rt.device, dtype=dtype)
    b = torch.randn(n, n, device=rt.device, dtype=dtype)
    (a @ b).sum().item()  # warm-up and compile
    _sync(rt)
    start = time.perf_counter()
    for _ in range(iters):
        c = a @ b
    _sync(rt)
    seconds = (time.perf_counter() - start) / iters
    del c
    return Measurement("matmul", rt.rank, host, str(rt.device), 2 * n**3 / seconds / 1e12, seconds=seconds)


def _allreduce(rt, host: str, size: int, iters: int, warmup: int) -> Measurement:
    import torch

    dist = torch.distributed
    tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device=rt.device)
    for _ in range(warmup):
        dist.all_reduce(tensor)
    _sync(rt)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor)
    _sync(rt)
    seconds = (time.perf_counter() - start) / iters
    # The slowest rank's time is the collective's time: take the max over ranks.
    t = torch.tensor([seconds], dtype=torch.float64, device=rt.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    seconds = float(t.item())
    algbw, busbw = bus_bandwidth(tensor.numel() * 4, seconds, rt.world_size)
    return Measurement("allreduce", rt.rank, host, str(rt.device), busbw, tensor.numel() * 4, seconds, algbw,
                       rt.world_size)


def main(argv: Sequence[str] | None = None) -> int:
    import socket

    from ascend_ready.training.devices import setup_runtime, shutdown

    ap = argparse.ArgumentParser(prog="python -m ascend_ready.checks.cluster.collective")
    ap.add_argument("--sizes", default="1K,64K,1M,16M", help="all-reduce message sizes (1K, 64M, 1G)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--matmul-n", type=int, default=1024, help="square matmul size per device")
    ap.add_argument("--device", default="auto", help="auto, npu, cuda or cpu")
    args = ap.parse_args(argv)
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    except ValueError as exc:
        ap.error(str(exc))
    rt = setup_runtime(args.device, "fp32")
    host = socket.gethostname()
    try:
        _emit(_matmul(rt, host, args.matmul_n, args.iters))
        if rt.distributed:
            for size in sizes:
                _emit(_allreduce(rt, host, size, args.iters, args.warmup))
    finally:
        shutdown(rt)
    return 0


def rows(measurements: Iterable[Measurement]) -> list[str]:
    """nccl-tests-like table rows: size, time (us), algbw, busbw (GB/s), from rank 0's lines."""
    out = [f"{'size(B)':>12} {'time(us)':>10} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12}"]
    for m in sorted((m for m in measurements if m.kind == "allreduce" and m.rank == 0),
                    key=lambda m: m.size_bytes):
        out.append(f"{m.size_bytes:>12} {m.seconds * 1e6:>10.1f} {m.algbw:>12.3f} {m.value:>12.3f}")
    return out


if __name__ == "__main__":
    sys.exit(main())
