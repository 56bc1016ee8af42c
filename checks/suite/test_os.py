"""OS checks: THP, NUMA balancing, limits, driver user, glibc, kernel headers, disk, /dev/shm, clock."""

from __future__ import annotations

import re

from ascend_ready.checks.registry import check, evidence, fix_command, warn
from ascend_ready.checks.resources import (
    Accounts,
    Clock,
    ClockOffset,
    DiskFree,
    Glibc,
    KernelHeaders,
    PythonPackages,
    RebootPending,
    Shm,
    Sysctl,
    Thp,
    UserLimits,
)

#: The limits file the playbook manages (tuning_limits_file in playbooks/roles/tuning/defaults/main.yml):
#: fix commands append to it, so applying several in any order keeps them all.
LIMITS_FILE = "/etc/security/limits.d/90-ascend-ready.conf"


def limits_fix(user: str, item: str, value: str) -> str:
    """Append the soft and hard limit as the playbook's limits.conf.j2 writes them (`USER soft ITEM V`)."""
    return f"printf '%s\\n' '{user} soft {item} {value}' '{user} hard {item} {value}' | tee -a {LIMITS_FILE}"


@check(
    "os.thp",
    title="transparent hugepages: enabled and defrag set to the profile's mode",
    severity="major",
    reads=[Thp],
    fix="Disable THP now and at boot (transparent_hugepage=never on the kernel command line)",
    command="echo never > /sys/kernel/mm/transparent_hugepage/enabled; "
    "echo never > /sys/kernel/mm/transparent_hugepage/defrag",
)
def test_thp(host):
    want = host.profile.thp
    bad = []
    for which in ("enabled", "defrag"):
        mode = host.thp.mode(which)
        evidence(f"transparent_hugepage/{which}: {mode.line}")
        if mode.selected != want:
            bad.append(f"THP {which} is {mode.selected}, should be {want}")
    assert not bad, "; ".join(bad)


@check(
    "os.numa_balancing",
    title="kernel.numa_balancing is off",
    severity="major",
    reads=[Sysctl],
    fix="Turn automatic NUMA balancing off (it migrates pages under the NPU's DMA)",
    command="sysctl -w kernel.numa_balancing=0",
)
def test_numa_balancing(host):
    value = host.sysctl.get("kernel.numa_balancing")
    want = str(host.profile.numa_balancing)
    evidence(f"kernel.numa_balancing = {value}")
    assert value is not None, "kernel.numa_balancing is not readable (/proc/sys/kernel/numa_balancing)"
    assert value == want, f"kernel.numa_balancing is {value}, should be {want}"


def _limit(host, name):
    limits = host.user_limits.limits
    user = host.profile.training_user
    assert limits.user == user, f"limits were read as {limits.user}, not the training user {user}"
    limit = getattr(limits, name)
    evidence(f"{user}: {name} hard {limit.hard} soft {limit.soft}")
    return limit


@check(
    "os.nofile",
    title="the training user's open-files limit is high enough",
    severity="major",
    reads=[UserLimits],
    fix="Raise nofile in /etc/security/limits.d/ and log in again",
    command=limits_fix("<user>", "nofile", "1048576"),
)
def test_nofile(host):
    limit, want = _limit(host, "nofile"), host.profile.nofile_min
    fix_command(limits_fix(host.profile.training_user, "nofile", str(want)))
    assert limit.at_least(want), f"nofile is {limit.soft} (soft) / {limit.hard} (hard), should be >= {want}"


@check(
    "os.memlock",
    title="the training user's memlock limit is unlimited (or the profile's minimum)",
    severity="major",
    reads=[UserLimits],
    fix="Set memlock unlimited in /etc/security/limits.d/ (RDMA and HCCL pin memory) and log in again",
    command=limits_fix("<user>", "memlock", "unlimited"),
)
def test_memlock(host):
    limit, want = _limit(host, "memlock"), host.profile.memlock_min_kb
    fix_command(limits_fix(host.profile.training_user, "memlock", "unlimited" if want is None else str(want)))
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
    reads=[Accounts],
    fix="Create the driver user and group before (re)installing the driver",
    command="groupadd HwHiAiUser && useradd -g HwHiAiUser -d /home/HwHiAiUser -m HwHiAiUser -s /bin/bash",
)
def test_driver_user(host):
    accounts = host.accounts.accounts
    who = host.profile.driver_user
    evidence(line for line in (accounts.users.get(who), accounts.groups.get(who)) if line)
    missing = [f"user {who}"] * (who not in accounts.users) + [f"group {who}"] * (who not in accounts.groups)
    assert not missing, f"{' and '.join(missing)} missing"


_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def wheel_glibc(tags: list[str]) -> tuple[int, int] | None:
    """The oldest glibc the wheel's manylinux tags accept (pip installs it if one tag fits).

    Plain `linux_*` and pure-Python tags state no floor and are left out; None when no manylinux tag.
    """
    floor = wheel_floor(tags)
    return floor[0] if floor else None


def wheel_floor(tags: list[str]) -> tuple[tuple[int, int], str] | None:
    """wheel_glibc's floor with the platform tag that sets it (`manylinux_2_28_x86_64`)."""
    needs = []
    for tag in tags:
        platform = tag.rsplit("-", 1)[-1]
        if m := re.match(r"manylinux_(\d+)_(\d+)_", platform):
            needs.append(((int(m[1]), int(m[2])), platform))
        elif (legacy := platform.split("_", 1)[0]) in _MANYLINUX:
            needs.append((_MANYLINUX[legacy], platform))
    return min(needs) if needs else None


