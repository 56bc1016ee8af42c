"""What a training job needs in device memory, before anything starts: weights, gradients, optimizer
states, activations and the rollout engine's KV cache per device, judged against the hardware profile.

Pure arithmetic over the model's `config.json`, the parallel layout and the workload (no torch import).
`plan_memory()` prices one layout; memory_search finds the fewest nodes (then the simplest layout) that
fits, memory_render shows a plan, and memory_plan prices a TrainConfig and re-exports all of it (the
module to import). All sizes are bytes.

Formulas (Ψ = parameters held by one model-parallel rank, N_d = its data-parallel sharding group):

* Parameters, from config.json (SwiGLU decoder, as Qwen2/Qwen3/Llama/Mixtral): per layer, attention
  q,k,v,o = h·(n_h·d) + 2·h·(n_kv·d) + (n_h·d)·h (+ q/k/v biases for Qwen2, q/k RMSNorm for Qwen3),
  dense MLP 3·h·I, or MoE router h·E + E·3·h·I_moe (+ shared expert 3·h·I_sh), two RMSNorms 2h;
  embedding V·h, and an untied LM head V·h. Checked on Qwen2.5-7B (7.61 B) and Qwen3-235B-A22B
  (235 B total, 22 B active) in tests.
* Model states, mixed-precision Adam (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
  Training Trillion Parameter Models", §3.1 and Figure 1): 2Ψ bf16 weights + 2Ψ bf16 gradients + KΨ
  optimizer states with K = 12 (fp32 master weights, momentum, variance): 16Ψ in all. fp32 training is
  4Ψ + 4Ψ + 8Ψ. ZeRO partitions over N_d (Figure 1): stage 0 (baseline DP) (2+2+K)Ψ, stage 1 (P_os)
  2Ψ + 2Ψ + KΨ/N_d, stage 2 (P_os+g) 2Ψ + (2+K)Ψ/N_d, stage 3 (P_os+g+p) (2+2+K)Ψ/N_d. PyTorch FSDP
  full sharding (verl's `fsdp` strategy) is stage 3 over all ranks. Stage 3 also all-gathers one
  layer's full weights while it runs, plus one prefetched: 2 × 2 × (largest layer) bytes (FSDP's unit
  is one decoder layer; for a MoE layer that is every expert of it).
* Model parallelism (Megatron, verl's `megatron` strategy): non-expert weights split over TP·PP,
  expert weights over EP·ETP·PP (expert tensor parallel: Megatron's default, the TP size, which verl
  leaves unset); ZeRO-1 (Megatron's distributed optimizer) then shards over N_d = world/(TP·PP) for
  dense and world/(EP·ETP·PP) for expert weights.
* LoRA: the frozen base keeps only its weights (2Ψ, sharded by stage 3); gradients and optimizer
  states cover the adapters, r·(d_in + d_out) per adapted projection.
* Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", §4, eq. 2 and 5): per layer sbh(34 + 5as/h) bytes with 16-bit activations, and
  sbh(34/t + 5as/(ht)) with tensor and sequence parallelism t. The 34 is its term-by-term accounting
  (attention 11sbh + 5as²b, MLP 19sbh, norms 4sbh), which we keep term by term so that it carries over
  to GQA (q_dim, kv_dim), gated MLPs (8·sb·I instead of 4·sb·I for the up-projection outputs) and MoE
  (I → k·I_moe, each token visits k experts); for q_dim = kv_dim = h, a plain 4h MLP and k = 1 it is
  exactly 34sbh + 5as²b. Fused (flash) attention, which both torch_npu and vLLM-Ascend use, never
  stores the s×s scores, dropping the 5as²b term (the paper's "selective recomputation" result).
  Full recomputation (gradient checkpointing) keeps 2sbh per layer plus one layer's full activations.
  With 1F1B pipelining the first stage holds L layers' worth whatever PP is (§4.2.3). The output layer
  adds its logits, s·b·V·(2 + 4)/t (bf16 logits and their fp32 log-softmax for the log-probs).
* KV cache (Kwon et al. 2023, "Efficient Memory Management for Large Language Model Serving with
  PagedAttention", §3: "2 (key and value vectors) × 5120 (hidden state size) × 40 (number of layers) ×
  2 (bytes per FP16)" = 800 KB per token for OPT-13B): 2 · L · n_kv · d · bytes per token. A rollout
  engine with tensor parallel size t keeps ceil(n_kv/t) heads per device; its weights are 2Ψ/t.

Phases. TRL (engine `trl`) generates with the training model itself: everything is resident at
once. verl (engine `verl`) colocates actor, reference, critic and vLLM on the same devices and swaps
by phase: training = resident states + activations; rollout = rollout weights + KV cache + what stays
resident. With offload, states go to host memory while their model is idle (verl's param/optimizer
offload); under `trl`, offload is ZeRO-Offload (optimizer states, and with stage 3 the weights, live
in host memory and only the working layer is on the device).

Limit: npu-smi counts the driver's idle reservation (profile `hbm_idle_baseline_mb`), and the preflight
fails a chip above `hbm_max_used_pct` (90 %, the usual `gpu_memory_utilization=0.9` of field guides),
so the budget per device is HBM × pct − baseline.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ascend_ready.errors import ConfigError

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

#: vLLM's default cap on sequences scheduled at once per engine (SchedulerConfig.max_num_seqs)
ROLLOUT_MAX_NUM_SEQS = 256
#: host RAM per node, by the matrix product id, for the offload check when the profile states none:
#: Atlas 800T A2 and A3 servers are commonly fitted with 32 x 64 GB DDR4/DDR5 (2 TB is the A2's maximum of
#: 32 slots of 64 GB, Huawei's product page), taken here at 1 TB (16 x 64 GB, the usual order) so the check
#: errs on the safe side; `--host-ram-gb` gives the real figure.
HOST_RAM_GB_BY_PRODUCT = {"910b": 1024, "910_93": 1024, "310p": 256}
#: share of a node's RAM offloaded states may take (Ray's object store 30 %, the OS and the workers 10 %)
HOST_RAM_USABLE = 0.6
#: what vLLM's workspace takes beside weights and KV cache: one forward of max_num_batched_tokens
#: (verl's default 8192) through one layer, and the sampler's fp32 logits for max_num_seqs sequences
ROLLOUT_BATCHED_TOKENS = 8192


# ---------------------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True)
class ModelShape:
    """The config.json values that decide a decoder's size."""

    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    moe_layers: int = 0
    attention_bias: bool = False
    qk_norm: bool = False
    gated_mlp: bool = True

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any], name: str = "model") -> ModelShape:
        """Read a Hugging Face `config.json` (dense Qwen2/Qwen3/Llama, MoE Qwen3-MoE/Qwen2-MoE/Mixtral)."""
        try:
            h = int(cfg["hidden_size"])
            layers = int(cfg["num_hidden_layers"])
            heads = int(cfg["num_attention_heads"])
            vocab = int(cfg["vocab_size"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{name}: config.json lacks {exc}",
                              hint="give the model's own config.json (hidden_size, num_hidden_layers, ...)"
                              ) from None
        model_type = str(cfg.get("model_type", ""))
        experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
                      or 0)
        moe_layers = 0
        if experts:
            step = int(cfg.get("decoder_sparse_step") or 1)
            dense_only = set(cfg.get("mlp_only_layers") or [])
            first_dense = int(cfg.get("first_k_dense_replace") or 0)
            moe_layers = sum(1 for i in range(layers)
                             if i not in dense_only and i >= first_dense and (i + 1) % step == 0)
        return cls(
            name=name,
            hidden_size=h,
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or h // heads),
            intermediate_size=int(cfg.get("intermediate_size") or 4 * h),
            vocab_size=vocab,
            # PretrainedConfig's default is True; Qwen/Llama config.json files always state it.
            tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
            num_experts=experts,
            experts_per_token=int(cfg.get("num_experts_per_tok") or 0),
            moe_intermediate_size=int(cfg.get("moe_intermediate_size") or
                                      (cfg.get("intermediate_size") if experts else 0) or 0),
            shared_expert_intermediate_size=int(cfg.get("shared_expert_intermediate_size") or 0),
            moe_layers=moe_layers,
            attention_bias=bool(cfg.get("attention_bias", model_type in ("qwen2", "qwen2_moe"))),
            qk_norm=model_type.startswith("qwen3"),
            gated_mlp=str(cfg.get("hidden_act", "silu")) in ("silu", "swiglu", "gelu_pytorch_tanh"),
        )

    # sizes -----------------------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.moe_layers > 0

    def attention_params(self) -> int:
        h = self.hidden_size
        n = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        if self.attention_bias:
            n += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            n += 2 * self.head_dim
        return n + 2 * h  # the two RMSNorms of the layer

    def _mlp(self, width: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden_size * width

    def dense_mlp_params(self) -> int:
        return self._mlp(self.intermediate_size)

    def expert_params_per_layer(self) -> int:
        """All routed experts of one MoE layer."""
        return self.num_experts * self._mlp(self.moe_intermediate_size)

    def moe_shared_params_per_layer(self) -> int:
        """What a MoE layer holds besides its routed experts: the router and a shared expert."""
        n = self.hidden_size * self.num_experts
        if self.shared_expert_intermediate_size:
            n += self._mlp(self.shared_expert_intermediate_size) + self.hidden_size
        return n

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2) + self.hidden_size

    def expert_params(self) -> int:
        """Weights that expert parallelism splits (every routed expert of every MoE layer)."""
        return self.moe_layers * self.expert_params_per_layer()

    def dense_params(self) -> int:
        """Everything else: attention, dense MLPs, routers, shared experts, embeddings."""
        dense_layers = self.num_layers - self.moe_layers
        return (self.num_layers * self.attention_params() + dense_layers * self.dense_mlp_params()
                + self.moe_layers * self.moe_shared_params_per_layer() + self.embedding_params())

    def total_params(self) -> int:
        return self.dense_params() + self.expert_params()

    def active_params(self) -> int:
        """Parameters one token passes through (k of E experts)."""
        if not self.is_moe:
            return self.total_params()
        per_expert = self._mlp(self.moe_intermediate_size)
        return self.dense_params() + self.moe_layers * self.experts_per_token * per_expert

    def largest_layer_params(self) -> int:
        moe = self.attention_params() + self.moe_shared_params_per_layer() + self.expert_params_per_layer()
        dense = self.attention_params() + self.dense_mlp_params()
        return max(moe if self.is_moe else 0, dense if self.num_layers > self.moe_layers else 0)

    def lora_params(self, rank: int) -> int:
        """Adapters on q,k,v,o and every MLP projection (dense, shared and routed experts)."""
        h, r = self.hidden_size, rank
        attn = r * ((h + self.q_dim) * 2 + (h + self.kv_dim) * 2)
        mlp_proj = 3 if self.gated_mlp else 2

        def mlp(width: int) -> int:
            return mlp_proj * r * (h + width)

        per_moe = self.num_experts * mlp(self.moe_intermediate_size) + (
            mlp(self.shared_expert_intermediate_size) if self.shared_expert_intermediate_size else 0)
        dense_layers = self.num_layers - self.moe_layers
        return (self.num_layers * attn + dense_layers * mlp(self.intermediate_size)
                + self.moe_layers * per_moe)

    def kv_bytes_per_token(self, dtype_bytes: int = 2, tp: int = 1) -> int:
        """KV cache per token on one device of a tensor-parallel group of `tp` (vLLM)."""
        return 2 * self.num_layers * math.ceil(self.num_kv_heads / tp) * self.head_dim * dtype_bytes

    def activation_bytes_per_layer(self, seq: int, batch: int, *, tp: int = 1, flash: bool = True,
                                   dtype_bytes: int = 2) -> float:
        """Korthikanti et al. eq. 2/5, term by term (see the module docstring); 16-bit for dtype_bytes=2."""
        s, b, h, a = seq, batch, self.hidden_size, self.num_heads
        scale = dtype_bytes / 2  # the paper's byte counts assume 16-bit activations
        attention = (2 * h + 2 * (self.q_dim + self.kv_dim) + 2 * self.kv_dim + 2 * self.q_dim + h) * s * b
        scores = 0 if flash else 5 * a * s * s * b
        if self.is_moe:
            width = self.experts_per_token * self.moe_intermediate_size + self.shared_expert_intermediate_size
        else:
            width = self.intermediate_size
        mlp = (2 * h + (8 if self.gated_mlp else 4) * width + h) * s * b
        norms = 4 * s * b * h
        return scale * (attention + scores + mlp + norms) / tp


