"""NPU resources: the `npu-smi info` table, per-chip health detail, the chip-to-chip topology and the
/dev/davinciN device nodes, each with the probe it runs.

A table npu-smi did not print to the end (cut in the device or the process table) is never judged:
every check reading it is `error` naming the command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from ascend_ready.checks.parsers.npu_smi_info import NpuSmiInfo, NpuSmiProcess, parse_npu_smi_info
from ascend_ready.checks.parsers.npu_smi_kv import NpuSmiHealth, parse_npu_smi_health
from ascend_ready.checks.resources.base import ProbeFailed, Resource, probe
from ascend_ready.npu_smi_layout import LAYOUTS

if TYPE_CHECKING:
    from ascend_ready.checks.parsers.npu_smi_topo import NpuTopo

__all__ = ["Chip", "DeviceNodes", "NpuHealth", "NpuSmi", "NpuTopology", "NumaNodes"]

NPU_SMI_INFO = probe(
    "npu-smi-info", argv=("npu-smi", "info"), description="main table: health, temp, HBM, processes"
)
NPU_SMI_L = probe("npu-smi-l", argv=("npu-smi", "info", "-l"), description="NPU ids and chips per NPU")
NPU_SMI_HEALTH = probe(
    "npu-smi-health",
    argv=("npu-smi", "info", "-t", "health", "-i", "{1}", "-c", "{2}"),
    foreach="npu-chip",
    needs=(NPU_SMI_L,),
    description="health status and error codes per chip",
)
NPU_SMI_TOPO = probe(
    "npu-smi-topo",
    argv=("npu-smi", "info", "-t", "topo"),
    description="link type between every two chips (HCCS, SIO, PCIe) and their CPU affinity",
)
NUMA_NODES = probe(
    "numa-nodes",
    # grep -H prints each file's name: the node number travels with its CPUs (the launcher reads the same)
    shell="grep -H . /sys/devices/system/node/node*/cpulist",
    description="the host's NUMA nodes and their CPUs (where npu-smi's CPU affinities must fall)",
)
DEV_DAVINCI = probe("dev-davinci", shell="ls -1 /dev", description="device nodes (/dev/davinciN)")

_CUT_HINT = (
    "run `npu-smi info` by hand: a table without its end means the tool was stopped or its output "
    "lost; a complete table is needed to judge the chips"
)


@dataclass
class Chip:
    """One chip of `npu-smi info`, with its NPU id and the two table rows it was read from."""

    npu_id: int
    chip_id: int
    phy_id: int | None
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


def cut_reason(info: NpuSmiInfo) -> str | None:
    """Why a parsed table is not the whole output npu-smi prints, or None when it is complete."""
    if info.truncated:
        # the parser's verdict: the output stops at a row boundary, or its process table leaves out
        # NPUs of the device table (npu-smi lists every NPU there, idle or not)
        return "the table ends early, at a row boundary before the end of the device or process table"
    layout = LAYOUTS[info.layout]
    if info.process_table == "absent" and layout.geometry is not None and layout.geometry.process_cells:
        return f"it ends after the device table, without the process table npu-smi {info.tool_version} prints"
    return None


class NpuSmi(Resource):
    """`npu-smi info`, the main table: NPUs and chips (health, temperature, HBM) and their processes."""

    probes = (NPU_SMI_INFO,)

    @cached_property
    def command(self) -> str:
        return self.host.result("npu-smi-info").command

    @cached_property
    def text(self) -> str:
        return self.host.stdout("npu-smi-info")

    @cached_property
    def info(self) -> NpuSmiInfo:
        """The parsed table; a cut one raises ProbeFailed naming the command (never judged)."""
        info = parse_npu_smi_info(self.text)
        reason = cut_reason(info)
        if reason:
            raise ProbeFailed(f"`{self.command}` output is cut: {reason}", hint=_CUT_HINT)
        return info

    @property
    def npu_ids(self) -> list[int]:
        return [n.id for n in self.info.npus]

    @property
    def has_hbm(self) -> bool:
        """This npu-smi's table has an HBM-Usage column (310/310P cards have none)."""
        return "HBM-Usage(MB)" in LAYOUTS[self.info.layout].row2

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
                bus = c.bus_id.lower() if c.bus_id else None
                out.append(
                    Chip(
                        npu_id=npu.id,
                        chip_id=c.chip_id,
                        phy_id=c.phy_id,
                        name=c.name,
                        health=c.health,
                        temp_c=c.temp_c,
                        hbm_used_mb=c.hbm_used_mb,
                        hbm_total_mb=c.hbm_total_mb,
                        bus_id=bus,
                        evidence=self._rows_by_bus.get(bus, []) if bus else [],
                    )
                )
        return out

    @property
    def processes(self) -> list[NpuSmiProcess]:
        """The process table's rows; a table without one raises ProbeFailed (nothing known)."""
        info = self.info
        if info.process_table == "absent":
            raise ProbeFailed(
                f"`{self.command}` printed no process table (npu-smi {info.tool_version}): "
                "which processes hold the NPUs is unknown",
                hint="check with `npu-smi info -t proc-mem -i <npu>` or a newer driver's npu-smi",
            )
        return list(info.processes)

    def npu_of_bus(self) -> dict[str, int]:
        """PCI BDF (lower case) -> NPU id."""
        return {c.bus_id: c.npu_id for c in self.chips if c.bus_id}


