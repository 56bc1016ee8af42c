#!/usr/bin/env bash
# The end-to-end demo: bring up a mixed simulated cluster, look inside, reach it with Ansible, tear it down.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/.venv/bin
trap '$BIN/ascend-sim down >/dev/null 2>&1 || true' EXIT
$BIN/ascend-sim up 4 --profile a2-ubuntu2204,a2-kylinv10,a2-centos76,a3-openeuler2203
$BIN/ascend-sim status
echo "--- lspci on node01 (fake PCI tree of an Atlas 800T A2)"
$BIN/ascend-sim exec node01 -- sh -c 'lspci 2>/dev/null | grep -i accelerators || echo "(no fake lspci yet)"'
echo "--- THP on node03, set the kernel way"
$BIN/ascend-sim exec node03 -- sh -c 'echo never > /sys/kernel/mm/transparent_hugepage/enabled; cat /sys/kernel/mm/transparent_hugepage/enabled'
echo "--- Ansible facts over SSH"
$BIN/ascend-sim run -- sh -c "'$BIN/ansible' -i \"\$ASCEND_SIM_INVENTORY\" all -m setup -o \
  -a 'filter=ansible_distribution*' | cut -c1-160"
$BIN/ascend-sim down
