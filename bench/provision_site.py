"""Benchmark: site.yml on N simulated nodes, first run (installs everything) and the no-op re-run.

Target (issue 4): the re-run takes <= 25 s on 8 nodes with 2 cores and reports changed=0 everywhere.
Reports wall seconds, controller CPU (ansible-playbook and its workers) and node CPU (the nodes' sshd and
the modules they ran): on one machine the two CPU figures share the same cores.
Usage (root): .venv/bin/python bench/provision_site.py [--nodes 8] [--json out.json]
(ASCEND_BENCH_RUN_DIR and ASCEND_BENCH_SUBNET move its simulated cluster off the defaults.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

from ascend_ready.sim.harness import fleet as fleet_harness

REPO = Path(__file__).resolve().parents[1]
PLAYBOOKS = REPO / "playbooks"
BIN = Path(sys.executable).parent
STACK = "cann-8.2.RC1-torch-2.5.1"
# Override both when another session's simulated cluster could use the same run dir or subnet.
RUN_DIR = os.environ.get("ASCEND_BENCH_RUN_DIR", "/run/ascend-sim-bench-provision")
SUBNET = os.environ.get("ASCEND_BENCH_SUBNET", "10.251.210.0/24")
TARGET_S = 25.0


def _fleet_helper():
    return fleet_harness


def _node_cpu_s(run_dir: Path) -> float:
    """CPU seconds the nodes' sshd processes and their reaped children (the modules Ansible ran) used so
    far: the node side of a run, on the same cores as the controller."""
    tick = os.sysconf("SC_CLK_TCK")
    nodes = json.loads((run_dir / "cluster.json").read_text())["nodes"]
    namespaces = {os.readlink(f"/proc/{n['pid']}/ns/pid") for n in nodes}
    total = 0
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text() if proc.name.isdigit() else ""
            if "(sshd)" not in stat or os.readlink(proc / "ns" / "pid") not in namespaces:
                continue
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / tick


def _play(inventory: Path, run_dir: Path) -> dict:
    env = {**os.environ, "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    node_before = _node_cpu_s(run_dir)
    started = time.monotonic()
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), "site.yml", "--skip-tags",
                           "os_prereqs"], cwd=PLAYBOOKS, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    node_cpu = _node_cpu_s(run_dir) - node_before
    recap = {m.group(1): {"changed": int(m.group(2)), "failed": int(m.group(3))}
             for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)",
                                  proc.stdout, re.M)}
    if proc.returncode != 0:
        sys.exit(f"site.yml failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    return {"wall_s": round(wall, 1),
            "controller_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "node_cpu_s": round(node_cpu, 1),
            "tasks": proc.stdout.count("\nTASK ["),
            "changed": sum(r["changed"] for r in recap.values()), "hosts": len(recap)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ["ASCEND_SIM_RUN_DIR"], os.environ["ASCEND_SIM_SUBNET"] = RUN_DIR, SUBNET
    from ascend_ready.sim import cluster as sim

    fleet = _fleet_helper()
    work = Path(RUN_DIR + "-work")
    sim.down()
    try:
        c = sim.up(args.nodes)
        subprocess.run([sys.executable, "-m", "ascend_ready.sim.harness.build_packages",
                        str(work / "packages"), "--stack", STACK], check=True, capture_output=True)
        fleet.preinstall_net_tools(c.run_dir)
        inventory = fleet.write_inventory(c.run_dir, work / "inventory", work / "packages", STACK)
        first = _play(inventory, c.run_dir)
        rerun = _play(inventory, c.run_dir)
    finally:
        sim.down()
    result = {"nodes": args.nodes, "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 1),
              "first_run": first, "rerun": rerun, "rerun_target_s": TARGET_S,
              "rerun_within_target": rerun["wall_s"] <= TARGET_S and rerun["changed"] == 0}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
