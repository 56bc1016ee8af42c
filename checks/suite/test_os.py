"""OS checks: THP, NUMA balancing, limits, driver user, glibc, kernel headers, disk, /dev/shm, clock."""

from __future__ import annotations

import re

from ascend_ready.checks.registry import check, evidence


@check(
    "os.thp",
    title="transparent hugepages: enabled and defrag set to the profile's mode",
    severity="major",
    probes=["thp-enabled", "thp-defrag"],
    fix="Disable THP now and at boot (transparent_hugepage=never on the kernel command line)",
    command="echo never > /sys/kernel/mm/transparent_hugepage/enabled; "
    "echo never > /sys/kernel/mm/transparent_hugepage/defrag",
)
def test_thp(host):
    want = host.profile.thp
    bad = []
    for which in ("enabled", "defrag"):
        mode, line = host.os.thp(which)
        evidence(f"transparent_hugepage/{which}: {line}")
        if mode != want:
            bad.append(f"THP {which} is {mode}, should be {want}")
    assert not bad, "; ".join(bad)


@check(
    "os.numa_balancing",
    title="kernel.numa_balancing is off",
    severity="major",
    probes=["sysctl"],
    fix="Turn automatic NUMA balancing off (it migrates pages under the NPU's DMA)",
    command="sysctl -w kernel.numa_balancing=0",
)
def test_numa_balancing(host):
    value = host.os.sysctl.get("kernel.numa_balancing")
    want = str(host.profile.numa_balancing)
    evidence(f"kernel.numa_balancing = {value}")
    assert value is not None, "kernel.numa_balancing is not readable (/proc/sys/kernel/numa_balancing)"
    assert value == want, f"kernel.numa_balancing is {value}, should be {want}"


def _limit(host, name):
    limits = host.os.limits
    user = limits.get("user")
    assert user is not None and user.hard == host.profile.training_user, (
        f"limits were read as {user.hard if user else 'an unknown user'}, not the training user "
        f"{host.profile.training_user}"
    )
    assert name in limits, f"no {name} line in the limits probe output"
    evidence(f"{host.profile.training_user}: {name} hard {limits[name].hard} soft {limits[name].soft}")
    return limits[name]


@check(
    "os.nofile",
    title="the training user's open-files limit is high enough",
    severity="major",
    probes=["user-limits"],
    fix="Raise nofile in /etc/security/limits.d/ and log in again",
    command="echo '<user> - nofile 1048576' > /etc/security/limits.d/90-ascend.conf",
)
def test_nofile(host):
    limit, want = _limit(host, "nofile"), host.profile.nofile_min
    assert limit.at_least(want), f"nofile is {limit.soft} (soft) / {limit.hard} (hard), should be >= {want}"


@check(
    "os.memlock",
    title="the training user's memlock limit is unlimited (or the profile's minimum)",
    severity="major",
    probes=["user-limits"],
    fix="Set memlock unlimited in /etc/security/limits.d/ (RDMA and HCCL pin memory) and log in again",
    command="echo '<user> - memlock unlimited' > /etc/security/limits.d/90-ascend.conf",
)
def test_memlock(host):
    limit, want = _limit(host, "memlock"), host.profile.memlock_min_kb
    if want is None:
        assert limit.unlimited, f"memlock is {limit.soft} (soft) / {limit.hard} (hard), should be unlimited"
    else:
        assert limit.at_least(want), (
            f"memlock is {limit.soft} (soft) / {limit.hard} (hard) KiB, should be >= {want}"
        )


@check(
    "os.driver_user",
    title="the driver's run user and group exist",
    severity="critical",
    probes=["accounts"],
    fix="Create the driver user and group before (re)installing the driver",
    command="groupadd HwHiAiUser && useradd -g HwHiAiUser -d /home/HwHiAiUser -m HwHiAiUser -s /bin/bash",
)
def test_driver_user(host):
    users, groups, lines = host.os.accounts
    who = host.profile.driver_user
    evidence(line for line in lines if line.startswith(who + ":"))
    missing = [f"user {who}"] * (who not in users) + [f"group {who}"] * (who not in groups)
    assert not missing, f"{' and '.join(missing)} missing"


