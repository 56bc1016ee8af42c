"""OS resources: THP, kernel parameters, the training user's limits, accounts, glibc, kernel headers,
free space and the clock, each with the probe it runs (parsed by checks/parsers/os_commands.py).
"""

from __future__ import annotations

import shlex
from functools import cached_property

from ascend_ready.checks.parsers import os_commands as parsed
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.resources.base import Resource, probe, profile_probe

__all__ = [
    "Accounts",
    "Clock",
    "ClockOffset",
    "DiskFree",
    "Glibc",
    "KernelHeaders",
    "OsRelease",
    "RebootPending",
    "Shm",
    "Sysctl",
    "Thp",
    "UserLimits",
]

THP_ENABLED = probe("thp-enabled", argv=("cat", "/sys/kernel/mm/transparent_hugepage/enabled"))
THP_DEFRAG = probe("thp-defrag", argv=("cat", "/sys/kernel/mm/transparent_hugepage/defrag"))
SYSCTL = probe(
    "sysctl",
    # As `sysctl NAME` prints; a key the kernel lacks is left out. `cat`, not `read`: dash reads
    # a byte at a time, and integer /proc/sys files answer a read at an offset with EOF.
    shell=(
        "for k in kernel.numa_balancing vm.max_map_count net.ipv4.ip_local_reserved_ports; do "
        "f=/proc/sys; r=$k; "
        "while :; do f=$f/${r%%.*}; case $r in *.*) r=${r#*.} ;; *) break ;; esac; done; "
        'v=$(cat "$f" 2>/dev/null) && echo "$k = $v"; done'
    ),
)
USER_LIMITS = probe(
    "user-limits",
    shell=(
        'echo "user $(id -un)"; echo "nofile $(ulimit -H -n) $(ulimit -S -n)"; '
        'echo "memlock $(ulimit -H -l) $(ulimit -S -l)"'
    ),
    as_user=True,
    background=True,
    description="the training user's limits in a login shell",
)


@profile_probe("accounts")
def ACCOUNTS(profile: HardwareProfile) -> dict:
    q = shlex.quote
    return {
        "shell": (
            f"getent passwd {q(profile.driver_user)} {q(profile.training_user)}; "
            f"getent group {q(profile.driver_user)}; exit 0"
        )
    }


GLIBC = probe("glibc", shell="getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version | head -n 1")
KERNEL_HEADERS = probe(
    "kernel-headers",
    shell=(
        'r=$(uname -r); echo "kernel $r"; '
        "for d in /lib/modules/$r/build /usr/src/kernels/$r /usr/src/linux-headers-$r; "
        'do [ -e "$d/Makefile" ] && echo "headers $d"; done; exit 0'
    ),
)


@profile_probe("disk-free")
def DISK_FREE(profile: HardwareProfile) -> dict:
    return {"argv": ("df", "-Pk", profile.checkpoint_dir)}


SHM = probe("shm", argv=("df", "-Pk", "/dev/shm"))
OS_RELEASE = probe("os-release", argv=("cat", "/etc/os-release"), description="the distribution and version")
# The first tool that answers wins; timedatectl fails without systemd (containers).
CLOCK = probe(
    "clock",
    shell=(
        "timedatectl show -p NTPSynchronized 2>/dev/null && exit 0; "
        "timedatectl status 2>/dev/null && exit 0; "
        "command -v chronyc >/dev/null 2>&1 && { chronyc tracking; exit $?; }; "
        "command -v ntpstat >/dev/null 2>&1 && { ntpstat; exit $?; }; "
        "echo 'no time sync tool answered (timedatectl, chronyc, ntpstat)'"
    ),
)


# The offset: chronyd's own estimate, else systemd-timesyncd's (timedatectl show -p NTPSynchronized has none).
CLOCK_OFFSET = probe(
    "clock-offset",
    shell=(
        "command -v chronyc >/dev/null 2>&1 && { chronyc tracking; exit $?; }; "
        "timedatectl timesync-status 2>/dev/null && exit 0; "
        "echo 'no offset source answered (chronyc tracking, timedatectl timesync-status)'"
    ),
    description="how far the system clock is from NTP time",
)

