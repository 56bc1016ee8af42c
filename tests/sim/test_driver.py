"""Acceptance: a bare node has no npu-smi; installing the fake driver package makes `npu-smi info` appear."""

from __future__ import annotations

import shutil

import pytest

from ascend_ready.sim import cluster as sim

pytestmark = pytest.mark.sim

STACK = {"driver": "24.1.rc2", "firmware": "7.3.0.1.231", "cann": "8.0.0", "torch": "2.1.0",
         "torch_npu": "2.1.0.post3", "manylinux": "manylinux2014", "compatible_drivers": ["24.1"]}


@pytest.fixture
def bare_node(sim_host, monkeypatch):
    """One fresh node of its own (the shared cluster's nodes stay driverless)."""
    monkeypatch.setenv("ASCEND_SIM_RUN_DIR", "/run/ascend-sim-pytest-driver")
    monkeypatch.setenv("ASCEND_SIM_SUBNET", "10.251.203.0/24")
    sim.down()
    yield sim.up(1, "a2-ubuntu2204").nodes[0]
    sim.down()


def test_driver_install_makes_npu_smi_appear(bare_node, tmp_path):
    packages = pytest.importorskip("ascend_ready.sim.packages", reason="fake packages not written yet")
    pytest.importorskip("ascend_ready.sim.hw", reason="hardware model not installed yet")
    pkgdir = packages.build_package_dir(tmp_path / "pkgs", [STACK], arch="x86_64")
    driver = next(pkgdir.glob("*npu-driver_24.1.rc2*.run"))
    shutil.copy(driver, f"/proc/{bare_node.pid}/root/tmp/{driver.name}")

    def node(cmd: str):
        return sim.node_exec(bare_node, ["sh", "-c", cmd], capture_output=True, text=True, timeout=120)

    before = node("npu-smi info")
    assert before.returncode == 127  # command not found: no driver yet
    r = node("groupadd HwHiAiUser && useradd -g HwHiAiUser -d /home/HwHiAiUser -m -s /bin/bash HwHiAiUser && "
             f"sh /tmp/{driver.name} --full --install-for-all --quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    info = node("npu-smi info")
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    assert "npu-smi 24.1.rc2" in lines[1] and "Version: 24.1.rc2" in lines[1]
    assert sum(" 910B3 " in line for line in lines) == 8  # one row per NPU of the Atlas 800T A2