def load_model_shape(path: str | Path) -> ModelShape:
    """A ModelShape from a model directory (its config.json) or a config.json file."""
    p = Path(path)
    file = p / "config.json" if p.is_dir() else p
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {file}: {exc}", hint="give a model directory with a config.json"
                          ) from None
    return ModelShape.from_hf_config(data, name=p.name if p.is_dir() else p.stem.removesuffix(".config"))


# ---------------------------------------------------------------------------------------------------
# Layout, workload, device


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


# ---------------------------------------------------------------------------------------------------
# Model states (ZeRO)


def model_state_bytes(params: float, *, stage: int, shard: int, dtype_bytes: int = 2,
                      trainable: float | None = None, fp32_grads: bool = False) -> dict[str, float]:
    """Weights, gradients and Adam states per device for `params` weights sharded over `shard` ranks.

    ZeRO Figure 1: stage 0 (2+2+K)Ψ; 1: 2Ψ+2Ψ+KΨ/N_d; 2: 2Ψ+(2+K)Ψ/N_d; 3: (2+2+K)Ψ/N_d, K=12 for
    mixed precision (fp32: 4Ψ weights, 4Ψ gradients, K=8). `trainable` (LoRA) replaces Ψ in the
    gradient and optimizer terms. `fp32_grads`: DeepSpeed keeps its gradient partition in fp32, so its
    own estimator counts 18Ψ/N_d for stage 3, not 16 (`estimate_zero3_model_states_mem_needs` in
    deepspeed/runtime/zero/stage3.py: "gpu_mem = largest_layer_memory + int(18 * total_params /
    total_gpus)").
    """
    grad_bytes, k = (2, 12) if dtype_bytes == 2 else (4, 8)
    if fp32_grads:
        grad_bytes = 4
    t = params if trainable is None else trainable
    return {
        "weights": dtype_bytes * params / (shard if stage >= 3 else 1),
        "gradients": grad_bytes * t / (shard if stage >= 2 else 1),
        "optimizer": k * t / (shard if stage >= 1 else 1),
    }


