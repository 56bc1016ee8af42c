"""Resources: one small class per thing a check reads, built from a host's snapshot through the parsers.

Checks reach them as `host.npu_smi`, `host.pcie_links`, `host.hccn`... Vendor and driver-version
differences (sysfs vs `lspci -vvv`, toolkit layouts) are handled here, never in a check.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from ascend_ready.checks.parsers import get_parser
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.snapshot import HostSnapshot, ProbeResult
from ascend_ready.errors import AscendReadyError, ParseError

__all__ = ["Host", "ProbeFailed"]


class ProbeFailed(AscendReadyError):
    """A probe gave no usable output (timed out, not installed, not permitted): its checks error out."""

    exit_code = 1


@cache
def _parser(kind: str):
    return get_parser(kind)


def lines_with(text: str, *needles: str) -> list[str]:
    """The lines of `text` that contain any of `needles` (case-insensitive): evidence for a verdict."""
    lowered = [n.lower() for n in needles if n]
    return [line for line in text.splitlines() if any(n in line.lower() for n in lowered)]


_MISSING = ("No such file", "not found", "cannot access")


class Host:
    """A node as its snapshot shows it, with the profile it is judged against."""

    def __init__(self, snapshot: HostSnapshot, profile: HardwareProfile):
        self.snapshot = snapshot
        self.profile = profile
        self.name = snapshot.name
        self._parsed: dict[tuple[str, str], Any] = {}

    def __repr__(self) -> str:
        return f"Host({self.name!r})"

    # ------------------------------------------------------------ raw access

    def result(self, probe_id: str) -> ProbeResult:
        """The probe's result; a probe that was not collected or timed out raises ProbeFailed."""
        res = self.snapshot.probes.get(probe_id)
        if res is None:
            raise ProbeFailed(
                f"no output of probe {probe_id!r} in the snapshot of {self.name}",
                hint="collect again with this ascend-check version",
            )
        if res.timed_out:
            limit = f" after {res.timeout_s:g} s" if res.timeout_s else ""
            why = f" ({res.stderr.strip()})" if res.rc == -1 and res.stderr.strip() else ""
            raise ProbeFailed(
                f"`{res.command}` timed out{limit}{why}",
                hint="the tool hangs: check the driver (dmesg) before anything else",
            )
        return res

    def stdout(self, probe_id: str, *, ok_rc: tuple[int, ...] = (0,)) -> str:
        """stdout of a probe that must succeed; otherwise ProbeFailed naming the command and its error."""
        res = self.result(probe_id)
        if res.rc not in ok_rc:
            err = (res.stderr.strip() or res.stdout.strip()).splitlines()
            hint = "the command is not installed or not on PATH" if res.rc == 127 else None
            raise ProbeFailed(f"`{res.command}` exited {res.rc}" + (f": {err[-1]}" if err else ""), hint=hint)
        return res.stdout

    def file(self, probe_id: str) -> str | None:
        """Contents a `cat`-like probe read, or None when the file does not exist."""
        res = self.result(probe_id)
        if res.rc != 0 and any(m in res.stderr for m in _MISSING):
            return None
        return self.stdout(probe_id)

    def instances(self, base: str) -> dict[str, ProbeResult]:
        """Per-device results of a foreach probe: key (`3`, `0.1`) -> result."""
        marker = self.snapshot.probes.get(base)
        if marker is not None:  # the batch stopped before the loop: the whole probe failed
            self.result(base)
        prefix = base + "."
        return {
            pid[len(prefix) :]: res for pid, res in self.snapshot.probes.items() if pid.startswith(prefix)
        }

    def parse(self, kind: str, probe_id: str, text: str | None = None) -> Any:
        """Parsed output of a probe (cached); ParseError propagates and fails the check."""
        key = (kind, probe_id)
        if key not in self._parsed:
            self._parsed[key] = _parser(kind)(self.stdout(probe_id) if text is None else text)
        return self._parsed[key]

    def instance_stdout(self, base: str, key: str) -> str:
        return self.stdout(f"{base}.{key}")

    # ------------------------------------------------------------ resources

    @cached_property
    def npu_smi(self) -> NpuSmi:
        return NpuSmi(self)

    @cached_property
    def npu_health(self) -> dict[tuple[int, int], Any]:
        """(npu id, chip id) -> NpuSmiHealth from `npu-smi info -t health -i N -c C`."""
        out = {}
        for key in sorted(self.instances("npu-smi-health"), key=_numeric_key):
            npu, chip = (int(x) for x in key.split("."))
            out[(npu, chip)] = self.parse("npu-smi-health", f"npu-smi-health.{key}")
        return out

    @cached_property
    def davinci_ids(self) -> list[int]:
        """N of every /dev/davinciN (device logic ids)."""
        names = self.stdout("dev-davinci").split()
        return sorted(int(m[1]) for n in names if (m := re.fullmatch(r"davinci(\d+)", n)))

    @cached_property
    def pci_npus(self) -> list[Any]:
        """Ascend NPU functions `lspci` lists (Huawei, processing-accelerator class)."""
        return [d for d in self.parse("lspci", "lspci").devices if d.is_ascend_npu]

    @cached_property
    def pcie_links(self) -> list[PcieLink]:
        return pcie_links(self)

    @cached_property
    def aer_counters(self) -> dict[str, dict[str, int]]:
        """NPU function -> its non-zero AER totals in sysfs (`aer_dev_correctable: TOTAL_ERR_COR 3`)."""
        sysfs = _sysfs(self)
        out: dict[str, dict[str, int]] = {}
        for bdf, dev in sysfs.devices.items() if sysfs is not None else ():
            if not (dev.class_id or "").startswith("12"):
                continue
            totals = {
                f: n
                for f, counters in dev.aer.items()
                for k, n in counters.items()
                if k.startswith("TOTAL_") and n
            }
            if totals:
                out[bdf] = totals
        return out

    @cached_property
    def kernel_log(self) -> Any:
        return self.parse("dmesg", "dmesg")

    @cached_property
    def hccn(self) -> Hccn:
        return Hccn(self)

    @cached_property
    def os(self) -> Os:
        return Os(self)

    @cached_property
    def versions(self) -> Versions:
        return Versions(self)


