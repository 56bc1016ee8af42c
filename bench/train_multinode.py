"""Seconds per step on the tiny CPU config, launched by `ascend-train` over SSH on simulated nodes: one node
running two processes against two nodes running one each (gloo between the nodes' network namespaces).

Run (root: it starts a 2-node cluster of its own and tears it down):
    .venv/bin/python bench/train_multinode.py --steps 30 --json bench/out/train_multinode.json

A step is `perf/step_time_s` from rank 0's metrics.jsonl (one step start to the next), median over the steps
after the first three; `job_s` is the launcher's whole run (SSH, probe, torchrun rendezvous, model load,
training, teardown). Both layouts share the same CPUs of this machine: the figure measures what crossing
nodes costs (veth + gloo TCP, the launcher's streaming) rather than any speed-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def run(layout: str, hosts: str, nproc: int, cluster, algo: str, steps: int) -> dict:
    out = cluster.run_dir / "shared" / f"{algo}-{layout}"
    cmd = [str(BIN / "ascend-train"), algo, "-c", "tiny", "--hosts", hosts, "--ssh-config",
           str(cluster.ssh_config), "--skip-preflight", "--nproc-per-node", str(nproc), "-o", str(out),
           "--node-output-dir", f"/shared/{out.name}", f"max_steps={steps}", "eval_max_examples=0",
           f"save_every={steps}"]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    job_s = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{layout} failed:\n{proc.stderr[-3000:]}")
    records = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    times = [r["perf/step_time_s"] for r in records if r.get("perf/step_time_s") is not None][3:]
    return {"layout": layout, "algo": algo, "steps": steps, "step_s": round(statistics.median(times), 4),
            "step_s_p90": round(sorted(times)[int(0.9 * (len(times) - 1))], 4), "job_s": round(job_s, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--algo", action="append", choices=["grpo", "ppo"], help="default: grpo and ppo")
    ap.add_argument("--run-dir", default="/run/ascend-sim-bench-train")
    ap.add_argument("--subnet", default="10.251.190.0/24")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    os.environ["ASCEND_SIM_RUN_DIR"] = args.run_dir
    from ascend_ready.sim import cluster as sim

    sim.down()
    cluster = sim.up(2, "a2-ubuntu2204", subnet=args.subnet)
    results = []
    try:
        for algo in args.algo or ["grpo", "ppo"]:
            for layout, hosts, nproc in (("1 node x 2 processes", "node01", 2),
                                         ("2 nodes x 1 process", "node01,node02", 1)):
                r = run(layout, hosts, nproc, cluster, algo, args.steps)
                results.append(r)
                print(f"{algo}  {layout:<22} {r['step_s']:.4f} s/step (p90 {r['step_s_p90']:.4f}), "
                      f"job {r['job_s']:.1f} s", flush=True)
    finally:
        sim.down()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
