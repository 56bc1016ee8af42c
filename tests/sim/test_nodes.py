"""Every node of the shared 4-node cluster is its own machine: hostname, IP, OS, Python, keys, devices."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import paramiko
import pytest
from sim_support import wait_for

from ascend_ready.sim.cluster import NODE_TOOLS

pytestmark = pytest.mark.sim

NODES = ["node01", "node02", "node03", "node04"]
# profile per node (tests/conftest.py SIM_PROFILES): what the node's OS must say it is
OS_RELEASE = {
    "node01": ('ID=ubuntu', 'VERSION_ID="22.04"'),
    "node02": ('ID="kylin"', 'VERSION_ID="V10"'),
    "node03": ('ID="centos"', 'VERSION_ID="7"'),
    "node04": ('ID="openEuler"', 'VERSION_ID="22.03"'),
}
FACTS = {  # Ansible distribution facts as on the real OS
    "node01": ("Ubuntu", "22.04", "22", "Debian"),
    "node02": ("Kylin Linux Advanced Server", "V10", "V10", "RedHat"),
    "node03": ("CentOS", "7.6", "7", "RedHat"),
    "node04": ("openEuler", "22.03", "22", "RedHat"),
}
PYTHON = {"node01": "3.11", "node02": "3.7.16", "node03": "3.6.15", "node04": "3.9.18"}
# What each OS's C library and kernel report (sim/profiles.yaml, with sources): `ldd --version | head -1`,
# `getconf GNU_LIBC_VERSION`, `uname -r`, `uname -v`, and the libc files in /lib64
OS_IDENTITY = {
    "node01": ("ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35", "glibc 2.35", "5.15.0-91-generic",
               "#101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023", []),
    "node02": ("ldd (GNU libc) 2.28", "glibc 2.28", "4.19.90-24.4.v2101.ky10.x86_64",
               "#1 SMP Mon May 24 12:14:55 CST 2021", ["libc-2.28.so", "libc.so.6 -> libc-2.28.so"]),
    "node03": ("ldd (GNU libc) 2.17", "glibc 2.17", "3.10.0-957.el7.x86_64",
               "#1 SMP Thu Nov 8 23:39:32 UTC 2018", ["libc-2.17.so", "libc.so.6 -> libc-2.17.so"]),
    "node04": ("ldd (GNU libc) 2.34", "glibc 2.34", "5.10.0-60.18.0.50.oe2203.x86_64",
               "#1 SMP Wed Mar 30 03:12:24 UTC 2022", ["libc.so.6"]),
}


@pytest.mark.parametrize("name", NODES)
def test_node_identity_over_ssh(sim_cluster, remote, name):
    node = sim_cluster.node(name)
    r = remote(name, "hostname; hostname -I; cat /etc/os-release")
    assert r.rc == 0, r.err
    hostname, ips, os_release = r.out.split("\n", 2)
    assert hostname == name
    assert ips.split() == [node.ip]
    for line in OS_RELEASE[name]:
        assert line in os_release.splitlines()


def test_nodes_reach_each_other_by_name(remote):
    r = remote("node01", "ping -c1 -W2 node04 >/dev/null && getent hosts node03")
    assert r.rc == 0, r.err
    assert r.out.split()[1] == "node03"


def test_sudo_user_logs_in_with_the_same_key(remote):
    r = remote("node02", "id -un; sudo -n id -u", user="ascend")
    assert (r.rc, r.out) == (0, "ascend\n0\n")


def test_known_hosts_is_enforced(sim_cluster):
    """Each node has its own host key: presenting node01's key where node02's is expected is refused."""
    keys = paramiko.HostKeys(str(sim_cluster.known_hosts))
    node1, node2 = sim_cluster.node("node01"), sim_cluster.node("node02")
    assert keys.lookup(node1.ip)["ssh-ed25519"] != keys.lookup(node2.ip)["ssh-ed25519"]
    swapped = paramiko.SSHClient()
    swapped.get_host_keys().add(node2.ip, "ssh-ed25519", keys.lookup(node1.ip)["ssh-ed25519"])
    swapped.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.BadHostKeyException):
        swapped.connect(node2.ip, username="root", key_filename=str(sim_cluster.key_path),
                        look_for_keys=False, allow_agent=False, timeout=10)
    unknown = paramiko.SSHClient()
    unknown.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        unknown.connect(node2.ip, username="root", key_filename=str(sim_cluster.key_path),
                        look_for_keys=False, allow_agent=False, timeout=10)


def test_openssh_client_uses_the_generated_ssh_config(sim_cluster):
    cmd = ["ssh", "-F", str(sim_cluster.ssh_config), "-o", "BatchMode=yes", "node03", "hostname"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout) == (0, "node03\n"), proc.stderr


@pytest.mark.parametrize("name", NODES)
def test_python_is_the_profiles_only_one(remote, name):
    r = remote(name, "python3 --version; ls /usr/bin | grep -E '^python' | sort | tr '\\n' ' '")
    assert r.rc == 0, r.err
    version, listed = r.out.splitlines()
    assert version.startswith(f"Python {PYTHON[name]}")
    series = ".".join(PYTHON[name].split(".")[:2])
    assert listed.split() == ["python3", f"python{series}"]


@pytest.mark.parametrize("name", NODES)
def test_each_os_reports_its_glibc_kernel_and_libc_file(remote, name):
    ldd, getconf, release, version, libc = OS_IDENTITY[name]
    r = remote(name, "ldd --version | head -1; getconf GNU_LIBC_VERSION; uname -r; uname -v; "
                     "getconf PAGESIZE; ldd /bin/true | grep -c 'libc.so.6 => '; "
                     "cd /lib64 && for f in libc-*.so libc.so.6; do [ -e \"$f\" ] && { t=$(readlink \"$f\"); "
                     "case $t in /*|'') echo \"$f\";; *) echo \"$f -> $t\";; esac; }; done; true")
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    # other getconf values and ldd's listing are the real tools' answers
    assert lines[:6] == [ldd, getconf, release, version, "4096", "1"]
    assert lines[6:] == libc
    # what Python reads (Ansible's ansible_kernel is platform.release(); pip's glibc check os.confstr)
    py = remote(name, "python3 -c 'import os, platform, ctypes; f = ctypes.CDLL(None).gnu_get_libc_version; "
                      "f.restype = ctypes.c_char_p; print(platform.release()); "
                      "print(os.confstr(\"CS_GNU_LIBC_VERSION\")); print(f().decode())'")
    assert py.out.splitlines() == [release, getconf, getconf.split()[1]], py.err


def test_pip_on_the_centos_node_refuses_a_manylinux_2_28_wheel(sim_cluster, remote, tmp_path):
    """As on a real glibc 2.17 host: a current pip reads glibc 2.17 and refuses manylinux_2_28, naming the
    wheel; the manylinux2014 build of the same release installs; on Kylin V10 (2.28) both do. CentOS's own
    pip 18.1 knows no manylinux_2_28 tag at all: from a wheelhouse (--find-links, as python_env installs) it
    finds nothing to install (a wheel named by its path it installs unchecked, real pip 18 too)."""
    from ascend_ready.sim.packages import wheels

    pip = sorted(Path("/root/.pyenv/versions").glob("3.11*/lib/python3.11/ensurepip/_bundled/pip-*.whl"))
    if not pip:
        pytest.skip("no pip wheel of a Python 3.11 under /root/.pyenv")
    for floor in ("2.17", "2.28"):
        for py in ("3.11", "3.6"):
            wheels.build_wheel(tmp_path, "probe", "1.0", py, floor, "x86_64", {"probe/__init__.py": ""},
                               summary="glibc probe")
    for node in ("node02", "node03"):
        root = Path(f"/proc/{sim_cluster.node(node).pid}/root/tmp/pip-probe")
        root.mkdir(exist_ok=True)
        for src in [*tmp_path.glob("*.whl"), pip[-1]]:
            (root / src.name).write_bytes(src.read_bytes())
    # the node's private Python 3.11 runs that pip: the C library it loads is the node's, preload included
    whl = f"/tmp/pip-probe/{pip[-1].name}"
    modern = (f"/opt/ascend-sim/bin/python3 {whl}/pip install --dry-run --no-deps --target /tmp/pip-probe/t "
              "--no-index --disable-pip-version-check /tmp/pip-probe/probe-1.0-cp311-cp311-")
    tag28 = "manylinux_2_28_x86_64.whl"
    refused = remote("node03", modern + tag28)
    assert refused.rc == 1
    assert f"probe-1.0-cp311-cp311-{tag28} is not a supported wheel on this platform" in refused.err
    # the platform tags that same pip accepts (its own packaging.tags, as it judged above): one run per node
    tags = (f"/opt/ascend-sim/bin/python3 -c 'import sys; sys.path.insert(0, \"{whl}\"); "
            "from pip._vendor.packaging.tags import sys_tags; p = {t.platform for t in sys_tags()}; "
            "print(*[t in p for t in (\"manylinux2014_x86_64\", \"manylinux_2_28_x86_64\")])'")
    assert remote("node03", tags).out == "True False\n"
    assert remote("node02", tags).out == "True True\n"
    old = remote("node03", "mkdir -p /tmp/pip-probe/28 && cp /tmp/pip-probe/*-cp36m-manylinux_2_28_* "
                           "/tmp/pip-probe/28/ && python3 -m pip --version && python3 -m pip install "
                           "--no-deps --no-index -f /tmp/pip-probe/28 --target /tmp/pip-probe/t probe")
    assert old.out.startswith("pip 18.1 ")
    assert old.rc == 1 and "No matching distribution found for probe" in old.err, old.out + old.err


def test_private_interpreter_imports_the_package(remote):
    r = remote("node03", "PYTHONPATH=/opt/ascend-sim/lib /opt/ascend-sim/bin/python3 -c "
                         "'import sys, ascend_ready.sim; print(sys.version_info[:2])'; "
                         "touch /opt/ascend-sim/lib/ascend_ready/x")
    assert r.out == "(3, 11)\n"
    assert "Read-only file system" in r.err  # the host's package is lent read-only


def test_ansible_setup_facts_per_profile(sim_cluster):
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ansible")), "-i", str(sim_cluster.inventory_path), "all",
         "-m", "setup", "-a", "filter=ansible_distribution*,ansible_os_family,ansible_hostname,"
                              "ansible_default_ipv4,ansible_python_version,ansible_kernel*", "-o"],
        capture_output=True, text=True, timeout=180, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = {}
    for line in proc.stdout.splitlines():
        host, _, rest = line.partition(" | SUCCESS => ")
        facts[host] = json.loads(rest)["ansible_facts"]
    assert sorted(facts) == NODES
    for name, (dist, version, major, family) in FACTS.items():
        f = facts[name]
        got = (f["ansible_distribution"], f["ansible_distribution_version"],
               f["ansible_distribution_major_version"], f["ansible_os_family"])
        assert got == (dist, version, major, family)
        assert f["ansible_hostname"] == name
        assert f["ansible_default_ipv4"]["address"] == sim_cluster.node(name).ip
        assert f["ansible_python_version"].startswith(PYTHON[name])
        assert (f["ansible_kernel"], f["ansible_kernel_version"]) == OS_IDENTITY[name][2:4]


def test_npu_device_nodes(sim_cluster, remote):
    hw = pytest.importorskip("ascend_ready.sim.hw", reason="hardware model not installed yet")
    state = json.loads((sim_cluster.node("node01").simdir(sim_cluster.run_dir) / "state.json").read_text())
    expected = sorted(d["path"] for d in hw.device_nodes(state))
    r = remote("node01", "find /dev -type c \\( -name 'davinci*' -o -name devmm_svm -o -name hisi_hdc \\)")
    assert sorted(r.out.split()) == expected
    assert "/dev/davinci7" in expected


def test_fake_pci_tree_resolves_inside_sys_devices(remote):
    r = remote("node01", "ls /sys/bus/pci/devices | head -50; readlink -f /sys/bus/pci/devices/0000:c1:00.0; "
                         "cat /sys/bus/pci/devices/0000:c1:00.0/vendor; ls /sys/class/net")
    if "0000:c1:00.0" not in r.out:
        pytest.skip("hardware model wrote no PCI tree")
    lines = r.out.splitlines()
    assert "/sys/devices/pci0000:c0/0000:c0:00.0/0000:c1:00.0" in lines
    assert "0x19e5" in lines  # Huawei
    assert lines[-2:] == ["eth0", "lo"]  # the real sysfs still shows the node's own interfaces


def test_lspci_and_dmesg_on_a_bare_node(remote):
    if not (NODE_TOOLS / "lspci").is_file():
        pytest.skip("fake lspci not written yet by the hardware part (sim/node/bin/lspci)")
    r = remote("node01", "command -v lspci dmesg; lspci | grep -c 'Processing accelerators: Huawei'; "
                         "lspci -d 19e5:d802 | wc -l; readlink -f /sys/bus/pci/devices/0000:75:00.0")
    # 8 NPUs (d802) and, as on a real Kunpeng 920 host, the CPU's two ZIP engines (a250) in that class
    assert r.out.splitlines() == ["/usr/local/sbin/lspci", "/usr/local/bin/dmesg", "10", "8",
                                  "/sys/devices/pci0000:74/0000:74:00.0/0000:75:00.0"]


def test_host_kernel_log_and_clock_are_out_of_reach(remote):
    """The node's root gets EPERM for the host's kernel log and clock (seccomp), as in a container."""
    r = remote("node01", "/usr/bin/dmesg; echo rc=$?; date -s '2001-01-01' >/dev/null; echo rc=$?; "
                         "timeout 2 cat /proc/kmsg | wc -c")
    assert "Operation not permitted" in r.err
    assert r.out.split() == ["rc=1", "rc=1", "0"]  # /proc/kmsg is masked (reading it drains the host's log)


def test_killed_sshd_is_restarted_and_the_node_survives(sim_cluster, remote):
    node = sim_cluster.node("node04")
    r = remote("node04", "pkill -x sshd; true")  # also ends this session
    r = wait_for(lambda: remote("node04", "echo back"), 30, "node04's sshd to take logins again",
                 interval=0.2, ignore=(paramiko.SSHException, OSError))
    assert r.out == "back\n"
    assert node.alive()


def test_logins_get_server_limits_and_apply_limits_d(remote):
    """sshd starts with a server's limits (as far as the host allows) and PAM's pam_limits applies
    limits.d at login; `*` lines do not cover root, as with the real pam_limits."""
    conf = "/etc/security/limits.d/90-ascend-sim-test.conf"
    show = "echo $(ulimit -S -n) $(ulimit -H -n) $(ulimit -S -l) $(ulimit -H -l)"
    bare = remote("node02", show, user="ascend")
    lines = r"ascend soft nofile 4096\nascend hard nofile 10000\n* soft memlock 4096\n"
    r = remote("node02", f"printf '{lines}' > {conf}")
    assert r.rc == 0, r.err
    try:
        user, root = remote("node02", show, user="ascend"), remote("node02", show)
    finally:
        remote("node02", f"rm -f {conf}")
    # the login's soft nofile is 1024 as on a server; the hard one a server's unless the host's is lower
    # (no CAP_SYS_RESOURCE to raise it)
    nofile = ["1024", str(min(524288, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))]
    assert bare.out.split() == [*nofile, "8192", "8192"]
    assert user.out.split() == ["4096", "10000", "4096", "8192"]
    assert root.out.split() == [*nofile, "8192", "8192"]


def test_pam_limits_raise_to_limits_d_where_the_host_allows_it(remote):
    """The node's sshd runs logins through PAM (UsePAM yes, `session required pam_limits.so` in
    /etc/pam.d/sshd and su), so limits.d's nofile 1048576 / memlock unlimited take effect as on a server,
    when this host gives the nodes CAP_SYS_RESOURCE; without it no hard limit rises above the host's."""
    cfg = remote("node01", "grep -h '^session.*pam_limits.so' /etc/pam.d/sshd /etc/pam.d/su; "
                           "sshd -T 2>/dev/null | grep -i '^usepam'")
    assert cfg.out.split("\n")[:-1] == ["session    required     pam_limits.so",
                                        "session    required   pam_limits.so", "usepam yes"], cfg.out
    from ascend_ready.sim.harness.fleet import _host_can_raise

    if not _host_can_raise(resource.RLIMIT_NOFILE, 1048576):
        pytest.skip("this host gives no CAP_SYS_RESOURCE: a login cannot exceed the host's hard limits")
    conf = "/etc/security/limits.d/90-ascend-sim-pam.conf"
    remote("node01", f"printf '* - nofile 1048576\\n* - memlock unlimited\\n' > {conf}")
    try:
        ssh = remote("node01", "ulimit -Sn; ulimit -Hn; ulimit -Hl", user="ascend")
        su = remote("node01", "su - ascend -c 'ulimit -Sn; ulimit -Hl'")
    finally:
        remote("node01", f"rm -f {conf}")
    assert ssh.out.split() == ["1048576", "1048576", "unlimited"]
    assert su.out.split() == ["1048576", "unlimited"]


def test_chronyc_reports_the_clock_synchronised(remote):
    r = remote("node03", "command -v chronyc; chronyc tracking | tail -n 1")
    assert (r.rc, r.out) == (0, "/usr/bin/chronyc\nLeap status     : Normal\n"), r.err