def _numeric_key(key: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else -1 for x in key.split("."))


# ---------------------------------------------------------------- NPU


@dataclass
class Chip:
    """One chip row of `npu-smi info`, with its NPU id."""

    npu_id: int
    chip_id: int
    name: str
    health: str
    temp_c: int | None
    hbm_used_mb: int | None
    hbm_total_mb: int | None
    bus_id: str | None
    evidence: list[str]

    @property
    def label(self) -> str:
        return f"NPU {self.npu_id} chip {self.chip_id}"


_BUS_RE = re.compile(r"\b[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\b")


class NpuSmi:
    """`npu-smi info` (main table) and `npu-smi info -l`."""

    def __init__(self, host: Host):
        self._host = host
        self.text = host.stdout("npu-smi-info")
        self.info = host.parse("npu-smi-info", "npu-smi-info")

    @property
    def npu_ids(self) -> list[int]:
        return [n.id for n in self.info.npus]

    @cached_property
    def _rows_by_bus(self) -> dict[str, list[str]]:
        """Bus id (lower case) -> the table rows of its chip: the NPU row above and the chip row."""
        out: dict[str, list[str]] = {}
        lines = self.text.splitlines()
        for i, line in enumerate(lines):
            for bus in _BUS_RE.findall(line):
                above = lines[i - 1] if i and not lines[i - 1].startswith("+") else None
                out.setdefault(bus.lower(), []).extend(x for x in (above, line) if x)
        return out

    @cached_property
    def chips(self) -> list[Chip]:
        out = []
        for npu in self.info.npus:
            for c in npu.chips:
                rows = self._rows_by_bus.get(c.bus_id.lower(), []) if c.bus_id else []
                out.append(
                    Chip(
                        npu_id=npu.id,
                        chip_id=c.chip_id,
                        name=c.name,
                        health=c.health,
                        temp_c=c.temp_c,
                        hbm_used_mb=c.hbm_used_mb,
                        hbm_total_mb=c.hbm_total_mb,
                        bus_id=c.bus_id.lower() if c.bus_id else None,
                        evidence=rows,
                    )
                )
        return out

    @property
    def processes(self) -> list[Any]:
        return list(self.info.processes)

    def npu_of_bus(self) -> dict[str, int]:
        """PCI BDF (lower case) -> NPU id."""
        return {c.bus_id: c.npu_id for c in self.chips if c.bus_id}


