"""Every check over real SSH on the simulated cluster: it passes on a healthy node and fails on an
injected fault (hardware faults through the simulator's model, OS faults by editing the node).

The healthy node is node01 (a2-ubuntu2204) of `sim_cluster`, brought to the provisioned state by a
minimal stand-in for the playbooks (fake driver/firmware/CANN installers, stand-in wheels, OS knobs,
device NIC addresses). Where the simulator cannot reach the real target, the profile says so:
- rlimits cannot be raised above the host's (nofile 20000, memlock 8192 KiB) inside a node, so the
  sim profile asks for those instead of 1048576/unlimited;
- the overlay root has ~10 GB free, so checkpoints need 1 GB here;
- a node shares the host kernel: kernel headers are stood in for (its clock sync is the simulator's
  `chronyc`, broken by the `clock-unsynced` fault).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import time
from pathlib import Path

import pytest
import yaml

from ascend_ready.checks.preflight import PROFILE_VAR, PreflightOptions, preflight
from ascend_ready.checks.probes import FOREACH
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import all_checks
from ascend_ready.fleet.inventory import limit_targets, load_inventory
from ascend_ready.fleet.transport import FanoutOptions

pytestmark = pytest.mark.sim

NODE = "node01"
#: checks the simulator cannot bring to a pass: its npu-smi renders no `npu-smi info -t topo` yet
#: (npu.topology is judged on real captures in test_check_suite_npu.py)
NOT_HEALTHY_IN_SIM: set[str] = {"npu.topology"}
#: provision() below stands in for the playbooks without the training venv (as site.yml with
#: python_env_training: false, where the validate role skips this check too; npu.sdc needs a torch that
#: computes, which the stand-in wheels are not: it runs with the lent checkout's below);
#: versions.training_env is judged on nodes site.yml provisioned (tests/training/test_multinode_sim.py,
#: make demo) and fails in tests/checks/test_check_training_env.py
NO_TRAINING_VENV: set[str] = {"versions.training_env", "npu.sdc"}
#: the node's site-packages (a sh command substitution)
PURELIB = "python3 -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'"
SIM_PROFILE = {"min_disk_free_gb": 1, "nofile_min": 16384, "memlock_min_kb": 8192}


def sh(cluster, cmd: str, node: str = NODE) -> str:
    from ascend_ready.sim.cluster import node_exec

    res = node_exec(cluster.node(node), ["sh", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"{cmd}: {res.stdout}{res.stderr}"
    return res.stdout


def provision(cluster, tmp: Path, node: str = NODE, product: str = "910b") -> None:
    """What the playbooks leave on an A2 node, done directly: packages, users, knobs, NIC addresses."""
    from ascend_ready.provision.resolver import resolve
    from ascend_ready.sim.packages import build_package_dir

    python = sh(cluster, "python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'", node).strip()
    s = resolve(product=product, python=python, arch="x86_64")
    pkgs = build_package_dir(
        tmp / "pkgs",
        [
            {
                "driver": s.driver,
                "firmware": s.firmware,
                "cann": s.cann,
                "torch": s.torch,
                "torch_npu": s.torch_npu,
                "python": [python],
                "glibc": s.glibc_floor,
                "compatible_drivers": s.hdk_compatible,
            }
        ],
        arch="x86_64",
        products=[product],
    )
    root = Path(f"/proc/{cluster.node(node).pid}/root")
    (root / "tmp/pkgs/wheelhouse").mkdir(parents=True, exist_ok=True)
    for f in [*pkgs.glob("*.run"), *pkgs.glob("wheelhouse/*.whl")]:
        (root / "tmp/pkgs" / f.relative_to(pkgs)).write_bytes(f.read_bytes())
    sh(
        cluster,
        f"""set -e
        getent group HwHiAiUser >/dev/null || groupadd HwHiAiUser
        id HwHiAiUser >/dev/null 2>&1 || useradd -g HwHiAiUser -d /home/HwHiAiUser -m HwHiAiUser -s /bin/bash
        cd /tmp/pkgs
        sh ./*-npu-driver_*.run --full --install-for-all --quiet
        sh ./*-npu-firmware_*.run --full --quiet
        sh ./Ascend-cann-toolkit_*.run --install --quiet
        sh ./*-ops_*.run --install --quiet
        . /usr/local/Ascend/cann/set_env.sh && sh ./Ascend-cann-nnal_*.run --install --quiet
        site=$({PURELIB}); [ -w "$site" ] || {{ site=$(python3 -m site --user-site); mkdir -p "$site"; }}
        for w in wheelhouse/*.whl; do python3 -m zipfile -e "$w" "$site"; done
        echo '. /usr/local/Ascend/cann/set_env.sh' > /etc/profile.d/ascend.sh
        printf 'root - nofile 1048576\nroot - memlock unlimited\n' > /etc/security/limits.d/90-ascend.conf
        echo never > /sys/kernel/mm/transparent_hugepage/enabled
        echo never > /sys/kernel/mm/transparent_hugepage/defrag
        echo 0 > /proc/sys/kernel/numa_balancing
        mkdir -p /lib/modules/$(uname -r)/build && touch /lib/modules/$(uname -r)/build/Makefile
        for d in $({FOREACH["davinci"]}); do p=$((d % 4 + 1))
            hccn_tool -i $d -ip -s address 192.$p.1.$((d + 10)) netmask 255.255.0.0
            hccn_tool -i $d -gateway -s gateway 192.$p.0.1
            hccn_tool -i $d -netdetect -s address 192.$p.0.1
        done
    """,
        node,
    )


def sim_targets(inventory: Path, node: str, profile_path: Path):
    """`node` of the simulator's inventory, judged with `profile_path`: the inventory names a bundled
    profile per hardware group (ascend_check_profile, which ranks above --profile), so the simulator's
    limits go in the host's own variable, as a site would name its profile file there."""
    targets = limit_targets(load_inventory(inventory), node)
    return [dataclasses.replace(t, vars={**t.vars, PROFILE_VAR: str(profile_path)}) for t in targets]


def sim_profile(tmp: Path, name: str) -> Path:
    """A bundled profile with the simulator's limits (module docstring) as a profile file."""
    profile = load_profile(name).model_dump()
    profile.update(SIM_PROFILE)
    path = tmp / f"sim-{name}.yml"
    path.write_text(yaml.safe_dump(profile))
    return path


@pytest.fixture(scope="module")
def node(sim_cluster, tmp_path_factory):
    from ascend_ready.sim import faults

    tmp = tmp_path_factory.mktemp("simcheck")
    provision(sim_cluster, tmp)
    yield sim_cluster, sim_profile(tmp, "atlas-800t-a2")
    faults.change(NODE, None, {})


def check(node, check_id: str, **profile_changes):
    """Run one check on node01 over SSH (inventory from `ascend-sim`); its result."""
    cluster, profile_path = node
    if profile_changes:
        data = yaml.safe_load(profile_path.read_text())
        data.update(profile_changes)
        profile_path = profile_path.with_name("changed.yml")
        profile_path.write_text(yaml.safe_dump(data))
    targets = sim_targets(cluster.inventory_path, NODE, profile_path)
    options = PreflightOptions(
        tier="full",
        select=[check_id],
        profile=str(profile_path),
        fanout=FanoutOptions(probe_timeout_s=5, host_deadline_s=40),
    )
    report = preflight(targets, options)
    assert report.hosts[0].reachable, report.hosts[0].error
    (result,) = report.results
    return result


def one_host_fleet(result) -> bool:
    """fleet.*, the mesh and the collective compare two or more hosts: judging one, they skip
    (test_check_fleet.py, tests/cluster/test_mesh_sim.py, test_collective_sim.py judge them across hosts)."""
    across = result.check_id.startswith("fleet.") or result.check_id in ("hccl.mesh", "hccl.allreduce",
                                                                         "npu.matmul")
    return across and result.status == "skip"


def test_healthy_node_passes_every_check(node):
    cluster, profile_path = node
    targets = sim_targets(cluster.inventory_path, NODE, profile_path)
    options = PreflightOptions(tier="full", skip=sorted(NOT_HEALTHY_IN_SIM | NO_TRAINING_VENV),
                               profile=str(profile_path))
    report = preflight(targets, options)
    bad = {r.check_id: (r.status, r.message) for r in report.results
           if r.status != "pass" and not one_host_fleet(r)}
    assert bad == {}
    full_tier = {cid for cid, spec in all_checks().items() if spec.tier != "burn-in"}
    assert {r.check_id for r in report.results} == full_tier - NOT_HEALTHY_IN_SIM - NO_TRAINING_VENV


def test_the_centos_node_reports_glibc_217_python_36_and_fails_a_manylinux_2_28_torch(sim_cluster, tmp_path):
    """node03 (a2-centos76) as ascend-check reads it over SSH: its C library's glibc 2.17 and the
    interpreter's Python 3.6 (sim/osident.py, sim/profiles.yaml); a torch 2.6 (manylinux_2_28) in that
    Python fails os.glibc naming the tag, as it would on a real CentOS 7.6 node."""
    profile_path = sim_profile(tmp_path, "atlas-800t-a2")
    targets = sim_targets(sim_cluster.inventory_path, "node03", profile_path)
    options = PreflightOptions(select=["os.glibc"], profile=str(profile_path),
                               fanout=FanoutOptions(probe_timeout_s=20, host_deadline_s=60))
    (ok,) = preflight(targets, options).results
    assert ok.status == "pass", ok.message
    assert ok.evidence[:2] == ["glibc: glibc 2.17", "python: 3.6.15 (python3)"]
    # into the training user's own site-packages, which the probe's interpreter lists
    user = yaml.safe_load(profile_path.read_text())["training_user"]
    sh(sim_cluster, f"d=$(su - {user} -c 'python3 -m site --user-site')/torch-2.6.0.dist-info && "
                    "mkdir -p $d && echo $d > /root/torch.path && "
                    "printf 'Wheel-Version: 1.0\\nTag: cp36-cp36m-manylinux_2_28_x86_64\\n' > $d/WHEEL",
       "node03")
    try:
        (bad,) = preflight(targets, options).results
    finally:
        sh(sim_cluster, "rm -r $(cat /root/torch.path) /root/torch.path", "node03")
    assert bad.status == "fail"
    assert bad.message == "glibc is 2.17: torch 2.6.0 needs glibc 2.28 (manylinux_2_28_x86_64)"


def test_fleet_os_tells_the_kylin_node_from_the_centos_node_by_glibc_and_kernel(sim_cluster, tmp_path):
    """The two OSes of the mission side by side (make demo's fleet): fleet.os reads each node's own values."""
    profile_path = sim_profile(tmp_path, "atlas-800t-a2")
    targets = [dataclasses.replace(t, vars={**t.vars, PROFILE_VAR: str(profile_path)})
               for t in limit_targets(load_inventory(sim_cluster.inventory_path), "node02,node03")]
    options = PreflightOptions(select=["fleet.os"], profile=str(profile_path),
                               fanout=FanoutOptions(probe_timeout_s=20, host_deadline_s=60))
    results = {r.host: r for r in preflight(targets, options).results}
    assert sorted(results) == ["node02", "node03"]
    said = " ".join(results["node03"].evidence) + " " + results["node03"].message
    for value in ("glibc=2.17", "kernel=3.10.0-957.el7.x86_64", "glibc=2.28",
                  "kernel=4.19.90-24.4.v2101.ky10.x86_64"):
        assert value in said, (value, results["node03"])


def test_healthy_a3_node_passes_every_check(sim_cluster, tmp_path):
    # node04: Atlas A3 (8 NPUs x 2 chips, npu-smi "Ascend910"), openEuler, Python 3.9; its driver is a
    # 26.x one, so npu-smi prints the 116-column table.
    (a3,) = [n for n in sim_cluster.nodes if n.hardware == "atlas-800t-a3"]
    provision(sim_cluster, tmp_path, node=a3.name, product="910_93")
    profile_path = sim_profile(tmp_path, "atlas-800t-a3")
    targets = sim_targets(sim_cluster.inventory_path, a3.name, profile_path)
    options = PreflightOptions(tier="full", skip=sorted(NOT_HEALTHY_IN_SIM | NO_TRAINING_VENV),
                               profile=str(profile_path))
    report = preflight(targets, options)
    bad = {r.check_id: (r.status, r.message) for r in report.results
           if r.status != "pass" and not one_host_fleet(r)}
    # the A3's topology listing has no CPU Affinity column (tests/checks/test_check_suite_npu.py): said
    affinity = bad.pop("npu.numa_affinity")
    assert affinity[0] == "skip" and "no CPU affinity column" in affinity[1], affinity
    assert bad == {}
    assert report.profile == "Atlas 800T A3"
    count = next(r for r in report.results if r.check_id == "npu.count")
    assert "NPU 7: 2 chip(s) Ascend910" in count.evidence


# (check id, simulator fault kind, parameters, expected status, text in the message)
HARDWARE_FAULTS = [
    ("npu.count", "npu-missing", {"npu": 5}, "fail", "npu-smi lists 7 NPUs, the Atlas 800T A2 has 8"),
    ("npu.pci_functions", "npu-missing", {"npu": 5}, "fail", "lspci shows 7 NPU function(s)"),
    (
        "npu.health",
        "chip-health",
        {"npu": 3, "level": "Alarm"},
        "fail",
        "NPU 3 chip 0 (0000:02:00.0): Alarm, error codes A4025021 8C03A000 8C084E00",
    ),
    ("npu.health", "chip-health", {"npu": 1, "level": "Warning"}, "warn", "NPU 1 chip 0"),
    ("npu.temperature", "hot-chip", {"npu": 6, "temp_c": 96}, "fail", "NPU 6 chip 0 at 96 °C"),
    ("npu.processes", "stray-process", {"npu": 0, "pid": 31337}, "fail", "pid 31337 python3 on NPU 0"),
    ("npu.hbm_idle", "stray-process", {"npu": 0, "memory_mb": 20480}, "fail", "NPU 0 chip 0 uses"),
    ("npu.hbm_usage", "stray-process", {"npu": 0, "memory_mb": 58000}, "fail", "(max 90 %)"),
    (
        "pcie.link_width",
        "pcie-width",
        {"npu": 2, "width": 8},
        "fail",
        "0000:c2:00.0 (NPU 2) trains at x8, should be x16",
    ),
    (
        "pcie.link_speed",
        "pcie-speed",
        {"npu": 5, "speed": 8.0},
        "fail",
        "0000:41:00.0 (NPU 5) trains at 8 GT/s, should be 16 GT/s",
    ),
    ("hccl.link_up", "link-down", {"device": 4}, "fail", "device 4 link DOWN"),
    ("hccl.net_health", "net-health-fault", {"device": 1}, "fail", "device 1 net health"),
    ("hccl.ip", "device-ip-missing", {"device": 3}, "fail", "device 3 has no IP"),
    ("hccl.ip", "device-ip-duplicate", {"device": 1, "same_as": 0}, "fail", "shares"),
    ("hccl.tls", "tls-mismatch", {"device": 6, "enable": 1}, "fail", "on on device 6"),
    ("versions.stack", "driver-version-drift", {"version": "23.0.6"}, "fail", "driver is 23.0.6, should be"),
    ("os.clock_sync", "clock-unsynced", {}, "fail", "the clock is not synchronized"),
]


@pytest.mark.parametrize(
    ("check_id", "kind", "params", "status", "text"),
    HARDWARE_FAULTS,
    ids=[f"{c}-{k}" for c, k, *_ in HARDWARE_FAULTS],
)
def test_hardware_fault(node, check_id, kind, params, status, text):
    from ascend_ready.sim import faults

    assert check(node, check_id).status == "pass"
    faults.change(NODE, kind, params)
    try:
        result = check(node, check_id)
        assert (result.status, text in result.message) == (status, True), result.message
        assert result.evidence
    finally:
        faults.change(NODE, None, {})
    assert check(node, check_id).status == "pass"


# (check id, break it on the node, repair it, text in the message[, profile changes])
NODE_FAULTS = [
    (
        "npu.device_nodes",
        "mv /dev/davinci3 /root/davinci3.bak",
        "mv /root/davinci3.bak /dev/davinci3",
        "7 /dev/davinciN device node(s) but npu-smi lists 8 chip(s)",
    ),
    ("pcie.aer", "true", "true", "AER/PCIe bus error line(s) in dmesg"),
    (
        "hccl.conf",
        "sed -i 's/^address_5=.*/address_5=192.2.9.9/' /etc/hccn.conf",
        "sed -i 's/^address_5=.*/address_5=192.2.1.15/' /etc/hccn.conf",
        "device 5 runs 192.2.1.15, hccn.conf says 192.2.9.9",
    ),
    (
        "os.thp",
        "echo always > /sys/kernel/mm/transparent_hugepage/enabled",
        "echo never > /sys/kernel/mm/transparent_hugepage/enabled",
        "THP enabled is always, should be never",
    ),
    (
        "os.numa_balancing",
        "echo 1 > /proc/sys/kernel/numa_balancing",
        "echo 0 > /proc/sys/kernel/numa_balancing",
        "kernel.numa_balancing is 1, should be 0",
    ),
    (
        "os.nofile",
        "sed -i 's/nofile 1048576/nofile 1024/' /etc/security/limits.d/90-ascend.conf",
        "sed -i 's/nofile 1024/nofile 1048576/' /etc/security/limits.d/90-ascend.conf",
        "nofile is 1024 (soft)",
    ),
    (
        "os.memlock",
        "sed -i 's/memlock unlimited/memlock 64/' /etc/security/limits.d/90-ascend.conf",
        "sed -i 's/memlock 64/memlock unlimited/' /etc/security/limits.d/90-ascend.conf",
        "memlock is 64 (soft)",
    ),
    (
        "os.driver_user",
        "userdel HwHiAiUser && groupdel HwHiAiUser 2>/dev/null; true",
        "groupadd HwHiAiUser && useradd -g HwHiAiUser -d /home/HwHiAiUser -s /bin/bash HwHiAiUser",
        "user HwHiAiUser and group HwHiAiUser missing",
    ),
    (
        "os.glibc",
        f"d=$({PURELIB})/future-9.9.dist-info; "
        "mkdir -p $d && printf 'Tag: cp311-cp311-manylinux_2_99_x86_64\\n' > $d/WHEEL",
        f"rm -r $({PURELIB})/future-9.9.dist-info",
        "future 9.9 needs glibc 2.99",
    ),
    (
        "os.kernel_headers",
        "mv /lib/modules/$(uname -r)/build /root/build.bak",
        "mv /root/build.bak /lib/modules/$(uname -r)/build",
        "no kernel headers for the running kernel",
    ),
    (
        "os.shm",
        "mount -o remount,size=64m /dev/shm",
        "mount -o remount,size=50% /dev/shm",
        "/dev/shm is 0.1 GB",
    ),
    (
        "versions.torch_npu_import",
        "mv /dev/davinci3 /root/davinci3.bak",
        "mv /root/davinci3.bak /dev/davinci3",
        "torch_npu sees 7 device(s), npu-smi lists 8",
    ),
    (
        "versions.installed",
        "mv /usr/local/Ascend/cann/x86_64-linux/ascend_ops_install.info /root/ops.bak",
        "mv /root/ops.bak /usr/local/Ascend/cann/x86_64-linux/ascend_ops_install.info",
        "not installed: ops",
    ),
    (
        "versions.set_env",
        "mv /usr/local/Ascend/cann/set_env.sh /root/c.bak && "
        "mv /usr/local/Ascend/ascend-toolkit/set_env.sh /root/a.bak",
        "mv /root/c.bak /usr/local/Ascend/cann/set_env.sh && "
        "mv /root/a.bak /usr/local/Ascend/ascend-toolkit/set_env.sh",
        "no cann/set_env.sh under /usr/local/Ascend",  # the installed toolkit's (8.5) layout names it
    ),
    (
        "versions.user_libs",
        "mv /etc/profile.d/ascend.sh /root/ascend.sh.bak",
        "mv /root/ascend.sh.bak /etc/profile.d/ascend.sh",
        "does not find libascendcl.so, libhccl.so, libascend_hal.so",
    ),
]


