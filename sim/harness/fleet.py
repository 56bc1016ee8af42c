"""Prepare a running simulated cluster for site.yml: an inventory directory (the simulator's inventory
plus group/host vars: stack, package source, device NIC addresses), and the OS packages a bare node
lacks. Used by demo-provision.sh, bench/ and tests/provision_play.

Usage: python -m ascend_ready.sim.harness.fleet OUT_DIR --packages DIR --stack ID
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

#: where `apt-get download` keeps the .deb files nodes get (the node base is Debian bookworm)
DEB_CACHE = Path(os.environ.get("ASCEND_READY_DEB_CACHE", "/var/cache/ascend-ready-sim/debs"))
#: Python the simulator lends every node privately; CentOS 7.6 (3.6) and Kylin V10 (3.7) ship no Python
#: the wheels support, so python_env is pointed at it, as an operator would at one they installed.
LENT_PYTHON = "/opt/ascend-sim/bin/python3"
#: checks no simulated node can pass however it is provisioned: no time service, a small disk, no kernel
#: headers for the VM's kernel, sshd without pam_limits (limits.d is written, tests read it); and
#: ascend-check reads python3 and root's environment, while the stack lives in the training user's
#: venv and shell (a gap reported to the ascend-check owners).
SIM_CANNOT_PASS = ["os.clock_sync", "os.disk_free", "os.kernel_headers", "os.nofile", "os.memlock",
                   "versions.installed", "versions.user_libs", "versions.torch_npu_import"]
DEVICES = {"atlas-800t-a2": 8, "atlas-800t-a3": 16, "atlas-300i-duo": 0}
OLD_PYTHON_OS = ("centos76", "kylinv10")


def device_nics(index: int, devices: int) -> list[dict]:
    """hccn_devices of node `index`: device d at 192.168.d.(10+index)/24 behind 192.168.d.1."""
    return [{"id": d, "address": f"192.168.{d}.{10 + index}", "netmask": "255.255.255.0",
             "gateway": f"192.168.{d}.1"} for d in range(devices)]


def group_vars(packages: Path, stack: str) -> dict:
    return {"ascend_training_user": "ascend", "stack_id": stack, "stack_package_source": str(packages),
            # no reboot in a simulated node: the role marks /run/ascend-ready.reboot-required instead
            "ascend_common_reboot": False,
            # the simulator's wheelhouse holds torch, torch_npu and pip; CANN's other Python
            # dependencies come from an index or a full wheelhouse on real fleets
            "python_env_cann_requirements": [],
            "validate_skip": SIM_CANNOT_PASS}


def host_vars(nodes: list[dict]) -> dict[str, dict]:
    out = {}
    for node in nodes:
        values: dict = {"hccn_devices": device_nics(node["index"], DEVICES.get(node["hardware"], 8))}
        if node["os"] in OLD_PYTHON_OS:
            values["python_env_python"] = LENT_PYTHON
        out[node["name"]] = values
    return out


def write_inventory(run_dir: Path, out: Path, packages: Path, stack: str) -> Path:
    """out/hosts.ini (the simulator's inventory), out/group_vars/, out/host_vars/; returns hosts.ini."""
    nodes = json.loads((run_dir / "cluster.json").read_text())["nodes"]
    shutil.rmtree(out, ignore_errors=True)
    (out / "group_vars").mkdir(parents=True)
    (out / "host_vars").mkdir()
    shutil.copy(run_dir / "inventory.ini", out / "hosts.ini")
    (out / "group_vars" / "ascend_nodes.yml").write_text(yaml.safe_dump(group_vars(packages, stack)))
    for name, values in host_vars(nodes).items():
        (out / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(values))
    return out / "hosts.ini"


def net_tools_deb() -> Path:
    """net-tools (ifconfig, which the driver installer demands), downloaded once from Debian."""
    DEB_CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(DEB_CACHE.glob("net-tools_*.deb"))
    if not found:
        subprocess.run(["apt-get", "download", "net-tools"], cwd=DEB_CACHE, check=True, capture_output=True)
        found = sorted(DEB_CACHE.glob("net-tools_*.deb"))
    return found[-1]


def preinstall_net_tools(run_dir: Path) -> None:
    """dpkg -i net-tools in every node: stands in for os_prereqs where no package mirror is set up."""
    deb = net_tools_deb()
    for node in json.loads((run_dir / "cluster.json").read_text())["nodes"]:
        root = Path(f"/proc/{node['pid']}/root")
        if (root / "usr/sbin/ifconfig").exists():
            continue
        shutil.copy(deb, root / "tmp" / deb.name)
        subprocess.run(["nsenter", "-t", str(node["pid"]), "-m", "-u", "-i", "-n", "-p", "-r", "-w",
                        "dpkg", "-i", f"/tmp/{deb.name}"], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--packages", type=Path, required=True)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--run-dir", type=Path,
                        default=Path(os.environ.get("ASCEND_SIM_RUN_DIR", "/run/ascend-sim")))
    parser.add_argument("--no-net-tools", action="store_true", help="leave ifconfig to the os_prereqs role")
    args = parser.parse_args()
    if not args.no_net_tools:
        preinstall_net_tools(args.run_dir)
    print(write_inventory(args.run_dir, args.out, args.packages.resolve(), args.stack))


if __name__ == "__main__":
    main()