# ---------------------------------------------------------------- PCIe


@dataclass
class PcieLink:
    """An NPU function's PCIe link: what it trained to, what it and its upstream port can do."""

    bdf: str
    npu_id: int | None
    speed_gts: float | None
    width: int | None
    max_speed_gts: float | None
    max_width: int | None
    port_bdf: str | None
    port_max_speed_gts: float | None
    port_max_width: int | None
    source: str
    evidence: list[str] = field(default_factory=list)

    @property
    def slot_speed_gts(self) -> float | None:
        """The speed the slot can give: the lower of the device's and its upstream port's capability."""
        caps = [s for s in (self.max_speed_gts, self.port_max_speed_gts) if s]
        return min(caps) if caps else None

    @property
    def label(self) -> str:
        npu = f" (NPU {self.npu_id})" if self.npu_id is not None else ""
        return f"{self.bdf}{npu}"


def _npu_of_bus(host: Host) -> dict[str, int]:
    try:
        return host.npu_smi.npu_of_bus()
    except (ProbeFailed, ParseError):
        return {}  # the link is judged without the NPU id; the npu.* checks report npu-smi itself


def pcie_links(host: Host) -> list[PcieLink]:
    """From sysfs where the kernel exposes link attributes (4.13+), else from `lspci -vvv`."""
    npu_of = _npu_of_bus(host)
    parents = _topology(host)
    sysfs = _sysfs(host)
    if sysfs is not None:
        links = []
        by_bdf: dict[str, list[str]] = {}
        for line in host.stdout("sysfs-pci-link").splitlines():
            parts = line.split("/")
            if len(parts) > 5:
                by_bdf.setdefault(parts[5].lower(), []).append(line)
        for bdf, dev in sysfs.devices.items():
            if not (dev.class_id or "").startswith("12"):
                continue
            port = sysfs.devices.get(parents.get(bdf, ""))
            links.append(
                PcieLink(
                    bdf=bdf,
                    npu_id=npu_of.get(bdf),
                    speed_gts=dev.current_link_speed_gts,
                    width=dev.current_link_width,
                    max_speed_gts=dev.max_link_speed_gts,
                    max_width=dev.max_link_width,
                    port_bdf=port.bdf if port else None,
                    port_max_speed_gts=port.max_link_speed_gts if port else None,
                    port_max_width=port.max_link_width if port else None,
                    source="sysfs",
                    evidence=[line for line in by_bdf.get(bdf, []) if "_link_" in line]
                    + [line for line in by_bdf.get(port.bdf if port else "", []) if "/max_link_" in line],
                )
            )
        return links
    vvv = host.parse("lspci-vvv", "lspci-vvv")
    by_bdf = {d.device.bdf: d for d in vvv.devices}
    links = []
    for d in vvv.devices:
        if not d.device.is_ascend_npu:
            continue
        port = by_bdf.get(parents.get(d.device.bdf, ""))
        links.append(
            PcieLink(
                bdf=d.device.bdf,
                npu_id=npu_of.get(d.device.bdf),
                speed_gts=d.speed_gts,
                width=d.width,
                max_speed_gts=d.cap_speed_gts,
                max_width=d.cap_width,
                port_bdf=port.device.bdf if port else None,
                port_max_speed_gts=port.cap_speed_gts if port else None,
                port_max_width=port.cap_width if port else None,
                source="lspci -vvv",
                evidence=[f"{d.device.bdf}: {line.strip()}" for line in d.evidence]
                + (
                    [f"{port.device.bdf}: {line.strip()}" for line in port.evidence if "LnkCap" in line]
                    if port
                    else []
                ),
            )
        )
    return links


