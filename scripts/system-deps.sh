#!/usr/bin/env bash
# Installs the system packages the simulated cluster needs (Debian/Ubuntu hosts). Idempotent.
#   debootstrap      builds the nodes' Debian base image (once, cached in /var/cache/ascend-sim)
#   iproute2         the cluster's bridge, veths and routes
#   openssh-client   ssh-keygen for host/controller keys, ssh for users
#   util-linux       nsenter (`ascend-sim exec`), mount
#   chromium         headless screenshots of `ascend-check --html` pages (tests/checks/test_html_report.py)
#   prometheus       promtool: `promtool check/test rules` of the alert rules (tests/checks/test_node_health_role.py)
#   systemd          systemd-analyze verify of the node_health role's timer and service
# The kernel must offer overlayfs and FUSE (/dev/fuse) for the nodes' roots and kernel-knob files.
set -euo pipefail
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v ip >/dev/null || need+=(iproute2)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
command -v nsenter >/dev/null || need+=(util-linux)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
command -v systemd-analyze >/dev/null || need+=(systemd)
lean=()  # without recommends: promtool needs none of the prometheus server's web assets
command -v promtool >/dev/null || lean+=(prometheus)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: missing system packages: ${need[*]}; run as root, or: sudo apt-get install -y ${need[*]}" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ${#lean[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: missing system packages: ${lean[*]}; run as root, or: sudo apt-get install -y --no-install-recommends ${lean[*]}" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  [ ${#need[@]} -gt 0 ] || apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${lean[@]}" >/dev/null
fi
if [ "$(id -u)" -eq 0 ]; then
  [ -e /dev/fuse ] || modprobe fuse 2>/dev/null || true
  grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
fi
[ -e /dev/fuse ] || echo "warning: /dev/fuse missing: simulated nodes' THP/NUMA knob files will be read-only" >&2
grep -qw overlay /proc/filesystems || { echo "error: the kernel has no overlayfs: the simulator cannot run" >&2; exit 2; }
