"""Parsers of the OS commands' and files' output ascend-check's own probes read (checks/resources/os.py):
`df -Pk`, the THP mode files, the sysctl loop, the training user's `ulimit`, `getent`, `getconf
GNU_LIBC_VERSION`/`ldd --version`, kernel headers, the clock (timedatectl/chronyc), the PCI parents in sysfs
and /etc/os-release. Each model is the parsed output (`GlibcOutput`); the resource of the same name without
`Output` (checks/resources/os.py) is what a check reads.

These outputs have one known shape each (the probe prints it), so any line outside it is a ParseError
naming the line, never skipped: a probe whose output changed must not read as a healthy value.
"""

from __future__ import annotations

import re

from ascend_ready.checks.parsers._common import to_int
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, numbered_lines, parser

__all__ = [
    "AccountsOutput",
    "ClockOffset",
    "ClockSync",
    "DiskUsage",
    "GlibcOutput",
    "KernelHeadersOutput",
    "Limit",
    "MachineIdentityOutput",
    "OsReleaseOutput",
    "PciParents",
    "RebootMarker",
    "SysctlValues",
    "ThpMode",
    "UserLimitsOutput",
    "parse_accounts",
    "parse_clock",
    "parse_clock_offset",
    "parse_df",
    "parse_glibc",
    "parse_kernel_headers",
    "parse_machine_identity",
    "parse_os_release",
    "parse_pci_parents",
    "parse_reboot_marker",
    "parse_sysctl",
    "parse_thp",
    "parse_user_limits",
]


def probe_lines(kind: str, text: str, *, allow_empty: bool = False) -> list[Line]:
    """The non-blank lines of a probe's output (no prompt skipping: our probes print none)."""
    out = [line for line in numbered_lines(text) if line.strip()]
    for line in out:
        if "\x00" in line:
            raise fail(kind, "binary data (NUL byte) in input", line)
    if not out and not allow_empty:
        raise fail(kind, "empty output", hint="the probe printed nothing: check that the command exists")
    return out


# ---------------------------------------------------------------- df -Pk PATH


class DiskUsage(ParsedModel):
    """`df -Pk PATH` (POSIX format): the file system holding PATH."""

    filesystem: str
    size_kb: int
    used_kb: int
    avail_kb: int
    mount: str
    line: str


@parser("df")
def parse_df(text: str) -> DiskUsage:
    kind = "df"
    lines = probe_lines(kind, text)
    if not lines[0].startswith("Filesystem"):
        raise fail(kind, "expected the 'Filesystem 1024-blocks ...' header", lines[0])
    if len(lines) != 2:
        raise fail(
            kind, "expected exactly one data line under the header", lines[2] if len(lines) > 2 else lines[0]
        )
    parts = lines[1].split()
    if len(parts) < 6:
        raise fail(kind, "expected 'FILESYSTEM SIZE USED AVAILABLE CAPACITY MOUNTPOINT'", lines[1])
    size, used, avail = (
        to_int(kind, parts[i], lines[1], what=w)
        for i, w in ((1, "1024-blocks"), (2, "Used"), (3, "Available"))
    )
    return DiskUsage(
        filesystem=parts[0],
        size_kb=size,
        used_kb=used,
        avail_kb=avail,
        mount=" ".join(parts[5:]),
        line=str(lines[1]),
    )


# ---------------------------------------------------------------- /sys/kernel/mm/transparent_hugepage/*


class ThpMode(ParsedModel):
    """`always madvise [never]`: the modes the kernel offers and the selected one."""

    modes: list[str]
    selected: str
    line: str


@parser("thp")
def parse_thp(text: str) -> ThpMode:
    kind = "thp"
    lines = probe_lines(kind, text)
    if len(lines) != 1:
        raise fail(kind, "expected one line of modes", lines[1])
    words = lines[0].split()
    selected = [w[1:-1] for w in words if w.startswith("[") and w.endswith("]")]
    if len(selected) != 1 or not re.fullmatch(r"[\w+]+", selected[0]):
        raise fail(kind, "expected exactly one [selected] mode", lines[0])
    return ThpMode(modes=[w.strip("[]") for w in words], selected=selected[0], line=lines[0].strip())


