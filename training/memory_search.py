"""The search for the smallest fleet that fits a job: the fewest nodes, then no offload, then the least
model parallelism (memory_costs prices each candidate layout); and the refusal that names it."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from ascend_ready.errors import TrainingError
from ascend_ready.training.memory_costs import MemoryPlan, plan_memory
from ascend_ready.training.memory_layout import GIB, Device, Engine, Layout, Workload
from ascend_ready.training.model_shape import ModelShape


def pow2_upto(n: int) -> list[int]:
    """1, 2, 4, ... up to n (the parallel sizes worth trying)."""
    return [2**i for i in range(int(math.log2(n)) + 1)] if n >= 1 else [1]


def candidate_layouts(model: ModelShape, nodes: int, device: Device, engine: Engine,
                      base: Layout) -> list[Layout]:
    """Layouts worth trying on `nodes` nodes, simplest first."""
    per = device.devices_per_node
    world = nodes * per
    out: list[Layout] = []
    offloads = [False, True] if not base.offload else [True]
    # a rollout engine spans at most two nodes: wider tensor parallelism across RoCE is not worth it
    rollout_tps = ([t for t in pow2_upto(min(world, 2 * per)) if model.num_heads % t == 0]
                   if engine == "verl" else [1])
    if engine == "trl":
        stages = sorted({base.zero_stage, 3})
        for stage, off in itertools.product(stages, offloads):
            out.append(replace(base, nodes=nodes, strategy="zero", zero_stage=stage, offload=off))
        return out
    # then the optimizer on the host (its step on the CPU), the last resort for device memory
    hosts = [False, True] if not base.optimizer_on_host else [True]
    moved = [(off, host) for host in hosts for off in offloads if off or not host]
    # a MoE rollout: its experts over the replica's TP only, or over up to 32 devices (vLLM's EP = TP x DP)
    reps = sorted({1, base.rollout_ep, min(32, world)}) if model.is_moe else [1]
    rollouts = [(rtp, rep) for rtp in rollout_tps for rep in reps if rep == 1 or rep % rtp == 0]
    for (off, _host), (rtp, rep) in itertools.product([m for m in moved if not m[1]], rollouts):
        out.append(replace(base, nodes=nodes, strategy="fsdp", zero_stage=3, tp=1, pp=1, ep=1, cp=1,
                           offload=off,
                           optimizer_on_host=False, rollout_tp=rtp, rollout_ep=rep))
    eps = [e for e in pow2_upto(world) if model.is_moe and model.num_experts % e == 0] or [1]
    for tp, pp, ep, (off, host), (rtp, rep) in itertools.product(
            [t for t in pow2_upto(per) if model.num_heads % t == 0], [1, 2, 4, 8, 16], eps, moved, rollouts):
        out.append(replace(base, nodes=nodes, strategy="megatron", zero_stage=1, tp=tp, pp=pp, ep=ep, sp=1,
                           offload=off, optimizer_on_host=host, rollout_tp=rtp, rollout_ep=rep))
    return out


def _simplicity(layout: Layout) -> tuple:
    return (layout.optimizer_on_host, layout.offload, layout.tp * layout.pp * layout.ep, layout.rollout_tp,
            layout.strategy != "fsdp")


def smallest_fleet(model: ModelShape, work: Workload, device: Device, *, engine: Engine = "trl",
                   base: Layout | None = None, max_nodes: int = 256) -> MemoryPlan | None:
    """The plan with the fewest nodes that fits (then no offload, then the least model parallelism)."""
    # a fleet is whole nodes: every device of each
    base = replace(base or Layout(nodes=1, devices_per_node=device.devices_per_node),
                   devices_per_node=device.devices_per_node)
    nodes = 1
    while nodes <= max_nodes:
        fitting = []
        for layout in candidate_layouts(model, nodes, device, engine, base):
            if layout.problems(model):
                continue
            w = replace(work, rollout_sequences=work.rollout_sequences * nodes // max(base.nodes, 1))
            plan = plan_memory(model, layout, w, device, engine)
            if plan.fits:
                fitting.append(plan)
        if fitting:
            return min(fitting, key=lambda p: (_simplicity(p.layout), p.peak_bytes))
        nodes += 1 if nodes < 16 else 4 if nodes < 64 else 8
    return None


def check_plan(plan: MemoryPlan, model: ModelShape, work: Workload, *, max_nodes: int = 256) -> None:
    """Raise TrainingError when the plan does not fit, naming the binding phase and its figure, and the
    smallest fleet that fits."""
    if plan.fits:
        return
    best = smallest_fleet(model, work, plan.device, engine=plan.engine, base=plan.layout, max_nodes=max_nodes)
    phase, need, limit = plan.binding
    dev = plan.device
    if phase.startswith("host"):
        where = (f"{need / GIB:.1f} GiB of host RAM per node for its offloaded states on "
                 f"{plan.layout.describe()}; the limit is {limit / GIB:.1f} GiB "
                 f"({dev.host_ram_gb:g} GB less Ray's object store and the system)")
    else:
        rule = (f"{dev.hbm_mb / 1024:g} GiB less the {dev.idle_baseline_mb} MiB driver reservation"
                if phase == "rollout" else f"{dev.max_used_pct:g} % of {dev.hbm_mb / 1024:g} GiB less the "
                f"{dev.idle_baseline_mb} MiB driver reservation")
        where = (f"{need / GIB:.1f} GiB per device in the {phase} phase on {plan.layout.describe()}; "
                 f"the limit "
                 f"is {limit / GIB:.1f} GiB ({rule}) on {dev.name}")
    msg = f"memory plan refused: {model.name} needs {where}"
    if phase == "rollout" and plan.notes:
        msg += "; " + next((n for n in plan.notes if n.startswith("rollout:")), "")
    if best is None:
        hint = f"nothing up to {max_nodes} nodes fits; use LoRA, shorter sequences or a smaller batch"
    else:
        lay = best.layout
        flags = f"--nodes {lay.nodes} --strategy {lay.strategy}" + "".join(
            f" --{k} {v}" for k, v in (("tp", lay.tp), ("pp", lay.pp), ("ep", lay.ep)) if v > 1)
        if plan.engine == "verl":
            flags += f" --rollout-tp {lay.rollout_tp}"
            if lay.rollout_ep != plan.layout.rollout_ep:
                flags += f" rollout.expert_parallel={lay.rollout_ep}"
        offload = "; set distributed.offload=true" if lay.offload and not plan.layout.offload else ""
        hint = (f"smallest fleet that fits: {lay.nodes} node(s) — {lay.describe()}, peak "
                f"{best.peak_bytes / GIB:.1f} GiB per device (`ascend-train plan -c CONFIG {flags}` shows it"
                f"{offload})")
    raise TrainingError(msg, hint=hint)
