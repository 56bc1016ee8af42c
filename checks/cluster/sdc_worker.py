"""The silent-data-corruption probe's worker: fixed kernels on fixed seeded inputs on every device of the
node, one JSON line per device, kernel and dtype, for npu.sdc to compare bit for bit (checks/cluster/sdc.py).

It runs on the node as `python -c <this file's text>` with the training interpreter (the `npu-sdc` probe of
the full tier), so it imports only the standard library and torch (Python 3.8+; no ascend_ready on the
node). One process per device (forked after torch's import, before any device is touched: the runtime
comes up in each child), and
an all-reduce across them (hccl, nccl or gloo). Three kernels:

- `matmul-exact`: inputs in {-1, 0, 1} with an inner size of 128, so every partial sum is an integer the
  dtype holds exactly: the result is known bit for bit whatever order the device sums in, and any bit
  that differs from the reference (computed here in float64 on the CPU) is wrong;
- `matmul`: seeded Gaussian inputs (made on the CPU, the same bytes everywhere), repeated; its digest is
  compared across repeats, across the node's devices and across nodes of one SKU, CANN and torch
  (the fleet's majority is the golden value): rounding makes the bits depend on the kernel, not on luck;
- `allreduce`: integer-valued float32 (each rank `base * (rank + 1)`), whose sum is exact in any order.

    python checks/cluster/sdc_worker.py --device cpu --ranks 2     # here, by hand or for the bench
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.metadata as md
import json
import multiprocessing
import os
import socket
import sys
import time
from importlib.util import find_spec

HEADER = "ascend-check sdc v1"
SEED = 20261202
#: the exact kernel's inner size: |sum| <= 128 fits bf16's 8-bit significand, so no partial sum rounds
EXACT_K = 128
#: accelerator / CPU shapes: the CPU one keeps the probe to a second on a simulated node
SIZES = {"accelerator": {"n": 2048, "exact_n": 1024, "reduce": 1 << 22},
         "cpu": {"n": 256, "exact_n": 256, "reduce": 1 << 16}}


def _devices(requested: str) -> tuple[str, int]:
    """(kind, count) without importing torch: torch_npu and /dev/davinciN, /dev/nvidiaN, else one cpu."""
    npu, gpu = glob.glob("/dev/davinci[0-9]*"), glob.glob("/dev/nvidia[0-9]*")
    if requested in ("auto", "npu") and find_spec("torch_npu") and npu:
        seen = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
        return "npu", len(seen.split(",")) if seen else len(npu)
    if requested in ("auto", "cuda") and gpu:
        seen = os.environ.get("CUDA_VISIBLE_DEVICES")
        return "cuda", len(seen.split(",")) if seen else len(gpu)
    if requested in ("npu", "cuda"):
        sys.exit(f"sdc: no {requested} device is visible to {sys.executable}")
    return "cpu", 1


def _emit(obj: dict) -> None:
    # one write per line: the ranks share stdout
    os.write(sys.stdout.fileno(), (json.dumps(obj, sort_keys=True) + "\n").encode())


def _digest(t) -> str:
    bits = t.contiguous().cpu().view(-1).view(_int_dtype(t))
    return hashlib.sha256(bits.numpy().tobytes()).hexdigest()[:32]


def _int_dtype(t):
    import torch  # heavy: only in the node's ranks

    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]


def _sync(kind: str) -> None:
    import torch  # heavy: only in the node's ranks

    if kind == "npu":
        torch.npu.synchronize()
    elif kind == "cuda":
        torch.cuda.synchronize()


def _first_difference(got, want) -> dict:
    """How many elements differ bit for bit, and the first one (index, expected and got bits in hex)."""
    import torch  # heavy: only in the node's ranks

    gi = got.contiguous().view(-1).view(_int_dtype(got))
    wi = want.contiguous().view(-1).view(_int_dtype(want))
    bad = torch.nonzero(gi != wi).view(-1)
    if bad.numel() == 0:
        return {"wrong": 0}
    i = int(bad[0])
    width = got.element_size() * 2
    mask = (1 << (got.element_size() * 8)) - 1
    return {"wrong": int(bad.numel()), "index": i, "want_bits": f"{int(wi[i]) & mask:0{width}x}",
            "got_bits": f"{int(gi[i]) & mask:0{width}x}", "want": float(want.view(-1)[i].float()),
            "got": float(got.view(-1)[i].float())}


def _matmuls(kind: str, dev, dtype, name: str, sizes: dict, repeats: int, base: dict) -> list[dict]:
    import torch  # heavy: only in the node's ranks

    gen = torch.Generator().manual_seed(SEED)
    n, m = sizes["n"], sizes["exact_n"]
    a = torch.randn(n, n, generator=gen).to(dtype)
    b = torch.randn(n, n, generator=gen).to(dtype)
    ea = torch.randint(-1, 2, (m, EXACT_K), generator=gen).to(dtype)
    eb = torch.randint(-1, 2, (EXACT_K, m), generator=gen).to(dtype)
    want = (ea.double() @ eb.double()).to(dtype)
    a, b, ea, eb = (x.to(dev) for x in (a, b, ea, eb))
    out = []
    digests, started = [], time.perf_counter()
    for _ in range(repeats):
        c = torch.matmul(a, b)
        _sync(kind)
        digests.append(_digest(c))
    out.append({**base, "kernel": "matmul", "dtype": name, "shape": [n, n, n], "digests": digests,
                "seconds": round(time.perf_counter() - started, 6)})
    started = time.perf_counter()
    got = torch.matmul(ea, eb)
    _sync(kind)
    got = got.cpu()
    out.append({**base, "kernel": "matmul-exact", "dtype": name, "shape": [m, EXACT_K, m],
                "digests": [_digest(got)], "want_digest": _digest(want), **_first_difference(got, want),
                "seconds": round(time.perf_counter() - started, 6)})
    return out


def _allreduce(kind: str, dev, rank: int, world: int, size: int, base: dict) -> dict:
    import torch  # heavy: only in the node's ranks

    dist = torch.distributed
    gen = torch.Generator().manual_seed(SEED + 1)
    ones = torch.randint(-1000, 1001, (size,), generator=gen).to(torch.float32)
    t = (ones * (rank + 1)).to(dev)
    started = time.perf_counter()
    dist.all_reduce(t)
    _sync(kind)
    got = t.cpu()
    want = ones * (world * (world + 1) // 2)
    return {**base, "kernel": "allreduce", "dtype": "fp32", "shape": [size], "ranks": world,
            "digests": [_digest(got)], "want_digest": _digest(want), **_first_difference(got, want),
            "seconds": round(time.perf_counter() - started, 6)}


def _rank(kind: str, rank: int, world: int, port: int, repeats: int) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    base = {"rank": rank, "device": f"{kind}:{rank}", "kind": kind}
    try:
        import torch  # heavy: only in the node's ranks

        if kind == "npu":
            import torch_npu  # noqa: F401  (heavy: registers torch.npu)

            torch.npu.set_device(rank)
            base["name"] = torch.npu.get_device_name(rank)
        elif kind == "cuda":
            torch.cuda.set_device(rank)
            base["name"] = torch.cuda.get_device_name(rank)
        else:
            torch.set_num_threads(1)  # one summation order on every CPU rank
            base["name"] = "cpu"
        dev = torch.device(kind, rank) if kind != "cpu" else torch.device("cpu")
        sizes = SIZES["cpu" if kind == "cpu" else "accelerator"]
        dtypes = [("fp32", torch.float32)] + ([] if kind == "cpu" else [("bf16", torch.bfloat16),
                                                                      ("fp16", torch.float16)])
        for name, dtype in dtypes:
            for line in _matmuls(kind, dev, dtype, name, sizes, repeats, base):
                _emit(line)
        if world > 1:
            backend = {"npu": "hccl", "cuda": "nccl"}.get(kind, "gloo")
            torch.distributed.init_process_group(backend, rank=rank, world_size=world)
            _emit(_allreduce(kind, dev, rank, world, sizes["reduce"], base))
            torch.distributed.destroy_process_group()
    except Exception as exc:  # the controller names the rank and its error; the rank exits non-zero
        _emit({**base, "error": f"{type(exc).__name__}: {exc}"[:500]})
        os._exit(1)
    os._exit(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="sdc_worker")
    ap.add_argument("--device", default="auto", choices=("auto", "npu", "cuda", "cpu"))
    ap.add_argument("--ranks", type=int, default=None, help="processes (default: every visible device)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    kind, count = _devices(args.device)
    world = args.ranks or count
    versions = {}
    for dist in ("torch", "torch_npu"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            versions[dist] = ""
    print(HEADER, flush=True)
    _emit({"run": 1, "kind": kind, "ranks": world, "seed": SEED, "python": sys.executable, **versions})
    port = _free_port()
    if versions["torch"]:
        # heavy: imported once here and shared by every rank (forked), which would each take seconds to
        # import it; torch starts no device runtime on import, and torch_npu is imported in the ranks only
        import torch  # noqa: F401
    # fork: the children inherit this code (it runs as `python -c`, with no file to re-import) and
    # bring the device runtime up themselves, as nothing here has touched it
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_rank, args=(kind, r, world, port, args.repeats)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = [r for r, p in enumerate(procs) if p.exitcode != 0]
    _emit({"done": 1, "failed_ranks": failed, "exit_codes": [p.exitcode for p in procs]})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
