"""Resources: one small class per thing a check reads, each running its own probes and parsing them
with typed parsers; checks reach them from `host` (`host.npu_smi`, `host.pcie_links`, `host.sysctl`).

Vendor and driver-version differences (sysfs vs `lspci -vvv`, toolkit layouts) are handled in the
resource, never in a check. `ALL` lists every resource in catalogue (batch) order.
"""

from __future__ import annotations

from ascend_ready.checks.resources.base import HostBase, ProbeDef, ProbeFailed, Resource, probe_ids
from ascend_ready.checks.resources.burn_in import BurnIn
from ascend_ready.checks.resources.collective import CollectiveResult
from ascend_ready.checks.resources.hccn import (
    HccnConfFile,
    MeshResult,
    NicIp,
    NicLink,
    NicNetHealth,
    NicPing,
    NicTls,
    same_subnet,
)
from ascend_ready.checks.resources.identity import MachineIdentity
from ascend_ready.checks.resources.launch import (
    JobInterpreter,
    JobPaths,
    LoginUser,
    MasterRoute,
    SharedRunDir,
)
from ascend_ready.checks.resources.npu import DeviceNodes, NpuHealth, NpuSmi, NpuTopology, NumaNodes
from ascend_ready.checks.resources.os import (
    Accounts,
    Clock,
    ClockOffset,
    DiskFree,
    Glibc,
    KernelHeaders,
    OsRelease,
    RebootPending,
    Shm,
    Sysctl,
    Thp,
    UserLimits,
)
from ascend_ready.checks.resources.output_dir import OutputDir
from ascend_ready.checks.resources.pcie import Dmesg, PcieLinks, PciFunctions
from ascend_ready.checks.resources.perf import AscendDmi, NodeSku
from ascend_ready.checks.resources.perf_torch import DeviceCopies, DeviceFlops, TorchCopies
from ascend_ready.checks.resources.sdc import SdcProbe
from ascend_ready.checks.resources.versions import (
    CannComponents,
    DriverVersion,
    FirmwareVersion,
    PythonPackages,
    SetEnv,
    Toolkit,
    TorchImport,
    TrainingEnv,
    UserLibs,
)

__all__ = [
    "ALL",
    "Accounts",
    "AscendDmi",
    "BurnIn",
    "CannComponents",
    "Clock",
    "ClockOffset",
    "CollectiveResult",
    "DeviceCopies",
    "DeviceFlops",
    "DeviceNodes",
    "DiskFree",
    "Dmesg",
    "DriverVersion",
    "FirmwareVersion",
    "Glibc",
    "HccnConfFile",
    "Host",
    "JobInterpreter",
    "JobPaths",
    "KernelHeaders",
    "LoginUser",
    "MachineIdentity",
    "MasterRoute",
    "MeshResult",
    "NicIp",
    "NicLink",
    "NicNetHealth",
    "NicPing",
    "NicTls",
    "NodeSku",
    "NpuHealth",
    "NpuSmi",
    "NpuTopology",
    "NumaNodes",
    "OsRelease",
    "OutputDir",
    "PciFunctions",
    "PcieLinks",
    "ProbeDef",
    "ProbeFailed",
    "PythonPackages",
    "RebootPending",
    "Resource",
    "SdcProbe",
    "SetEnv",
    "SharedRunDir",
    "Shm",
    "Sysctl",
    "Thp",
    "Toolkit",
    "TorchCopies",
    "TorchImport",
    "TrainingEnv",
    "UserLibs",
    "UserLimits",
    "probe_ids",
    "same_subnet",
]

#: Every resource a check reads, in the order their probes run in a batch (OutputDir is read only by the
#: launcher's pre-start probe, training/run_dir.py, and is no preflight probe: it tries a write): the
#: vendor tools first (serially), then PCI and the kernel log, the device NICs, the OS and the software stack.
ALL: tuple[type[Resource], ...] = (
    NpuSmi,
    NpuHealth,
    NpuTopology,
    NumaNodes,
    DeviceNodes,
    PciFunctions,
    PcieLinks,
    Dmesg,
    NicLink,
    NicNetHealth,
    NicIp,
    NicTls,
    HccnConfFile,
    NicPing,
    MeshResult,
    CollectiveResult,
    AscendDmi,
    NodeSku,
    SdcProbe,
    BurnIn,
    Thp,
    Sysctl,
    UserLimits,
    Accounts,
    Glibc,
    KernelHeaders,
    DiskFree,
    Shm,
    Clock,
    ClockOffset,
    OsRelease,
    RebootPending,
    MachineIdentity,
    DriverVersion,
    FirmwareVersion,
    Toolkit,
    CannComponents,
    SetEnv,
    UserLibs,
    PythonPackages,
    TorchImport,
    TorchCopies,
    DeviceCopies,
    DeviceFlops,
    TrainingEnv,
)


