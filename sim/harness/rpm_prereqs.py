"""What `dnf install` of the os_prereqs packages from a local mirror leaves on a simulated RHEL-family
node, done from the controller: the tools for real from the harness's apt mirror, the RPM names in its
rpm view.

The simulator's yum/dnf are stand-ins with no RPMs behind them, and Ansible's dnf module needs dnf's Python
bindings, which a node (Debian inside) cannot have; so os_prereqs cannot install there. This module installs
the Debian packages that give the same tools (gcc, make, dkms, ifconfig, lspci, the kernel-headers
stand-in of apt_mirror) from the same mirror the Ubuntu nodes use, then records each RPM name of the role's
list (roles/os_prereqs/vars/<distribution>.yml) in the node's rpm view with the version it got, so the
role's `rpm -q` finds them installed and a re-run changes nothing, as on a node provisioned from a yum repo.

Usage: python -m ascend_ready.sim.harness.rpm_prereqs mirror OUT_DIR
       python -m ascend_ready.sim.harness.rpm_prereqs install --source "[trusted=yes] http://HOST:PORT/ ./"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from ascend_ready.sim.harness import apt_mirror
from ascend_ready.sim.harness.fleet import DEBIAN_FAMILY_OS, run_dir_default

ROLE_VARS = Path(__file__).resolve().parents[2] / "playbooks/roles/os_prereqs/vars"
#: os_prereqs vars file of each simulated RHEL-family OS (Ansible's distribution, spaces as _)
VARS_FILE = {"kylinv10": "Kylin_Linux_Advanced_Server.yml", "centos76": "RedHat.yml",
             "openeuler2203": "RedHat.yml"}
#: the Debian package that gives what each RPM of the role's lists gives (kernel packages: the stand-in)
DEBIAN_EQUIVALENT = {"make": "make", "dkms": "dkms", "gcc": "gcc", "gcc-c++": "g++", "pciutils": "pciutils",
                     "net-tools": "net-tools", "python3-devel": "python3-dev",
                     "elfutils-libelf-devel": "libelf-dev"}
RPMDB = "/var/lib/rpm/ascend-sim-installed"


def rpm_names(os_id: str, kernel: str) -> list[str]:
    """The RPMs os_prereqs asks for on `os_id` (its vars file, the kernel packages for `kernel`)."""
    data = yaml.safe_load((ROLE_VARS / VARS_FILE[os_id]).read_text())
    kernel_pkgs = [p.replace("{{ ansible_facts.kernel }}", kernel)
                   for p in data["_os_prereqs_kernel_packages"]]
    return [*data["_os_prereqs_packages"], *kernel_pkgs]


def _debian_name(rpm: str, kernel: str) -> str:
    if rpm.startswith(("kernel-devel", "kernel-headers")):
        return apt_mirror.headers_package(kernel)
    return DEBIAN_EQUIVALENT[rpm]


def mirror_packages() -> tuple[str, ...]:
    """apt_mirror's packages plus the equivalents the RHEL-family lists need (python3-dev, libelf-dev)."""
    extra = sorted({DEBIAN_EQUIVALENT[p] for os_id in VARS_FILE
                    for p in rpm_names(os_id, "K") if p in DEBIAN_EQUIVALENT})
    return tuple(dict.fromkeys([*apt_mirror.PACKAGES, *extra]))


def rpm_view_lines(wanted: dict[str, str], versions: dict[str, str], kernel: str, view: str) -> list[str]:
    """The rpm view's lines ("NAME VERSION RELEASE ARCH") for the RPMs `wanted` (RPM -> Debian package)
    that `view` lacks, versioned as dpkg installed their Debian packages (`versions`)."""
    have = {line.split()[0] for line in view.splitlines() if line.strip()}
    lines = []
    for rpm, deb in wanted.items():
        if deb.startswith("linux-headers-"):  # kernel-devel-<release>: rpm -q asks by the running kernel
            version, _, release = kernel.partition("-")
            name = rpm[: -len(kernel) - 1] if rpm.endswith(f"-{kernel}") else rpm
        else:
            version, _, release = versions[deb].split(":")[-1].partition("-")
            name = rpm
        if name not in have:
            lines.append(f"{name} {version} {release or '0'} {os.uname().machine}\n")
            have.add(name)
    return lines


def _exec(pid: int, script: str) -> str:
    argv = ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "-r", "-w", "sh", "-c", script]
    proc = subprocess.run(argv, capture_output=True, text=True,
                          env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if proc.returncode != 0:
        raise SystemExit(f"error: {script!r} in the node exited {proc.returncode}: "
                         f"{proc.stderr.strip()[-2000:]}")
    return proc.stdout


def install(run_dir: Path, source: str) -> list[str]:
    """Install os_prereqs' RPM list on every RHEL-family node of the cluster; one line per node said."""
    said = []
    for node in json.loads((run_dir / "cluster.json").read_text())["nodes"]:
        if node["os"] in DEBIAN_FAMILY_OS:
            continue
        pid = node["pid"]
        kernel = _exec(pid, "uname -r").strip()
        wanted = {rpm: _debian_name(rpm, kernel) for rpm in rpm_names(node["os"], kernel)}
        debs = " ".join(sorted(set(wanted.values())))
        # The mirror alone, from a list outside the node's apt configuration: nothing of it stays behind.
        _exec(pid, f"echo 'deb {source}' > /tmp/ascend-sim-mirror.list && "
                   "opts='-o Dir::Etc::sourcelist=/tmp/ascend-sim-mirror.list -o Dir::Etc::sourceparts=-' && "
                   "apt-get update -q $opts >/dev/null && "
                   f"apt-get install -q -y --no-install-recommends $opts {debs} >/dev/null && "
                   "rm /tmp/ascend-sim-mirror.list")
        versions = dict(line.split(" ", 1) for line in _exec(
            pid, f"dpkg-query -W -f='${{Package}} ${{Version}}\\n' {debs}").splitlines())
        db = Path(f"/proc/{pid}/root") / RPMDB.lstrip("/")
        with db.open("a+") as fh:
            fh.seek(0)
            fh.writelines(rpm_view_lines(wanted, versions, kernel, fh.read()))
        said.append(f"{node['name']} ({node['profile']}): {' '.join(wanted)} (from {debs})")
    return said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("mirror", help="build the apt mirror with the RHEL-family equivalents too")
    m.add_argument("out", type=Path)
    i = sub.add_parser("install", help="install the prerequisites on the running cluster's RHEL-family nodes")
    i.add_argument("--source", required=True, help="the mirror's apt source line body")
    i.add_argument("--run-dir", type=Path, default=None)
    args = parser.parse_args()
    if args.command == "mirror":
        print(apt_mirror.build(args.out, packages=mirror_packages()))
    else:
        for line in install(args.run_dir or run_dir_default(), args.source):
            print(line)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
