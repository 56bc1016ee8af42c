"""A training job's memory plan from its TrainConfig: the entry point of `ascend-train plan` and of the
launch gate, and the module to import (it re-exports memory_costs, memory_search and memory_render).

The formulas, with their sources, are in the docstring of memory_costs (the model's shape is
model_shape; the layout, workload and device are memory_layout); the search for the smallest fleet that
fits is memory_search; the table and JSON of a plan are memory_render.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ascend_ready.errors import ConfigError
from ascend_ready.training.memory_costs import (
    ROLLOUT_MAX_NUM_SEQS,
    MemoryPlan,
    model_state_bytes,
    plan_memory,
    rollout_weights_bytes,
    zero_bytes_per_device,
)
from ascend_ready.training.memory_layout import (
    GB,
    GIB,
    HBM_MB_BY_PRODUCT,
    HOST_RAM_GB_BY_PRODUCT,
    Device,
    Engine,
    Layout,
    Strategy,
    Workload,
    device_from_profile,
)
from ascend_ready.training.memory_render import format_plan, plan_as_dict
from ascend_ready.training.memory_search import candidate_layouts, check_plan, pow2_upto, smallest_fleet
from ascend_ready.training.model_shape import ModelShape, load_model_shape

__all__ = [
    "BUNDLED_MODEL_DIR",
    "GB",
    "GIB",
    "HBM_MB_BY_PRODUCT",
    "HOST_RAM_GB_BY_PRODUCT",
    "ROLLOUT_MAX_NUM_SEQS",
    "TINY_VOCAB",
    "Device",
    "Engine",
    "Layout",
    "MemoryPlan",
    "ModelShape",
    "Strategy",
    "Workload",
    "candidate_layouts",
    "check_plan",
    "device_from_profile",
    "engine_of",
    "format_plan",
    "launch_gate",
    "layout_from_config",
    "load_model_shape",
    "model_state_bytes",
    "plan_as_dict",
    "plan_for_config",
    "plan_memory",
    "resolve_model_shape",
    "rollout_weights_bytes",
    "smallest_fleet",
    "workload_from_config",
    "zero_bytes_per_device",
]


def workload_from_config(cfg: Any, algorithm: str, *, engine: Engine = "trl") -> Workload:
    """The per-device workload of a training.config.TrainConfig for `algorithm`."""
    dtype_bytes = 4 if cfg.precision == "fp32" else 2
    lora = cfg.model.lora.r if cfg.model.lora is not None else None
    gen = cfg.generation
    if algorithm in ("grpo", "ppo"):
        seq = gen.max_prompt_length + gen.max_completion_length
        if algorithm == "grpo":
            micro, ref = cfg.batch_size, cfg.grpo.beta > 0
            per_step = cfg.batch_size * cfg.gradient_accumulation_steps
            critic = "none"
        else:
            micro = max(1, cfg.batch_size // cfg.ppo.num_minibatches)
            ref = cfg.ppo.kl_coef > 0
            per_step = cfg.batch_size
            critic = "separate" if engine == "verl" else cfg.ppo.critic
        world = cfg.launch.nnodes * cfg.launch.nproc_per_node
        return Workload(algorithm=algorithm, micro_batch=micro, seq_len=seq, dtype_bytes=dtype_bytes,
                        recompute=cfg.model.gradient_checkpointing, lora_rank=lora, reference_model=ref,
                        critic=critic, rollout=True, rollout_sequences=per_step * world,
                        rollout_gpu_util=cfg.rollout.gpu_memory_utilization,
                        rollout_max_num_seqs=cfg.rollout.max_num_seqs)
    micro = cfg.batch_size * (2 if algorithm == "rm" else 1)
    return Workload(algorithm=algorithm, micro_batch=micro, seq_len=cfg.max_length, dtype_bytes=dtype_bytes,
                    recompute=cfg.model.gradient_checkpointing, lora_rank=lora)


def engine_of(cfg: Any) -> tuple[Engine, str]:
    """The engine a config is written for, and why: verl where it names a verl training strategy
    (distributed.strategy fsdp or megatron) or a size only verl runs (tensor/pipeline/expert/context/Ulysses
    parallel above 1: TRL's trainers shard with ZeRO only), else trl."""
    d = cfg.distributed
    if d.strategy != "auto":
        return "verl", f"the config's distributed.strategy is {d.strategy}"
    sizes = {"tensor_parallel": d.tensor_parallel, "pipeline_parallel": d.pipeline_parallel,
             "expert_parallel": d.expert_parallel, "context_parallel": d.context_parallel,
             "sequence_parallel": d.sequence_parallel}
    above = [k for k, v in sizes.items() if v > 1]
    if above:
        return "verl", f"the config sets distributed.{above[0]}={sizes[above[0]]} (verl only)"
    return "trl", "the config names no verl strategy or model-parallel size"


def layout_from_config(cfg: Any, device: Device, *, engine: Engine = "trl", strategy: Strategy | None = None,
                       tp: int | None = None, pp: int | None = None, ep: int | None = None,
                       rollout_tp: int | None = None, nodes: int | None = None) -> Layout:
    """The layout a TrainConfig asks for (distributed.* and rollout.*; arguments given here win)."""
    d = cfg.distributed
    if engine == "verl":
        tp, pp, ep = tp or d.tensor_parallel, pp or d.pipeline_parallel, ep or d.expert_parallel
        cp, sp = d.context_parallel, d.sequence_parallel
    else:  # TRL's trainers shard with ZeRO only: the config's model-parallel sizes are verl's
        tp, pp, ep, cp, sp = tp or 1, pp or 1, ep or 1, 1, 1
    zero = d.zero_stage
    if strategy is None and engine == "verl":
        strategy = None if d.strategy == "auto" else d.strategy
    if strategy is None:
        strategy = ("megatron" if (tp, pp, ep, cp) != (1, 1, 1,
                                                       1) else "fsdp") if engine == "verl" else "zero"
    if strategy == "megatron":
        zero = 1  # Megatron's distributed optimizer
    per_node = min(cfg.launch.nproc_per_node, device.devices_per_node)
    return Layout(nodes=nodes or cfg.launch.nnodes, devices_per_node=per_node,
                  strategy=strategy, zero_stage=3 if strategy == "fsdp" else zero, tp=tp, pp=pp, ep=ep,
                  cp=cp, sp=sp, offload=d.offload, rollout_tp=rollout_tp or cfg.rollout.tensor_parallel or 1,
                  rollout_ep=cfg.rollout.expert_parallel, etp_size=d.expert_tensor_parallel,
                  optimizer_on_host=d.optimizer_on_host and strategy == "megatron")


def fit_layout(layout: Layout, model: ModelShape) -> Layout:
    """The config's layout on a fleet it does not tile (`plan --nodes 1` of a 128-device layout): each
    parallel size halved, pipeline first, then the experts and the rollout's, until it does, so the plan
    prices the same job on that fleet and names the phase that does not fit."""
    if not layout.problems(model):
        return layout
    for name in ("pp", "ep", "cp", "rollout_ep", "tp", "rollout_tp", "sp"):
        while layout.problems(model) and getattr(layout, name) > 1:
            layout = replace(layout, **{name: getattr(layout, name) // 2})
            if name == "rollout_ep" and layout.rollout_ep < layout.rollout_tp:
                layout = replace(layout, rollout_ep=1)
    return layout


#: training/configs/model-<name>.json: config.json copies of the models the bundled configs name
BUNDLED_MODEL_DIR = Path(__file__).resolve().parent / "configs"
#: the tiny character tokenizer's size: 3 special tokens + 18 characters (training/models.py)
TINY_VOCAB = 21


def resolve_model_shape(cfg: Any, model_config: str | Path | None = None) -> ModelShape:
    """The model's shape: an explicit config.json, else model.path/config.json, else the bundled copy
    named after model.path (`Qwen3-235B-A22B` -> configs/model-qwen3-235b-a22b.json), else model.tiny."""
    if model_config is not None:
        return load_model_shape(model_config)
    path = cfg.model.path
    if path and (Path(path) / "config.json").is_file():
        return load_model_shape(path)
    if path:
        stem = Path(path).name.lower()
        for name in (stem, stem.removesuffix("-instruct")):
            bundled = BUNDLED_MODEL_DIR / f"model-{name}.json"
            if bundled.is_file():
                shape = load_model_shape(bundled)
                return replace(shape, name=Path(path).name)
    if cfg.model.tiny is not None:
        t = cfg.model.tiny
        return ModelShape(name=f"tiny-{t.architecture}", hidden_size=t.hidden_size, num_layers=t.num_layers,
                          num_heads=t.num_heads, num_kv_heads=t.num_heads,
                          head_dim=t.hidden_size // t.num_heads,
                          intermediate_size=t.intermediate_size, vocab_size=TINY_VOCAB, tied_embeddings=True,
                          qk_norm=t.architecture == "qwen3", attention_bias=t.architecture == "qwen2")
    raise ConfigError(f"no config.json for model {path}",
                      hint="give --model-config PATH/config.json (the plan needs the model's shape)")


def plan_for_config(cfg: Any, algorithm: str, *, engine: Engine = "trl", profile: str | None = None,
                    nodes: int | None = None, strategy: Strategy | None = None, tp: int | None = None,
                    pp: int | None = None, ep: int | None = None, rollout_tp: int | None = None,
                    model_config: str | Path | None = None, hbm_gb: float | None = None,
                    host_ram_gb: float | None = None) -> tuple[MemoryPlan, ModelShape, Workload]:
    """Price a TrainConfig on the hardware profile (default: the project's Atlas 800T A2)."""
    from ascend_ready.checks.profile import load_profile

    device = device_from_profile(load_profile(profile))
    if hbm_gb is not None:
        device = replace(device, hbm_mb=int(hbm_gb * GB / 2**20))
    if host_ram_gb is not None:
        device = replace(device, host_ram_gb=host_ram_gb)
    model = resolve_model_shape(cfg, model_config)
    work = workload_from_config(cfg, algorithm, engine=engine)
    layout = layout_from_config(cfg, device, engine=engine, strategy=strategy, tp=tp, pp=pp, ep=ep,
                                rollout_tp=rollout_tp, nodes=nodes)
    if nodes is not None and nodes != cfg.launch.nnodes:
        world = cfg.launch.nnodes * cfg.launch.nproc_per_node
        work = replace(work, rollout_sequences=work.rollout_sequences * layout.world // max(world, 1))
    fitted = fit_layout(layout, model)
    note = [] if fitted == layout else [f"layout: the configured {layout.describe()} does not tile "
                                        f"{layout.world} devices; priced as {fitted.describe()}"]
    layout = fitted
    if rollout_tp is None and cfg.rollout.tensor_parallel is None and engine == "verl":
        # the smallest rollout tensor-parallel size whose weights fit (fewer engines, more KV); when none
        # does, the one closest to fitting, so a refusal names the phase that really binds
        trials = [replace(layout, rollout_tp=t) for t in pow2_upto(min(layout.world,
                                                                       2 * device.devices_per_node))]
        plans = [plan_memory(model, t, work, device, engine) for t in trials if not t.problems(model)]
        if plans:
            fitting = [p for p in plans if p.fits]
            chosen = fitting[0] if fitting else min(plans, key=lambda p: p.binding[1] / p.binding[2])
            chosen.notes[:0] = note
            return chosen, model, work
    plan = plan_memory(model, layout, work, device, engine)
    plan.notes[:0] = note
    return plan, model, work


def launch_gate(cfg: Any, algorithm: str, *, engine: Engine = "trl", profile: str | None = None,
                **layout: Any) -> MemoryPlan | None:
    """Before any launch: the plan of this job, or TrainingError naming the binding phase and the smallest
    fleet that fits.

    None on CPU (no device memory to plan). `layout` takes plan_for_config's strategy/tp/pp/ep/rollout_tp.
    """
    if cfg.launch.device == "cpu":
        return None
    plan, model, work = plan_for_config(cfg, algorithm, engine=engine, profile=profile, **layout)
    check_plan(plan, model, work)
    return plan
