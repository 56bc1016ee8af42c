"""Node-local mode benchmark (issue 19): one simulated A2 node's quick tier as `ascend-check node` run on
the node itself, against the same node's quick tier over SSH from the controller, in one invocation.

Targets: node-local <= 1.0 s wall and <= 0.5 CPU-s (ascend-check's own process: interpreter start-up,
imports, judging, writing the textfile and report); reported as a ratio to the SSH run of the same node.
CPU is split into ascend-check's own and its probes' (the probe batch's shell and the vendor tools; the
simulator's npu-smi and hccn_tool are Python scripts, so they cost far more here than the real C tools).
Each figure is the median of --repeat runs after one warm-up.

    sudo .venv/bin/python bench/node_local.py [--repeat 5] [--json FILE]

Needs root (the simulator); its own run dir and subnet (ASCEND_BENCH_RUN_DIR, ASCEND_BENCH_SUBNET). The node
runs this checkout and its .venv, which the simulator lends it (ASCEND_SIM_LEND_CHECKOUT=1, set here).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_fanout import _cpu, install_driver  # the bench folder's shared helpers

RUN_DIR = os.environ.get("ASCEND_BENCH_RUN_DIR", "/run/ascend-sim-bench-node")
SUBNET = os.environ.get("ASCEND_BENCH_SUBNET", "10.251.209.0/24")
VENV_BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
#: runs ascend-check's CLI in this process on the node, then prints its own and its children's CPU
_IN_NODE = """
import resource, sys, time
from ascend_ready.checks.cli import main
t0 = time.perf_counter()
try:
    main(["node", "--report", "/tmp/bench-node.json", "--prometheus", "/tmp/bench-node.prom",
          "--format", "json"], standalone_mode=False)
except SystemExit:
    pass
wall = time.perf_counter() - t0
own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print("BENCH", wall, own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime, file=sys.stderr)
"""


def installed_bytecode() -> None:
    """Give the checkout the bytecode an installed ascend-ready has: pip and uv compile a package's modules
    when they install it, and pytest keeps its assertion-rewritten check modules beside them after the
    first run. Nodes see this checkout read-only; without it (PYTHONDONTWRITEBYTECODE here) every run on a
    node would compile the whole package again, which no installed node does."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    folders = [str(REPO / d) for d in ("common", "checks", "training", "provision")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], env=env, check=True)
    subprocess.run([str(VENV_BIN / "ascend-check"), "node", "--no-report", "--format", "json"], env=env,
                   capture_output=True, timeout=300, check=False)  # pytest's rewritten suite, cached


def node_local(cluster) -> dict:
    """One node-local run: wall (the whole command, interpreter start-up included), own and probe CPU."""
    from ascend_ready.sim.cluster import node_exec

    t0 = time.perf_counter()
    proc = node_exec(cluster.node("node01"), [sys.executable, "-c", _IN_NODE],
                     capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - t0
    line = next((ln for ln in proc.stderr.splitlines() if ln.startswith("BENCH ")), None)
    if line is None:
        raise SystemExit(f"node-local run failed: {proc.stderr[-2000:]}")
    _, _inner, own, probes = line.split()
    return {"wall_s": wall, "cpu_s": float(own), "probe_cpu_s": float(probes)}


def over_ssh(cluster) -> dict:
    """The same node's quick tier from the controller (`ascend-check -i INVENTORY --limit node01`)."""
    c0, t0 = _cpu(), time.perf_counter()
    subprocess.run([str(VENV_BIN / "ascend-check"), "-i", str(cluster.inventory_path), "--limit", "node01",
                    "--format", "json"], capture_output=True, timeout=120, check=False)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": _cpu() - c0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("error: the simulated cluster needs root", file=sys.stderr)
        return 2
    os.environ["ASCEND_SIM_RUN_DIR"], os.environ["ASCEND_SIM_SUBNET"] = RUN_DIR, SUBNET
    # The node runs this checkout's ascend-check with this .venv's interpreter (node_exec below): the
    # simulator lends them to its nodes only when asked (sim/cluster.py; off by default).
    os.environ["ASCEND_SIM_LEND_CHECKOUT"] = "1"
    from ascend_ready.provision.resolver import resolve
    from ascend_ready.sim import cluster as sim
    from ascend_ready.sim.packages import build_package_dir

    sim.down()
    cluster = sim.up(1, "a2-ubuntu2204")
    try:
        s = resolve(product="910b", arch="x86_64")
        pkgdir = build_package_dir(Path(RUN_DIR) / "bench-packages", [
            {"driver": s.driver, "firmware": s.firmware, "cann": s.cann, "torch": s.torch,
             "torch_npu": s.torch_npu}], arch="x86_64")
        install_driver(cluster, pkgdir)
        installed_bytecode()
        # interleaved, so load on the shared machine falls on both alike
        local, ssh = [], []
        for _ in range(args.repeat + 1):
            local.append(node_local(cluster))
            ssh.append(over_ssh(cluster))
        local, ssh = local[1:], ssh[1:]  # the first round warms caches
    finally:
        sim.down()
    med = {name: {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
           for name, runs in (("node_local", local), ("ssh", ssh))}
    result = {
        **med,
        "ratio_wall": round(med["node_local"]["wall_s"] / med["ssh"]["wall_s"], 2),
        "ratio_cpu": round(med["node_local"]["cpu_s"] / med["ssh"]["cpu_s"], 2),
        "targets": {"node_local_wall_s": 1.0, "node_local_cpu_s": 0.5},
        "met": med["node_local"]["wall_s"] <= 1.0 and med["node_local"]["cpu_s"] <= 0.5,
        "load_average": os.getloadavg(),
        "repeat": args.repeat,
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