def zero_bytes_per_device(params: float, stage: int, n_d: int, dtype_bytes: int = 2) -> float:
    """The ZeRO paper's total for one device (the sum of model_state_bytes)."""
    return sum(model_state_bytes(params, stage=stage, shard=n_d, dtype_bytes=dtype_bytes).values())


# ---------------------------------------------------------------------------------------------------
# A plan


@dataclass
class MemoryPlan:
    """The per-device bill of one layout, and whether it fits (device phases, and the node's host RAM)."""

    model: str
    total_params: int
    active_params: int
    layout: Layout
    engine: Engine
    device: Device
    components: dict[str, float] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    host_bytes_per_node: float = 0.0
    rollout_gpu_util: float | None = None
    model_layers: int = 0

    @property
    def peak_bytes(self) -> float:
        return max(self.phases.values())

    def limit(self, phase: str) -> float:
        """A phase's limit: the profile's budget, except for the rollout, where vLLM takes its
        gpu_memory_utilization share of the device's whole memory by design (the driver's reservation
        and what stays resident must leave it room)."""
        if phase == "rollout":
            return self.device.hbm_mb * 2**20 - self.device.idle_baseline_mb * 2**20
        return self.device.budget_bytes

    @property
    def device_fits(self) -> bool:
        return all(v <= self.limit(k) for k, v in self.phases.items())

    @property
    def host_fits(self) -> bool:
        return self.host_bytes_per_node <= self.device.host_budget_bytes or not self.host_bytes_per_node

    @property
    def fits(self) -> bool:
        return self.device_fits and self.host_fits

    @property
    def binding(self) -> tuple[str, float, float]:
        """The phase that decides the plan: (name, its bytes, its limit) -- the host RAM when offloaded
        states do not fit it and the device does, else the device phase with the highest peak."""
        if self.device_fits and not self.host_fits:
            return ("host RAM (offloaded states, per node)", self.host_bytes_per_node,
                    self.device.host_budget_bytes)
        worst = max(self.phases, key=lambda k: self.phases[k] / self.limit(k))
        return worst, self.phases[worst], self.limit(worst)


