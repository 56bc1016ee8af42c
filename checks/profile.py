"""Hardware profiles: what a healthy node of a product looks like (counts, thresholds, the training user).

Bundled profiles live in checks/profiles/<name>.yml; `--profile FILE|NAME` picks one, `overrides`
adjusts fields per inventory group, and `ascend-check schema profile` prints the JSON Schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ascend_ready.checks.parsers.lspci import npu_device_ids
from ascend_ready.errors import ConfigError

__all__ = [
    "BUNDLED_DIR", "DEFAULT_PROFILE", "NODE_PROFILE", "HardwareProfile", "bundled_profiles", "load_profile",
]

BUNDLED_DIR = Path(__file__).resolve().parent / "profiles"
DEFAULT_PROFILE = "atlas-800t-a2"
#: the profile the provisioning left on a node (python_env): what the controller's `ascend-check -i` judges
#: that node by, so the node's own ascend-check (the single-node preflight) judges by it too
NODE_PROFILE = "/etc/ascend-ready/profile.yml"

#: Link types `npu-smi info -t topo` prints between two chips (its legend): HCCS, HCCS through a
#: switch, the SIO die-to-die bus, and the PCIe paths PIX/PXB/PHB/SYS.
TopoLink = Literal["HCCS", "HCCS_SW", "SIO", "PIX", "PXB", "PHB", "SYS"]


#: The checks a training server's preflight must have judged before a job starts on it: every quick-tier
#: check whose failure would crash, hang or slow the job (the bundled profiles state their own list).
TRAINING_CHECKS: tuple[str, ...] = (
    "npu.count", "npu.health", "npu.device_nodes", "npu.pci_functions", "npu.hbm_usage", "npu.processes",
    "pcie.link_width", "pcie.link_speed",
    "hccl.ip", "hccl.link_up", "hccl.net_health",
    "os.driver_user", "os.glibc", "os.memlock", "os.nofile", "os.shm", "os.disk_free",
    "versions.installed", "versions.stack", "versions.set_env", "versions.user_libs",
    "fleet.stack", "fleet.hardware", "fleet.hccn",
)


class HardwareProfile(BaseModel):
    """Expected facts and thresholds of one NPU server product. Every field has a documented default
    so a profile file only states what differs."""

    model_config = ConfigDict(extra="forbid")

    product: str = Field(description="product name, e.g. 'Atlas 800T A2'")
    matrix_product: str = Field(
        "910b", description="product id in the compatibility matrix (910b, 910_93, 310p)"
    )
    npu_count: int = Field(8, ge=1, description="NPUs (cards) `npu-smi info` must list")
    chips_per_npu: int = Field(1, ge=1, description="chips per NPU (A3 and 300I Duo: 2)")
    chip_names: list[str] = Field(
        default_factory=list, description="accepted chip names from `npu-smi info` (empty: any)"
    )
    pci_device_ids: list[str] = Field(
        default_factory=lambda: npu_device_ids("910b"),
        description="Huawei (19e5) PCI device ids of the NPU functions",
    )
    pci_functions_per_npu: int = Field(1, ge=1, description="PCI functions `lspci` shows per NPU")
    temp_min_c: float = Field(
        10, description="lowest plausible chip temperature (a lower one is a sensor fault)"
    )
    temp_max_c: float = Field(
        70, description="highest acceptable chip temperature at idle (field reports call 40-60 °C normal)"
    )
    hbm_idle_baseline_mb: int = Field(
        3400, ge=0, description="HBM the driver reserves per chip on an idle node (about 3.4 GB on a 910B)"
    )
    hbm_idle_margin_mb: int = Field(
        1024, ge=0, description="allowed HBM use above the baseline on an idle chip"
    )
    hbm_max_used_pct: float = Field(90, gt=0, le=100, description="HBM use above this fails, idle or not")
    pcie_width: int = Field(16, description="link width every NPU must train at")
    topology_link: TopoLink | None = Field(
        "HCCS",
        description="link `npu-smi info -t topo` must show between every two chips of different NPUs "
        "(A2: HCCS; A3: HCCS_SW, through the switch chip); null: not checked (PCIe-only cards)",
    )
    topology_link_within_npu: TopoLink | None = Field(
        None,
        description="link between the chips of one NPU (A3: SIO, the die-to-die bus); "
        "null: one chip per NPU, or not checked",
    )
    hccn: bool = Field(True, description="the NPUs have RoCE ports managed by hccn_tool (training cards)")
    thp: Literal["never", "madvise", "always"] = Field(
        "never", description="required THP enabled/defrag mode"
    )
    numa_balancing: int = Field(0, description="required kernel.numa_balancing")
    nofile_min: int = Field(1048576, description="minimum open-files limit (nofile) of the training user")
    memlock_min_kb: int | None = Field(
        None,
        description="minimum memlock limit (KiB) of the training user; "
        "null: it must be unlimited (RDMA pins memory)",
    )
    training_user: str = Field("root", description="the user the training job runs as")
    driver_user: str = Field("HwHiAiUser", description="the driver's run user and group")
    ascend_root: str = Field("/usr/local/Ascend", description="install root of driver, firmware and CANN")
    python: str = Field("python3", description="the training user's Python interpreter")
    checkpoint_dir: str = Field(
        "/", description="directory checkpoints are written to (free space is checked)"
    )
    min_disk_free_gb: float = Field(100, ge=0, description="free space needed under checkpoint_dir")
    min_shm_gb: float = Field(8, ge=0, description="minimum size of /dev/shm (dataloader workers, HCCL)")
    required_libs: list[str] = Field(
        default_factory=lambda: ["libascendcl.so", "libhccl.so", "libascend_hal.so"],
        description="libraries the training user's LD_LIBRARY_PATH must find",
    )
    fleet_pins: dict[str, str] = Field(
        default_factory=dict,
        description="fleet.* field -> the value every node must have (e.g. cann: 8.2.RC1); "
        "fields not pinned are judged against the fleet's majority",
    )
    clock_max_offset_s: float = Field(
        1.0, gt=0,
        description="os.clock_sync: the most the system clock may be off the NTP time (chronyc tracking's "
        "System time, timedatectl timesync-status's Offset), in seconds",
    )
    straggler_ratio: float = Field(
        0.8, gt=0, lt=1,
        description="npu.matmul / hccl.allreduce (full tier): a device, node or node pair below this "
        "fraction of the fleet's median (of two: of the faster) is a straggler",
    )
    matmul_min_tflops: float | None = Field(
        None, gt=0,
        description="npu.matmul: the least bf16 matmul TFLOPS every NPU must reach (null: judged against "
        "the fleet only; never applied to a CPU run)",
    )
    allreduce_min_busbw_gbps: float | None = Field(
        None, gt=0,
        description="hccl.allreduce: the least bus bandwidth (GB/s) of the all-reduce across all nodes at "
        "its largest message size, on NPUs (null: judged against the fleet only)",
    )
    training_checks: list[str] = Field(
        default_factory=lambda: list(TRAINING_CHECKS),
        description="ids of the checks a preflight must have judged on a host before ascend-train starts a "
        "job there (a launch spec or preflight narrowed by --select/--skip/--tier that left one out is "
        "refused, unless the operator waives it: --waive CHECK)",
    )
    overrides: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="inventory group -> fields that differ there"
    )

    def for_groups(self, groups: list[str]) -> HardwareProfile:
        """This profile with the overrides of `groups` applied in order (later groups win)."""
        changes: dict[str, Any] = {}
        for group in groups:
            changes.update(self.overrides.get(group, {}))
        if not changes:
            return self
        data = self.model_dump()
        data.update(changes)
        return _validate(data, f"overrides for groups {', '.join(groups)}")


def _validate(data: Any, origin: str) -> HardwareProfile:
    try:
        return HardwareProfile.model_validate(data)
    except ValidationError as exc:
        from ascend_ready.errors import validation_lines

        lines = validation_lines(exc, HardwareProfile)
        raise ConfigError(
            f"invalid hardware profile ({origin}):\n  " + "\n  ".join(lines),
            hint="`ascend-check schema profile` prints every field",
        ) from None


#: data files in the profiles folder that are not hardware profiles (checks/perf_sku.py reads sku_perf.yml)
NOT_PROFILES = frozenset({"sku_perf"})


def bundled_profiles() -> list[str]:
    return sorted(p.stem for p in BUNDLED_DIR.glob("*.yml") if p.stem not in NOT_PROFILES)


def load_profile(spec: str | None = None) -> HardwareProfile:
    """A bundled profile by name, or a YAML/JSON profile file by path."""
    spec = spec or DEFAULT_PROFILE
    path = Path(spec)
    if not path.is_file():
        path = BUNDLED_DIR / f"{spec}.yml"
        if not path.is_file() or spec in NOT_PROFILES:
            raise ConfigError(
                f"no hardware profile {spec!r}",
                hint="give a profile file, or one of: " + ", ".join(bundled_profiles()),
            )
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read hardware profile {path}: {exc}",
                          hint="fix the file (YAML: field: value), or name a bundled profile: "
                          + ", ".join(bundled_profiles())) from None
    return _validate(data, str(path))
