#!/usr/bin/env bash
# Provision the running simulated cluster with site.yml from the bundled fake packages, then show that
# a second run changes nothing. Called by `make demo` after `ascend-sim up`; needs root like the simulator.
#   ASCEND_DEMO_STACK   matrix stack id to install; scripts/demo.sh passes the one its Kylin V10 and CentOS 7.6
#                       nodes both take (ascend-matrix resolve per OS). Default cann-8.2.RC1-torch-2.6.0, for
#                       nodes of glibc 2.28 or newer (its wheels are manylinux_2_28)
#   ASCEND_SIM_RUN_DIR  the cluster (default /run/ascend-sim)
#   ASCEND_DEMO_OS_PREREQS_REPO  an apt source line of a mirror the nodes reach (ascend_ready.sim.harness.apt_mirror);
#                       without it os_prereqs is skipped (simulated nodes reach no distribution mirror)
set -euo pipefail
cd "$(dirname "$0")"
BIN=$(cd ../.venv/bin && pwd)
RUN_DIR=${ASCEND_SIM_RUN_DIR:-/run/ascend-sim}
WORK=$RUN_DIR/provision
STACK=${ASCEND_DEMO_STACK:-cann-8.2.RC1-torch-2.6.0}

# --training: ascend-ready's own wheel and the training job's (transformers, TRL, ...; downloaded once into
# the simulator's cache), and this machine's CPU torch under the stack's pin: python_env installs them into
# each node's training venv, where the job runs (simulated nodes train on CPU).
echo "== building the simulated package source for $STACK (fake .run installers, wheels, SHA256SUMS)   (${SECONDS}s)"
"$BIN/python" -m ascend_ready.sim.harness.build_packages "$WORK/packages" --stack "$STACK" --training >/dev/null
# With a mirror the validate play judges the kernel headers too (fleet.py skips only what this machine
# cannot give a node, and says why in group_vars: ascend_sim_validate_skip_reasons).
mirror=()
if [ -n "${ASCEND_DEMO_OS_PREREQS_REPO:-}" ]; then
  mirror=(--os-prereqs-repo "$ASCEND_DEMO_OS_PREREQS_REPO")
  # A RHEL-family node's dnf is a simulator stand-in (no RPMs, no Python bindings for Ansible's dnf
  # module): the harness installs what a yum mirror would give it, so os_prereqs finds nothing missing.
  echo "== RHEL-family nodes: os_prereqs' RPMs, installed by the harness from the same mirror (sim/harness/rpm_prereqs.py)   (${SECONDS}s)"
  "$BIN/python" -m ascend_ready.sim.harness.rpm_prereqs install --source "$ASCEND_DEMO_OS_PREREQS_REPO" --run-dir "$RUN_DIR"
fi
# The simulated nodes run on this machine: their hard limits and disk are this host's, not a server's.
# A profile for them says so (the bundled Atlas 800T A2 profile with those thresholds relaxed: fleet.py
# host_bound_profile); the inventory's ascend_check_profile names it, so ascend-check -i, ascend-train's
# preflight gate and each node's own ascend-check (python_env records it there) judge by it.
INVENTORY=$("$BIN/python" -m ascend_ready.sim.harness.fleet "$WORK/inventory" --packages "$WORK/packages" --stack "$STACK" \
  --run-dir "$RUN_DIR" --training --host-bound-profile "${mirror[@]}")

echo "$INVENTORY" > "$WORK/inventory.path"
export PATH="$BIN:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg"
# Reboots on, as on a real rack (fleet.py turns them off for the tests' fleets): the nodes load the driver
# and firmware they were given and owe no reboot, which os.reboot_pending judges; a simulated reboot costs
# a few seconds.
extra=(-e '{"ascend_common_reboot": true, "ascend_common_reboot_timeout": 300}')
if [ -n "${ASCEND_DEMO_OS_PREREQS_REPO:-}" ]; then
  extra+=(-e "$(printf '{"os_prereqs_repo": "%s"}' "$ASCEND_DEMO_OS_PREREQS_REPO")")
else
  # No mirror: fleet.py put in what the driver installer needs (net-tools).
  extra+=(--skip-tags os_prereqs)
fi
echo "== ansible-playbook -i $INVENTORY site.yml   (first run: installs)   (${SECONDS}s)"
"$BIN/ansible-playbook" -i "$INVENTORY" site.yml "${extra[@]}" | tail -n 12

echo "== the same command again (must report changed=0 on every node)   (${SECONDS}s)"
"$BIN/ansible-playbook" -i "$INVENTORY" site.yml "${extra[@]}" | tee "$WORK/rerun.log" | tail -n 8
if grep -E 'changed=[1-9]' "$WORK/rerun.log" >/dev/null; then
  echo "error: the re-run changed something; see $WORK/rerun.log" >&2
  exit 1
fi
