"""`ascend-sim fault` changes exactly the affected node output, and --clear restores it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.sim

ASCEND_SIM = str(Path(sys.executable).with_name("ascend-sim"))


def _sim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([ASCEND_SIM, *args], capture_output=True, text=True, timeout=60, env=os.environ)


@pytest.fixture
def hw_node(sim_cluster):
    pytest.importorskip("ascend_ready.sim.hw", reason="hardware model not installed yet")
    node = sim_cluster.node("node02")
    yield node
    assert _sim("fault", "node02", "--clear").returncode == 0


def _bdfs(sim_cluster, node) -> list[str]:
    state = json.loads((node.simdir(sim_cluster.run_dir) / "state.json").read_text())
    return [npu["chips"][0]["bus_id"].lower() for npu in state["npus"]]


def test_pcie_width_fault_changes_only_that_link(sim_cluster, remote, hw_node):
    bdfs = _bdfs(sim_cluster, hw_node)
    cmd = "; ".join(f"cat /sys/bus/pci/devices/{b}/current_link_width" for b in bdfs)
    before = remote("node02", cmd).out.split()
    assert before == ["16"] * 8
    r = _sim("fault", "node02", "pcie-width", "--param", "npu=2", "--param", "width=8")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "node02: injected pcie-width\n"
    after = remote("node02", cmd).out.split()
    assert after == ["16", "16", "8", "16", "16", "16", "16", "16"]
    assert remote("node01", "cat /sys/bus/pci/devices/0000:c1:00.0/current_link_width").out == "16\n"
    assert _sim("fault", "node02", "--clear").returncode == 0
    assert remote("node02", cmd).out.split() == before


def test_missing_npu_loses_its_device_node(remote, hw_node):
    assert _sim("fault", "node02", "npu-missing", "--param", "npu=3").returncode == 0
    r = remote("node02", "ls /dev | grep -E '^davinci[0-9]+$' | sort -V | tr '\\n' ' '")
    assert r.out.split() == [f"davinci{i}" for i in (0, 1, 2, 4, 5, 6, 7)]
    assert _sim("fault", "node02", "--clear").returncode == 0
    r = remote("node02", "ls /dev | grep -cE '^davinci[0-9]+$'")
    assert r.out == "8\n"


def test_fault_cli_rejects_bad_input(hw_node):
    r = _sim("fault", "node02", "no-such-fault")
    assert r.returncode == 2 and "error: unknown fault kind 'no-such-fault'" in r.stderr
    r = _sim("fault", "node09", "hot-chip")
    assert r.returncode == 2 and "error: no node named 'node09'" in r.stderr
    r = _sim("fault", "node02")
    assert r.returncode == 2 and "give either a fault KIND or --clear" in r.stderr
    assert "Traceback" not in r.stderr
