"""Benchmark of the device-NIC ping mesh (issue 10): its schedule and culprit isolation at 32 nodes x 8
devices on a model fabric, and the real mesh over SSH on a 4-node simulated cluster.

(a) model, in-process: rounds used (31 for 32 nodes), pings run, the wall time of scheduling plus
    isolation, and the extra pings isolation asks for with one dead device and with one cut link;
(b) simulator (root; skipped with --model-only): `checks.cluster.mesh_run.mesh` on 4 A2 nodes whose
    device NICs are addressed as the fleet's hccn role does: wall time per round, healthy and with one
    device's link down, and what a 32-node run would take at that per-round time (31 rounds + re-tests;
    a projection, not a measurement: on real nodes each round's pings run on the nodes' own cores).

    sudo .venv/bin/python bench/mesh.py [--nodes 32] [--devices 8] [--repeat 3] [--model-only] [--json F]

ASCEND_BENCH_RUN_DIR and ASCEND_BENCH_SUBNET move its simulated cluster off the defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from ascend_ready.checks.cluster.mesh import Ping, PingOutcome, isolate, rounds

RUN_DIR = os.environ.get("ASCEND_BENCH_RUN_DIR", "/run/ascend-sim-bench-mesh")
SUBNET = os.environ.get("ASCEND_BENCH_SUBNET", "10.251.211.0/24")


class ModelFabric:
    """Dead device NICs and cut links, answering a round at once; counts what it was asked."""

    def __init__(self, dead=(), cut=()):
        self.dead, self.cut = set(dead), {(frozenset(c[:2]), c[2]) for c in cut}
        self.asked = 0

    def __call__(self, pings: list[Ping]) -> dict[Ping, PingOutcome]:
        self.asked += len(pings)
        out = {}
        for p in pings:
            bad = ((p.src, p.plane) in self.dead or (p.dst, p.plane) in self.dead
                   or (frozenset((p.src, p.dst)), p.plane) in self.cut)
            out[p] = PingOutcome(not bad, f"{p.src} -> {p.dst} plane {p.plane}")
        return out


def model(nodes: int, devices: int, repeat: int) -> dict:
    names = [f"node{i:02d}" for i in range(1, nodes + 1)]
    out = {}
    cases = {"healthy": {}, "one dead device": {"dead": [(names[6], 3)]},
             "one cut link": {"cut": [(names[1], names[3], 5)]}}
    for label, faults in cases.items():
        walls = []
        for _ in range(repeat):
            fabric = ModelFabric(**faults)
            t0 = time.perf_counter()
            result = isolate(rounds(names, range(devices)), fabric)
            walls.append(time.perf_counter() - t0)
        out[label] = {"rounds": result.rounds, "pings": result.pings, "extra_pings": result.retests,
                      "culprits": sorted(map(list, result.culprits)),
                      "bad_links": sorted(map(list, result.bad_links)),
                      "wall_s": round(statistics.median(walls), 4)}
    return out


def _prepare(c) -> None:
    from ascend_ready.sim.harness.fleet import address_device_nics

    address_device_nics(c)


def simulated(repeat: int, project_nodes: int) -> dict:
    from ascend_ready.checks.cluster.mesh_run import mesh
    from ascend_ready.checks.preflight import profiles_for
    from ascend_ready.fleet.inventory import load_inventory
    from ascend_ready.fleet.transport import FanoutOptions
    from ascend_ready.sim import cluster as sim
    from ascend_ready.sim import faults

    os.environ["ASCEND_SIM_RUN_DIR"] = RUN_DIR
    sim.down()
    c = sim.up(4, "a2-ubuntu2204", subnet=SUBNET)
    try:
        _prepare(c)
        targets = load_inventory(str(c.inventory_path))
        options = FanoutOptions(ssh_config_file=str(c.ssh_config), known_hosts_file=str(c.known_hosts))
        profiles = profiles_for(targets, None)
        mesh(targets, options, profiles)  # warm-up: render caches, imports
        out = {}
        for label, fault in (("healthy", None), ("one dead device", ("node03", "link-down", {"device": 5}))):
            if fault:
                faults.change(*fault)
            runs = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                result = mesh(targets, options, profiles)
                runs.append((time.perf_counter() - t0, result))
            wall, result = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
            per_round = statistics.median(result.round_wall_s[:result.rounds])
            out[label] = {"wall_s": round(wall, 3), "rounds": result.rounds, "pings": result.pings,
                          "extra_pings": result.retests, "round_wall_s": result.round_wall_s,
                          "median_round_s": round(per_round, 3),
                          "culprits": sorted(map(list, result.culprits))}
        healthy = out["healthy"]
        out["projected"] = {"nodes": project_nodes, "rounds": project_nodes - 1,
                            "wall_s": round((project_nodes - 1) * healthy["median_round_s"], 1)}
        return out
    finally:
        sim.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model-only", action="store_true",
                        help="skip the simulated cluster (no root needed)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    figures = {"model": model(args.nodes, args.devices, args.repeat)}
    print(f"(a) model fabric, {args.nodes} nodes x {args.devices} devices (median of {args.repeat}):")
    for label, f in figures["model"].items():
        found = f["culprits"] or f["bad_links"] or "-"
        print(f"    {label:<16} rounds {f['rounds']:>3}  pings {f['pings']:>5}  "
              f"extra pings {f['extra_pings']:>2}  schedule+isolation {f['wall_s'] * 1000:.1f} ms  "
              f"found {found}")
    if not args.model_only:
        figures["sim"] = simulated(args.repeat, args.nodes)
        print(f"(b) real mesh over SSH, 4 simulated A2 nodes x 8 devices (median of {args.repeat}):")
        for label in ("healthy", "one dead device"):
            f = figures["sim"][label]
            rounds_s = ", ".join(f"{w:.2f}" for w in f["round_wall_s"])
            print(f"    {label:<16} wall {f['wall_s']:.2f} s  rounds {f['rounds']}  pings {f['pings']}  "
                  f"extra pings {f['extra_pings']}  per round [{rounds_s}] s  "
                  f"culprits {f['culprits'] or '-'}")
        p = figures["sim"]["projected"]
        print(f"    projected {p['nodes']} nodes: {p['rounds']} rounds x the 4-node median round "
              f"= {p['wall_s']} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)


if __name__ == "__main__":
    main()