@check(
    "os.glibc",
    title="glibc is at least what the installed wheels need",
    severity="critical",
    reads=[Glibc, PythonPackages],
    fix="Install wheels built for this glibc (manylinux2014 for glibc 2.17) or move to a supported OS",
    command="pip install --force-reinstall <package>==<version built for this glibc>",
)
def test_glibc(host):
    glibc = host.glibc.version
    have = (glibc.major, glibc.minor)
    packages = host.python_packages.packages
    dists = packages.dists
    evidence(f"glibc: {glibc.line}", f"python: {packages.python} ({host.profile.python})")
    bad = []
    for dist in dists.values():
        floor = wheel_floor(dist.tags)
        if floor and floor[0] > have:
            (major, minor), tag = floor
            bad.append(f"{dist.name} {dist.version} needs glibc {major}.{minor} ({tag})")
            evidence(f"{dist.name} {dist.version}: {', '.join(dist.tags)}")
    assert not bad, f"glibc is {have[0]}.{have[1]}: " + "; ".join(bad)
    # A compiled wheel without WHEEL tags states no glibc floor: for the stack's own packages say so.
    untagged = [
        f"{dists[n].name} {dists[n].version}"
        for n in ("torch", "torch-npu")
        if n in dists and not dists[n].tags
    ]
    if untagged:
        warn(f"no wheel tags (WHEEL file) for {', '.join(untagged)}: the glibc they need is unknown")


@check(
    "os.kernel_headers",
    title="kernel headers for the running kernel are installed",
    severity="major",
    reads=[KernelHeaders],
    fix="Install the headers of the running kernel (the driver builds its modules with DKMS)",
    command="apt-get install linux-headers-$(uname -r)  # or: yum install kernel-devel-$(uname -r)",
)
def test_kernel_headers(host):
    found = host.kernel_headers.headers
    evidence(f"running kernel {found.kernel}", *(f"headers at {h}" for h in found.headers))
    assert found.headers, f"no kernel headers for the running kernel {found.kernel}"


@check(
    "os.disk_free",
    title="the checkpoint directory has enough free space",
    severity="major",
    reads=[DiskFree],
    fix="Free space or point checkpoint_dir at a larger volume",
    command="df -h <checkpoint_dir>",
)
def test_disk_free(host):
    want = host.profile.min_disk_free_gb
    disk, path = host.disk_free, host.profile.checkpoint_dir
    evidence(disk.usage.line)
    assert disk.avail_gb >= want, (
        f"{disk.avail_gb:.1f} GB free under {path} ({disk.usage.mount}), need {want:g} GB"
    )


@check(
    "os.shm",
    title="/dev/shm is large enough",
    severity="major",
    reads=[Shm],
    fix="Enlarge /dev/shm (and its fstab entry)",
    command="mount -o remount,size=<N>G /dev/shm",
)
def test_shm(host):
    want = host.profile.min_shm_gb
    shm = host.shm
    evidence(shm.usage.line)
    assert shm.size_gb >= want, f"/dev/shm is {shm.size_gb:.1f} GB, need {want:g} GB"


@check(
    "os.clock_sync",
    title="the system clock is synchronized",
    severity="major",
    reads=[Clock, ClockOffset],
    fix="Enable time sync (chrony or systemd-timesyncd) and step a clock that is far off (chronyc makestep): "
    "skewed clocks break HCCL timeouts, TLS and the order of the nodes' logs",
    command="timedatectl set-ntp true; chronyc makestep",
)
def test_clock_sync(host):
    sync = host.clock.sync
    evidence(sync.line)
    assert sync.synchronized is not None, (
        "no time synchronization service answered (timedatectl, chronyc, ntpstat)"
    )
    assert sync.synchronized, "the clock is not synchronized"
    # synchronised says a source was selected, not that the clock is near it: a clock being slewed back
    # from minutes off reports Leap status Normal all along
    offset, bound = host.clock_offset.offset, host.profile.clock_max_offset_s
    evidence(offset.line)
    if offset.offset_s is None:
        warn("the clock's offset was not read (no chronyc or systemd-timesyncd answered): only its sync "
             "status was judged")
    off = offset.offset_s
    assert abs(off) <= bound, (
        f"the clock is {abs(off):.3f} s {'fast' if off > 0 else 'slow'} of NTP time ({offset.tool}), "
        f"more than the profile's {bound:g} s"
    )


@check(
    "os.reboot_pending",
    title="the node owes no reboot (a driver or firmware installed and not yet loaded)",
    severity="critical",
    reads=[RebootPending],
    fix="Reboot the node to load the driver/firmware installed (re-running site.yml reboots it when "
    "ascend_common_reboot is on)",
    command="systemctl reboot",
    disruptive=True,
)
def test_reboot_pending(host):
    marker = host.reboot_pending.marker
    evidence(f"{marker.path}: {'present: ' + marker.text if marker.present else 'absent'}")
    assert not marker.present, f"{marker.path} is present: {marker.text or 'a reboot is owed'}"
