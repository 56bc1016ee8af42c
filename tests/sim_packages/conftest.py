"""Fixtures for the fake installer tests: one package directory per session, a scratch root per test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ascend_ready.sim.packages import build_package_dir

# CANN 8.0.0 with its recommended HDK (REFERENCE.md §2.2 c), CANN 8.5.0 with HDK 25.5.1 (§2.2 a),
# and a CANN 9.0.0 stack for the 8.5+ upgrade rules.
STACKS = [
    {"driver": "24.1.rc2", "firmware": "7.3.0.1.231", "cann": "8.0.0", "torch": "2.1.0",
     "torch_npu": "2.1.0.post3", "manylinux": "manylinux2014", "compatible_drivers": ["24.1"]},
    {"driver": "25.5.1", "firmware": "7.8.0.2.212", "cann": "8.5.0", "torch": "2.8.0",
     "torch_npu": "2.8.0.post2", "glibc": "2.28", "compatible_drivers": ["25.5", "25.3", "25.2", "25.0"],
     "python": ["3.11"]},
    {"driver": "25.5.1", "firmware": "7.8.0.2.212", "cann": "9.0.0", "torch": "2.8.0",
     "torch_npu": "2.8.0.post2", "glibc": "2.28", "compatible_drivers": ["25.5"], "python": ["3.11"]},
]
ARCH = "x86_64"  # the wheels must install on this machine's interpreters
DRIVER_24 = "Ascend-hdk-910b-npu-driver_24.1.rc2_linux-x86-64.run"
DRIVER_25 = "Ascend-hdk-910b-npu-driver_25.5.1_linux-x86-64.run"
FIRMWARE_73 = "Ascend-hdk-910b-npu-firmware_7.3.0.1.231.run"
FIRMWARE_78 = "Ascend-hdk-910b-npu-firmware_7.8.0.2.212.run"


@pytest.fixture(scope="session")
def pkgdir(tmp_path_factory) -> Path:
    return build_package_dir(tmp_path_factory.mktemp("packages"), STACKS, arch=ARCH)


class Node:
    """A scratch root (ASCEND_SIM_FSROOT) with the users, /dev/davinci nodes and tools of a bare node."""

    def __init__(self, root: Path, pkgdir: Path, fakebin: Path):
        self.root = root
        self.pkgdir = pkgdir
        self.env = dict(os.environ, ASCEND_SIM_FSROOT=str(root), TMPDIR=str(root / "tmp"),
                        PATH=f"{fakebin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        self.env.pop("ASCEND_HOME_PATH", None)

    def run(self, package: str, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess:
        """Run a .run file with dash, as a playbook would with `sh <file> <flags>`."""
        return subprocess.run(["sh", str(self.pkgdir / package), *args], input=stdin, capture_output=True,
                              text=True, env={**self.env, **env}, timeout=60, check=False)

    def path(self, p: str) -> Path:
        return self.root / p.lstrip("/")

    def read(self, p: str) -> str:
        return self.path(p).read_text()

    def gen(self) -> int:
        return int(self.read("/var/lib/ascend-sim/gen"))


@pytest.fixture
def node(tmp_path, pkgdir) -> Node:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "tmp").mkdir()
    (root / "dev").mkdir()
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                     "HwHiAiUser:x:1000:1000::/home/HwHiAiUser:/bin/bash\n")
    (root / "etc/group").write_text("root:x:0:\nHwHiAiUser:x:1000:\n")
    for name in [*(f"davinci{i}" for i in range(8)), "davinci_manager", "devmm_svm", "hisi_hdc"]:
        (root / "dev" / name).touch()
    fakebin = tmp_path / "fakebin"
    fakebin.mkdir()
    for tool in ("lspci", "ifconfig"):  # pciutils/net-tools, which the driver installer demands
        (fakebin / tool).write_text("#!/bin/sh\nexit 0\n")
        (fakebin / tool).chmod(0o755)
    return Node(root, pkgdir, fakebin)