# ---------------------------------------------------------------- sysctl loop (`KEY = VALUE` lines)


class SysctlValues(ParsedModel):
    """The kernel parameters the probe read; a key the kernel lacks is absent."""

    values: dict[str, str]


@parser("sysctl")
def parse_sysctl(text: str) -> SysctlValues:
    kind = "sysctl"
    values: dict[str, str] = {}
    for line in probe_lines(kind, text, allow_empty=True):
        key, sep, value = line.partition(" = ")
        if not sep or not re.fullmatch(r"[a-z0-9_]+(?:\.[a-z0-9_]+)+", key.strip()):
            raise fail(kind, "expected 'name.of.key = value'", line)
        if key.strip() in values:
            raise fail(kind, f"{key.strip()} printed twice", line)
        values[key.strip()] = value.strip()
    return SysctlValues(values=values)


# ---------------------------------------------------------------- the training user's limits


class Limit(ParsedModel):
    """One `ulimit` pair as the login shell reports it: numbers (KiB for memlock) or `unlimited`."""

    name: str
    hard: str
    soft: str
    line: str

    def at_least(self, value: int) -> bool:
        return all(v == "unlimited" or int(v) >= value for v in (self.hard, self.soft))

    @property
    def unlimited(self) -> bool:
        return self.hard == self.soft == "unlimited"


class UserLimitsOutput(ParsedModel):
    """`user NAME` / `nofile HARD SOFT` / `memlock HARD SOFT` from the training user's login shell."""

    user: str
    nofile: Limit
    memlock: Limit


@parser("user-limits")
def parse_user_limits(text: str) -> UserLimitsOutput:
    kind = "user-limits"
    found: dict[str, Line] = {}
    for line in probe_lines(kind, text):
        word = line.split(None, 1)[0]
        if word not in ("user", "nofile", "memlock"):
            raise fail(kind, f"unknown line {word!r} (expected user, nofile or memlock)", line)
        if word in found:
            raise fail(kind, f"{word} printed twice", line)
        found[word] = line
    for word in ("user", "nofile", "memlock"):
        if word not in found:
            raise fail(kind, f"no '{word}' line", probe_lines(kind, text)[-1])
    user = found["user"].split()
    if len(user) != 2:
        raise fail(kind, "expected 'user NAME'", found["user"])
    limits = {}
    for word in ("nofile", "memlock"):
        parts = found[word].split()
        if len(parts) != 3:
            raise fail(kind, f"expected '{word} HARD SOFT'", found[word])
        for value in parts[1:]:
            if value != "unlimited" and not value.isdigit():
                raise fail(kind, f"{word} limit {value!r} is neither a number nor 'unlimited'", found[word])
        limits[word] = Limit(name=word, hard=parts[1], soft=parts[2], line=found[word].strip())
    return UserLimitsOutput(user=user[1], **limits)


# ---------------------------------------------------------------- getent passwd/group


class AccountsOutput(ParsedModel):
    """`getent passwd U...; getent group G...`: name -> its line; an account that does not exist is absent."""

    users: dict[str, str]
    groups: dict[str, str]


@parser("getent")
def parse_accounts(text: str) -> AccountsOutput:
    kind = "getent"
    users: dict[str, str] = {}
    groups: dict[str, str] = {}
    for line in probe_lines(kind, text, allow_empty=True):
        fields = line.split(":")
        if len(fields) == 7 and fields[0] and fields[2].isdigit():
            users.setdefault(fields[0], str(line))
        elif len(fields) == 4 and fields[0] and fields[2].isdigit():
            groups.setdefault(fields[0], str(line))
        else:
            raise fail(kind, "expected a passwd (7 fields) or group (4 fields) entry", line)
    return AccountsOutput(users=users, groups=groups)


# ---------------------------------------------------------------- glibc


class GlibcOutput(ParsedModel):
    """`getconf GNU_LIBC_VERSION` (`glibc 2.35`) or the first line of `ldd --version`."""

    major: int
    minor: int
    line: str


