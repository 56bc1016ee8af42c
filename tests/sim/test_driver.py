"""Acceptance: a bare node has no npu-smi; installing the fake driver package makes `npu-smi info` appear."""

from __future__ import annotations

import shutil

import pytest
from sim_support import own_cluster

from ascend_ready.sim import cluster as sim

pytestmark = pytest.mark.sim

STACK = {"driver": "24.1.rc2", "firmware": "7.3.0.1.231", "cann": "8.0.0", "torch": "2.1.0",
         "torch_npu": "2.1.0.post3", "manylinux": "manylinux2014", "compatible_drivers": ["24.1"]}


@pytest.fixture
def bare_node(sim_host, monkeypatch):
    """One fresh node of its own (the shared cluster's nodes stay driverless)."""
    run_dir, subnet = own_cluster("driver", 6)  # default /run/ascend-sim-pytest-driver, 10.251.200.192/27
    monkeypatch.setenv("ASCEND_SIM_RUN_DIR", run_dir)
    monkeypatch.setenv("ASCEND_SIM_SUBNET", subnet)
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


def test_driver_gives_its_devices_to_its_run_user(bare_node, tmp_path):
    """Before the driver the device nodes are root's; the driver gives them to HwHiAiUser, 660 (as its
    host_sys_init.sh does and the 910B1 capture shows): a member of that group may open them, another
    user not, and a fault that recreates the nodes keeps that."""
    from ascend_ready.sim import faults
    from ascend_ready.sim.packages import build_package_dir

    pkgdir = build_package_dir(tmp_path / "pkgs", [STACK], arch="x86_64")
    driver = next(pkgdir.glob("*npu-driver_24.1.rc2*.run"))
    shutil.copy(driver, f"/proc/{bare_node.pid}/root/tmp/{driver.name}")

    def node(cmd: str) -> str:
        r = sim.node_exec(bare_node, ["sh", "-c", cmd], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    modes = ("stat -c '%n %U:%G %a' /dev/davinci0 /dev/davinci7 /dev/davinci_manager /dev/hisi_hdc "
             "/dev/devmm_svm")
    opens = ("su -s /bin/sh {} -c 'test -r /dev/davinci0 -a -w /dev/davinci0 -a -w /dev/hisi_hdc "
             "&& echo yes || echo no'")
    assert {line.split()[1] for line in node(modes).splitlines()} == {"root:root"}
    node("groupadd HwHiAiUser && useradd -g HwHiAiUser -d /home/HwHiAiUser -m -s /bin/bash HwHiAiUser && "
         "useradd -m -G HwHiAiUser trainer && useradd -m outsider && "
         f"sh /tmp/{driver.name} --full --quiet")
    assert {" ".join(line.split()[1:]) for line in node(modes).splitlines()} == {"HwHiAiUser:HwHiAiUser 660"}
    assert (node(opens.format("trainer")), node(opens.format("outsider"))) == ("yes\n", "no\n")
    faults.change(bare_node.name, "npu-missing", {"npu": 3})
    faults.change(bare_node.name, None, {})
    assert {" ".join(line.split()[1:]) for line in node(modes).splitlines()} == {"HwHiAiUser:HwHiAiUser 660"}
