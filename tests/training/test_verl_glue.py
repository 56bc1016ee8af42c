"""--engine verl: TrainConfig -> verl Hydra overrides, composed with the installed verl's own config."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

pytest.importorskip("hydra", reason="needs the [verl] extra")
pytest.importorskip("pandas", reason="needs the [verl] extra")

from ascend_ready.errors import ConfigError
from ascend_ready.training import memory_plan as mp
from ascend_ready.training import verl_glue as vg
from ascend_ready.training.cli import main
from ascend_ready.training.config import load_config

try:
    vg.verl_dir()
except ConfigError:
    pytest.skip("verl is not installed (pip install --no-deps verl==0.9.1)", allow_module_level=True)


def overrides_for(name: str, algo: str, *extra: str, **layout) -> list[str]:
    cfg = load_config(name, list(extra))
    plan, _, _ = mp.plan_for_config(cfg, algo, engine="verl", **layout)
    return vg.to_overrides(cfg, algo, plan=plan, train_file="/d/train.parquet", val_file="/d/val.parquet",
                           output_dir="/runs/x")


def as_dict(overrides: list[str]) -> dict[str, str]:
    return dict(o.split("=", 1) for o in overrides)


@pytest.mark.parametrize("name,algo,extra", [
    ("tiny", "grpo", ("launch.device=npu",)),
    ("tiny", "ppo", ("launch.device=npu",)),
    ("grpo-qwen2.5-7b-a2", "grpo", ()),
    ("grpo-qwen3-235b-a22b-a2", "grpo", ()),
    ("ppo-qwen3-lora", "ppo", ()),
])
def test_bundled_configs_compose_with_verls_own_config(name, algo, extra):
    composed = vg.validate_overrides(overrides_for(name, algo, *extra))
    assert composed.algorithm.adv_estimator == ("grpo" if algo == "grpo" else "gae")
    assert composed.trainer.device == "npu"


def test_grpo_settings_land_on_verls_keys():
    o = as_dict(overrides_for("grpo-qwen3-235b-a22b-a2", "grpo"))
    a = "actor_rollout_ref"
    assert o[f"{a}.actor.use_kl_loss"] == "True" and o[f"{a}.actor.kl_loss_coef"] == "0.001"
    assert o[f"{a}.actor.kl_loss_type"] == "low_var_kl" and o[f"{a}.actor.clip_ratio"] == "0.2"
    assert o[f"{a}.rollout.n"] == "8" and o[f"{a}.rollout.name"] == "vllm"
    assert o["trainer.nnodes"] == "16" and o["trainer.n_gpus_per_node"] == "8"
    assert o[f"{a}.rollout.tensor_model_parallel_size"] == "16"  # what the memory plan picked
    assert o[f"{a}.actor.fsdp_config.param_offload"] == "True"
    assert o[f"{a}.model.path"] == "/data/models/Qwen3-235B-A22B"


def test_megatron_layout_and_ppo_critic_compose():
    o = overrides_for("grpo-qwen3-235b-a22b-a2", "grpo", strategy="megatron", tp=4, pp=4, ep=8, nodes=16)
    assert o[0] == "model_engine=megatron"
    composed = vg.validate_overrides(o)
    assert composed.actor_rollout_ref.actor.megatron.expert_model_parallel_size == 8
    ppo = as_dict(overrides_for("ppo-qwen3-lora", "ppo"))
    assert ppo["algorithm.use_kl_in_reward"] == "True" and ppo["critic.optim.lr"] == "1e-05"
    assert ppo["actor_rollout_ref.model.lora_rank"] == "64"


@pytest.mark.parametrize("bad,named", [
    ("actor_rollout_ref.actor.kl_los_coef=0.1",
     "verl override actor_rollout_ref.actor.kl_los_coef: not a key"),
    ("trainer.nodes=2", "verl override trainer.nodes: not a key"),
    ("algorithm.adv_estimator=grp", "algorithm.adv_estimator: 'grp' is not one of"),
    ("trainer.nnodes=two", "trainer.nnodes: 'two' must be a number"),
    ("actor_rollout_ref.actor.use_kl_loss=3", "use_kl_loss: 3 must be a boolean"),
])
def test_unknown_keys_and_refused_values_are_named(bad, named):
    with pytest.raises(ConfigError) as exc:
        vg.validate_overrides([*overrides_for("tiny", "grpo", "launch.device=npu"), bad])
    assert named in exc.value.message


def test_prompts_become_verls_parquet_rows_and_rewards_score_them(tmp_path):
    cfg = load_config("tiny")
    train, val = vg.write_parquet(cfg, tmp_path)
    import pandas as pd

    row = pd.read_parquet(train).iloc[0]
    assert row["prompt"][0]["role"] == "user" and row["data_source"] == "arithmetic"
    truth = row["reward_model"]["ground_truth"]
    assert vg.compute_score(row["data_source"], truth, truth, row["extra_info"]) == 1.5  # answer + format
    assert vg.compute_score(row["data_source"], "no idea", truth, row["extra_info"]) == 0.0
    assert len(pd.read_parquet(val)) == cfg.data.eval_size


def test_cli_engine_verl_dry_run_validates_before_any_node(tmp_path):
    never = tmp_path / "ascend-check"  # a dry run must not even start the preflight
    args = ["grpo", "-c", "tiny", "--engine", "verl", "--device", "npu", "--dry-run"]
    result = CliRunner().invoke(main, [*args, "--preflight-command", str(never), "-o", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["dry_run"] is True and "trainer.device=npu" in summary["overrides"]
    assert (tmp_path / "run" / "verl-overrides.txt").is_file()
    refused = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "bad"), "actor_rollout_ref.x=1"])
    assert refused.exit_code == 2  # our own config refuses an unknown key first