_GLIBC_RE = re.compile(r"^(?:glibc (?P<a>\d+)\.(?P<b>\d+)|ldd \(.*\) (?P<c>\d+)\.(?P<d>\d+))\b")


@parser("glibc")
def parse_glibc(text: str) -> GlibcOutput:
    kind = "glibc"
    lines = probe_lines(kind, text)
    if len(lines) != 1:
        raise fail(kind, "expected one version line", lines[1])
    match = _GLIBC_RE.match(lines[0].strip())
    if not match:
        raise fail(kind, "expected 'glibc X.Y' or 'ldd (...) X.Y' (not glibc?)", lines[0])
    major, minor = (match["a"], match["b"]) if match["a"] else (match["c"], match["d"])
    return GlibcOutput(major=int(major), minor=int(minor), line=lines[0].strip())


# ---------------------------------------------------------------- kernel headers


class KernelHeadersOutput(ParsedModel):
    """The running kernel and the header trees found for it (`kernel R` / `headers DIR`)."""

    kernel: str
    headers: list[str]


@parser("kernel-headers")
def parse_kernel_headers(text: str) -> KernelHeadersOutput:
    kind = "kernel-headers"
    kernel, headers = None, []
    for line in probe_lines(kind, text):
        word, _, rest = line.strip().partition(" ")
        if word == "kernel" and rest and kernel is None:
            kernel = rest.strip()
        elif word == "headers" and rest.startswith("/"):
            headers.append(rest.strip())
        else:
            raise fail(kind, "expected 'kernel RELEASE' once, then 'headers /DIR' lines", line)
    if kernel is None:
        raise fail(kind, "no 'kernel RELEASE' line", probe_lines(kind, text)[0])
    return KernelHeadersOutput(kernel=kernel, headers=headers)


# ---------------------------------------------------------------- clock synchronization


class ClockSync(ParsedModel):
    """What the first time tool that answered says: synchronized, not, or (None) no tool answered."""

    synchronized: bool | None
    tool: str  # timedatectl, chronyc, ntpstat, or none
    line: str


_NO_TOOL = "no time sync tool answered"


@parser("clock")
def parse_clock(text: str) -> ClockSync:
    """`timedatectl show -p NTPSynchronized`, `timedatectl status`, `chronyc tracking` or `ntpstat`."""
    kind = "clock"
    lines = probe_lines(kind, text)
    first = lines[0].strip()
    low = first.lower()
    if low.startswith(_NO_TOOL):
        if len(lines) > 1:
            raise fail(kind, "unexpected line after the no-tool message", lines[1])
        return ClockSync(synchronized=None, tool="none", line=first)
    if low.startswith("ntpsynchronized="):  # timedatectl show: exactly this line
        if len(lines) > 1:
            raise fail(kind, "unexpected line after NTPSynchronized=", lines[1])
        return ClockSync(
            synchronized=_yes_no(kind, first.split("=", 1)[1], lines[0]), tool="timedatectl", line=first
        )
    if low.startswith(("synchronised to", "synchronized to", "unsynchronised")):  # ntpstat
        for row in lines[1:]:
            if not row[:1].isspace():
                raise fail(kind, "expected an indented ntpstat detail line", row)
        return ClockSync(synchronized=not low.startswith("unsynchronised"), tool="ntpstat", line=first)
    # timedatectl status ("Key: value") or chronyc tracking ("Key    : value"): every line a key/value.
    verdict: tuple[bool, str, str] | None = None
    for row in lines:
        key, sep, value = row.strip().partition(":")
        if not sep or not key.strip():
            raise fail(kind, "expected 'Key: value' (timedatectl status, chronyc tracking)", row)
        key = key.strip().lower()
        if key in ("system clock synchronized", "ntp synchronized"):
            verdict = (_yes_no(kind, value, row), "timedatectl", row.strip())
        elif key == "leap status":
            verdict = (value.strip().lower() == "normal", "chronyc", row.strip())
    if verdict is None:
        raise fail(kind, "no NTPSynchronized / 'System clock synchronized' / 'Leap status' line", lines[0])
    return ClockSync(synchronized=verdict[0], tool=verdict[1], line=verdict[2])


