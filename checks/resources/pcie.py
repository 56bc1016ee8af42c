"""PCIe resources: the NPU functions `lspci` lists, each NPU's link (sysfs, else `lspci -vvv`) with
its upstream port, the AER counters and the kernel log, each with the probes it runs.

An NPU is known by its PCI device id, never by its class: a Kunpeng 920 host carries HiSilicon
accelerators of its own (the ZIP engine is class 1200 "Processing accelerators" too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ascend_ready.checks.parsers.dmesg import KernelLog, parse_dmesg
from ascend_ready.checks.parsers.lspci import (
    HUAWEI_VENDOR_ID,
    PciDevice,
    ascend_npu_model,
    parse_lspci,
    parse_lspci_vvv,
)
from ascend_ready.checks.parsers.os_commands import parse_pci_parents
from ascend_ready.checks.parsers.sysfs import SysfsPci, SysfsPciDevice, parse_sysfs_link
from ascend_ready.checks.resources.base import ProbeFailed, Resource, probe
from ascend_ready.checks.resources.npu import NpuSmi
from ascend_ready.errors import ParseError

__all__ = ["Dmesg", "PciFunctions", "PcieLink", "PcieLinks"]

#: sh loop head over the Huawei (19e5) PCI functions in sysfs: NPUs, their HiSilicon root ports and
#: the CPU's own accelerators. Builtins only (`read`, `[`): a host has hundreds of functions.
_HUAWEI_FUNCTIONS = (
    "for d in /sys/bus/pci/devices/*; do "
    'v=; read -r v < "$d/vendor" 2>/dev/null; [ "$v" = 0x19e5 ] || continue; '
)

LSPCI = probe("lspci", argv=("lspci", "-D", "-nn"), description="PCI functions")
# Link attributes of every Huawei function in `grep -H` form, and each function's upstream port.
SYSFS_PCI_LINK = probe(
    "sysfs-pci-link",
    shell=(
        "set --; "
        + _HUAWEI_FUNCTIONS
        + "for a in class device current_link_speed current_link_width max_link_speed max_link_width "
        "aer_dev_correctable aer_dev_nonfatal aer_dev_fatal; do "
        '[ -r "$d/$a" ] && set -- "$@" "$d/$a"; done; done; '
        '[ $# -eq 0 ] || grep -H . "$@"; exit 0'
    ),
    description="PCIe link speed/width and AER counters of Huawei functions (sysfs)",
)
PCI_TOPOLOGY = probe(
    "pci-topology",
    # `cd -P` resolves the /sys/bus link into /sys/devices; its parent is the upstream port.
    shell=(_HUAWEI_FUNCTIONS + 'cd -P "$d" && p=${PWD%/*} && echo "${d##*/} ${p##*/}"; done; exit 0'),
    description="upstream port of each Huawei PCI function",
)
LSPCI_VVV = probe(
    "lspci-vvv",
    argv=("lspci", "-D", "-nn", "-vvv", "-d", "19e5:"),
    description="PCIe capabilities (fallback); -nn: an NPU is known by its device id, named or not",
)
DMESG = probe(
    "dmesg", shell="dmesg 2>/dev/null || journalctl -k -q --no-pager", description="kernel log (AER)"
)


def _sysfs_npu(dev: SysfsPciDevice) -> bool:
    # The probe reads Huawei (19e5) functions only, and not their `vendor` file.
    return ascend_npu_model(dev.vendor_id or HUAWEI_VENDOR_ID, dev.device_id) is not None


class PciFunctions(Resource):
    """`lspci -D -nn`: the Ascend NPU functions on the bus."""

    probes = (LSPCI,)

    @cached_property
    def npus(self) -> list[PciDevice]:
        devices = parse_lspci(self.host.stdout("lspci")).devices
        return [d for d in devices if d.is_ascend_npu]


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


class PcieLinks(Resource):
    """Each NPU's link from sysfs where the kernel exposes link attributes (4.13+), else `lspci -vvv`;
    its upstream port from the /sys/devices hierarchy; NPU ids from `npu-smi info`."""

    probes = (SYSFS_PCI_LINK, PCI_TOPOLOGY, LSPCI_VVV)
    requires = (NpuSmi,)

    @cached_property
    def _npu_of_bus(self) -> dict[str, int]:
        try:
            return self.host.resource(NpuSmi).npu_of_bus()
        except (ProbeFailed, ParseError):
            return {}  # links are judged without NPU ids; the npu.* checks report npu-smi itself

    @cached_property
    def _parents(self) -> dict[str, str]:
        return parse_pci_parents(self.host.stdout("pci-topology")).parents

    @cached_property
    def sysfs(self) -> SysfsPci | None:
        """Parsed sysfs attributes, or None when this kernel shows no link attributes (use lspci)."""
        res = self.host.optional("sysfs-pci-link")
        if res is None or res.rc != 0 or not res.stdout.strip():
            return None
        parsed = parse_sysfs_link(res.stdout)
        npus = [d for d in parsed.devices.values() if _sysfs_npu(d)]
        if not npus or all(d.max_link_speed_gts is None and not d.link_down for d in npus):
            return None
        return parsed

    @cached_property
    def links(self) -> list[PcieLink]:
        return self._from_sysfs(self.sysfs) if self.sysfs is not None else self._from_lspci()

    def _from_sysfs(self, sysfs: SysfsPci) -> list[PcieLink]:
        by_bdf: dict[str, list[str]] = {}
        for line in self.host.stdout("sysfs-pci-link").splitlines():
            parts = line.split("/")
            if len(parts) > 5:
                by_bdf.setdefault(parts[5].lower(), []).append(line)
        links = []
        for bdf, dev in sysfs.devices.items():
            if not _sysfs_npu(dev):
                continue
            port = sysfs.devices.get(self._parents.get(bdf, ""))
            links.append(
                PcieLink(
                    bdf=bdf,
                    npu_id=self._npu_of_bus.get(bdf),
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

    def _from_lspci(self) -> list[PcieLink]:
        vvv = parse_lspci_vvv(self.host.stdout("lspci-vvv"))
        by_bdf = {d.device.bdf: d for d in vvv.devices}
        links = []
        for d in vvv.devices:
            if not d.device.is_ascend_npu:
                continue
            port = by_bdf.get(self._parents.get(d.device.bdf, ""))
            port_caps = (
                [f"{port.device.bdf}: {ln.strip()}" for ln in port.evidence if "LnkCap" in ln] if port else []
            )
            links.append(
                PcieLink(
                    bdf=d.device.bdf,
                    npu_id=self._npu_of_bus.get(d.device.bdf),
                    speed_gts=d.speed_gts,
                    width=d.width,
                    max_speed_gts=d.cap_speed_gts,
                    max_width=d.cap_width,
                    port_bdf=port.device.bdf if port else None,
                    port_max_speed_gts=port.cap_speed_gts if port else None,
                    port_max_width=port.cap_width if port else None,
                    source="lspci -vvv",
                    evidence=[f"{d.device.bdf}: {line.strip()}" for line in d.evidence] + port_caps,
                )
            )
        return links

    @cached_property
    def aer_counters(self) -> dict[str, dict[str, int]]:
        """NPU function -> its non-zero AER totals in sysfs (`aer_dev_correctable: TOTAL_ERR_COR 3`)."""
        out: dict[str, dict[str, int]] = {}
        for bdf, dev in self.sysfs.devices.items() if self.sysfs is not None else ():
            if not _sysfs_npu(dev):
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


class Dmesg(Resource):
    """The kernel log (`dmesg`, else `journalctl -k`): AER and PCIe bus errors."""

    probes = (DMESG,)

    @cached_property
    def log(self) -> KernelLog:
        return parse_dmesg(self.host.stdout("dmesg"))
