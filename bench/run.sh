#!/usr/bin/env bash
# Runs every CPU benchmark in one invocation, one after the other (they would skew each other if run
# in parallel), and writes their JSON figures to bench/out/. Root: the fan-out and provisioning
# benchmarks start simulated clusters of their own.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
OUT=${BENCH_OUT:-bench/out}
mkdir -p "$OUT"
echo "== ascend-check fan-out: 1 node, 32 nodes, ansible -m shell on 32 nodes"
$PY bench/check_fanout.py --nodes 32 --repeat 3 --json "$OUT/check_fanout.json"
echo "== ascend-check node: one node's quick tier on the node, against the same node over SSH"
$PY bench/node_local.py --repeat 5 --json "$OUT/node_local.json"
echo "== site.yml on 8 simulated nodes: first run and no-op re-run"
$PY bench/provision_site.py --nodes 8 --json "$OUT/provision_site.json"
echo "== training step time: our GRPO vs plain TRL, PPO vs GRPO (tiny CPU config)"
OMP_NUM_THREADS=1 $PY bench/train_step_time.py --steps 30 --repeats 3 | tee "$OUT/train_step_time.txt"
echo "== ascend-check diagnose: a generated 1 GiB log, streamed"
$PY bench/diagnose_scan.py --size-gb 1 --json "$OUT/diagnose_scan.json"
echo "== device-NIC ping mesh: 32x8 model fabric, real mesh on 4 simulated nodes"
$PY bench/mesh.py --nodes 32 --repeat 3 --json "$OUT/mesh.json"
echo "figures in $OUT/"
