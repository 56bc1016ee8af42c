#!/usr/bin/env bash
# The end-to-end demo on a simulated cluster: one playbook, one preflight, one launch.
#   0. the stack: `ascend-matrix resolve --os centos7.6` and `--os kylinv10sp2` (product 910b); the stack
#      both nodes can take (CentOS 7.6's glibc 2.17 is the floor: manylinux2014 wheels, torch <= 2.5)
#   1. two simulated Atlas 800T A2 nodes, node01 on Kylin V10 SP2 and node02 on CentOS 7.6, each its own
#      host with sshd and 8 fake 910B3, each reporting its OS's glibc, kernel and Python (sim/osident.py)
#   2. provision them with playbooks/site.yml from the bundled fake packages (OS prerequisites from a
#      local mirror, since simulated nodes reach no distribution mirror: the harness installs them, the
#      simulated dnf/yum having no RPMs); a re-run changes nothing
#   3. ascend-check over SSH: every check passes, across the two nodes too (fleet.*; fleet.os warns that
#      the two OSes differ, a mixed fleet with one stack being legitimate); an HTML report
#   4. inject a fault (a PCIe link trained at x8): the failure with its remediation, and training refused
#   5. the preflight writes a launch spec; ascend-train grpo runs on both nodes from it (torchrun over SSH,
#      gloo on CPU, the tiny config; each rank bound to its NPU's NUMA node of the presented Kunpeng host)
#      in the training venv the playbook built on each node (the nodes do not see this checkout or its
#      .venv), its outputs on the cluster's shared filesystem; held-out accuracy printed at the start and end;
#      then ascend-train ppo from the same spec, 10 steps, and no training process left on either node
# Needs root (the simulator uses Linux namespaces). Env: ASCEND_DEMO_STACK (matrix stack id, instead of
# the one resolved in step 0).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BIN=$REPO/.venv/bin
export ASCEND_SIM_RUN_DIR=${ASCEND_SIM_RUN_DIR:-/run/ascend-sim-demo}
SUBNET=${ASCEND_DEMO_SUBNET:-10.251.240.0/24}
HOST_IP=${SUBNET%.*}.1
# The run's outputs: the simulated cluster's shared filesystem (<run dir>/shared, /shared in the nodes)
OUT=$ASCEND_SIM_RUN_DIR/shared/demo
NODE_OUT=/shared/demo
REPORT=${ASCEND_DEMO_REPORT:-$REPO/runs/demo-report.html}
MIRROR_PORT=${ASCEND_DEMO_MIRROR_PORT:-47380}
mirror_pid=

