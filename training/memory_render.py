"""A memory plan shown to people (the table of `ascend-train plan`) and to programs (its JSON), in GiB
as npu-smi's MB are MiB."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ascend_ready.training.memory_costs import MemoryPlan
from ascend_ready.training.memory_layout import GIB


def format_plan(plan: MemoryPlan) -> str:
    """The plan as a table for people (GiB, as npu-smi's MB are MiB)."""
    dev = plan.device
    lines = [f"memory plan: {plan.model} ({plan.total_params / 1e9:.2f} B parameters, "
             f"{plan.active_params / 1e9:.2f} B active), engine {plan.engine}",
             f"layout: {plan.layout.describe()}",
             f"device: {dev.name}, {dev.hbm_mb / 1024:g} GiB, limit {dev.budget_bytes / GIB:.2f} GiB "
             f"({dev.max_used_pct:g} % less the {dev.idle_baseline_mb} MiB driver reservation)",
             "", f"{'per device':<24}{'GiB':>10}"]
    lines += [f"  {k:<22}{v / GIB:>10.2f}" for k, v in plan.components.items() if v]
    lines += ["", f"{'phase peak':<24}{'GiB':>10}{'limit':>10}"]
    lines += [f"  {k:<22}{v / GIB:>10.2f}{plan.limit(k) / GIB:>10.2f}" for k, v in plan.phases.items()]
    lines.append("")
    if plan.host_bytes_per_node:
        lines += [f"host RAM per node: {plan.host_bytes_per_node / GIB:.1f} GiB offloaded, limit "
                  f"{dev.host_budget_bytes / GIB:.1f} GiB of {dev.host_ram_gb:g} GB", ""]
    lines += [f"note: {n}" for n in plan.notes]
    phase, need, limit = plan.binding
    lines.append(f"fits: {'yes' if plan.fits else 'NO'} (binding: {phase}, {need / GIB:.1f} GiB of "
                 f"{limit / GIB:.1f} GiB)")
    return "\n".join(lines)


def plan_as_dict(plan: MemoryPlan) -> dict[str, Any]:
    """The plan as `ascend-train plan --format json` prints it."""
    return {
        "model": plan.model,
        "total_params": plan.total_params,
        "active_params": plan.active_params,
        "engine": plan.engine,
        "layout": asdict(plan.layout) | {"world": plan.layout.world, "summary": plan.layout.describe()},
        "device": {"name": plan.device.name, "hbm_gib": round(plan.device.hbm_mb / 1024, 2),
                   "limit_pct": plan.device.max_used_pct,
                   "idle_baseline_mib": plan.device.idle_baseline_mb,
                   "budget_gib": round(plan.device.budget_bytes / GIB, 2)},
        "per_device_gib": {k: round(v / GIB, 3) for k, v in plan.components.items()},
        "phases_gib": {k: round(v / GIB, 3) for k, v in plan.phases.items()},
        "phase_limits_gib": {k: round(plan.limit(k) / GIB, 3) for k in plan.phases},
        "peak_gib": round(plan.peak_bytes / GIB, 3),
        "host_ram_per_node_gib": round(plan.host_bytes_per_node / GIB, 3),
        "host_ram_limit_gib": round(plan.device.host_budget_bytes / GIB, 3),
        "rollout_gpu_memory_utilization": plan.rollout_gpu_util,
        "binding_phase": plan.binding[0],
        "fits": plan.fits,
        "notes": plan.notes,
    }
