"""site.yml for real, against a mixed simulated fleet: first install, no-op re-run, drift, failures that
stay on their host, a killed driver install, check mode, and argument_specs.

One cluster for the module (Ubuntu, Kylin V10, CentOS 7.6 with Python 3.6 only, openEuler on an A3);
the tests run in order and build on each other's end state, as re-runs on a real fleet do.
"""

from __future__ import annotations

import re
import shutil

import pytest

from ascend_ready.provision import matrix as mx
from ascend_ready.provision import resolver as rv

from .conftest import STACK, sim_fleet

pytestmark = pytest.mark.sim

PROFILES = "a2-ubuntu2204,a2-kylinv10,a2-centos76,a3-openeuler2203"
NODES = ("node01", "node02", "node03", "node04")
PRODUCT = {"node01": "910b", "node02": "910b", "node03": "910b", "node04": "910_93"}
# os_prereqs needs a package mirror; it has its own test (test_os_prereqs.py).
SKIP = ("--skip-tags", "os_prereqs")
THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def expected(node: str) -> rv.ResolvedStack:
    row = next(s for s in mx.load_matrix().stacks if s.id == STACK)
    return rv.resolve(cann=row.cann, torch=row.torch, product=PRODUCT[node], arch="x86_64")


@pytest.fixture(scope="module")
def fleet(fleet_factory):
    f = fleet_factory(PROFILES, 1)
    f.group_vars = sim_fleet.group_vars(f.packages, STACK, run_dir=f.cluster.run_dir)
    # This fleet mixes four OSes on purpose (one stack on each): the fleet consistency check rightly
    # names the odd OS out (CentOS 7.6's glibc 2.17), which is not what these tests judge.
    f.group_vars["validate_skip"] = sorted({*f.group_vars["validate_skip"], "fleet.os"})
    f.host_vars = sim_fleet.host_vars([vars(n) for n in f.cluster.nodes])
    f.write_inventory(f.group_vars, f.host_vars)
    return f