@pytest.mark.parametrize(
    ("check_id", "breaks", "repairs", "text"), NODE_FAULTS, ids=[c for c, *_ in NODE_FAULTS]
)
def test_node_fault(node, check_id, breaks, repairs, text):
    cluster, _ = node
    assert check(node, check_id).status == "pass"
    if check_id == "pcie.aer":  # the fake dmesg prints the simdir's kernel log: append an AER report
        log = cluster.node(NODE).simdir(cluster.run_dir) / "dmesg"
        saved = log.read_text()
        log.write_text(
            saved + "[ 4242.000001] pcieport 0000:40:00.0: AER: Corrected error received: 0000:41:00.0\n"
        )
        repairs_fn = lambda: log.write_text(saved)  # noqa: E731
    else:
        sh(cluster, breaks)
        repairs_fn = lambda: sh(cluster, repairs)  # noqa: E731
    try:
        result = check(node, check_id)
        expected = "warn" if check_id == "pcie.aer" else "fail"
        assert (result.status, text in result.message) == (expected, True), result.message
    finally:
        repairs_fn()
    assert check(node, check_id).status == "pass"


def test_disk_free_threshold(node):
    assert check(node, "os.disk_free").status == "pass"
    result = check(node, "os.disk_free", min_disk_free_gb=100000)
    assert result.status == "fail" and "need 100000 GB" in result.message