def _sysfs(host: Host) -> Any | None:
    """Parsed sysfs links, or None when this kernel has no link attributes (fall back to lspci)."""
    res = host.snapshot.probes.get("sysfs-pci-link")
    if res is None or res.timed_out or not res.stdout.strip():
        return None
    parsed = host.parse("sysfs-link", "sysfs-pci-link")
    npus = [d for d in parsed.devices.values() if (d.class_id or "").startswith("12")]
    if not npus or all(d.max_link_speed_gts is None and not d.link_down for d in npus):
        return None
    return parsed


def _topology(host: Host) -> dict[str, str]:
    """PCI function -> its upstream port (parent directory in /sys/devices)."""
    res = host.snapshot.probes.get("pci-topology")
    if res is None or res.timed_out or res.rc != 0:
        return {}
    out = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0].lower()] = parts[1].lower()
    return out


# ---------------------------------------------------------------- HCCL device NICs


@dataclass
class DeviceNic:
    """One device's RoCE port as hccn_tool reports it."""

    device_id: int
    link: str | None = None
    net_health: str | None = None
    net_healthy: bool | None = None
    address: str | None = None
    netmask: str | None = None
    tls_enabled: bool | None = None
    evidence: list[str] = field(default_factory=list)


class Hccn:
    """`hccn_tool -i N -link/-net_health/-ip/-tls -g` per device, and `/etc/hccn.conf`."""

    def __init__(self, host: Host):
        self._host = host

    def _per_device(self, base: str, kind: str, ok_rc: tuple[int, ...] = (0,)) -> dict[int, tuple[Any, str]]:
        out = {}
        for key in sorted(self._host.instances(base), key=_numeric_key):
            text = self._host.stdout(f"{base}.{key}", ok_rc=ok_rc)
            out[int(key)] = (self._host.parse(kind, f"{base}.{key}", text), text)
        return out

    @cached_property
    def devices(self) -> dict[int, DeviceNic]:
        """Device id -> NIC facts, for the device ids the node's /dev/davinciN show."""
        return {d: DeviceNic(device_id=d) for d in self._host.davinci_ids}

    def _fill(self, base: str, kind: str, setter, ok_rc: tuple[int, ...] = (0,)) -> dict[int, DeviceNic]:
        devs = self.devices
        for dev_id, (parsed, text) in self._per_device(base, kind, ok_rc).items():
            nic = devs.setdefault(dev_id, DeviceNic(device_id=dev_id))
            setter(nic, parsed)
            nic.evidence.extend(f"[device {dev_id}] {line}" for line in text.splitlines() if line.strip())
        return devs

    def links(self) -> dict[int, DeviceNic]:
        return self._fill("hccn-link", "hccn-link", lambda n, p: setattr(n, "link", p.status))

    def net_health(self) -> dict[int, DeviceNic]:
        def put(n: DeviceNic, p: Any) -> None:
            n.net_health, n.net_healthy = p.status, p.healthy

        return self._fill("hccn-net-health", "hccn-net-health", put)

    def ips(self) -> dict[int, DeviceNic]:
        def put(n: DeviceNic, p: Any) -> None:
            n.address, n.netmask = p.address, p.netmask

        # "Get ipconf failed, because no ip was preset there!" exits 1: a fact (no IP), not a failed probe.
        return self._fill("hccn-ip", "hccn-ip", put, ok_rc=(0, 1))

    def tls(self) -> dict[int, DeviceNic]:
        return self._fill("hccn-tls", "hccn-tls", lambda n, p: setattr(n, "tls_enabled", p.tls_enabled))

    @cached_property
    def conf_text(self) -> str | None:
        return self._host.file("hccn-conf")

    @cached_property
    def conf(self) -> Any | None:
        """Parsed /etc/hccn.conf, or None when the file does not exist."""
        text = self.conf_text
        return None if text is None else self._host.parse("hccn-conf", "hccn-conf", text)

    def pings(self) -> dict[int, tuple[Any, str]]:
        return self._per_device("hccn-ping", "hccn-ping", ok_rc=(0, 1))


def same_subnet(address: str, netmask: str, other: str) -> bool:
    net = ipaddress.ip_network(f"{address}/{netmask}", strict=False)
    return ipaddress.ip_address(other) in net


# ---------------------------------------------------------------- OS