def kv(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_first_run_installs_the_resolved_stack(fleet):
    result = fleet.play(*SKIP)
    assert result.rc == 0, result.output[-4000:]
    for node in NODES:
        want = expected(node)
        assert kv(fleet.read(node, "/usr/local/Ascend/driver/version.info"))["Version"] == want.driver
        assert kv(fleet.read(node, "/usr/local/Ascend/firmware/version.info"))["Version"] == want.firmware
        assert kv(fleet.read(node, want.layout.version_file))["version"] == want.cann
        ops = f"{want.layout.home}/x86_64-linux/ascend_kernels_install.info"
        # The matrix names the operator package (A3 before CANN 8.5: Atlas-A3-cann-kernels_...).
        assert kv(fleet.read(node, ops))["package_name"] == want.packages.ops.split("_", 1)[0]
        assert kv(fleet.read(node, f"/usr/local/Ascend/nnal/atb/{want.cann}/ascend_nnal_install.info")
                  )["version"] == want.cann
        sysctl = fleet.read(node, "/etc/sysctl.d/90-ascend-ready.conf")
        assert "kernel.numa_balancing = 0" in sysctl
        assert "net.ipv4.ip_local_reserved_ports = 60000-60031" in sysctl
        limits = fleet.read(node, "/etc/security/limits.d/90-ascend-ready.conf")
        assert "* hard nofile 1048576" in limits and "root soft memlock unlimited" in limits
        tmpfiles = fleet.read(node, "/etc/tmpfiles.d/ascend-ready.conf")
        assert "transparent_hugepage/enabled - - - - never" in tmpfiles
        assert fleet.sh(node, f"cat {THP}").strip() == "always madvise [never]"
        assert fleet.sh(node, "sysctl -n kernel.numa_balancing net.ipv4.ip_local_reserved_ports").split() == [
            "0", "60000-60031"]
        assert "HwHiAiUser" in fleet.sh(node, "id -nG ascend").split()
        assert f". {want.layout.set_env}" in fleet.read(node, "/home/ascend/.bashrc")
        venv = f"/home/ascend/venvs/ascend-{STACK}/bin/python"
        # torch_npu loads CANN's libraries: only with set_env.sh sourced, as the training user's shell does.
        versions = fleet.sh(node, f". {want.layout.set_env} && {venv} -c 'import torch, torch_npu; "
                                  f"print(torch.__version__, torch_npu.__version__)'").split()
        assert versions == [want.torch, want.torch_npu]
        if node == "node03":  # CentOS 7.6 ships Python 3.6: the venv is built from the standalone CPython
            row = next(s for s in mx.load_matrix().stacks if s.id == STACK)
            build = rv.resolve(cann=row.cann, torch=row.torch, os="centos7.6", arch="x86_64").python_build
            pyvenv = fleet.read(node, f"/home/ascend/venvs/ascend-{STACK}/pyvenv.cfg")
            cfg = dict(ln.split(" = ", 1) for ln in pyvenv.splitlines() if " = " in ln)
            assert cfg["home"] == f"{build.install_dir}/bin"
        # The driver left its device nodes to its run user (mode 666: npu_driver installs --install-for-all),
        # so the training user's own login sees every chip, as the real torch_npu would.
        assert fleet.sh(node, "stat -c '%U:%G %a' /dev/davinci0 /dev/davinci_manager /dev/hisi_hdc").split(
            "\n")[:-1] == ["HwHiAiUser:HwHiAiUser 666"] * 3
        hardware = fleet.cluster.node(node).hardware
        count = "import torch_npu; print(torch_npu.npu.device_count())"
        seen = fleet.sh(node, f"su - ascend -c \"{venv} -c '{count}'\"")
        assert seen.split()[-1] == str(sim_fleet.DEVICES[hardware])
        assert fleet.read(node, "/run/ascend-ready.reboot-required").startswith("NPU driver/firmware changed")
        hccn = fleet.read(node, "/etc/hccn.conf")
        assert f"address_7=192.168.7.{11 + NODES.index(node)}" in hccn and "netdetect_0=192.168.0.1" in hccn
        assert fleet.sh(node, "hccn_tool -i 3 -ip -g").split() == [
            f"ipaddr:192.168.3.{11 + NODES.index(node)}", "netmask:255.255.255.0"]
    assert "ascend-check: every check passed on node03" in result.output


def test_centos_node_is_managed_through_python_36(fleet):
    # The node's only python3 is 3.6: every module above ran on it (ansible-core 2.16, docs/targets.md).
    assert fleet.sh("node03", "python3 -V").strip().startswith("Python 3.6")
    assert fleet.sh("node03", "ls /usr/bin | grep -c '^python3'").strip() == "2"  # python3, python3.6


def test_second_run_changes_nothing(fleet):
    result = fleet.play(*SKIP)
    assert result.rc == 0, result.output[-4000:]
    assert {n: result.changed(n) for n in NODES} == dict.fromkeys(NODES, 0)


def test_unhealthy_chips_block_an_upgrade(fleet):
    fleet.sim("fault", "node02", "driver-version-drift", "--param", "version=24.1.rc2")
    fleet.sim("fault", "node02", "chip-health", "--param", "npu=3")
    before = fleet.read("node02", "/usr/local/Ascend/driver/version.info")
    result = fleet.play(*SKIP)
    assert result.failed("node02") and result.changed("node02") == 0
    assert re.search(r"Refusing to change the driver 24\.1\.rc2 -> \S+: NPU 3 chip 0: \w+", result.output)
    assert fleet.read("node02", "/usr/local/Ascend/driver/version.info") == before
    assert all(result.changed(n) == 0 and not result.failed(n) for n in ("node01", "node03", "node04"))


def test_drift_upgrades_that_node_only_firmware_then_driver_then_cann(fleet):
    want = expected("node02")
    fleet.sim("fault", "node02", "--clear")
    fleet.sim("fault", "node02", "driver-version-drift", "--param", "version=24.1.rc2")
    fleet.sim("fault", "node02", "firmware-version-drift", "--param", "version=7.3.0.1.231")
    # The operator package went missing too (a CANN toolkit --upgrade is not exercised here: the
    # simulator's fake toolkit installer cannot upgrade in place yet, see the report of this issue).
    ops = fleet.root("node02") / f"{want.layout.home}/x86_64-linux/ascend_kernels_install.info".lstrip("/")
    ops.unlink()
    fleet.sh("node02", ": > /var/log/ascend_seclog/ascend_install.log")

    result = fleet.play(*SKIP)
    assert result.rc == 0, result.output[-4000:]
    assert all(result.changed(n) == 0 for n in ("node01", "node03", "node04"))
    assert result.changed("node02") > 0
    assert kv(fleet.read("node02", "/usr/local/Ascend/driver/version.info"))["Version"] == want.driver
    assert kv(fleet.read("node02", "/usr/local/Ascend/firmware/version.info"))["Version"] == want.firmware
    assert kv(fleet.read("node02", want.layout.version_file))["version"] == want.cann
    assert kv(ops.read_text())["version"] == want.cann
    # The installers' own log shows the order: firmware, then driver (vendor upgrade order).
    log = fleet.read("node02", "/var/log/ascend_seclog/ascend_install.log")
    modules = re.findall(r"^\[(Firmware|Driver)\]", log, re.M)
    assert modules[0] == "Firmware" and modules[-1] == "Driver", modules
    # And the play ran firmware, driver, then CANN on node02.
    ran = [m.group(1) for line in result.output.splitlines()
           if (m := re.match(r"TASK \[(\w+) : Run the .*installer", line))]
    assert ran[:3] == ["npu_firmware", "npu_driver", "cann"], ran


def test_failures_stay_on_their_host_and_change_nothing(fleet):
    corrupt = fleet.workdir / "packages-corrupt"
    shutil.copytree(fleet.packages, corrupt)
    driver = expected("node02").packages.driver
    with open(corrupt / driver, "ab") as fh:
        fh.write(b"\0")
    fleet.write_inventory(
        fleet.group_vars,
        {**fleet.host_vars,
         # a corrupt package on node02 only
         "node02": {**fleet.host_vars["node02"], "stack_package_source": str(corrupt)},
         # torch 2.9.0 wheels are manylinux_2_28: CentOS 7.6's glibc 2.17 cannot load them
         "node03": {**fleet.host_vars["node03"], "stack_id": "", "stack_torch": "2.9.0"}},
        # an address of this fleet's own subnet where no node answers (another session's cluster may
        # hold any other 10.251.x.0/24)
        extra_hosts=f"node05 ansible_host={fleet.cluster.subnet.rsplit('.', 1)[0]}.99 "
                    "ansible_ssh_common_args='-o ConnectTimeout=3'")
    watched = ("find /usr/local/Ascend /etc/sysctl.d /etc/security/limits.d /home/ascend -type f "
               "-exec md5sum {} + | sort")
    snapshot = {n: fleet.sh(n, watched) for n in ("node02", "node03")}
    result = fleet.play(*SKIP)
    try:
        assert result.rc != 0
        assert result.failed("node02") and result.failed("node03")
        assert result.recap["node05"]["unreachable"] == 1
        assert f"package {driver} is corrupt" in result.output
        assert re.search(r"invalid Ascend stack: no stack fits: os centos7\.6 \(glibc 2\.17\) rules out",
                         result.output)
        for node in ("node02", "node03"):
            assert result.changed(node) == 0
            assert fleet.sh(node, watched) == snapshot[node]
        assert all(result.changed(n) == 0 and not result.failed(n) for n in ("node01", "node04"))
    finally:
        fleet.write_inventory(fleet.group_vars, fleet.host_vars)


def test_a_driver_install_killed_halfway_is_completed_by_the_next_run(fleet):
    want = expected("node01")
    staged = f"/var/cache/ascend-ready/packages/{want.packages.driver}"
    # An upgrade that dies after removing the old driver and before writing version.info.
    fleet.sh("node01", "sed -i 's/^Version=.*/Version=24.1.rc2/' /usr/local/Ascend/driver/version.info")
    # setsid: the installer and the payload script it starts share one process group, killed at once.
    # It is killed once its log says it is past the removal, in its first pause (10%); waited for, with a
    # bound, not slept on.
    log = "/var/log/ascend_seclog/ascend_install.log"
    reached = f"grep -q 'upgradePercentage:10%' {log}"
    fleet.sh("node01", f": > {log}; ASCEND_SIM_INSTALL_DELAY=30 setsid {staged} --upgrade --quiet "
                       ">/dev/null 2>&1 & pid=$!; "
                       f"for i in $(seq 600); do {reached} && break; sleep 0.1; done; "
                       "env kill -KILL -- -$pid; "
                       f"{reached} || {{ echo 'the installer never reached 10%' >&2; exit 1; }}")
    assert fleet.sh("node01", "test -e /usr/local/Ascend/driver/version.info && echo present || echo gone"
                    ).strip() == "gone"
    result = fleet.play(*SKIP, "--limit", "node01")
    assert result.rc == 0, result.output[-4000:]
    assert "driver: install none ->" in result.output
    assert kv(fleet.read("node01", "/usr/local/Ascend/driver/version.info"))["Version"] == want.driver
    again = fleet.play(*SKIP, "--limit", "node01")
    assert again.rc == 0 and again.changed("node01") == 0


def test_check_mode_shows_changes_and_changes_nothing(fleet):
    fleet.sim("fault", "node04", "firmware-version-drift", "--param", "version=7.3.0.1.231")
    fleet.sh("node04", f"echo always > {THP}; "
                       "rm /etc/security/limits.d/90-ascend-ready.conf")
    result = fleet.play(*SKIP, "--check", "--diff", "--limit", "node04")
    assert result.rc == 0, result.output[-4000:]
    assert result.changed("node04") > 0
    assert "firmware (before_driver): upgrade 7.3.0.1.231 ->" in result.output
    assert "+* hard nofile 1048576" in result.output  # the diff of the limits file
    assert fleet.sh("node04", f"cat {THP}").strip() == "[always] madvise never"
    assert not (fleet.root("node04") / "etc/security/limits.d/90-ascend-ready.conf").exists()
    assert kv(fleet.read("node04", "/usr/local/Ascend/firmware/version.info"))["Version"] == "7.3.0.1.231"
    fixed = fleet.play(*SKIP, "--limit", "node04")
    assert fixed.rc == 0 and fixed.changed("node04") > 0
    assert fleet.play(*SKIP, "--limit", "node04").changed("node04") == 0


def test_drift_behind_a_skipped_include_is_repaired_on_that_node_only(fleet):
    # A no-op run reads each of these with one raw probe and skips the tasks that would write them: the
    # probes must still see a drift and let the writes run on that node alone.
    block = r"/# BEGIN ascend-ready: CANN environment/,/# END ascend-ready: CANN environment/d"
    fleet.sh("node01", f"sed -i '{block}' /home/ascend/.bashrc")
    fleet.sh("node02", "gpasswd -d ascend HwHiAiUser")
    fleet.sh("node03", "echo kernel.numa_balancing = 1 >> /etc/sysctl.d/90-ascend-ready.conf")
    fleet.sh("node04", "sed -i 's/^address_7=.*/address_7=192.168.7.99/' /etc/hccn.conf")
    result = fleet.play("--tags", "npu_user,tuning,cann,hccn")
    assert result.rc == 0, result.output[-4000:]
    assert all(result.changed(n) > 0 for n in NODES), result.output[-4000:]
    bashrc = fleet.read("node01", "/home/ascend/.bashrc")
    assert "# BEGIN ascend-ready: CANN environment" in bashrc
    assert f". {expected('node01').layout.set_env}" in bashrc
    assert "HwHiAiUser" in fleet.sh("node02", "id -nG ascend").split()
    assert "kernel.numa_balancing = 1" not in fleet.read("node03", "/etc/sysctl.d/90-ascend-ready.conf")
    assert "address_7=192.168.7.14" in fleet.read("node04", "/etc/hccn.conf")
    again = fleet.play("--tags", "npu_user,tuning,cann,hccn")
    assert {n: again.changed(n) for n in NODES} == dict.fromkeys(NODES, 0)
    # And on the no-op run the writers did not even run (blockinfile would report "ok", not "changed").
    for task in ("npu_user : Create or fix what differs", "tuning : Apply what differs",
                 "cann : Ensure set_env.sh is sourced for the training users", "hccn : Set what differs"):
        section = again.output.split(f"TASK [{task}]")[1].split("TASK [")[0]
        assert not re.findall(r"^(?:ok|changed|included):", section, re.M), (task, section)


def test_validate_fails_a_node_whose_checks_fail(fleet):
    fleet.sim("fault", "node01", "link-down", "--param", "device=2")
    try:
        result = fleet.play("--tags", "validate")
        assert result.failed("node01") and result.changed("node01") == 0
        assert re.search(r"ascend-check on node01: .*hccl\.\w+: .*device 2", result.output, re.S)
        assert all(not result.failed(n) for n in ("node02", "node03", "node04"))
    finally:
        fleet.sim("fault", "node01", "--clear")


def test_bad_role_variables_are_rejected_before_any_change(fleet):
    result = fleet.play("--tags", "tuning", "--limit", "node01", "-e", "tuning_numa_balancing=7",
                        "-e", "tuning_thp=sometimes")
    assert result.rc != 0 and result.changed("node01") == 0
    assert "tuning_numa_balancing" in result.output and "tuning_thp" in result.output
    assert "must be one of" in result.output


def _would_install(output: str, node: str) -> tuple[str, set[str]]:
    """The package manager and packages the check-mode report of os_prereqs names for `node`."""
    m = re.search(rf"changed: \[{node}\] => \s+msg: '?(yum|dnf) would install: (.*?)'?\n+"
                  r"(?:changed|ok|TASK|PLAY)", output, re.S)
    assert m, output[-3000:]
    return m.group(1), set(m.group(2).split())


def test_os_prereqs_in_check_mode_on_rhel_family_nodes(fleet):
    # The simulated Kylin and CentOS nodes are Debian inside, with the simulator's rpm database view and
    # yum/dnf stand-ins (docs/design/simulator.md): the rpm query is real, the install is reported.
    db = "/var/lib/rpm/ascend-sim-installed"
    kernel = fleet.sh("node03", "uname -r").strip()
    version, release = kernel.split("-", 1)
    added = f"make 3.82 23.el7 x86_64\\nkernel-devel {version} {release} x86_64\\n"
    fleet.sh("node03", f"printf '{added}' >> {db}")
    assert fleet.sh("node03", f"rpm -q make kernel-devel-{kernel} dkms; echo rc=$?").splitlines() == [
        "make-3.82-23.el7.x86_64", f"kernel-devel-{kernel}.x86_64", "package dkms is not installed", "rc=1"]
    watched = f"md5sum {db}; ls /etc/yum.repos.d"
    before = {n: fleet.sh(n, watched) for n in ("node02", "node03")}
    fleet.write_inventory({**fleet.group_vars, "os_prereqs_repo": "http://192.0.2.1/rpm/"}, fleet.host_vars)
    try:
        result = fleet.play("--tags", "os_prereqs", "--check", "--diff", "--limit", "node02,node03")
    finally:
        fleet.write_inventory(fleet.group_vars, fleet.host_vars)
    assert result.rc == 0, result.output[-4000:]
    assert result.changed("node02") > 0 and result.changed("node03") > 0
    # Kylin V10 (dnf; vars/Kylin_Linux_Advanced_Server.yml) from a minimal install's package list.
    assert _would_install(result.output, "node02") == (
        "dnf", {"make", "dkms", "gcc", "gcc-c++", "pciutils", "net-tools", "python3-devel", "kernel-devel"})
    # CentOS 7.6 (yum; vars/RedHat.yml): make and the running kernel's kernel-devel are installed.
    assert _would_install(result.output, "node03") == (
        "yum", {"dkms", "gcc", "gcc-c++", "pciutils", "net-tools", "elfutils-libelf-devel", "python3-devel",
                f"kernel-headers-{kernel}"})
    assert result.output.count("+baseurl = http://192.0.2.1/rpm/") == 2  # the mirror's repo file, as a diff
    assert {n: fleet.sh(n, watched) for n in ("node02", "node03")} == before
    assert "ascend-ready.repo" not in before["node02"] + before["node03"]
