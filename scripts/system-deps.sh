#!/usr/bin/env bash
# Installs the system packages the simulated cluster needs (Debian/Ubuntu hosts). Idempotent.
set -euo pipefail
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v ip >/dev/null || need+=(iproute2)
command -v ssh >/dev/null || need+=(openssh-client)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "error: missing system packages: ${need[*]}; run as root, or: sudo apt-get install -y ${need[*]}" >&2
  exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