_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def wheel_glibc(tags: list[str]) -> tuple[int, int] | None:
    """The oldest glibc the wheel's manylinux tags accept (pip installs it if one tag fits).

    Plain `linux_*` and pure-Python tags state no floor and are left out; None when no manylinux tag.
    """
    needs = []
    for tag in tags:
        platform = tag.rsplit("-", 1)[-1]
        if m := re.match(r"manylinux_(\d+)_(\d+)_", platform):
            needs.append((int(m[1]), int(m[2])))
        elif (legacy := platform.split("_", 1)[0]) in _MANYLINUX:
            needs.append(_MANYLINUX[legacy])
    return min(needs) if needs else None


@check(
    "os.glibc",
    title="glibc is at least what the installed wheels need",
    severity="critical",
    probes=["glibc", "python-packages"],
    fix="Install wheels built for this glibc (manylinux2014 for glibc 2.17) or move to a supported OS",
    command="pip install --force-reinstall <package>==<version built for this glibc>",
)
def test_glibc(host):
    have, line = host.os.glibc
    _version, dists = host.versions.python
    evidence(f"glibc: {line}")
    bad = []
    for dist in dists.values():
        need = wheel_glibc(dist.tags)
        if need and need > have:
            bad.append(f"{dist.name} {dist.version} needs glibc {need[0]}.{need[1]}")
            evidence(f"{dist.name} {dist.version}: {', '.join(dist.tags)}")
    assert not bad, f"glibc is {have[0]}.{have[1]}: " + "; ".join(bad)


@check(
    "os.kernel_headers",
    title="kernel headers for the running kernel are installed",
    severity="major",
    probes=["kernel-headers"],
    fix="Install the headers of the running kernel (the driver builds its modules with DKMS)",
    command="apt-get install linux-headers-$(uname -r)  # or: yum install kernel-devel-$(uname -r)",
)
def test_kernel_headers(host):
    kernel, headers = host.os.kernel_headers
    evidence(f"running kernel {kernel}", *(f"headers at {h}" for h in headers))
    assert headers, f"no kernel headers for the running kernel {kernel}"


@check(
    "os.disk_free",
    title="the checkpoint directory has enough free space",
    severity="major",
    probes=["disk-free"],
    fix="Free space or point checkpoint_dir at a larger volume",
    command="df -h <checkpoint_dir>",
)
def test_disk_free(host):
    want = host.profile.min_disk_free_gb
    disk = host.os.disk("disk-free", host.profile.checkpoint_dir)
    evidence(disk.line)
    assert disk.avail_gb >= want, (
        f"{disk.avail_gb:.1f} GB free under {disk.path} ({disk.mount}), need {want:g} GB"
    )


@check(
    "os.shm",
    title="/dev/shm is large enough",
    severity="major",
    probes=["shm"],
    fix="Enlarge /dev/shm (and its fstab entry)",
    command="mount -o remount,size=<N>G /dev/shm",
)
def test_shm(host):
    want = host.profile.min_shm_gb
    shm = host.os.disk("shm", "/dev/shm")
    evidence(shm.line)
    assert shm.size_gb >= want, f"/dev/shm is {shm.size_gb:.1f} GB, need {want:g} GB"


@check(
    "os.clock_sync",
    title="the system clock is synchronized",
    severity="major",
    probes=["clock"],
    fix="Enable time sync (chrony or systemd-timesyncd): skewed clocks break HCCL timeouts and TLS",
    command="timedatectl set-ntp true",
)
def test_clock_sync(host):
    synced, lines = host.os.clock
    evidence(lines)
    assert synced is not None, "no time synchronization service answered (timedatectl, chronyc, ntpstat)"
    assert synced, "the clock is not synchronized"