@dataclass
class DiskFree:
    path: str
    mount: str
    size_gb: float
    avail_gb: float
    line: str


def parse_df(text: str, what: str) -> DiskFree:
    """`df -Pk PATH` (POSIX format): one header and one data line."""
    rows = [line for line in text.splitlines() if line.strip()]
    if len(rows) < 2 or not rows[0].startswith("Filesystem"):
        raise ParseError(
            "df",
            f"expected a 'Filesystem ...' header and a data line for {what}",
            line_no=1,
            line=rows[0] if rows else "",
        )
    parts = rows[-1].split()
    try:
        size_k, avail_k = int(parts[1]), int(parts[3])
    except (IndexError, ValueError):
        raise ParseError(
            "df", "expected numeric 1024-blocks and Available columns", line_no=len(rows), line=rows[-1]
        ) from None
    return DiskFree(
        path=what, mount=parts[-1], size_gb=size_k / 2**20, avail_gb=avail_k / 2**20, line=rows[-1]
    )


@dataclass
class Limit:
    name: str
    hard: str
    soft: str
    line: str

    def at_least(self, value: int) -> bool:
        return all(v == "unlimited" or (v.isdigit() and int(v) >= value) for v in (self.hard, self.soft))

    @property
    def unlimited(self) -> bool:
        return self.hard == self.soft == "unlimited"


class Os:
    """Kernel knobs, limits, accounts, libraries and clocks of the node."""

    def __init__(self, host: Host):
        self._host = host

    def thp(self, which: str) -> tuple[str, str]:
        """(selected mode, the raw line) of THP `enabled` or `defrag` (`always madvise [never]`)."""
        text = self._host.stdout(f"thp-{which}").strip()
        match = re.search(r"\[(\w[\w+]*)\]", text)
        if not match:
            raise ParseError(f"thp-{which}", "no [selected] mode", line_no=1, line=text)
        return match[1], text

    @cached_property
    def sysctl(self) -> dict[str, str]:
        out = {}
        for line in self._host.stdout("sysctl").splitlines():
            key, sep, value = line.partition(" = ")
            if sep:
                out[key.strip()] = value.strip()
        return out

    @cached_property
    def limits(self) -> dict[str, Limit]:
        """The training user's nofile/memlock limits in its login shell, and the user they were read as."""
        out = {}
        for line in self._host.stdout("user-limits").splitlines():
            parts = line.split()
            if parts and parts[0] in ("nofile", "memlock"):
                if len(parts) != 3:
                    raise ParseError("user-limits", "expected 'NAME HARD SOFT'", line=line)
                out[parts[0]] = Limit(parts[0], parts[1], parts[2], line)
            elif parts and parts[0] == "user" and len(parts) == 2:
                out["user"] = Limit("user", parts[1], parts[1], line)
        return out

    @cached_property
    def accounts(self) -> tuple[set[str], set[str], list[str]]:
        """(users, groups, raw lines) of the driver and training accounts from getent."""
        users, groups, lines = set(), set(), []
        for line in self._host.stdout("accounts").splitlines():
            fields = line.split(":")
            lines.append(line)
            if len(fields) == 7:
                users.add(fields[0])
            elif len(fields) == 4:
                groups.add(fields[0])
        return users, groups, lines

    @cached_property
    def glibc(self) -> tuple[tuple[int, int], str]:
        text = self._host.stdout("glibc").strip()
        match = re.search(r"(\d+)\.(\d+)", text)
        if not match:
            raise ParseError("glibc", "no glibc version", line_no=1, line=text)
        return (int(match[1]), int(match[2])), text

    @cached_property
    def kernel_headers(self) -> tuple[str, list[str]]:
        kernel, headers = "", []
        for line in self._host.stdout("kernel-headers").splitlines():
            word, _, rest = line.partition(" ")
            if word == "kernel":
                kernel = rest.strip()
            elif word == "headers":
                headers.append(rest.strip())
        return kernel, headers

    def disk(self, probe_id: str, path: str) -> DiskFree:
        return parse_df(self._host.stdout(probe_id), path)

    @cached_property
    def clock(self) -> tuple[bool | None, list[str]]:
        """(synchronized?, evidence) from timedatectl or chronyc; None when neither says."""
        text = self._host.stdout("clock", ok_rc=(0, 1, 2))  # ntpstat: 1 unsynchronised, 2 unknown
        lines = text.splitlines()
        for line in lines:
            low = line.strip().lower()
            if low.startswith(("ntpsynchronized=", "system clock synchronized:", "ntp synchronized:")):
                value = low.split("=" if "=" in low else ":", 1)[1].strip()
                return value == "yes", [line.strip()]
            if low.startswith("leap status"):
                return low.split(":", 1)[1].strip() == "normal", [line.strip()]
            if low.startswith("no time sync tool"):
                return None, [line.strip()]
            if low.startswith(("synchronised to", "synchronized to")):  # ntpstat
                return True, [line.strip()]
            if low.startswith("unsynchronised"):
                return False, [line.strip()]
        raise ParseError(
            "clock",
            "no NTPSynchronized / 'System clock synchronized' / 'Leap status' line",
            line=lines[0] if lines else "",
        )


