"""How a training job is spread and what it runs on, as the memory model takes them: the parallel layout
(and why a layout cannot run a model), the per-device workload, and a device's memory from its profile."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ascend_ready.errors import ConfigError
from ascend_ready.training.model_shape import ModelShape

__all__ = [
    "GB",
    "GIB",
    "HBM_MB_BY_PRODUCT",
    "HOST_RAM_GB_BY_PRODUCT",
    "HOST_RAM_USABLE",
    "Device",
    "Engine",
    "Layout",
    "Strategy",
    "Workload",
    "device_from_profile",
]

GB = 1e9
GIB = 1024**3

Strategy = Literal["zero", "fsdp", "megatron"]
Engine = Literal["trl", "verl"]

#: HBM per logical device (a chip, or one die of an A3 NPU), by the matrix product id of a hardware
#: profile. npu-smi prints 65536 MB as the capacity of a 910B3 chip and of a 910_93 die
#: (shared/ascend-samples npu-smi-info_910b3-procs-blankname_25.0.rc1.b010 and
#: npu-smi-info_910-93-a3_24.1.rc3.7); an Atlas 300I Duo card carries 96 GB LPDDR4X for its two 310P3
#: chips (product page). A profile field `hbm_total_mb`, where a profile has one, wins.
HBM_MB_BY_PRODUCT = {"910b": 65536, "910_93": 65536, "310p": 49152}
#: host RAM per node, by the matrix product id, for the offload check when the profile states none:
#: Atlas 800T A2 and A3 servers are commonly fitted with 32 x 64 GB DDR4/DDR5 (2 TB is the A2's maximum of
#: 32 slots of 64 GB, Huawei's product page), taken here at 1 TB (16 x 64 GB, the usual order) so the check
#: errs on the safe side; `--host-ram-gb` gives the real figure.
HOST_RAM_GB_BY_PRODUCT = {"910b": 1024, "910_93": 1024, "310p": 256}
#: share of a node's RAM offloaded states may take (Ray's object store 30 %, the OS and the workers 10 %)
HOST_RAM_USABLE = 0.6


@dataclass(frozen=True)
class Layout:
    """How the job is spread: nodes, devices, parallel degrees, sharding and offload."""

    nodes: int
    devices_per_node: int
    strategy: Strategy = "zero"
    zero_stage: int = 0
    tp: int = 1
    pp: int = 1
    ep: int = 1
    offload: bool = False
    rollout_tp: int = 1
    cp: int = 1
    sp: int = 1
    rollout_ep: int = 1
    optimizer_on_host: bool = False
    offload_optimizer: bool | None = None
    #: expert tensor parallel as configured (None: Megatron's default, the TP size)
    etp_size: int | None = None

    @property
    def world(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def dp(self) -> int:
        return self.world // (self.tp * self.pp * self.cp)

    @property
    def etp(self) -> int:
        """Expert tensor parallel: Megatron's default (the TP size; megatron-core TransformerConfig
        expert_tensor_parallel_size None -> tensor_model_parallel_size), which verl leaves unset."""
        if self.strategy != "megatron":
            return 1
        return self.etp_size or self.tp

    @property
    def expert_dp(self) -> int:
        return max(1, self.world // (self.ep * self.etp * self.pp))

    @property
    def rollout_dp(self) -> int:
        """Data-parallel ranks inside one rollout replica: vLLM's expert parallel size is TP x DP."""
        return max(1, self.rollout_ep // self.rollout_tp) if self.rollout_ep > 1 else 1

    @property
    def rollout_replica(self) -> int:
        """Devices of one rollout replica."""
        return self.rollout_tp * self.rollout_dp

    def problems(self, model: ModelShape) -> list[str]:
        """Why this layout cannot run the model (empty: it can)."""
        out = []
        if self.world % (self.tp * self.pp):
            out.append(f"tp*pp={self.tp * self.pp} does not divide {self.world} devices")
        if self.world % (self.ep * self.etp * self.pp):
            etp = f"*etp(={self.etp}, Megatron's default: tp)" if self.etp > 1 else ""
            out.append(f"ep{etp}*pp={self.ep * self.etp * self.pp} does not divide {self.world} devices")
        if model.num_heads % self.tp or model.num_heads % self.rollout_tp:
            out.append(f"{model.num_heads} attention heads do not split over tp={self.tp}/"
                       f"rollout_tp={self.rollout_tp}")
        if self.pp > model.num_layers:
            out.append(f"pp={self.pp} exceeds {model.num_layers} layers")
        if self.ep > 1 and (not model.is_moe or model.num_experts % self.ep):
            out.append(f"ep={self.ep} does not divide {model.num_experts} experts")
        if self.world % (self.tp * self.pp * self.cp):
            out.append(f"tp*pp*cp={self.tp * self.pp * self.cp} does not divide {self.world} devices")
        if self.rollout_ep > 1 and self.rollout_ep % self.rollout_tp:
            out.append(f"rollout ep={self.rollout_ep} is not rollout tp={self.rollout_tp} x a "
                       f"data-parallel size "
                       "(vLLM's expert parallel size is TP x DP)")
        if self.rollout_ep > 1 and (not model.is_moe or model.num_experts % self.rollout_ep):
            out.append(f"rollout ep={self.rollout_ep} does not divide {model.num_experts} experts")
        if self.rollout_replica > self.world or self.world % self.rollout_replica:
            out.append(f"a rollout replica of {self.rollout_replica} devices does not divide "
                       f"{self.world} devices")
        if self.strategy == "fsdp" and (self.tp, self.pp, self.ep, self.cp) != (1, 1, 1, 1):
            out.append("fsdp takes no tp/pp/ep/cp (use the megatron strategy)")
        if self.sp > 1 and (self.strategy != "fsdp" or self.world % self.sp or model.num_heads % self.sp):
            out.append(f"Ulysses sp={self.sp} needs the fsdp strategy and must divide the devices and the "
                       f"{model.num_heads} heads")
        return out

    def describe(self) -> str:
        shard = {"fsdp": "FSDP full shard", "megatron": f"Megatron ZeRO-{self.zero_stage}",
                 "zero": f"ZeRO-{self.zero_stage}"}[self.strategy]
        par = "".join(f" {k}={v}" for k, v in (("tp", self.tp), ("pp", self.pp), ("ep", self.ep), ("cp",
                                                                                                   self.cp),
                                                ("sp", self.sp)) if v > 1)
        rollout = f"rollout tp={self.rollout_tp}" + (f" ep={self.rollout_ep}" if self.rollout_ep > 1 else "")
        return (f"{self.nodes} node(s) x {self.devices_per_node} = {self.world} devices, {shard}{par}"
                f"{', offload' if self.offload else ''}"
                f"{', optimizer on host' if self.optimizer_on_host else ''}"
                f", {rollout}")


@dataclass(frozen=True)
class Workload:
    """What one device processes: the training micro-batch, and the rollout it generates."""

    algorithm: Literal["grpo", "ppo", "sft", "rm"]
    micro_batch: int
    seq_len: int
    dtype_bytes: int = 2
    recompute: bool = False
    lora_rank: int | None = None
    reference_model: bool = False
    critic: Literal["none", "shared", "separate"] = "none"
    rollout: bool = False
    rollout_sequences: int = 0
    flash_attention: bool = True
    rollout_gpu_util: float | None = None
    rollout_max_num_seqs: int = 256


@dataclass(frozen=True)
class Device:
    """One logical device's memory and the profile's limit on it."""

    name: str
    hbm_mb: int
    idle_baseline_mb: int = 0
    max_used_pct: float = 90.0
    devices_per_node: int = 8
    host_ram_gb: float = 0.0

    @property
    def budget_bytes(self) -> float:
        return self.hbm_mb * 2**20 * self.max_used_pct / 100 - self.idle_baseline_mb * 2**20

    @property
    def host_budget_bytes(self) -> float:
        """What offloaded states may take of a node's RAM: Ray's object store claims 30 % of it by default
        (Ray docs, "Memory Management": object_store_memory), and the OS and workers need room too."""
        return self.host_ram_gb * GB * HOST_RAM_USABLE


def device_from_profile(profile: Any) -> Device:
    """A Device from a checks.profile.HardwareProfile (or anything with its fields)."""
    hbm = getattr(profile, "hbm_total_mb", None) or HBM_MB_BY_PRODUCT.get(profile.matrix_product)
    if not hbm:
        raise ConfigError(f"profile {profile.product}: device memory unknown",
                          hint="give --hbm-gb, or a profile with hbm_total_mb")
    ram = getattr(profile, "host_ram_gb", None) or HOST_RAM_GB_BY_PRODUCT.get(profile.matrix_product, 0)
    return Device(name=profile.product, hbm_mb=int(hbm), idle_baseline_mb=profile.hbm_idle_baseline_mb,
                  max_used_pct=profile.hbm_max_used_pct,
                  devices_per_node=profile.npu_count * profile.chips_per_npu, host_ram_gb=float(ram))