#: the playbooks' owed-reboot marker (roles/ascend_common, ascend_common_reboot_marker's default)
REBOOT_MARKER = "/run/ascend-ready.reboot-required"
REBOOT_PENDING = probe(
    "reboot-marker",
    shell=(
        f"f={REBOOT_MARKER}; "
        'if [ -e "$f" ]; then echo "marker $f"; cat "$f"; echo; else echo "no marker $f"; fi'
    ),
    description="the owed-reboot marker the playbooks write before a driver or firmware installer runs",
)


class Thp(Resource):
    """Transparent hugepages: the selected `enabled` and `defrag` modes."""

    probes = (THP_ENABLED, THP_DEFRAG)

    def mode(self, which: str) -> parsed.ThpMode:
        """`enabled` or `defrag`."""
        return parsed.parse_thp(self.host.stdout(f"thp-{which}"))


class Sysctl(Resource):
    """kernel.numa_balancing, vm.max_map_count, net.ipv4.ip_local_reserved_ports (as `sysctl` prints)."""

    probes = (SYSCTL,)

    @cached_property
    def values(self) -> parsed.SysctlValues:
        return parsed.parse_sysctl(self.host.stdout("sysctl"))

    def get(self, key: str) -> str | None:
        """The value, or None when the kernel has no such parameter."""
        return self.values.values.get(key)


class UserLimits(Resource):
    """The training user's nofile/memlock limits in its login shell, and the user they were read as."""

    probes = (USER_LIMITS,)

    @cached_property
    def limits(self) -> parsed.UserLimitsOutput:
        return parsed.parse_user_limits(self.host.stdout("user-limits"))


class Accounts(Resource):
    """The driver's and the training user's accounts (getent)."""

    probes = (ACCOUNTS,)

    @cached_property
    def accounts(self) -> parsed.AccountsOutput:
        return parsed.parse_accounts(self.host.stdout("accounts"))


class Glibc(Resource):
    """The C library version."""

    probes = (GLIBC,)

    @cached_property
    def version(self) -> parsed.GlibcOutput:
        return parsed.parse_glibc(self.host.stdout("glibc"))


class KernelHeaders(Resource):
    """The running kernel and the header trees installed for it."""

    probes = (KERNEL_HEADERS,)

    @cached_property
    def headers(self) -> parsed.KernelHeadersOutput:
        return parsed.parse_kernel_headers(self.host.stdout("kernel-headers"))


class _Df(Resource):
    probe_id = ""

    @cached_property
    def usage(self) -> parsed.DiskUsage:
        return parsed.parse_df(self.host.stdout(self.probe_id))

    @property
    def size_gb(self) -> float:
        return self.usage.size_kb / 2**20

    @property
    def avail_gb(self) -> float:
        return self.usage.avail_kb / 2**20


class DiskFree(_Df):
    """`df -Pk` of the checkpoint directory."""

    probes = (DISK_FREE,)
    probe_id = "disk-free"


class Shm(_Df):
    """`df -Pk /dev/shm`."""

    probes = (SHM,)
    probe_id = "shm"


class Clock(Resource):
    """Clock synchronization from timedatectl, chronyc or ntpstat (the first that answers)."""

    probes = (CLOCK,)

    @cached_property
    def sync(self) -> parsed.ClockSync:
        # ntpstat exits 1 when unsynchronised and 2 when it cannot tell: answers, not failures
        return parsed.parse_clock(self.host.stdout("clock", ok_rc=(0, 1, 2)))


class ClockOffset(Resource):
    """The system clock's offset from NTP time, from chronyc or systemd-timesyncd (the first that answers)."""

    probes = (CLOCK_OFFSET,)

    @cached_property
    def offset(self) -> parsed.ClockOffset:
        return parsed.parse_clock_offset(self.host.stdout("clock-offset"))


class OsRelease(Resource):
    """The distribution (/etc/os-release): its ID and VERSION_ID."""

    probes = (OS_RELEASE,)

    @cached_property
    def release(self) -> parsed.OsReleaseOutput:
        return parsed.parse_os_release(self.host.stdout("os-release"))


class RebootPending(Resource):
    """Whether the node owes a reboot: the marker the playbooks write before installing a driver or
    firmware (a reboot clears it, /run being a tmpfs)."""

    probes = (REBOOT_PENDING,)

    @cached_property
    def marker(self) -> parsed.RebootMarker:
        return parsed.parse_reboot_marker(self.host.stdout("reboot-marker"))
