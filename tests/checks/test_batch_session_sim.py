"""The probe batch ends with its session on a simulated CentOS 7 node over real SSH (its /bin/sh, no
Python in the batch): an `npu-smi` that hangs after double-forking a child leaves nothing running on
the node once ascend-check has returned (the fault sweep's case, issue 18)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_support import node_run

pytestmark = pytest.mark.sim

NODE = "node03"  # a2-centos76 in the session cluster
FAKE = "/usr/local/sbin/npu-smi"  # ahead of the simulator's own npu-smi on sshd's PATH
MARK = "4217"  # the fake's sleeps: `sleep 34217` (escaped child) and `sleep 44217` (the hung tool)


def leftovers(cluster) -> list[str]:
    ps = node_run(cluster, NODE, "ps", "-eo", "pid,args")
    return [ln for ln in ps.stdout.splitlines() if f"sleep 3{MARK}" in ln or f"sleep 4{MARK}" in ln
            or "ascend-check" in ln]


def test_a_double_forked_child_of_a_hung_tool_is_gone_when_ascend_check_returns(sim_cluster):
    script = f"#!/bin/sh\n( sh -c 'exec sleep 3{MARK}' & )\nexec sleep 4{MARK}\n"
    put = node_run(sim_cluster, NODE, "sh", "-c", f"test ! -e {FAKE} && cat >{FAKE} <<'EOF'\n{script}EOF\n"
                   f"chmod 755 {FAKE}")
    assert put.returncode == 0, put.stderr
    try:
        started = time.monotonic()
        check = subprocess.run([str(Path(sys.executable).parent / "ascend-check"), "-i",
                                str(sim_cluster.inventory_path), "--limit", NODE, "--select", "npu.count",
                                "--timeout", "2", "--host-deadline", "60", "--format", "json"],
                               capture_output=True, text=True, timeout=120, check=False)
        took = time.monotonic() - started
        assert check.returncode == 1, check.stdout + check.stderr
        assert "`npu-smi info` timed out after 2 s" in check.stdout
        assert took < 30, took  # not the 60 s host deadline: the escaped child held the output open
        assert leftovers(sim_cluster) == []
    finally:
        node_run(sim_cluster, NODE, "rm", "-f", FAKE)
        for line in leftovers(sim_cluster):  # only the fake's own sleeps, by pid, if the test failed
            node_run(sim_cluster, NODE, "kill", "-9", line.split()[0])
