"""Prepare a running simulated cluster for site.yml: an inventory directory (the simulator's inventory
plus group/host vars: stack, package source, device NIC addresses), and the OS packages a bare node
lacks. Used by demo-provision.sh, bench/ and tests/provision_play.

Usage: python -m ascend_ready.sim.harness.fleet OUT_DIR --packages DIR --stack ID
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

import yaml

from ascend_ready.errors import SimError
from ascend_ready.provision.hccn import host_vars as hccn_host_vars
from ascend_ready.provision.hccn import plan_device_nics
from ascend_ready.sim import profiles

#: where `apt-get download` keeps the .deb files nodes get (the node base is Debian bookworm)
DEB_CACHE = Path(os.environ.get("ASCEND_READY_DEB_CACHE", "/var/cache/ascend-ready-sim/debs"))
CAP_SYS_RESOURCE = 24
#: the profiles whose package manager is apt (os_prereqs installs from the harness's apt mirror)
DEBIAN_FAMILY_OS = ("ubuntu2204",)


def _host_can_raise(resource_id: int, wanted: int) -> bool:
    """Whether a login in a node may get `wanted` as its hard limit: nodes share this host's
    capabilities (no user namespace), and without CAP_SYS_RESOURCE no hard limit rises above the one
    sshd was started with (the host's; pam_limits' setrlimit gets EPERM)."""
    hard = resource.getrlimit(resource_id)[1]
    if hard == resource.RLIM_INFINITY or (wanted != resource.RLIM_INFINITY and hard >= wanted):
        return True
    try:
        caps = next(line for line in Path("/proc/self/status").read_text().splitlines()
                    if line.startswith("CapEff:"))
    except (OSError, StopIteration):
        return False
    if not int(caps.split()[1], 16) >> CAP_SYS_RESOURCE & 1:
        return False
    # nofile can never exceed fs.nr_open, which the nodes share with the host
    if resource_id == resource.RLIMIT_NOFILE:
        return int(Path("/proc/sys/fs/nr_open").read_text()) >= wanted
    return True


def sim_cannot_pass(run_dir: Path, *, os_prereqs_repo: str | None = None,
                    profile: str = "atlas-800t-a2") -> dict[str, str]:
    """Checks the validate play skips on simulated nodes, each with why: only what this machine cannot
    give a node, judged here and now (a host that can give it runs the check). Everything else a node
    passes as a provisioned server does: chronyc answers synchronised, the training user's venv and
    shell are judged, its torch_npu opens the NPUs the driver gave the HwHiAiUser group."""
    from ascend_ready.checks.profile import load_profile  # the thresholds the preflight judges by

    prof = load_profile(profile)
    nodes = json.loads((run_dir / "cluster.json").read_text())["nodes"]
    no_cap = "this host gives no CAP_SYS_RESOURCE: no login in a node gets a hard"
    out = {}
    if not _host_can_raise(resource.RLIMIT_NOFILE, prof.nofile_min):
        host = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        out["os.nofile"] = (f"{no_cap} nofile above the host's {host}, so limits.d's {prof.nofile_min} "
                            "cannot take effect (pam_limits applies the rest)")
    memlock = resource.RLIM_INFINITY if prof.memlock_min_kb is None else prof.memlock_min_kb * 1024
    if not _host_can_raise(resource.RLIMIT_MEMLOCK, memlock):
        host_kib = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1] // 1024
        out["os.memlock"] = f"{no_cap} memlock above the host's {host_kib} KiB"
    if nodes and nodes[0].get("pid"):
        st = os.statvfs(Path(f"/proc/{nodes[0]['pid']}/root") / prof.checkpoint_dir.lstrip("/"))
        free_gb = st.f_bavail * st.f_frsize / 1e9
        if free_gb < prof.min_disk_free_gb:
            out["os.disk_free"] = (f"a node's {prof.checkpoint_dir} lies on this machine's node file system: "
                                   f"{free_gb:.1f} GB free, the profile wants {prof.min_disk_free_gb:g} GB")
    # RHEL-family nodes get headers only from rpm_prereqs.install (their dnf is a stand-in): judged here.
    def build(node: dict) -> Path:  # the headers of the kernel the node reports (sim/osident.py)
        release = profiles.get(node["profile"]).os.kernel_release() or os.uname().release
        return Path("lib/modules") / release / "build/Makefile"

    rhel = sorted(n["name"] for n in nodes if n["os"] not in DEBIAN_FAMILY_OS
                  and not (n.get("pid") and (Path(f"/proc/{n['pid']}/root") / build(n)).exists()))
    if os_prereqs_repo is None:
        out["os.kernel_headers"] = (
            "no package mirror reaches the nodes, so os_prereqs installs nothing and no node has headers "
            "for the kernel it reports (sim/harness/apt_mirror.py serves stand-ins to apt nodes)")
    elif rhel:
        out["os.kernel_headers"] = f"the yum/dnf stand-ins of {', '.join(rhel)} install nothing (no headers)"
    # the nodes' torch_npu is the simulator's stand-in (sim/packages/wheels.py): its `npu` devices are this
    # machine's CPU, so every simulated NPU computes the same bits by construction and one probe forks a
    # CPU torch per device (8 a node): npu.sdc is judged on the session cluster instead, with the sdc fault
    # that flips a device's bits (tests/checks/test_sim_checks.py)
    out["npu.sdc"] = ("the simulator's NPUs are this machine's CPU (the stand-in torch_npu): their bits "
                      "agree by construction, so npu.sdc is judged where the sdc fault is injected")
    return out


def host_bound_profile(out: Path, profile: str = "atlas-800t-a2") -> Path:
    """A profile for simulated nodes, written to `out`: the bundled `profile` with what a node of this
    machine cannot have relaxed to what it has. The nodes' hard limits and disk are this host's, not a
    server's: without CAP_SYS_RESOURCE limits.d's nofile 1048576 cannot take effect in a node (a login
    keeps pam's soft 1024), memlock stops at the host's hard limit, and a node's checkpoint directory lies
    on this machine's disk. Named by an inventory's ascend_check_profile, ascend-check judges the nodes by
    it from the controller, and python_env records it on each node for the single-node preflight."""
    from ascend_ready.checks.profile import load_profile

    memlock = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    data = load_profile(profile).model_dump(mode="json")
    data.update(nofile_min=1024, min_disk_free_gb=1,
                memlock_min_kb=None if memlock == resource.RLIM_INFINITY else memlock // 1024)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(data))
    return out


DEVICES = {"atlas-800t-a2": 8, "atlas-800t-a3": 16, "atlas-300i-duo": 0}
#: device d's NICs share 192.168.d.0/24 across the simulated fleet
DEVICE_NET = "192.168.{dev}.0/24"


def device_nics(index: int, devices: int) -> list[dict]:
    """hccn_devices of node `index`, planned as `ascend-matrix hccn-devices` plans a fleet
    (provision.hccn): device d at 192.168.d.(10+index)/24 behind 192.168.d.1; none without device NICs."""
    if not devices:
        return []  # an inference card (Atlas 300I Duo) has no RoCE NIC
    name = f"node{index:02d}"
    plan = plan_device_nics([name], DEVICE_NET, gateway=".1", first_host=10 + index, devices=devices)
    return hccn_host_vars(plan)[name]["hccn_devices"]


def address_device_nics(cluster, devices: int = 8) -> None:
    """Put hccn_tool where the driver package does and address every device NIC as the hccn role would
    (device_nics): what a test or bench needs of an unprovisioned cluster to ping across the fabric."""
    from ascend_ready.sim import cluster as sim

    for node in cluster.nodes:
        tool = f"/proc/{node.pid}/root/usr/local/bin/hccn_tool"
        shutil.copy(sim.NODE_TOOLS / "hccn_tool", tool)  # the wrapper the fake driver installs
        os.chmod(tool, 0o755)
        script = "set -e; " + "; ".join(
            f"hccn_tool -i {n['id']} -ip -s address {n['address']} netmask {n['netmask']}; "
            f"hccn_tool -i {n['id']} -gateway -s gateway {n['gateway']}"
            for n in device_nics(node.index, devices))
        sim.node_exec(node, ["sh", "-c", script], check=True, capture_output=True)


def run_dir_default() -> Path:
    return Path(os.environ.get("ASCEND_SIM_RUN_DIR", "/run/ascend-sim"))


def group_vars(packages: Path, stack: str, *, run_dir: Path | None = None,
               os_prereqs_repo: str | None = None, training: bool = False) -> dict:
    """Group vars of the simulated fleet; `os_prereqs_repo`: the apt source the play installs from;
    `training`: python_env installs ascend-ready and the training job's dependencies too (the package
    source was built with them: build_packages --training), else torch and torch_npu only."""
    skips = sim_cannot_pass(run_dir or run_dir_default(), os_prereqs_repo=os_prereqs_repo)
    extra = {} if os_prereqs_repo is None else {"os_prereqs_repo": os_prereqs_repo}
    return {"ascend_training_user": "ascend", "stack_id": stack, "stack_package_source": str(packages),
            # simulated nodes reboot for real (tests/provision_play/test_reboot.py), but a reboot costs a
            # node seconds: these fleets mark /run/ascend-ready.reboot-required instead
            "ascend_common_reboot": False,
            # the simulator's wheelhouse holds torch, torch_npu and pip; CANN's other Python
            # dependencies come from an index or a full wheelhouse on real fleets
            "python_env_cann_requirements": [],
            "python_env_training": training,
            "validate_skip": sorted(skips),
            # why each is skipped (read by people: the validate role only takes the ids)
            "ascend_sim_validate_skip_reasons": skips, **extra}


def host_vars(nodes: list[dict]) -> dict[str, dict]:
    out = {}
    for node in nodes:
        # CentOS 7.6 (3.6) and Kylin V10 (3.7) nodes get no python_env_python: python_env unpacks the
        # package source's standalone CPython there, as on a real fleet
        values: dict = {"hccn_devices": device_nics(node["index"], DEVICES.get(node["hardware"], 8))}
        out[node["name"]] = values
    return out


def write_inventory(run_dir: Path, out: Path, packages: Path, stack: str, *,
                    os_prereqs_repo: str | None = None, training: bool = False,
                    check_profile: Path | None = None) -> Path:
    """out/hosts.ini (the simulator's inventory), out/group_vars/, out/host_vars/; returns hosts.ini.
    `check_profile`: each node's ascend_check_profile (host_bound_profile)."""
    nodes = json.loads((run_dir / "cluster.json").read_text())["nodes"]
    shutil.rmtree(out, ignore_errors=True)
    (out / "group_vars").mkdir(parents=True)
    (out / "host_vars").mkdir()
    shutil.copy(run_dir / "inventory.ini", out / "hosts.ini")
    values = group_vars(packages, stack, run_dir=run_dir, os_prereqs_repo=os_prereqs_repo, training=training)
    (out / "group_vars" / "ascend_nodes.yml").write_text(yaml.safe_dump(values))
    for name, values in host_vars(nodes).items():
        if check_profile is not None:
            # a host variable: beats the simulator's per-hardware group (inventory.ini) in Ansible, whose
            # sibling groups merge by name, and in ascend-check alike
            values["ascend_check_profile"] = str(check_profile)
        (out / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(values))
    return out / "hosts.ini"


def net_tools_deb() -> Path:
    """net-tools (ifconfig, which the driver installer demands), downloaded once from Debian."""
    DEB_CACHE.mkdir(parents=True, exist_ok=True)
    # one download at a time: apt-get writes a partial name first, and a second process (another test
    # worker) that saw no .deb would download over it and find none while the first renames
    with open(DEB_CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = sorted(DEB_CACHE.glob("net-tools_*.deb"))
        if not found:
            subprocess.run(["apt-get", "download", "net-tools"], cwd=DEB_CACHE, check=True,
                           capture_output=True)
            found = sorted(DEB_CACHE.glob("net-tools_*.deb"))
    if not found:
        raise SimError(f"`apt-get download net-tools` left no net-tools_*.deb in {DEB_CACHE}",
                       hint="check this machine's apt sources (apt-get update), then rerun")
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
    parser.add_argument("--os-prereqs-repo", help="apt source line of a mirror the nodes reach (apt_mirror)")
    parser.add_argument("--training", action="store_true",
                        help="install ascend-ready and the training job's wheels (build_packages --training)")
    parser.add_argument("--host-bound-profile", action="store_true",
                        help="judge the nodes by host_bound_profile (written beside OUT_DIR): each node's "
                             "ascend_check_profile, which python_env records on the node")
    args = parser.parse_args()
    if not args.no_net_tools:
        preinstall_net_tools(args.run_dir)
    profile = host_bound_profile(args.out.parent / "sim-profile.yml") if args.host_bound_profile else None
    print(write_inventory(args.run_dir, args.out, args.packages.resolve(), args.stack,
                          os_prereqs_repo=args.os_prereqs_repo, training=args.training,
                          check_profile=profile))


if __name__ == "__main__":
    main()