cleanup() {
  [ -n "$mirror_pid" ] && kill "$mirror_pid" 2>/dev/null || true
  if [ -n "${ASCEND_DEMO_KEEP:-}" ]; then  # to look around after the demo: ascend-sim exec node01 -- ...
    echo "cluster kept (ASCEND_DEMO_KEEP): $BIN/ascend-sim down removes it" >&2
    return
  fi
  "$BIN/ascend-sim" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m   (%ds)\n' "$*" "$SECONDS"; }

step "0/5 the stack for a Kylin V10 and a CentOS 7.6 node: ascend-matrix resolve --os ... --product 910b"
if [ -z "${ASCEND_DEMO_STACK:-}" ]; then
  # Each OS's own pick, then the one stack both take: the newest stack of the oldest glibc's pick fits
  # the other OS too when its glibc floor does (the matrix says why not, if not).
  ASCEND_DEMO_STACK=$("$BIN/python" - <<'PY'
import sys
from ascend_ready.errors import AscendReadyError
from ascend_ready.provision.resolver import resolve
oses = ("centos7.6", "kylinv10sp2")
pick = {o: resolve(os=o, product="910b", arch="x86_64") for o in oses}
for o, r in pick.items():
    print(f"   ascend-matrix resolve --os {o} --product 910b: {r.id} (glibc floor {r.glibc_floor}, "
          f"{r.manylinux})", file=sys.stderr)
fits = {}
for o, r in pick.items():
    try:
        fits[o] = [resolve(os=other, product="910b", arch="x86_64", cann=r.cann, torch=r.torch).id
                   for other in oses]
    except AscendReadyError as exc:
        print(f"   {r.id} does not fit both: {exc}", file=sys.stderr)
common = next((r.id for o, r in pick.items() if o in fits), None)
if common is None:
    sys.exit("no one stack fits both nodes (each OS's own is shown above)")
print(f"   both nodes take {common}", file=sys.stderr)
print(common)
PY
)
fi
echo "-- stack: $ASCEND_DEMO_STACK"
export ASCEND_DEMO_STACK

step "1/5 bring up two simulated Atlas 800T A2 nodes: Kylin V10 SP2 and CentOS 7.6"
"$BIN/ascend-sim" down >/dev/null 2>&1 || true
"$BIN/ascend-sim" up 2 --profile a2-kylinv10,a2-centos76 --subnet "$SUBNET"
"$BIN/ascend-sim" status
echo "-- node01 before provisioning: the hardware is there, the vendor tools are not"
"$BIN/ascend-sim" exec node01 -- sh -c 'lspci | grep -c "Processing accelerators"; command -v npu-smi || echo "npu-smi: not installed"'
echo "-- what each node says it is (its C library, kernel and system Python: sim/profiles.yaml)"
for n in node01 node02; do
  "$BIN/ascend-sim" exec "$n" -- sh -c 'printf "   %s: %s, %s, kernel %s, %s\n" "$(hostname)" \
    "$(. /etc/os-release; echo "$PRETTY_NAME")" "$(getconf GNU_LIBC_VERSION)" "$(uname -r)" "$(python3 -V 2>&1)"'
done

step "2/5 provision with playbooks/site.yml"
echo "-- a local apt mirror for os_prereqs (make, dkms, gcc, kernel headers, pciutils, net-tools)   (${SECONDS}s)"
"$BIN/python" -m ascend_ready.sim.harness.rpm_prereqs mirror "$ASCEND_SIM_RUN_DIR/apt-mirror" >/dev/null
"$BIN/python" -m http.server "$MIRROR_PORT" --bind "$HOST_IP" --directory "$ASCEND_SIM_RUN_DIR/apt-mirror" \
  >/dev/null 2>&1 &
mirror_pid=$!
for _ in $(seq 100); do (: <"/dev/tcp/$HOST_IP/$MIRROR_PORT") 2>/dev/null && break; sleep 0.1; done
ASCEND_DEMO_OS_PREREQS_REPO="[trusted=yes] http://$HOST_IP:$MIRROR_PORT/ ./" bash playbooks/demo-provision.sh
echo "-- provisioned   (${SECONDS}s)"
INVENTORY=$(cat "$ASCEND_SIM_RUN_DIR/provision/inventory.path")
"$BIN/ascend-sim" exec node01 -- npu-smi info | head -n 9

step "3/5 preflight: ascend-check -i $INVENTORY"
mkdir -p "$(dirname "$REPORT")"
"$BIN/ascend-check" -i "$INVENTORY" --html "$REPORT"
echo "-- HTML report: $REPORT"

step "4/5 a fault: NPU 3 of node02 trains its PCIe link at x8 instead of x16"
"$BIN/ascend-sim" fault node02 pcie-width --param npu=3 --param width=8
rc=0
"$BIN/ascend-check" -i "$INVENTORY" --select 'pcie.*' || rc=$?
echo "-- ascend-check exited $rc (1: a check failed); and training is refused while it fails:"
rc=0
"$BIN/ascend-train" grpo --config tiny --output-dir "$OUT" -i "$INVENTORY" max_steps=1 || rc=$?
echo "-- ascend-train exited $rc before starting anything; clearing the fault"
"$BIN/ascend-sim" fault node02 --clear

step "5/5 train on both nodes: a launch spec from the preflight, then ascend-train grpo and ppo from it"
SPEC=$REPO/runs/demo-launch-spec.json
"$BIN/ascend-check" -i "$INVENTORY" --launch-spec "$SPEC" >/dev/null
echo "-- the job runs in the training venv the playbook built on each node (the interpreter the gate judged):"
"$BIN/python" -c 'import json, sys
for name, host in json.load(open(sys.argv[1]))["hosts"].items(): print("  ", name + ":", host["python"])' "$SPEC"
echo "-- node01's host as the launcher reads it: 8 NUMA nodes, and each NPU's CPU affinity in one of them"
"$BIN/ascend-sim" exec node01 -- sh -c 'lscpu | grep -E "^(Model name|Socket|NUMA node)"; \
  npu-smi info -t topo | sed -n "1,9p" | awk "{print \$1, \$NF}"'
rm -rf "$OUT"
# batch_size is per device: 32 on each of the two nodes is the tiny config's global batch of 64 on one
# (8 prompts x 8 completions a step), so this run learns as a one-node run of the tiny config does.
"$BIN/ascend-train" grpo --config tiny --launch-spec "$SPEC" -i "$INVENTORY" --output-dir "$OUT" \
  --node-output-dir "$NODE_OUT" max_steps=150 eval_every=50 batch_size=32
"$BIN/python" - "$OUT/metrics.jsonl" <<'PY'
import sys
from ascend_ready.training.metrics import read_metrics
acc = [(r["step"], r["eval/accuracy"]) for r in read_metrics(sys.argv[1]) if r.get("eval/accuracy") is not None]
print("-- held-out accuracy (greedy answers to the 32 held-out questions): "
      + ", ".join(f"step {s}: {a:.2f}" for s, a in acc))
print(f"-- held-out accuracy at the start: {acc[0][1]:.2f}, at the end: {acc[-1][1]:.2f}")
PY
echo "-- and ascend-train ppo (policy, value head and reference: ours) from the same spec, 10 steps   (${SECONDS}s)"
rm -rf "$OUT-ppo"
"$BIN/ascend-train" ppo --config tiny --launch-spec "$SPEC" -i "$INVENTORY" --output-dir "$OUT-ppo" \
  --node-output-dir "$NODE_OUT-ppo" max_steps=10 save_every=10 eval_max_examples=0 batch_size=32
"$BIN/python" - "$OUT-ppo/metrics.jsonl" <<'PY'
import sys
from ascend_ready.training.metrics import read_metrics
rows = [r for r in read_metrics(sys.argv[1]) if "loss/policy" in r]
if [r["step"] for r in rows] != list(range(1, 11)):
    sys.exit(f"PPO logged policy steps {[r['step'] for r in rows]}, not 1..10")
print(f"-- PPO: steps 1..10 logged, mean reward {rows[0]['reward/mean']:.2f} at step 1, "
      f"{rows[-1]['reward/mean']:.2f} at step 10")
PY
echo "-- no training process is left on either node:"
for n in node01 node02; do
  left=$("$BIN/ascend-sim" exec "$n" -- ps -eo pid,args | grep -E '[a]scend_ready\.(training|checks\.cluster)' || true)
  [ -z "$left" ] || { echo "error: $n still runs: $left" >&2; exit 1; }
  echo "   $n: none"
done
# The shared filesystem goes with the cluster: keep the run where the demo was started.
rm -rf "$REPO/runs/demo" "$REPO/runs/demo-ppo" && mkdir -p "$REPO/runs" && cp -r "$OUT" "$REPO/runs/demo" \
  && cp -r "$OUT-ppo" "$REPO/runs/demo-ppo"
OUT=$REPO/runs/demo
echo
echo "launch spec: $SPEC"
echo "HTML report: $REPORT"
echo "metrics: $OUT/metrics.jsonl (PPO: $REPO/runs/demo-ppo/metrics.jsonl)"
echo "plot:    $OUT/metrics.png"
echo "tensorboard: $BIN/tensorboard --logdir $OUT/tensorboard"