def test_torch_npu_import_fails_without_the_cann_environment(node):
    cluster, _ = node
    sh(cluster, "mv /etc/profile.d/ascend.sh /root/ascend.sh.bak")
    try:
        result = check(node, "versions.torch_npu_import")
    finally:
        sh(cluster, "mv /root/ascend.sh.bak /etc/profile.d/ascend.sh")
    assert result.status == "error"
    assert "libhccl.so: cannot open shared object file" in result.message


#: What the playbooks give a training user (playbooks/README.md): the python_env role's venv at its
#: default path, and the cann role's set_env.sh line in ~/.bashrc.
TRAINING_USER = "ascend"
SIM_STACK_ID = "cann-sim"
VENV = f"/home/{TRAINING_USER}/venvs/ascend-{SIM_STACK_ID}"
SET_ENV_LINE = shlex.quote("[ -f /usr/local/Ascend/cann/set_env.sh ] && . /usr/local/Ascend/cann/set_env.sh")


@pytest.fixture(scope="module")
def venv_node(node):
    """node01 with a training user `ascend` whose venv alone holds the stack's wheels (root's python3
    keeps its own copy, so a verdict from the wrong interpreter shows)."""
    cluster, profile_path = node
    u = TRAINING_USER
    # the session cluster's nodes have `ascend` already (the sudo user other modules log in as): it stays,
    # with its home and authorized_keys; only a user this fixture made is removed after it
    made = sh(cluster, f"id {u} >/dev/null 2>&1 || {{ useradd -m -s /bin/bash {u} && echo made; }}")
    made = made == "made\n"
    sh(
        cluster,
        f"""set -e
        V={VENV}
        python3 -m venv --without-pip "$V" 2>/dev/null || {{ mkdir -p "$V/bin"
            ln -sf "$(command -v python3)" "$V/bin/python"; echo "home = /usr/bin" > "$V/pyvenv.cfg"; }}
        site=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        case $site in "$V"/*) ;; *) echo "not a venv: $site" >&2; exit 1;; esac
        mkdir -p "$site"
        for w in /tmp/pkgs/wheelhouse/*.whl; do "$V/bin/python" -m zipfile -e "$w" "$site"; done
        chown -R {u}: /home/{u}
        # What the cann role's default --install-for-all leaves (the stand-in installer ignores it).
        chmod -R o+rX /usr/local/Ascend
        printf '{u} - nofile {SIM_PROFILE["nofile_min"]}\n{u} - memlock {SIM_PROFILE["memlock_min_kb"]}\n' \\
            >> /etc/security/limits.d/90-ascend.conf
        """,
    )
    (target,) = sim_targets(cluster.inventory_path, NODE, profile_path)
    # The inventory the playbooks ran with: the fleet-wide training user and stack id.
    target = dataclasses.replace(
        target, vars={**target.vars, "ascend_training_user": u, "stack_id": SIM_STACK_ID}
    )
    yield cluster, profile_path, target
    gone = f"userdel -r {u} 2>/dev/null" if made else f"rm -rf {shlex.quote(VENV)}"
    sh(cluster, f"{gone}; sed -i '/^{u} /d' /etc/security/limits.d/90-ascend.conf")