class NpuHealth(Resource):
    """`npu-smi info -t health -i N -c C` per chip (the chips `npu-smi info -l` lists)."""

    probes = (NPU_SMI_HEALTH,)

    @cached_property
    def chips(self) -> dict[tuple[int, int], NpuSmiHealth]:
        """(npu id, chip id) -> the chip's health detail."""
        out = {}
        for key in self.host.instances("npu-smi-health"):
            npu, chip = (int(x) for x in key.split("."))
            out[(npu, chip)] = parse_npu_smi_health(self.host.stdout(f"npu-smi-health.{key}"))
        return out

    def command(self, npu: int, chip: int) -> str:
        return NPU_SMI_HEALTH(self.host.profile).command_for(f"{npu}.{chip}")


_DAVINCI_RE = re.compile(r"davinci(\d+)")


class DeviceNodes(Resource):
    """`ls -1 /dev`: the /dev/davinciN device nodes (N: the device logic ids hccn_tool takes)."""

    probes = (DEV_DAVINCI,)

    @cached_property
    def ids(self) -> list[int]:
        names = self.host.stdout("dev-davinci").split()
        return sorted(int(m[1]) for n in names if (m := _DAVINCI_RE.fullmatch(n)))


class NpuTopology(Resource):
    """`npu-smi info -t topo`: the link between every two chips and each chip's CPU affinity."""

    probes = (NPU_SMI_TOPO,)

    @cached_property
    def command(self) -> str:
        return self.host.result("npu-smi-topo").command

    @cached_property
    def text(self) -> str:
        return self.host.stdout("npu-smi-topo")

    @cached_property
    def topo(self) -> NpuTopo:
        from ascend_ready.checks.parsers.npu_smi_topo import parse_npu_smi_topo

        return parse_npu_smi_topo(self.text)


class NumaNodes(Resource):
    """The host's NUMA nodes and their CPUs (`/sys/devices/system/node/node*/cpulist`)."""

    probes = (NUMA_NODES,)

    @cached_property
    def command(self) -> str:
        return self.host.result("numa-nodes").command

    @cached_property
    def text(self) -> str:
        # grep exits 2 when the glob matches nothing: a kernel built without NUMA lists no node
        return self.host.stdout("numa-nodes", ok_rc=(0, 2))

    @cached_property
    def nodes(self) -> dict[int, set[int]]:
        """NUMA node -> its CPUs; an empty dict where the kernel lists none (no NUMA support)."""
        from ascend_ready.checks.parsers.numa import parse_node_cpulists

        return parse_node_cpulists(self.text)
