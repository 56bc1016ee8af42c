#!/usr/bin/env bash
# The end-to-end demo: bring up a simulated cluster, show it, tear it down.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
trap '$BIN/ascend-sim down >/dev/null 2>&1 || true' EXIT
$BIN/ascend-sim up 2
$BIN/ascend-sim status
$BIN/ascend-sim down