def test_training_users_venv_and_login_shell_are_judged(venv_node):
    cluster, profile_path, target = venv_node

    def judge(*ids):
        options = PreflightOptions(
            select=ids,
            profile=str(profile_path),
            fanout=FanoutOptions(probe_timeout_s=10, host_deadline_s=60),
        )
        return {r.check_id: r for r in preflight([target], options).results}

    # The libraries come only from ~ascend/.bashrc, as the cann role arranges it.
    sh(cluster, "mv /etc/profile.d/ascend.sh /root/ascend.sh.venv")
    try:
        # Appended below Debian's "not interactive: return" guard, set_env.sh never runs in a login
        # shell: the check must see that, not root's environment.
        bashrc = f"/home/{TRAINING_USER}/.bashrc"
        sh(cluster, f"echo {SET_ENV_LINE} >> {bashrc}")
        libs = judge("versions.user_libs")["versions.user_libs"]
        assert libs.status == "fail", libs.message
        assert libs.message.startswith(f"{TRAINING_USER}'s LD_LIBRARY_PATH does not find libascendcl.so")
        sh(cluster, f"{{ echo {SET_ENV_LINE}; cat {bashrc}; }} > /tmp/bashrc && cat /tmp/bashrc > {bashrc}")
        ids = (
            "versions.installed",
            "versions.stack",
            "versions.user_libs",
            "os.nofile",
            "os.memlock",
            "os.glibc",
        )
        results = judge(*ids)
        assert {k: (r.status, r.message) for k, r in results.items()} == dict.fromkeys(ids, ("pass", ""))
        installed = results["versions.installed"].evidence
        assert any("torch_npu " in e and f" in {VENV}/lib/python3" in e for e in installed), installed
        assert any(e.startswith(f"{TRAINING_USER}: nofile hard ") for e in results["os.nofile"].evidence)
        # torch_npu gone from the venv (root's python3 still has it): judged from the venv, it fails.
        sh(
            cluster,
            f"d=$(ls -d {VENV}/lib/python3*/site-packages/torch_npu-*.dist-info) && "
            "echo $d > /root/tn.path && mv $d /root/tn.bak",
        )
        try:
            missing = judge("versions.installed")["versions.installed"]
        finally:
            sh(cluster, "mv /root/tn.bak $(cat /root/tn.path)")
        assert (missing.status, missing.message) == ("fail", "not installed: torch_npu")
    finally:
        sh(cluster, "mv /root/ascend.sh.venv /etc/profile.d/ascend.sh")


