"""What a training job needs in device memory, before anything starts: weights, gradients, optimizer
states, activations and the rollout engine's KV cache per device, judged against the hardware profile.

Pure arithmetic over the model's `config.json` (model_shape), the parallel layout, the workload and the
device (memory_layout), with no torch import. `plan_memory()` prices one layout; memory_search finds the
fewest nodes (then the simplest layout) that fits, memory_render shows a plan, and memory_plan prices a
TrainConfig and re-exports all of it (the module to import). All sizes are bytes.

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

import math
from dataclasses import dataclass, field

from ascend_ready.errors import ConfigError
from ascend_ready.training.memory_layout import GB, GIB, HOST_RAM_USABLE, Device, Engine, Layout, Workload
from ascend_ready.training.model_shape import ModelShape

#: vLLM's default cap on sequences scheduled at once per engine (SchedulerConfig.max_num_seqs)
ROLLOUT_MAX_NUM_SEQS = 256
#: what vLLM's workspace takes beside weights and KV cache: one forward of max_num_batched_tokens
#: (verl's default 8192) through one layer, and the sampler's fp32 logits for max_num_seqs sequences
ROLLOUT_BATCHED_TOKENS = 8192


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
