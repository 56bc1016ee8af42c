"""The memory plan accepts the RL configurations their publishers run (tests/training/data/
published_rl_recipes.yml, each with its source), and refuses the same layouts one step too small."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ascend_ready.training import memory_plan as mp

RECIPES = yaml.safe_load((Path(__file__).parent / "data" / "published_rl_recipes.yml").read_text())["recipes"]


def priced(recipe: dict, **changes) -> mp.MemoryPlan:
    device = mp.Device(**recipe["device"])
    layout = mp.Layout(devices_per_node=device.devices_per_node, **recipe["layout"])
    work = mp.Workload(algorithm="grpo", rollout=True, **recipe["workload"])
    model = mp.load_model_shape(mp.BUNDLED_MODEL_DIR / recipe["model"])
    return mp.plan_memory(model, replace(layout, **changes), work, device, "verl")


@pytest.mark.parametrize("recipe", RECIPES, ids=[r["name"].split(",")[0] for r in RECIPES])
def test_the_plan_accepts_each_published_recipe(recipe):
    assert recipe["source"] and recipe["model"]
    plan = priced(recipe)
    assert plan.fits, (plan.binding, plan.notes)
    # the published gpu_memory_utilization is what the rollout reserves, and it holds at least one sequence
    assert plan.rollout_gpu_util == recipe["workload"]["rollout_gpu_util"]
    model = mp.load_model_shape(mp.BUNDLED_MODEL_DIR / recipe["model"])
    one_sequence = recipe["workload"]["seq_len"] * model.kv_bytes_per_token(2, plan.layout.rollout_tp)
    assert plan.components["rollout_kv_cache"] >= one_sequence


@pytest.mark.parametrize("recipe", RECIPES, ids=[r["name"].split(",")[0] for r in RECIPES])
def test_without_its_offload_each_recipe_is_refused_naming_the_phase(recipe):
    """The recipes offload for a reason: kept on the device, the states no longer leave the rollout room
    (or the update's peak is over), and the refusal names that phase."""
    plan = priced(recipe, offload=False, optimizer_on_host=False, offload_optimizer=None)
    assert not plan.fits
    phase, need, limit = plan.binding
    assert phase in ("rollout", "actor_update") and need > limit


def test_fewer_concurrent_sequences_are_a_note_and_one_sequence_too_many_a_refusal():
    recipe = RECIPES[1]
    plan = priced(recipe)
    assert any("vLLM runs them in turns" in n for n in plan.notes)  # 64 wanted, fewer fit: a note
    model = mp.load_model_shape(mp.BUNDLED_MODEL_DIR / recipe["model"])
    tight = mp.plan_memory(model, replace(plan.layout, rollout_ep=1), replace(
        mp.Workload(algorithm="grpo", rollout=True, **recipe["workload"])), plan.device, "verl")
    assert not tight.fits and tight.binding[0] == "rollout"
    assert any("need" in n and "gpu_memory_utilization 0.85 reserves" in n for n in tight.notes)


def test_offloaded_states_are_checked_against_the_nodes_ram():
    recipe = RECIPES[0]
    plan = priced(recipe)
    assert plan.host_bytes_per_node > 0
    small = mp.plan_memory(mp.load_model_shape(mp.BUNDLED_MODEL_DIR / recipe["model"]), plan.layout,
                           mp.Workload(algorithm="grpo", rollout=True, **recipe["workload"]),
                           replace(plan.device, host_ram_gb=256), "verl")
    assert not small.fits and small.binding[0].startswith("host RAM")
