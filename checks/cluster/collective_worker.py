"""The collective worker, run on the nodes under torchrun: a short matmul per device and an all-reduce sweep,
one JSON line per measurement (collective.Measurement) on stdout for the controller to judge (collective.py).

    torchrun --nnodes N --node-rank R --master-addr A --master-port P --nproc-per-node K \\
        -m ascend_ready.checks.cluster.collective_worker --sizes 1K,1M,64M --iters 20 --host NAME
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from ascend_ready.checks.cluster.collective import (
    Measurement,
    bus_bandwidth,
    node_ranks,
    pair_slow_gate,
    parse_size,
)
from ascend_ready.checks.cluster.mesh import round_robin
from ascend_ready.runtime import setup_runtime, shutdown

__all__ = ["main"]


def _sync(rt) -> None:
    import torch

    if rt.device_type == "npu":
        torch.npu.synchronize()
    elif rt.device_type == "cuda":
        torch.cuda.synchronize()


def _emit(m: Measurement) -> None:
    # One write per line: the ranks of a node share stdout, and print() writes the newline separately.
    os.write(sys.stdout.fileno(), (json.dumps(m.__dict__) + "\n").encode())


def _matmul(rt, host: str, n: int, iters: int, min_seconds: float) -> Measurement:
    """Square matmuls in batches of `iters` until `min_seconds` have passed: a time window, not an
    iteration count, so that a device (or a node under a CPU quota) that is slow does less in it."""
    import torch

    dtype = torch.bfloat16 if rt.bf16 else torch.float32
    a = torch.randn(n, n, device=rt.device, dtype=dtype)
    b = torch.randn(n, n, device=rt.device, dtype=dtype)
    (a @ b).sum().item()  # warm-up and compile
    _sync(rt)
    done, start = 0, time.perf_counter()
    while True:
        for _ in range(iters):
            c = a @ b
        _sync(rt)
        done += iters
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            break
    del c
    seconds = elapsed / done
    return Measurement("matmul", rt.rank, host, str(rt.device), 2 * n**3 / seconds / 1e12, seconds=seconds,
                       dtype=str(dtype).removeprefix("torch."))


def _allreduce(rt, host: str, size: int, iters: int, warmup: int, group=None, name: str = "all",
               ranks: int | None = None) -> Measurement:
    import torch

    dist = torch.distributed
    tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device=rt.device)
    for _ in range(warmup):
        dist.all_reduce(tensor, group=group)
    _sync(rt)
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    _sync(rt)
    seconds = (time.perf_counter() - start) / iters
    # The slowest rank's time is the collective's time: take the max over ranks.
    t = torch.tensor([seconds], dtype=torch.float64, device=rt.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    seconds = float(t.item())
    n = ranks or rt.world_size
    algbw, busbw = bus_bandwidth(tensor.numel() * 4, seconds, n)
    return Measurement("allreduce", rt.rank, host, str(rt.device), busbw, tensor.numel() * 4, seconds, algbw,
                       n, group=name, dtype="float32")


def main(argv: Sequence[str] | None = None) -> int:
    import socket

    ap = argparse.ArgumentParser(prog="python -m ascend_ready.checks.cluster.collective_worker")
    ap.add_argument("--sizes", default="1K,64K,1M,16M", help="all-reduce message sizes (1K, 64M, 1G)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--matmul-n", type=int, default=1024, help="square matmul size per device")
    ap.add_argument("--matmul-seconds", type=float, default=0.2,
                    help="time window of the matmul per device (whole batches of --iters)")
    ap.add_argument("--device", default="auto", help="auto, npu, cuda or cpu")
    ap.add_argument("--host", default=os.environ.get("ASCEND_CHECK_HOST") or socket.gethostname(),
                    help="this node's name in the results (the inventory name)")
    ap.add_argument("--pairs", choices=("auto", "always", "never"), default="auto",
                    help="all-reduce between every two nodes, round by round, at the largest size "
                    "(auto: when the all-node one is below --min-busbw, or with no floor and 3+ nodes)")
    ap.add_argument("--min-busbw", type=float, default=None, help="the floor (GB/s) --pairs auto judges by")
    args = ap.parse_args(argv)
    try:
        sizes = sorted({parse_size(s) for s in args.sizes.split(",") if s})
    except ValueError as exc:
        ap.error(str(exc))
    if not sizes:
        ap.error("--sizes names no size")
    rt = setup_runtime(args.device, "auto")
    try:
        if not rt.distributed:
            _emit(_matmul(rt, args.host, args.matmul_n, args.iters, args.matmul_seconds))
            return 0
        import torch

        dist = torch.distributed
        hosts: list[str] = [""] * rt.world_size
        dist.all_gather_object(hosts, args.host)
        by_node = node_ranks(hosts)
        dist.barrier()  # every device starts its matmul window together
        _emit(_matmul(rt, args.host, args.matmul_n, args.iters, args.matmul_seconds))
        last = None
        for size in sizes:
            last = _allreduce(rt, args.host, size, args.iters, args.warmup)
            _emit(last)
        # Within each node (all nodes at once), where a node has two or more devices. Every rank
        # creates every group, in the same order (torch.distributed.new_group).
        node_groups = {h: dist.new_group(r) for h, r in by_node.items() if len(r) > 1}
        if args.host in node_groups:
            mine = node_groups[args.host]
            for size in sizes:
                _emit(_allreduce(rt, args.host, size, args.iters, args.warmup, mine, f"node:{args.host}",
                                 len(by_node[args.host])))
        dist.barrier()
        nodes = list(by_node)
        if args.pairs == "auto":
            run_pairs = pair_slow_gate(last.value if last else None, args.min_busbw, len(nodes))
        else:
            run_pairs = args.pairs == "always" and len(nodes) >= 2
        if run_pairs:
            for pairs in round_robin(nodes):
                groups = {pair: dist.new_group(by_node[pair[0]] + by_node[pair[1]]) for pair in pairs}
                for (a, b), group in groups.items():
                    if args.host in (a, b):
                        _emit(_allreduce(rt, args.host, sizes[-1], args.iters, args.warmup, group,
                                         f"pair:{a},{b}", len(by_node[a]) + len(by_node[b])))
                dist.barrier()
    finally:
        shutdown(rt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