def test_hung_npu_smi_is_a_failed_check_naming_the_command_not_a_hung_run(node):
    from ascend_ready.sim import faults

    faults.change(NODE, "npu-smi-hang", {})
    try:
        started = time.monotonic()
        result = check(node, "npu.count")
        assert time.monotonic() - started < 20
    finally:
        faults.change(NODE, None, {})
    assert result.status == "error"
    assert result.message.startswith("`npu-smi info` timed out after 5 s")


def test_unreachable_node_is_reported_once_and_the_others_carry_on(node):
    cluster, profile_path = node
    (alive,) = sim_targets(cluster.inventory_path, NODE, profile_path)
    dead = dataclasses.replace(alive, name="ghost", port=1)
    options = PreflightOptions(
        select=["os.thp"],
        profile=str(profile_path),
        fanout=FanoutOptions(connect_timeout_s=2, host_deadline_s=10),
    )
    report = preflight([alive, dead], options)
    assert [h.reachable for h in report.hosts] == [True, False]
    assert [(r.host, r.status) for r in report.results] == [(NODE, "pass")]
    assert ":1: " in report.hosts[1].error


#: the full tier's performance checks (checks/suite/test_perf.py) and the fault that must fail each alone
PERF_CHECKS = ("npu.flops", "npu.hbm_bandwidth", "npu.h2d_bandwidth", "npu.d2h_bandwidth",
               "npu.p2p_bandwidth")