class Host(HostBase):
    """A node as its snapshot shows it, judged against its profile; each resource is one attribute."""

    # NPU
    @property
    def npu_smi(self) -> NpuSmi:
        """`npu-smi info` (NpuSmi)."""
        return self.resource(NpuSmi)

    @property
    def npu_health(self) -> NpuHealth:
        """`npu-smi info -t health` per chip."""
        return self.resource(NpuHealth)

    @property
    def npu_topology(self) -> NpuTopology:
        """`npu-smi info -t topo`."""
        return self.resource(NpuTopology)

    @property
    def numa_nodes(self) -> NumaNodes:
        """The host's NUMA nodes (sysfs)."""
        return self.resource(NumaNodes)

    @property
    def device_nodes(self) -> DeviceNodes:
        """/dev/davinciN."""
        return self.resource(DeviceNodes)

    # PCIe
    @property
    def pci_functions(self) -> PciFunctions:
        """NPU functions in `lspci`."""
        return self.resource(PciFunctions)

    @property
    def pcie_links(self) -> PcieLinks:
        """NPU PCIe links."""
        return self.resource(PcieLinks)

    @property
    def dmesg(self) -> Dmesg:
        """The kernel log."""
        return self.resource(Dmesg)

    # HCCL device NICs
    @property
    def nic_link(self) -> NicLink:
        """`hccn_tool -i N -link -g`."""
        return self.resource(NicLink)

    @property
    def nic_net_health(self) -> NicNetHealth:
        """`hccn_tool -i N -net_health -g`."""
        return self.resource(NicNetHealth)

    @property
    def nic_ip(self) -> NicIp:
        """`hccn_tool -i N -ip -g`."""
        return self.resource(NicIp)

    @property
    def nic_tls(self) -> NicTls:
        """`hccn_tool -i N -tls -g`."""
        return self.resource(NicTls)

    @property
    def nic_ping(self) -> NicPing:
        """`hccn_tool -i N -ping -g` (gateway)."""
        return self.resource(NicPing)

    @property
    def mesh(self) -> MeshResult:
        """The device-NIC ping mesh across hosts (recorded by the controller)."""
        return self.resource(MeshResult)

    @property
    def collective(self) -> CollectiveResult:
        """The matmul and all-reduce across hosts under torchrun (recorded by the controller)."""
        return self.resource(CollectiveResult)

    @property
    def hccn_conf(self) -> HccnConfFile:
        """/etc/hccn.conf."""
        return self.resource(HccnConfFile)

    # OS
    @property
    def thp(self) -> Thp:
        """Transparent hugepages."""
        return self.resource(Thp)

    @property
    def sysctl(self) -> Sysctl:
        """Kernel parameters."""
        return self.resource(Sysctl)

    @property
    def user_limits(self) -> UserLimits:
        """The training user's limits."""
        return self.resource(UserLimits)

    @property
    def accounts(self) -> Accounts:
        """Driver and training accounts."""
        return self.resource(Accounts)

    @property
    def glibc(self) -> Glibc:
        """Glibc version."""
        return self.resource(Glibc)

    @property
    def kernel_headers(self) -> KernelHeaders:
        """Kernel headers."""
        return self.resource(KernelHeaders)

    @property
    def disk_free(self) -> DiskFree:
        """Free space for checkpoints."""
        return self.resource(DiskFree)

    @property
    def output_dir(self) -> OutputDir:
        """The job's output directory (the profile's checkpoint_dir) as the training user sees it."""
        return self.resource(OutputDir)

    @property
    def shm(self) -> Shm:
        """/dev/shm."""
        return self.resource(Shm)

    @property
    def clock(self) -> Clock:
        """Clock synchronization."""
        return self.resource(Clock)

    @property
    def clock_offset(self) -> ClockOffset:
        """The clock's offset from NTP time."""
        return self.resource(ClockOffset)

    @property
    def machine_identity(self) -> MachineIdentity:
        """Which machine the host is (machine-id, boot id)."""
        return self.resource(MachineIdentity)

    @property
    def reboot_pending(self) -> RebootPending:
        """The owed-reboot marker."""
        return self.resource(RebootPending)

    @property
    def os_release(self) -> OsRelease:
        """/etc/os-release."""
        return self.resource(OsRelease)

    # software stack
    @property
    def driver_version(self) -> DriverVersion:
        """Driver version.info."""
        return self.resource(DriverVersion)

    @property
    def firmware_version(self) -> FirmwareVersion:
        """Firmware version.info."""
        return self.resource(FirmwareVersion)

    @property
    def toolkit(self) -> Toolkit:
        """CANN toolkit install info."""
        return self.resource(Toolkit)

    @property
    def cann_components(self) -> CannComponents:
        """The ops/kernels and NNAL install files."""
        return self.resource(CannComponents)

    @property
    def set_env(self) -> SetEnv:
        """The set_env.sh scripts."""
        return self.resource(SetEnv)

    @property
    def python_packages(self) -> PythonPackages:
        """The training Python."""
        return self.resource(PythonPackages)

    @property
    def user_libs(self) -> UserLibs:
        """The training user's libraries."""
        return self.resource(UserLibs)

    @property
    def torch_import(self) -> TorchImport:
        """The torch_npu import."""
        return self.resource(TorchImport)

    @property
    def training_env(self) -> TrainingEnv:
        """What the training job imports, and ascend-ready's version."""
        return self.resource(TrainingEnv)

    # launch-time facts (checks/cluster/node_facts.py builds their probes for a launch)
    @property
    def master_route(self) -> MasterRoute:
        """The master as the node resolves it, the route and addresses toward it."""
        return self.resource(MasterRoute)

    @property
    def login_user(self) -> LoginUser:
        """The SSH login user."""
        return self.resource(LoginUser)

    @property
    def job_paths(self) -> JobPaths:
        """The job's paths as the training user."""
        return self.resource(JobPaths)

    @property
    def job_interpreter(self) -> JobInterpreter:
        """The job's interpreter and the ascend-ready it imports."""
        return self.resource(JobInterpreter)

    @property
    def shared_run_dir(self) -> SharedRunDir:
        """Whether the node sees the controller's run dir."""
        return self.resource(SharedRunDir)