def _states(model: ModelShape, layout: Layout, work: Workload, *, frozen: bool = False,
            value_model: bool = False) -> dict[str, float]:
    """Weights/gradients/optimizer of one model per device under the layout (frozen: weights only).

    Gradients as each engine keeps them: DeepSpeed (`zero`) its partitions in fp32; verl's FSDP reduces in
    fp32 (its mixed_precision reduce_dtype) and holds the fp32 gradient shard, plus, while one unit's
    backward runs, that unit's whole gradient in fp32 before the reduce-scatter -- for a MoE layer every
    expert of it; Megatron accumulates into an fp32 main-grad buffer of the rank's whole model slice (the
    distributed optimizer shards only the optimizer states).
    """
    tp_pp = layout.tp * layout.pp
    ep_pp = layout.ep * layout.etp * layout.pp
    dense = model.dense_params() / tp_pp
    expert = model.expert_params() / ep_pp
    if value_model:  # a critic: the LM head is a 1-wide value head
        dense -= (model.vocab_size - 1) * model.hidden_size / tp_pp * (0 if model.tied_embeddings else 1)
    stage = {"fsdp": 3, "megatron": layout.zero_stage, "zero": layout.zero_stage}[layout.strategy]
    if frozen:
        stage = 3 if stage >= 3 else 0
    shard_d = layout.world if layout.strategy == "fsdp" else layout.dp
    shard_e = layout.world if layout.strategy == "fsdp" else layout.expert_dp
    # a LoRA critic trains adapters of its own (ours and verl's: critic.model.lora_rank)
    lora = model.lora_params(work.lora_rank) if work.lora_rank else None
    out = {"weights": 0.0, "gradients": 0.0, "optimizer": 0.0}
    for params, shard in ((dense, shard_d), (expert, shard_e)):
        share = params / (dense + expert) if (dense + expert) else 0
        if frozen:
            trainable = 0.0
        elif lora is not None:
            trainable = lora / tp_pp * share
        else:
            trainable = None
        # every engine here reduces or accumulates gradients in fp32 (see the docstring)
        fp32_grads = not frozen and work.dtype_bytes == 2 and (
            (layout.strategy == "zero" and stage >= 1) or layout.strategy in ("fsdp", "megatron"))
        for k, v in model_state_bytes(params, stage=stage, shard=shard, dtype_bytes=work.dtype_bytes,
                                      trainable=trainable, fp32_grads=fp32_grads).items():
            out[k] += v
    if stage >= 3:
        # the working layer, all-gathered, and the next one prefetched
        out["weights"] += 2 * work.dtype_bytes * model.largest_layer_params() / tp_pp
        if layout.strategy == "fsdp" and not frozen and lora is None:
            # the unit's unsharded fp32 gradient before its reduce-scatter
            out["gradients"] += 4 * model.largest_layer_params()
    return out


