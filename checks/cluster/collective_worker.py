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
    projected_seconds,
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


class _Budget:
    """The worker's time budget (--budget-s, counted from its start) and what is left of it, as the slowest
    rank of a group sees it: every rank of the group gets the same figure, so they all take the same
    branch (a rank that skipped a collective its peers entered would hang them)."""

    def __init__(self, rt, seconds: float | None, start: float) -> None:
        self.rt, self.seconds, self.start = rt, seconds, start

    def left(self, share: float = 1.0, group=None) -> float:
        """Seconds left of `share` of the budget (inf: no budget)."""
        if self.seconds is None:
            return float("inf")
        import torch

        dist = torch.distributed
        t = torch.tensor([time.monotonic() - self.start], dtype=torch.float64, device=self.rt.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
        return self.seconds * share - float(t.item())


def _skipped(rt, host: str, size: int, seconds: float, ranks: int, group: str) -> None:
    _emit(Measurement("skipped", rt.rank, host, str(rt.device), round(seconds, 3), size, ranks=ranks,
                      group=group))


def _sweep(rt, host: str, sizes: list[int], args, budget: _Budget, share: float, group=None,
           name: str = "all", ranks: int | None = None) -> list[Measurement]:
    """The all-reduce of `group` at each size, smallest first. A size that, projected from the last one
    measured, would not finish in `share` of the budget is left out with every larger one (a `skipped`
    record each, its projected seconds): a port at a tenth of its speed then still leaves time for the
    pair rounds that name it, where the whole run would have timed out and named no one."""
    runs = args.iters + args.warmup
    done: list[Measurement] = []
    for at, size in enumerate(sizes):
        if done:
            last = done[-1]
            left = budget.left(share, group)
            if projected_seconds(last.seconds, last.size_bytes, size, runs) > left:
                for rest in sizes[at:]:
                    _skipped(rt, host, rest, projected_seconds(last.seconds, last.size_bytes, rest, runs),
                             ranks or rt.world_size, name)
                break
        done.append(_allreduce(rt, host, size, args.iters, args.warmup, group, name, ranks))
        _emit(done[-1])
    return done


def _pair_size(done: list[Measurement], rounds: int, runs: int, left: float) -> int | None:
    """The largest size the all-node sweep measured at which `rounds` pair rounds fit in `left` seconds (a
    pair with a slow node takes about what the all-node all-reduce took), None if not even the smallest."""
    for m in reversed(done):
        if projected_seconds(m.seconds, m.size_bytes, m.size_bytes, runs) * rounds <= left:
            return m.size_bytes
    return None


def main(argv: Sequence[str] | None = None) -> int:
    import socket

    started = time.monotonic()
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
                    help="all-reduce between every two nodes, round by round, at the largest size the "
                    "budget allows "
                    "(auto: when the all-node one is below --min-busbw, or with no floor and 3+ nodes)")
    ap.add_argument("--min-busbw", type=float, default=None, help="the floor (GB/s) --pairs auto judges by")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="seconds the measurements may take from the worker's start: the sweeps take half, "
                    "the node groups' up to 0.7, the pair rounds the rest; a size that would not fit is "
                    "left out (a `skipped` record)")
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
        budget = _Budget(rt, args.budget_s, started)
        _emit(_matmul(rt, args.host, args.matmul_n, args.iters, args.matmul_seconds))
        done = _sweep(rt, args.host, sizes, args, budget, 0.5)
        # Within each node (all nodes at once), where a node has two or more devices. Every rank
        # creates every group, in the same order (torch.distributed.new_group).
        node_groups = {h: dist.new_group(r) for h, r in by_node.items() if len(r) > 1}
        if args.host in node_groups:
            _sweep(rt, args.host, sizes, args, budget, 0.7, node_groups[args.host], f"node:{args.host}",
                   len(by_node[args.host]))
        dist.barrier()
        nodes = list(by_node)
        if args.pairs == "auto":
            run_pairs = pair_slow_gate(done[-1].value, args.min_busbw, len(nodes))
        else:
            run_pairs = args.pairs == "always" and len(nodes) >= 2
        if run_pairs:
            rounds = list(round_robin(nodes))
            size = _pair_size(done, len(rounds), args.iters + args.warmup, budget.left())
            for pairs in rounds:
                groups = {pair: dist.new_group(by_node[pair[0]] + by_node[pair[1]]) for pair in pairs}
                for (a, b), group in groups.items():
                    if args.host not in (a, b):
                        continue
                    ranks = len(by_node[a]) + len(by_node[b])
                    if size is None:  # not even the smallest size: the rounds' projected seconds
                        first = done[0]
                        _skipped(rt, args.host, first.size_bytes, len(rounds) * projected_seconds(
                            first.seconds, first.size_bytes, first.size_bytes, args.iters + args.warmup),
                            ranks, f"pair:{a},{b}")
                    else:
                        _emit(_allreduce(rt, args.host, size, args.iters, args.warmup, group, f"pair:{a},{b}",
                                         ranks))
                dist.barrier()
    finally:
        shutdown(rt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