PERF_FAULTS = [
    ("npu-throttle", {"npu": "all", "factor": 0.6}, {"npu.flops"}, "device 0: 18"),  # 40 % slow: the floor
    ("hbm-degraded", {"npu": 6, "factor": 0.5}, {"npu.hbm_bandwidth"}, "device 6: 7"),
    ("pcie-width", {"npu": 2, "width": 8}, {"npu.h2d_bandwidth", "npu.d2h_bandwidth"}, "device 2: 12."),
    ("hccs-link-down", {"device": 1, "other": 4}, {"npu.p2p_bandwidth"}, "device 1 -> 4: 22"),
]


def test_performance_checks_name_exactly_the_slow_part(node):
    """A clean node passes every performance check with measured, expected, floor and source in its JSON
    evidence; each performance fault fails exactly its check(s) on its absolute floor, the rest pass, and the
    failing device's measured, expected, floor and source are in the JSON report and on the HTML page."""
    import html

    from ascend_ready.checks.html_report import render_html
    from ascend_ready.sim import faults

    cluster, profile_path = node
    targets = sim_targets(cluster.inventory_path, NODE, profile_path)
    pages: list[tuple[str, str]] = []

    def judge() -> dict:
        options = PreflightOptions(tier="full", select=list(PERF_CHECKS), profile=str(profile_path))
        report = preflight(targets, options)
        pages[:] = [(report.model_dump_json(), html.unescape(render_html(report)))]
        return {r.check_id: r for r in report.results}

    clean = judge()
    assert {c: r.status for c, r in clean.items()} == dict.fromkeys(PERF_CHECKS, "pass")
    flops = "\n".join(clean["npu.flops"].evidence)
    assert "device 0: measured 30" in flops and "expected 313 TFLOPS" in flops and "floor 266.1" in flops
    assert "source:" in flops and clean["npu.flops"].model_dump_json().count("floor 266.1") == 8
    for kind, params, failing, text in PERF_FAULTS:
        faults.change(NODE, kind, params)
        try:
            got = judge()
        finally:
            faults.change(NODE, None, {})
        statuses = {c: r.status for c, r in got.items()}
        assert statuses == {c: "fail" if c in failing else "pass" for c in PERF_CHECKS}, (kind, statuses)
        for c in failing:
            assert text in got[c].message and "the absolute floor binds" in got[c].message, got[c].message
            line = next(e for e in got[c].evidence if e.startswith(text.rsplit(": ", 1)[0] + ": measured "))
            assert all(w in line for w in (", expected ", ", floor ", "source: ")), line
            for shown in pages[0]:  # the JSON report, the HTML page
                assert line in shown, (kind, line)