def _activations(model: ModelShape, layout: Layout, work: Workload) -> dict[str, float]:
    """Activations and logits of one micro-batch; context parallelism and Ulysses SP split the sequence."""
    s, b = math.ceil(work.seq_len / (layout.cp * layout.sp)), work.micro_batch
    per_layer = model.activation_bytes_per_layer(s, b, tp=layout.tp, flash=work.flash_attention,
                                                 dtype_bytes=work.dtype_bytes)
    if work.recompute:
        layers = 2 * s * b * model.hidden_size * work.dtype_bytes / 2 * model.num_layers / layout.tp
        layers += per_layer
    else:
        layers = per_layer * model.num_layers  # 1F1B: the first stage holds L layers' worth
    logits = s * b * model.vocab_size * (2 + 4) / layout.tp
    return {"activations": layers, "logits": logits}


def rollout_weights_bytes(model: ModelShape, layout: Layout, dtype_bytes: int = 2) -> float:
    """One device's share of the rollout engine's weights: dense weights split over its TP, experts over
    the whole replica (TP x DP; vLLM splits them over it with or without expert parallelism)."""
    return dtype_bytes * (model.dense_params() / layout.rollout_tp
                          + model.expert_params() / layout.rollout_replica)


def _rollout(plan: MemoryPlan, model: ModelShape, work: Workload, resident: float) -> None:
    """vLLM's share of the device: it reserves gpu_memory_utilization x HBM for weights, workspace and KV
    cache, and needs room for one whole sequence in it; fewer sequences at once than the batch offers is a
    throughput note, not a refusal. Unset, the utilization is what the resident states leave."""
    layout, device = plan.layout, plan.device
    hbm = device.hbm_mb * 2**20
    weights = rollout_weights_bytes(model, layout, work.dtype_bytes)
    per_token = model.kv_bytes_per_token(work.dtype_bytes, layout.rollout_tp)
    one_seq = work.seq_len * per_token
    workspace = (model.activation_bytes_per_layer(ROLLOUT_BATCHED_TOKENS, 1, tp=layout.rollout_tp)
                 + work.rollout_max_num_seqs * model.vocab_size * 4 / layout.rollout_tp)
    util = work.rollout_gpu_util
    if util is None:
        util = max(0.05, min(0.9, math.floor(100 * (plan.limit("rollout") - resident) / hbm) / 100))
    reserved = util * hbm
    kv_room = reserved - weights - workspace
    groups = max(layout.world // layout.rollout_tp, 1)  # attention groups; each runs its own sequences
    wanted = min(math.ceil(work.rollout_sequences / groups), work.rollout_max_num_seqs)
    at_once = max(0, int(kv_room // one_seq)) if one_seq else wanted
    plan.components.update({"rollout_weights": weights, "rollout_workspace": workspace,
                            "rollout_kv_cache": max(kv_room, 0.0)})
    plan.rollout_gpu_util = util
    needed = weights + workspace + one_seq
    plan.phases["rollout"] = resident + max(reserved, needed)
    if needed > reserved:
        plan.notes.append(f"rollout: gpu_memory_utilization {util:g} reserves {reserved / GIB:.1f} GiB, "
                          f"but the "
                          f"weights ({weights / GIB:.1f} GiB), workspace ({workspace / GIB:.1f} GiB) and one "
                          f"sequence of {work.seq_len} tokens ({one_seq / GIB:.2f} GiB) need "
                          f"{needed / GIB:.1f}")
    elif at_once < wanted:
        plan.notes.append(f"rollout: KV room for {at_once} of the {wanted} sequences each engine is "
                          f"given at once ({one_seq / 2**20:.0f} MiB each): vLLM runs them in turns "
                          "(throughput, not memory)")
    else:
        plan.notes.append(f"rollout: {wanted} sequences x {work.seq_len} tokens at once per engine of "
                          f"{layout.rollout_replica} device(s), gpu_memory_utilization {util:g}")


def plan_memory(model: ModelShape, layout: Layout, work: Workload, device: Device,
                engine: Engine = "trl") -> MemoryPlan:
    """Price one layout: per-device components and the peak of each phase."""
    problems = layout.problems(model)
    if problems:
        raise ConfigError("layout cannot run this model: " + "; ".join(problems),
                          hint="pick tp/pp/ep/cp/sp and the rollout's tp/ep so they divide the devices, "
                               "heads "
                               "and experts")
    plan = MemoryPlan(model=model.name, total_params=model.total_params(),
                      active_params=model.active_params(), layout=layout, engine=engine, device=device,
                      model_layers=model.num_layers)
    c = plan.components
    actor = _states(model, layout, work)
    act = _activations(model, layout, work)
    c.update({f"actor_{k}": v for k, v in actor.items()})
    c.update(act)
    if work.reference_model and not work.lora_rank:
        c["reference_weights"] = _states(model, layout, work, frozen=True)["weights"]
    critic_total = 0.0
    critic: dict[str, float] = {}
    if work.critic == "separate":
        critic = _states(model, layout, work, value_model=True)
        c.update({f"critic_{k}": v for k, v in critic.items()})
        critic_total = sum(critic.values())
        c["critic_activations"] = act["activations"]
    offload_optimizer = layout.offload
    actor_total = sum(actor.values())
    ref = c.get("reference_weights", 0.0)
    if engine == "trl":
        if offload_optimizer:
            # ZeRO-Offload: optimizer states (stage 3: also the weights) live in host memory
            c["actor_optimizer"] = 0.0
            if layout.zero_stage >= 3:
                c["actor_weights"] = 2 * work.dtype_bytes * model.largest_layer_params()
            plan.notes.append("offload: optimizer states in host memory (ZeRO-Offload)")
            actor_total = sum(v for k, v in c.items() if k.startswith("actor_"))
        kv = 0.0
        if work.rollout:
            kv = work.micro_batch * work.seq_len * model.kv_bytes_per_token(work.dtype_bytes)
            c["generation_kv_cache"] = kv
        resident = actor_total + ref + critic_total
        plan.phases["train"] = resident + act["activations"] + act["logits"] + c.get("critic_activations", 0)
        if work.rollout:
            plan.phases["generate"] = resident + kv
        return plan
    # verl: colocated workers, phase by phase
    host = 0.0
    if layout.optimizer_on_host:
        # the optimizer step runs on the CPU from host-resident states (Megatron's optimizer_cpu_offload)
        host += actor.get("optimizer", 0.0) + critic.get("optimizer", 0.0)
        actor_total -= actor.get("optimizer", 0.0)
        critic_total -= critic.get("optimizer", 0.0)
        c["actor_optimizer"] = 0.0
        if critic:
            c["critic_optimizer"] = 0.0
        plan.notes.append("optimizer on host: Adam states in host memory, the step on the CPU")
    states = actor_total + ref + critic_total
    optimizer = c.get("actor_optimizer", 0.0) + c.get("critic_optimizer", 0.0)
    offload_optimizer = layout.offload if layout.offload_optimizer is None else layout.offload_optimizer
    # what stays on the device while another model or the rollout runs
    resident_idle = ((0.0 if layout.offload else states - optimizer)
                     + (0.0 if offload_optimizer else optimizer))
    host += states - resident_idle
    if layout.offload:
        plan.notes.append("offload: idle models' weights and gradients wait in host memory"
                          + (", and their optimizer states" if offload_optimizer else ""))
    plan.host_bytes_per_node = host * layout.devices_per_node
    plan.phases["actor_update"] = (actor_total + act["activations"] + act["logits"]
                                   + (0.0 if layout.offload else ref + critic_total))
    if work.critic == "separate":
        plan.phases["critic_update"] = (critic_total + c["critic_activations"]
                                        + (0.0 if layout.offload else actor_total + ref))
    if work.rollout:
        _rollout(plan, model, work, resident_idle)
    if plan.host_bytes_per_node and not plan.host_fits:
        plan.notes.append(f"host RAM: offloaded states need {plan.host_bytes_per_node / GB:.0f} GB per "
                          f"node of "
                          f"{device.host_ram_gb:g} GB ({HOST_RAM_USABLE:.0%} usable: "
                          f"{device.host_budget_bytes / GB:.0f} "
                          "GB)")
    return plan