# ---------------------------------------------------------------- versions


@dataclass
class Distribution:
    name: str
    version: str
    tags: list[str]
    location: str


class Versions:
    """Installed driver, firmware, CANN components and the training Python's packages."""

    def __init__(self, host: Host):
        self._host = host

    @cached_property
    def driver(self) -> Any | None:
        text = self._host.file("driver-version")
        return None if text is None else self._host.parse("driver-version-info", "driver-version", text)

    @cached_property
    def firmware(self) -> Any | None:
        text = self._host.file("firmware-version")
        return None if text is None else self._host.parse("firmware-version-info", "firmware-version", text)

    @cached_property
    def toolkit(self) -> tuple[Any, str] | None:
        """(CannPackageInfo, the file it came from), or None when no toolkit is installed."""
        res = self._host.result("toolkit-version")
        if res.rc != 0:
            return None
        return self._host.parse("toolkit-install-info", "toolkit-version"), res.stderr.strip()

    @cached_property
    def components(self) -> dict[str, tuple[str, str]]:
        """ops/kernels and nnal: component -> (version, file)."""
        out: dict[str, tuple[str, str]] = {}
        current = None
        for line in self._host.stdout("cann-components").splitlines():
            if line.startswith("== "):
                current = line[3:].strip()
                continue
            key, sep, value = line.partition("=")
            if not sep or current is None or key.strip().lower() != "version":
                continue
            comp = "nnal" if "/nnal/" in current else "ops"
            out[comp] = (value.strip(), current)  # globs expand in order: the newest version comes last
        return out

    @cached_property
    def set_env(self) -> list[str]:
        return [line.strip() for line in self._host.stdout("set-env").splitlines() if line.strip()]

    @cached_property
    def python(self) -> tuple[str, dict[str, Distribution]]:
        """(Python version, normalized name -> Distribution) of the training interpreter."""
        version, dists = "", {}
        for line in self._host.stdout("python-packages").splitlines():
            parts = line.split(" ")
            if parts[0] == "python" and len(parts) == 2:
                version = parts[1]
            elif parts[0] == "dist" and len(parts) >= 5:
                name = re.sub(r"[-_.]+", "-", parts[1]).lower()
                dists.setdefault(
                    name,
                    Distribution(
                        parts[1],
                        parts[2],
                        [] if parts[3] == "-" else parts[3].split(","),
                        " ".join(parts[4:]),
                    ),
                )
        if not version:
            raise ParseError(
                "python-packages",
                "no 'python X.Y.Z' line",
                line_no=1,
                line=(self._host.stdout("python-packages").splitlines() or [""])[0],
            )
        return version, dists

    @cached_property
    def user_libs(self) -> tuple[str, dict[str, str | None]]:
        """(LD_LIBRARY_PATH, library -> where the training user's environment finds it or None)."""
        path, libs = "", {}
        for line in self._host.stdout("user-libs").splitlines():
            if line.startswith("LD_LIBRARY_PATH="):
                path = line.split("=", 1)[1]
            elif line.startswith("lib "):
                _, lib, where = line.split(" ", 2)
                libs[lib] = None if where == "-" else where
        return path, libs
