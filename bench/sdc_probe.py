"""What the silent-data-corruption probe (npu.sdc, full tier) costs per device: the worker run as the batch
runs it (`python -c <checks/cluster/sdc_worker.py>`), its wall time (interpreter, torch import and device
start in every rank, the kernels, the all-reduce) and the kernels' own seconds per device, by rank count.

    .venv/bin/python bench/sdc_probe.py --ranks 1,2 --out bench-sdc.json         # CPU, here
    python bench/sdc_probe.py --device cuda --ranks 1 --out "$OUT/sdc.json"      # a lent GPU machine

Prints one line per case and writes the figures as JSON to --out. Exit 0 when every case's worker passed
its own exact comparisons, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "checks" / "cluster" / "sdc_worker.py"


def run_case(python: str, device: str, ranks: int, repeats: int) -> dict:
    """One run of the worker as the probe runs it: wall seconds, and per device the kernels' seconds."""
    code = WORKER.read_text()
    started = time.perf_counter()
    proc = subprocess.run([python, "-c", code, "--device", device, "--ranks", str(ranks), "--repeats",
                           str(repeats)], capture_output=True, text=True, timeout=900, check=False)
    wall = time.perf_counter() - started
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    results = [ln for ln in lines if "kernel" in ln]
    per_device: dict[str, float] = {}
    for r in results:
        per_device[r["device"]] = per_device.get(r["device"], 0.0) + r["seconds"]
    kernels: dict[str, list[float]] = {}
    for r in results:
        name = f"{r['kernel']} {r['dtype']} {'x'.join(map(str, r['shape']))}"
        kernels.setdefault(name, []).append(r["seconds"])
    return {"device": device, "ranks": ranks, "repeats": repeats, "rc": proc.returncode,
            "wall_s": round(wall, 3),
            "wall_s_per_device": round(wall / ranks, 3),
            "kernel_s_per_device": {d: round(s, 6) for d, s in sorted(per_device.items())},
            "kernel_s_median": {k: round(statistics.median(v), 6) for k, v in sorted(kernels.items())},
            "wrong": sum(r.get("wrong") or 0 for r in results),
            "names": sorted({r.get("name", "") for r in results}),
            "stderr_tail": proc.stderr.strip().splitlines()[-3:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda", "npu", "auto"))
    ap.add_argument("--ranks", default="1,2", help="rank counts to run, comma-separated (each a case)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the Gaussian matmul (the probe: 3)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter with torch (the node's venv)")
    ap.add_argument("--out", type=Path, default=None, help="write the figures here as JSON")
    args = ap.parse_args(argv)
    cases = []
    for ranks in (int(r) for r in args.ranks.split(",") if r):
        case = run_case(args.python, args.device, ranks, args.repeats)
        cases.append(case)
        print(f"{args.device} x{ranks}: {case['wall_s']:.2f} s wall "
              f"({case['wall_s_per_device']:.2f} s per device); "
              f"kernels per device {case['kernel_s_per_device']}; rc {case['rc']}, wrong {case['wrong']}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"cases": cases}, indent=1) + "\n")
    return 0 if all(c["rc"] == 0 and c["wrong"] == 0 for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