def test_without_ascend_dmi_torch_measures_and_the_toolbox_installer_brings_it_back(node, tmp_path):
    """node01's toolbox moved away: the bandwidth and FLOPS checks measure with torch (the lent checkout's CPU
    torch as the training interpreter) and warn, naming the figure, that a CPU's copy or matmul cannot be
    compared to the 910B3 floor; the simulated MindCluster ToolBox installer (what the toolbox role runs:
    --install --quiet) brings ascend-dmi back and they pass on it again."""
    import sys

    cluster, profile_path = node
    data = yaml.safe_load(profile_path.read_text())
    data["python"] = sys.executable
    prof = tmp_path / "torch-python.yml"
    prof.write_text(yaml.safe_dump(data))
    copies = list(PERF_CHECKS)
    targets = sim_targets(cluster.inventory_path, NODE, prof)

    def judge() -> dict:
        options = PreflightOptions(tier="full", select=copies, profile=str(prof))
        return {r.check_id: r for r in preflight(targets, options).results}

    sh(cluster, "mv /usr/local/Ascend/toolbox /usr/local/Ascend/toolbox.off")
    try:
        torch = judge()
        assert {c: r.status for c, r in torch.items()} == dict.fromkeys(copies, "warn"), torch
        hbm = torch["npu.hbm_bandwidth"]
        assert "sees no NPU, only cpu (measured cpu: " in hbm.message, hbm.message
        assert "cannot be compared to the 910B3 floor 1440 GB/s" in hbm.message
        assert any(line.startswith("measured with torch (torch ") for line in hbm.evidence), hbm.evidence
        flops = torch["npu.flops"]
        assert "sees no NPU, only cpu (measured cpu: " in flops.message, flops.message
        assert "cannot be compared to the 910B3 floor 266.1 TFLOPS" in flops.message
        assert any("torch.mm of two 256 x 256 fp32" in line for line in flops.evidence), flops.evidence
        sh(cluster, "cd /tmp/pkgs && sh ./Ascend-mindx-toolbox_*_linux-x86_64.run --install --quiet")
        back = judge()
        assert {c: r.status for c, r in back.items()} == dict.fromkeys(copies, "pass"), back
        assert any(line.startswith("measured with ascend-dmi") for line in back["npu.hbm_bandwidth"].evidence)
    finally:
        sh(cluster, "rm -rf /usr/local/Ascend/toolbox && "
                    "mv /usr/local/Ascend/toolbox.off /usr/local/Ascend/toolbox")


@pytest.fixture(scope="module")
def two_nodes(node, tmp_path_factory):
    """node01 and node02 as targets. node02 (Kylin V10): the stand-in provisioning stops at the CANN ops
    package (named otherwise for its Python), after the driver (which carries the simulator's ascend-dmi):
    its other checks may fail, its performance checks run."""
    cluster, profile_path = node
    with contextlib.suppress(AssertionError):
        provision(cluster, tmp_path_factory.mktemp("node02"), node="node02")
    return cluster, profile_path, [t for name in (NODE, "node02")
                                   for t in sim_targets(cluster.inventory_path, name, profile_path)]


def test_a_uniformly_40_percent_slow_fleet_fails_on_the_absolute_floor(two_nodes):
    """Every device of both nodes throttled alike to 60 %: no device is off the fleet median, so only the
    SKU's absolute floor (0.85 x 313 TFLOPS for the 910B3) can fail them, and it does, on both nodes."""
    from ascend_ready.sim import faults

    _, profile_path, targets = two_nodes
    for name in (NODE, "node02"):
        faults.change(name, "npu-throttle", {"npu": "all", "factor": 0.6})
    try:
        options = PreflightOptions(tier="full", select=["npu.flops"], profile=str(profile_path))
        report = preflight(targets, options)
    finally:
        for name in (NODE, "node02"):
            faults.change(name, None, {})
    got = {r.host: r for r in report.results}
    assert {h: r.status for h, r in got.items()} == {NODE: "fail", "node02": "fail"}, got
    for r in got.values():
        assert "below its floor 266.1 TFLOPS (0.85 x 313 expected for 910B3)" in r.message, r.message
        assert "the absolute floor binds" in r.message and "fleet median binds" not in r.message
        assert "source:" in "\n".join(r.evidence)


def test_the_full_tier_on_two_nodes_with_the_performance_checks_takes_at_most_twice_as_long(two_nodes):
    """Both timed in one run: the full tier on node01 and node02 without the performance checks (as before
    them) and with them. The collective (npu.matmul, hccl.allreduce) is left out of both: it needs torch on
    the nodes, and its own wall time is measured in tests/cluster/test_collective_sim.py."""
    import os

    _, profile_path, targets = two_nodes
    common = sorted(NOT_HEALTHY_IN_SIM | NO_TRAINING_VENV | {"npu.matmul", "hccl.allreduce", "hccl.mesh"})

    def timed(skip: list[str]) -> tuple[float, dict]:
        started = time.monotonic()
        report = preflight(targets, PreflightOptions(tier="full", skip=skip, profile=str(profile_path)))
        return time.monotonic() - started, {(r.host, r.check_id): r.status for r in report.results}

    timed(common)  # warm-up: the first batch after provisioning renders every tool's cache
    olds, news = [], []
    for _ in range(3):  # alternated, medians compared: the host's load moves under both alike
        olds.append(timed(common + list(PERF_CHECKS))[0])
        t, new = timed(common)
        news.append(t)
    before, after = sorted(olds)[1], sorted(news)[1]
    load = os.getloadavg()[0]
    print(f"full tier on 2 nodes: {before:.1f} s without the performance checks, {after:.1f} s with them "
          f"({after / before:.2f} x; runs {[round(x, 1) for x in olds]} / {[round(x, 1) for x in news]}), "
          f"load {load:.1f}")
    assert {k: v for k, v in new.items() if k[1] in PERF_CHECKS} == {
        (h, c): "pass" for h in (NODE, "node02") for c in PERF_CHECKS}
    assert after <= 2 * before, (before, after, load)


