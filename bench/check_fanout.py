"""Fan-out benchmark of `ascend-check` on the simulated cluster (issue 3 targets).

Reports, in one run: (a) the quick tier on 1 node, (b) on N nodes (default 32), (c) the same probe
commands through `ansible -m shell` on the same N nodes: one `shell` task per command, as an Ansible
preflight is written (a per-device command runs as one shell loop, not one task per device). For
reference, (c1) is the batch script ascend-check sends, as ONE `ansible -m shell` call per host.
Each figure is the median of --repeat runs after one warm-up; wall seconds, with the controller's CPU
seconds and the whole machine's busy CPU seconds (every simulated node and sshd included, from
/proc/stat) in brackets. (a) and (b) are timed in-process (the library call the CLI makes) and as the
`ascend-check` command (adds interpreter start-up and imports).

Targets (issue 9): (a) as the command <= 1.0 s wall; controller CPU per host in (b) <= 25 ms; (c)/(b)
>= 5. All simulated nodes share this machine's cores, so (b)'s wall time says little about a real
fleet (the "efficiency" figure is machine CPU / cores / wall: 1.0 = CPU-bound, nothing left idle).
What bounds a real fleet is the controller's own CPU per host (one core: the GIL) and the command's
start-up, so the bench projects 1,000 nodes from one controller:
start-up + 1000 x controller CPU per host + the slowest node's batch, with the arithmetic shown.

    sudo .venv/bin/python bench/check_fanout.py [--nodes 32] [--repeat 3] [--keep] [--json FILE]

Needs root (the simulator). It uses its own run dir and subnet (ASCEND_BENCH_RUN_DIR and
ASCEND_BENCH_SUBNET move them), so a running cluster is untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RUN_DIR = os.environ.get("ASCEND_BENCH_RUN_DIR", "/run/ascend-sim-bench-check")
SUBNET = os.environ.get("ASCEND_BENCH_SUBNET", "10.251.208.0/24")
#: the fleet size the projection is made for
PROJECTED_NODES = 1000
REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _machine_cpu() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)
    return busy / os.sysconf("SC_CLK_TCK")


def timed(fn, repeat: int, *, warm_up: bool = True) -> dict:
    if warm_up:
        fn()  # render caches on the nodes, imports and the suite's modules here, ssh control masters
    walls, cpus, machine = [], [], []
    for _ in range(repeat):
        c0, m0, t0 = _cpu(), _machine_cpu(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
        machine.append(_machine_cpu() - m0)
    wall, busy = statistics.median(walls), statistics.median(machine)
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(statistics.median(cpus), 3),
        "machine_cpu_s": round(busy, 2),
        "efficiency": round(busy / (os.cpu_count() or 1) / wall, 2),
        "runs": [round(w, 3) for w in walls],
    }


def ansible_tasks(probes, user: str) -> list[dict]:
    """One `shell` task per probe command, as an Ansible preflight lists them. A per-device probe is one
    loop over the node's devices; as_user probes run in the user's login shell, as ascend-check runs them."""
    from ascend_ready.checks.probes import FOREACH

    # The npu-chip source reads the batch's saved `npu-smi info -l`; here it reads the command itself.
    sources = {
        "davinci": FOREACH["davinci"],
        "npu-chip": "npu-smi info -l | " + FOREACH["npu-chip"].replace(' "$_T/npu-smi-l.out"', ""),
    }
    tasks = []
    for probe in probes:
        if probe.foreach is not None:
            body = (
                f'sh -c {shlex.quote(probe.shell)} _ "$@"'
                if probe.shell is not None
                else probe.command.replace("{1}", '"$1"').replace("{2}", '"$2"')
            )
            cmd = f"({sources[probe.foreach]}) | while read -r k; do set -- $k; {body}; done"
        elif probe.as_user:
            cmd = f"su - {shlex.quote(user)} -c {shlex.quote(probe.command)}"
        else:
            cmd = probe.command
        tasks.append(
            {
                "name": probe.id,
                "ansible.builtin.shell": cmd,
                "changed_when": False,
                "failed_when": False,
                "timeout": int(probe.timeout_s or 10),
            }
        )
    return tasks


def install_driver(cluster, pkgdir: Path) -> None:
    """The fake driver and firmware on every node (npu-smi, hccn_tool), device NIC addresses set."""
    from ascend_ready.sim.cluster import node_exec

    runs = [p for p in pkgdir.glob("*.run") if "-npu-driver_" in p.name or "-npu-firmware_" in p.name]

    def one(node):
        root = Path(f"/proc/{node.pid}/root")
        (root / "tmp/pkgs").mkdir(parents=True, exist_ok=True)
        for run in runs:
            (root / "tmp/pkgs" / run.name).write_bytes(run.read_bytes())
        script = (
            "set -e; getent group HwHiAiUser >/dev/null || groupadd HwHiAiUser; "
            "id HwHiAiUser >/dev/null 2>&1 || useradd -g HwHiAiUser -m HwHiAiUser; cd /tmp/pkgs; "
            "sh ./*-npu-driver_*.run --full --install-for-all --quiet >/dev/null; "
            "sh ./*-npu-firmware_*.run --full --quiet >/dev/null; "
            "for d in 0 1 2 3 4 5 6 7; do p=$((d % 4 + 1)); "
            f"hccn_tool -i $d -ip -s address 192.$p.{node.index + 1}.$((d + 10)) netmask 255.255.0.0; "
            "hccn_tool -i $d -netdetect -s address 192.$p.0.1; done"
        )
        res = node_exec(node, ["sh", "-c", script], capture_output=True, text=True, timeout=300)
        if res.returncode:
            raise SystemExit(f"{node.name}: provisioning failed: {res.stderr or res.stdout}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, cluster.nodes))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--ansible-repeat",
        type=int,
        default=1,
        help="timed runs of (c), one task per command (slow: about a minute each)",
    )
    ap.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    ap.add_argument("--reuse", action="store_true", help="use the cluster a --keep run left (no setup)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--skip-ansible", action="store_true", help="leave out (c) and (c1) (minutes each)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("error: the simulated cluster needs root", file=sys.stderr)
        return 2
    os.environ["ASCEND_SIM_RUN_DIR"] = RUN_DIR
    os.environ["ASCEND_SIM_SUBNET"] = SUBNET

    from ascend_ready.checks.catalog import plan
    from ascend_ready.checks.preflight import PreflightOptions, preflight, profiles_for
    from ascend_ready.checks.probes import build_script
    from ascend_ready.fleet.inventory import limit_targets, load_inventory
    from ascend_ready.provision.resolver import resolve
    from ascend_ready.sim import cluster as sim
    from ascend_ready.sim.packages import build_package_dir

    started = time.perf_counter()
    if args.reuse:
        cluster = sim.load_running()
        if len(cluster.nodes) != args.nodes:
            print(f"error: --reuse found {len(cluster.nodes)} nodes, not {args.nodes}", file=sys.stderr)
            return 2
    else:
        sim.down()
        cluster = sim.up(args.nodes, "a2-ubuntu2204")
    try:
        s = resolve(product="910b", arch="x86_64")
        pkgdir = build_package_dir(
            Path(RUN_DIR) / "bench-packages",
            [
                {
                    "driver": s.driver,
                    "firmware": s.firmware,
                    "cann": s.cann,
                    "torch": s.torch,
                    "torch_npu": s.torch_npu,
                }
            ],
            arch="x86_64",
        )
        if not args.reuse:
            install_driver(cluster, pkgdir)
        setup_s = time.perf_counter() - started
        inventory = str(cluster.inventory_path)
        targets = load_inventory(inventory)
        one = limit_targets(targets, targets[0].name)
        options = PreflightOptions(tier="quick")
        slowest_batch: dict[int, float] = {}

        def run_lib(ts):
            def go():
                report = preflight(ts, options)
                assert all(h.reachable for h in report.hosts), [h.error for h in report.hosts]
                assert len(report.results) == len(ts) * len(options.checks())
                slowest_batch[len(ts)] = max(h.collect_s for h in report.hosts)

            return go

        def run_cli(limit):
            def go():
                subprocess.run(
                    [str(VENV_BIN / "ascend-check"), "-i", inventory, "--limit", limit, "--format", "json"],
                    capture_output=True,
                    check=False,
                    timeout=300,
                )

            return go

        # (c): the very script ascend-check sends (the quick tier's probes), once per host via ansible.
        profile = profiles_for(targets[:1], None)[targets[0].name]
        probes = plan(profile, {p for spec in options.checks() for p in spec.probes})
        script, _nonce = build_script(probes, user=profile.training_user)
        env = dict(
            os.environ,
            ANSIBLE_PIPELINING="1",
            ANSIBLE_PYTHON_INTERPRETER="auto_silent",
            ANSIBLE_HOST_KEY_CHECKING="True",
            ANSIBLE_STDOUT_CALLBACK="oneline",
            ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        )

        def run_ansible_script():
            res = subprocess.run(
                [
                    str(VENV_BIN / "ansible"),
                    "all",
                    "-i",
                    inventory,
                    "-f",
                    str(args.nodes),
                    "-m",
                    "shell",
                    "-a",
                    script,
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )
            # oneline: "node01 | CHANGED | rc=0 | (stdout) ..." per host
            ok = [line for line in res.stdout.splitlines() if " | CHANGED | rc=0 |" in line]
            if len(ok) != args.nodes:
                raise SystemExit(
                    f"ansible: {len(ok)}/{args.nodes} hosts ran the probes (rc {res.returncode}): "
                    f"{res.stderr[-2000:]}"
                )

        playbook = Path(RUN_DIR) / "bench-probes.yml"
        tasks = ansible_tasks(probes, profile.training_user)
        playbook.write_text(
            json.dumps(
                [
                    {
                        "name": "ascend-check probes, one task per command",
                        "hosts": "all",
                        "gather_facts": False,
                        "tasks": tasks,
                    }
                ],
                indent=1,
            )
        )

        def run_ansible_tasks():
            res = subprocess.run(
                [str(VENV_BIN / "ansible-playbook"), "-i", inventory, "-f", str(args.nodes), str(playbook)],
                capture_output=True,
                text=True,
                env=dict(env, ANSIBLE_STDOUT_CALLBACK="default"),
                timeout=1200,
            )
            recap = [line for line in res.stdout.splitlines() if " : ok=" in line]
            good = [line for line in recap if f"ok={len(tasks)} " in line and "failed=0" in line]
            if res.returncode != 0 or len(good) != args.nodes:
                raise SystemExit(
                    f"ansible-playbook: {len(good)}/{args.nodes} hosts ran every task "
                    f"(rc {res.returncode}): {res.stdout[-2000:]} {res.stderr[-2000:]}"
                )

        def node_batch():
            # The probe batch run inside one node, to see the node-side CPU it costs.
            from ascend_ready.sim.cluster import node_exec

            node_exec(cluster.nodes[0], ["sh", "-s"], input=script.encode(), capture_output=True, timeout=120)

        node_cpu = timed(node_batch, args.repeat)
        results = {
            "a_quick_1_node": timed(run_lib(one), args.repeat),
            "a_cli_1_node": timed(run_cli(one[0].name), args.repeat),
            "b_quick_n_nodes": timed(run_lib(targets), args.repeat),
            "b_cli_n_nodes": timed(run_cli("all"), args.repeat),
        }
        if not args.skip_ansible:
            results["c1_ansible_one_script_n_nodes"] = timed(run_ansible_script, args.repeat)
            # Right after (c1), whose runs leave ansible's ssh control masters open (ControlPersist):
            # no separate warm-up round of this slow one.
            results["c_ansible_shell_n_nodes"] = timed(run_ansible_tasks, args.ansible_repeat, warm_up=False)
    finally:
        if not args.keep:
            sim.down()
    a, b = (results[k]["wall_s"] for k in ("a_quick_1_node", "b_quick_n_nodes"))
    c = results.get("c_ansible_shell_n_nodes", {}).get("wall_s")
    cores = os.cpu_count() or 1
    # The controller's CPU per host: (b)'s in-process CPU over its hosts (SSH, streaming, judging).
    per_host_s = results["b_quick_n_nodes"]["cpu_s"] / args.nodes
    # Start-up: what the command adds to the same run in-process (interpreter, imports).
    startup_s = max(0.0, results["a_cli_1_node"]["wall_s"] - a)
    batch_s = slowest_batch.get(args.nodes, 0.0)
    projected_s = startup_s + PROJECTED_NODES * per_host_s + batch_s
    summary = {
        "node_batch": node_cpu,
        # Every simulated node shares this machine's cores: (b) cannot beat nodes x node CPU / cores.
        "b_node_cpu_floor_s": round(args.nodes * node_cpu["cpu_s"] / cores, 3),
        "b_machine_cpu_floor_s": round(results["b_quick_n_nodes"]["machine_cpu_s"] / cores, 3),
        "nodes": args.nodes,
        "probes_per_node": len(probes),
        "ansible_tasks_per_node": len(tasks),
        "checks_per_node": len(options.checks()),
        "cpu_count": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "setup_s": round(setup_s, 1),
        "results": results,
        "controller_cpu_per_host_ms": round(per_host_s * 1000, 1),
        "projection": {
            "nodes": PROJECTED_NODES,
            "startup_s": round(startup_s, 3),
            "controller_cpu_per_host_s": round(per_host_s, 4),
            "slowest_batch_s": round(batch_s, 3),
            "total_s": round(projected_s, 1),
        },
        "targets": {
            "a as the command <= 1 s": results["a_cli_1_node"]["wall_s"] <= 1.0,
            "controller CPU per host <= 25 ms": per_host_s <= 0.025,
            **({"c / b >= 5": c / b >= 5} if c is not None else {}),
        },
        "ratios": {
            "b/a": round(b / a, 2),
            "a cli / a in-process": round(results["a_cli_1_node"]["wall_s"] / a, 2),
            **({"c/b": round(c / b, 2)} if c is not None else {}),
            **(
                {"c1/b": round(results["c1_ansible_one_script_n_nodes"]["wall_s"] / b, 2)}
                if "c1_ansible_one_script_n_nodes" in results
                else {}
            ),
        },
    }
    print(
        f"ascend-check fan-out on {args.nodes} simulated nodes ({len(probes)} probes, "
        f"{len(options.checks())} checks per node; {cores} cores, load {summary['load_avg_1m']})"
    )
    print(f"  {'one node batch (in node)':30s} {node_cpu['wall_s']:7.3f} s  [{node_cpu['cpu_s']:.2f} cpu-s]")
    for key, r in results.items():
        print(
            f"  {key:30s} {r['wall_s']:7.3f} s  [{r['cpu_s']:.2f} cpu-s here, "
            f"{r['machine_cpu_s']:.2f} machine, efficiency {r['efficiency']:.2f}]  runs {r['runs']}"
        )
    print(
        f"  (b) floors here: nodes x node batch / cores = {summary['b_node_cpu_floor_s']:.2f} s; "
        f"machine CPU / cores = {summary['b_machine_cpu_floor_s']:.2f} s"
    )
    print(
        f"  controller CPU per host: (b) {results['b_quick_n_nodes']['cpu_s']:.3f} cpu-s / "
        f"{args.nodes} hosts = {per_host_s * 1000:.1f} ms"
    )
    print(
        f"  projected for {PROJECTED_NODES} nodes from one controller: start-up {startup_s:.3f} s "
        f"((a) as the command {results['a_cli_1_node']['wall_s']:.3f} - in-process {a:.3f}) "
        f"+ {PROJECTED_NODES} x {per_host_s * 1000:.1f} ms + slowest batch {batch_s:.3f} s "
        f"= {projected_s:.1f} s"
    )
    for target, ok in summary["targets"].items():
        print(f"  target {target:34s} {'met' if ok else 'MISSED'}")
    print("  " + ", ".join(f"{k} = {v:.2f}" for k, v in summary["ratios"].items()))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0 if all(summary["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
