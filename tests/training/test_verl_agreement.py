"""Our pre-launch check and verl 0.9.1's own validate_config (with the dataclass checks behind it) agree on
every batch layout: hypothesis draws batch sizes, generations, minibatch counts, device counts and parallel
sizes; where ours refuses, verl's refuses the same overrides, and where ours passes, verl's passes."""

from __future__ import annotations

import pytest

pytest.importorskip("hydra", reason="needs the [verl] extra")
pytest.importorskip("tensordict", reason="verl's validate_config needs the [verl] extra's tensordict")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ascend_ready.errors import ConfigError  # noqa: E402
from ascend_ready.training import memory_plan as mp  # noqa: E402
from ascend_ready.training import verl_overrides as vo  # noqa: E402
from ascend_ready.training.config import load_config  # noqa: E402

try:
    vo.verl_dir()
except ConfigError:
    pytest.skip("verl is not installed (pip install --no-deps verl==0.9.1)", allow_module_level=True)


def verdicts(algo: str, overrides: list[str]) -> tuple[list[str], str | None]:
    """(our refusals that verl's validate_config makes too, verl's refusal or None)."""
    cfg = load_config("tiny", ["launch.device=npu", "precision=bf16", *overrides])
    plan, _, _ = mp.plan_for_config(cfg, algo, engine="verl")
    ours = [m for where, m in vo.check_batches(cfg, algo, plan.layout) if where in ("validate_config",
                                                                                    "rollout")]
    raw = vo.to_overrides(cfg, algo, plan=plan, train_file="/d/t.parquet", val_file="/d/v.parquet",
                          output_dir="/r", check=False)
    try:
        vo.verl_validate(vo.compose(raw), cfg)
        theirs = None
    except ConfigError as exc:
        theirs = exc.message
    return ours, theirs


layouts = st.fixed_dictionaries({
    "nnodes": st.integers(1, 3),
    "nproc": st.sampled_from([1, 2, 3, 4, 8]),
    "batch": st.integers(1, 12),
    "strategy": st.sampled_from(["fsdp", "megatron"]),
    "tp": st.sampled_from([1, 2]),
    "pp": st.sampled_from([1, 2]),
})


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts, generations=st.integers(2, 9), accumulation=st.integers(1, 4))
def test_grpo_our_check_and_verls_agree(layout, generations, accumulation):
    sizes = ([f"distributed.tensor_parallel={layout['tp']}", f"distributed.pipeline_parallel={layout['pp']}"]
             if layout["strategy"] == "megatron" else [])
    ours, theirs = verdicts("grpo", [
        f"launch.nnodes={layout['nnodes']}", f"launch.nproc_per_node={layout['nproc']}",
        f"batch_size={layout['batch']}", f"grpo.num_generations={generations}",
        f"gradient_accumulation_steps={accumulation}", f"distributed.strategy={layout['strategy']}", *sizes])
    assert bool(ours) == (theirs is not None), (ours, theirs)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts, minibatches=st.integers(1, 6))
def test_ppo_our_check_and_verls_agree(layout, minibatches):
    ours, theirs = verdicts("ppo", [
        f"launch.nnodes={layout['nnodes']}", f"launch.nproc_per_node={layout['nproc']}",
        f"batch_size={layout['batch']}", f"ppo.num_minibatches={minibatches}", "distributed.strategy=fsdp"])
    assert bool(ours) == (theirs is not None), (ours, theirs)


def test_the_issues_cases_are_refused_by_ours_first_in_our_words():
    # grpo.num_generations=6 on the 7B config: 256 completions per step make 42 groups = 252 completions,
    # which do not divide over the 8 devices: verl's validate_config asserts; ours says it first
    cfg = load_config("grpo-qwen2.5-7b-a2", ["grpo.num_generations=6"])
    plan, _, _ = mp.plan_for_config(cfg, "grpo", engine="verl")
    with pytest.raises(ConfigError) as exc:
        vo.to_overrides(cfg, "grpo", plan=plan, train_file="/t", val_file="/v", output_dir="/r")
    assert "a step's 252 completions" in exc.value.message and "the 8 devices" in exc.value.message
    ours, theirs = verdicts("grpo", ["launch.nproc_per_node=8", "batch_size=8",
                                     "gradient_accumulation_steps=4",
                                     "grpo.num_generations=6"])
    assert ours and theirs and "252" in theirs
    # PPO minibatch splits of 3: 128 prompts into mini-batches of 42, which verl's worker cannot split over
    # 8 ranks (engine_workers.py asserts it); ours refuses the split
    cfg = load_config("ppo-qwen3-lora", ["ppo.num_minibatches=3"])
    plan, _, _ = mp.plan_for_config(cfg, "ppo", engine="verl")
    problems = dict((m, w) for w, m in vo.check_batches(cfg, "ppo", plan.layout))
    assert any("ppo.num_minibatches=3 does not divide the 128 prompts" in m for m in problems)
    assert any("42 responses does not split over the 8" in m for m in problems)
    with pytest.raises(ConfigError, match=r"ppo\.num_minibatches=3"):
        vo.to_overrides(cfg, "ppo", plan=plan, train_file="/t", val_file="/v", output_dir="/r")