def _yes_no(kind: str, value: str, line: Line) -> bool:
    value = value.strip().lower()
    if value not in ("yes", "no"):
        raise fail(kind, f"expected yes or no, got {value!r}", line)
    return value == "yes"


# ---------------------------------------------------------------- PCI parents (/sys/devices hierarchy)


class PciParents(ParsedModel):
    """PCI function -> the directory above it in /sys/devices (its upstream port, or `pci0000:00`)."""

    parents: dict[str, str]


_BDF = r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]"
_PARENT_RE = re.compile(rf"^(?P<bdf>{_BDF}) (?P<parent>{_BDF}|pci[0-9a-f]{{4}}:[0-9a-f]{{2}})$")


@parser("pci-parents")
def parse_pci_parents(text: str) -> PciParents:
    kind = "pci-parents"
    parents: dict[str, str] = {}
    for line in probe_lines(kind, text, allow_empty=True):
        match = _PARENT_RE.match(line.strip().lower())
        if not match:
            raise fail(kind, "expected 'BDF PARENT' (e.g. '0000:01:00.0 0000:00:00.0')", line)
        parents[match["bdf"]] = match["parent"]
    return PciParents(parents=parents)


# ---------------------------------------------------------------- /etc/os-release


class OsReleaseOutput(ParsedModel):
    """/etc/os-release (os-release(5)): `KEY=value` lines, values optionally quoted."""

    id: str
    version_id: str
    pretty_name: str | None
    fields: dict[str, str]

    @property
    def label(self) -> str:
        return f"{self.id} {self.version_id}"


_OS_RELEASE_LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


@parser("os-release")
def parse_os_release(text: str) -> OsReleaseOutput:
    """Parse os-release(5); ID and VERSION_ID are required (every supported distribution sets them)."""
    kind = "os-release"
    fields: dict[str, str] = {}
    for line in probe_lines(kind, text):
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        m = _OS_RELEASE_LINE.match(stripped)
        if m is None:
            raise fail(kind, "expected KEY=value", line)
        value = m[2]
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif value[:1] in ("\"", "'"):
            raise fail(kind, "unterminated quoted value", line)
        fields[m[1]] = value
    missing = [k for k in ("ID", "VERSION_ID") if k not in fields]
    if missing:
        raise fail(kind, f"no {' / '.join(missing)} line: not a whole os-release file",
                   hint="the file was cut or is not /etc/os-release")
    return OsReleaseOutput(id=fields["ID"], version_id=fields["VERSION_ID"],
                           pretty_name=fields.get("PRETTY_NAME"), fields=fields)


# ---------------------------------------------------------------- a reboot owed


class RebootMarker(ParsedModel):
    """ascend-ready's owed-reboot marker (the ascend_common role writes it before a driver or firmware
    installer runs; the reboot clears it): its path, whether it is there, and what it says."""

    path: str
    present: bool
    text: str = ""


@parser("reboot-marker")
def parse_reboot_marker(text: str) -> RebootMarker:
    """The reboot-marker probe: `marker PATH` then the file's lines, or `no marker PATH` alone."""
    kind = "reboot-marker"
    lines = probe_lines(kind, text)
    head = lines[0].strip()
    if head.startswith("no marker /"):
        if len(lines) > 1:
            raise fail(kind, "unexpected line after 'no marker PATH'", lines[1])
        return RebootMarker(path=head.split(" ", 2)[2], present=False)
    if head.startswith("marker /"):
        body = " ".join(line.strip() for line in lines[1:])
        return RebootMarker(path=head.split(" ", 1)[1], present=True, text=body)
    raise fail(kind, "expected 'marker PATH' or 'no marker PATH'", lines[0])


# ---------------------------------------------------------------- which machine