def test_sdc_fault_fails_the_device_it_names_and_clears(node):
    """`ascend-sim fault node01 sdc`: the node's CPU torch (the lent checkout's) flips bit 3 of element 0 of
    every matmul on device 0 (rank 0 here: one CPU rank); npu.sdc names that device and kernel while
    npu.health passes (the device computes wrong without an error); clearing the fault takes the hook out
    of the node (a clean run passes in tests/checks/test_sdc.py, on the worker's own output)."""
    import sys

    from ascend_ready.sim import faults
    from ascend_ready.sim.hw.faults import SDC_FILES

    cluster, profile_path = node
    data = yaml.safe_load(profile_path.read_text())
    data["python"] = sys.executable
    changed = profile_path.with_name("sdc.yml")
    changed.write_text(yaml.safe_dump(data))
    targets = sim_targets(cluster.inventory_path, NODE, changed)

    def judge():
        options = PreflightOptions(tier="full", select=["npu.sdc", "npu.health"], profile=str(changed),
                                   fanout=FanoutOptions(host_deadline_s=240))
        return {r.check_id: r for r in preflight(targets, options).results}

    faults.change(NODE, "sdc", {"device": 0, "bit": 3})
    try:
        bad = judge()
    finally:
        faults.change(NODE, None, {})
    assert bad["npu.health"].status == "pass"
    assert bad["npu.sdc"].status == "fail", bad["npu.sdc"].message
    assert bad["npu.sdc"].message.startswith("cpu:0 (cpu) matmul-exact fp32 256x128x256: 1 element(s) differ "
                                             "from the exact result; the first at index 0: want 0x")
    root = Path(f"/proc/{cluster.node(NODE).pid}/root")
    assert not any((root / path).exists() for path in SDC_FILES.values())


@pytest.mark.parametrize("duration,after_s", [
    ("6s", 3),
    pytest.param("60s", 30, marks=pytest.mark.slow),  # issue 30's acceptance run
])
def test_burn_in_fails_the_node_that_throttles_and_passes_the_clean_one(two_nodes, tmp_path, duration,
                                                                         after_s):
    """`ascend-check --tier burn-in --duration D` on node01 and node02 (their CPU torch: the lent checkout's,
    as --python) with node01's first chip throttling `after_s` seconds in (npu-throttle-after): node01 fails
    burn_in.throttle and burn_in.thermal with the curve that shows it in the JSON report, node02 passes them
    (its load warns: a CPU's figures are no NPU's), and a browser shows the curves on the HTML page."""
    import json
    import sys

    from click.testing import CliRunner

    from ascend_ready.checks.cli import main
    from ascend_ready.sim import faults

    cluster = two_nodes[0]
    page, out = tmp_path / "burn-in.html", tmp_path / "report.json"
    faults.change(NODE, "npu-throttle-after", {"after_s": after_s})
    try:
        res = CliRunner().invoke(main, ["-i", str(cluster.inventory_path), "--limit", f"{NODE}:node02",
                                        "--tier", "burn-in", "--duration", duration, "--select", "burn_in.*",
                                        "--python", sys.executable, "--format", "json", "--html", str(page)])
    finally:
        faults.change(NODE, None, {})
    assert res.exit_code == 1, res.output
    out.write_text(res.stdout)
    report = json.loads(res.stdout)
    assert report["tier"] == "burn-in" and report["schema_version"] == 3
    got = {(r["host"], r["check_id"]): r for r in report["results"]}
    statuses = {k: r["status"] for k, r in got.items()}
    assert statuses == {
        **{(NODE, c): "pass" for c in ("burn_in.ecc", "burn_in.links")},
        (NODE, "burn_in.throttle"): "fail", (NODE, "burn_in.thermal"): "fail", (NODE, "burn_in.load"): "warn",
        **{("node02", c): "pass"
           for c in ("burn_in.ecc", "burn_in.links", "burn_in.thermal", "burn_in.throttle")},
        ("node02", "burn_in.load"): "warn",
    }, {k: (r["status"], r["message"]) for k, r in got.items()}
    throttle = got[(NODE, "burn_in.throttle")]
    assert throttle["message"].startswith("throttled: npu 0 chip 0 at 100 % AI Core ran at 1000 of 1800 MHz "
                                          "from "), throttle["message"]
    clock = next(s for s in throttle["series"] if s["metric"] == "aicore_cur_freq_mhz"
                 and s["subject"] == "npu 0 chip 0")
    assert clock["values"][-1] == 1000 and len(clock["t_s"]) >= 2, clock
    load = got[("node02", "burn_in.load")]
    assert "sees no NPU, only cpu" in load["message"]
    assert any(s["metric"] == "matmul_tflops" for s in load["series"])
    from html_support import assert_curves_shown

    assert_curves_shown(page, tmp_path)