_HEX_ID = re.compile(r"[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class MachineIdentityOutput(ParsedModel):
    """/etc/machine-id (32 hex digits) and /proc/sys/kernel/random/boot_id (a UUID); None: not read."""

    machine_id: str | None
    boot_id: str | None

    @property
    def key(self) -> tuple[str, str] | None:
        """What one running machine has and no other: both ids, or None where either was not read."""
        return (self.machine_id, self.boot_id) if self.machine_id and self.boot_id else None


@parser("machine-identity")
def parse_machine_identity(text: str) -> MachineIdentityOutput:
    """The machine-identity probe: `machine-id ID` then `boot-id UUID` (an empty value: not readable)."""
    kind = "machine-identity"
    lines = probe_lines(kind, text)
    values: dict[str, str | None] = {}
    for line, label in zip(lines, ("machine-id", "boot-id"), strict=False):
        key, _, value = line.strip().partition(" ")
        if key != label:
            raise fail(kind, f"expected '{label} VALUE'", line)
        value = value.strip().lower()
        if value and not _HEX_ID.fullmatch(value):
            raise fail(kind, f"{label} is not an id (hex digits)", line)
        values[label] = value or None
    if len(lines) != 2:
        extra = lines[2] if len(lines) > 2 else lines[-1]
        raise fail(kind, "expected two lines, 'machine-id ID' and 'boot-id UUID'", extra)
    return MachineIdentityOutput(machine_id=values["machine-id"], boot_id=values["boot-id"])


# ---------------------------------------------------------------- clock offset


class ClockOffset(ParsedModel):
    """How far the system clock is from NTP time (seconds, + fast / - slow), from the first tool that
    answered; None: no tool that reports an offset answered."""

    offset_s: float | None
    tool: str  # chronyc, timedatectl, or none
    line: str


_NO_OFFSET = "no offset source answered"
#: chronyc tracking (chrony 4.x doc/chronyc.adoc "tracking"): "System time     : 0.000001501 seconds slow of
#: NTP time" (a real capture: zabbix-tooling/zabbix-agent-extensions#39)
_CHRONY_SYSTEM_TIME = re.compile(r"^System time\s*:\s*([0-9.]+) seconds (fast|slow) of NTP time$")
#: systemd's format_timespan units, as timedatectl timesync-status prints Offset ("+1.466ms", "-10min 12s")
_SPAN_UNITS = {"y": 31557600.0, "month": 2629800.0, "w": 604800.0, "d": 86400.0, "h": 3600.0,
               "min": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}
_SPAN_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(y|month|w|d|h|min|ms|us|\u00b5s|ns|s)")


def _timespan_s(kind: str, text: str, line: Line) -> float:
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-").strip()
    parts = body.split()
    total = 0.0
    for part in parts:
        m = _SPAN_PART.fullmatch(part)
        if not m:
            raise fail(kind, f"offset {text!r} is not a systemd time span (e.g. +1.466ms, -10min 12s)", line)
        total += float(m[1]) * _SPAN_UNITS[m[2]]
    if not parts:
        raise fail(kind, "an empty Offset", line)
    return sign * total


@parser("clock-offset")
def parse_clock_offset(text: str) -> ClockOffset:
    """`chronyc tracking` (its System time line) or `timedatectl timesync-status` (its Offset line)."""
    kind = "clock-offset"
    lines = probe_lines(kind, text)
    first = lines[0].strip()
    if first.lower().startswith(_NO_OFFSET):
        if len(lines) > 1:
            raise fail(kind, "unexpected line after the no-source message", lines[1])
        return ClockOffset(offset_s=None, tool="none", line=first)
    found: ClockOffset | None = None
    for row in lines:
        key, sep, value = row.strip().partition(":")
        if not sep or not key.strip():
            raise fail(kind, "expected 'Key: value' (chronyc tracking, timedatectl timesync-status)", row)
        key = key.strip()
        if key == "System time":
            m = _CHRONY_SYSTEM_TIME.match(row.strip())
            if not m:
                raise fail(kind, "expected 'System time : N seconds fast|slow of NTP time'", row)
            seconds = float(m[1]) * (1 if m[2] == "fast" else -1)
            found = ClockOffset(offset_s=seconds, tool="chronyc", line=row.strip())
        elif key == "Offset":
            found = ClockOffset(offset_s=_timespan_s(kind, value.strip(), row), tool="timedatectl",
                                line=row.strip())
    if found is None:
        raise fail(kind, "no 'System time' (chronyc tracking) or 'Offset' (timedatectl timesync-status) line",
                   lines[0])
    return found
