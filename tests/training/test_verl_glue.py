"""--engine verl: TrainConfig -> verl Hydra overrides, composed with the installed verl's own config and
checked by verl's own validate_config; the prompts as verl's parquet rows and the reward hook verl calls."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

pytest.importorskip("hydra", reason="needs the [verl] extra")
pytest.importorskip("pandas", reason="needs the [verl] extra")

from ascend_ready.errors import ConfigError
from ascend_ready.training import memory_plan as mp
from ascend_ready.training import verl_data as vd
from ascend_ready.training import verl_overrides as vg
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
    assert o[f"{a}.actor.kl_loss_type"] == "low_var_kl" and o[f"{a}.actor.clip_ratio_low"] == "0.2"
    assert o[f"{a}.rollout.n"] == "8" and o[f"{a}.rollout.name"] == "vllm"
    assert o["trainer.nnodes"] == "16" and o["trainer.n_gpus_per_node"] == "8"
    assert o[f"{a}.rollout.tensor_model_parallel_size"] == "4"
    assert o[f"{a}.rollout.expert_parallel_size"] == "32"
    assert o[f"{a}.rollout.data_parallel_size"] == "8"  # vLLM's EP = TP x DP
    assert o[f"{a}.actor.megatron.param_offload"] == "True"
    assert o[f"{a}.model.path"] == "/data/models/Qwen3-235B-A22B"
    # one optimizer update per generated batch, as TRL: 8 x 4 x 128 completions = 512 prompts of 8
    assert o["data.train_batch_size"] == "512" and o[f"{a}.actor.ppo_mini_batch_size"] == "512"
    assert o[f"{a}.actor.ppo_micro_batch_size_per_gpu"] == "8"
    # what used to be lost: warmup, the schedule, the clipping key verl 0.9.1 reads, NPU torch.compile off
    assert o[f"{a}.actor.optim.lr_warmup_steps"] == "5" and o[f"{a}.actor.optim.lr_decay_style"] == "constant"
    assert o[f"{a}.actor.optim.clip_grad"] == "1.0" and f"{a}.actor.grad_clip" not in o
    # the Megatron engine has no torch.compile; under FSDP it is fsdp_config's key (test_verl_reads.py)
    assert f"{a}.actor.use_torch_compile" not in o and f"{a}.nccl_timeout" not in o
    assert o["reward.custom_reward_function.path"] == "pkg://ascend_ready.training.verl_data"
    cosine = as_dict(overrides_for("grpo-qwen2.5-7b-a2", "grpo"))
    assert cosine[f"{a}.actor.optim.lr_scheduler_type"] == "cosine"


def test_megatron_layout_and_ppo_critic_compose():
    o = overrides_for("grpo-qwen3-235b-a22b-a2", "grpo")
    assert vg.config_name(o) == "ppo_megatron_trainer"
    composed = vg.validate_overrides(o)
    vg.verl_validate(composed, load_config("grpo-qwen3-235b-a22b-a2"))
    meg = composed.actor_rollout_ref.actor.megatron
    sizes = (meg.tensor_model_parallel_size, meg.pipeline_model_parallel_size, meg.expert_model_parallel_size)
    assert sizes == (4, 8, 8)
    # 94 layers over 8 stages: the embedding and the loss count as a layer each, as verl's 235B recipe
    assert meg.override_transformer_config.account_for_embedding_in_pipeline_split is True
    assert composed.actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_cpu_offload is True
    ppo = as_dict(overrides_for("ppo-qwen3-lora", "ppo"))
    assert ppo["algorithm.use_kl_in_reward"] == "True" and ppo["critic.optim.lr"] == "1e-05"
    assert ppo["actor_rollout_ref.model.lora_rank"] == "64"
    # verl 0.9.1's critic LoRA crashes inside peft: the critic trains in full, and the launch log says so
    assert "critic.model.lora_rank" not in ppo
    assert ppo["critic.optim.lr_warmup_steps"] == "10" and ppo["critic.ppo_mini_batch_size"] == "32"


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
    train, val = vd.write_parquet(cfg, tmp_path)
    import pandas as pd

    row = pd.read_parquet(train).iloc[0]
    assert row["prompt"][0]["role"] == "user" and row["data_source"] == "arithmetic"
    truth = row["reward_model"]["ground_truth"]
    assert vd.compute_score(row["data_source"], truth, truth, row["extra_info"]) == 1.5  # answer + format
    assert vd.compute_score(row["data_source"], "no idea", truth, row["extra_info"]) == 0.0
    assert len(pd.read_parquet(val)) == cfg.data.eval_size


def test_cli_engine_verl_dry_run_validates_before_any_node(tmp_path):
    never = tmp_path / "ascend-check"  # a dry run must not even start the preflight
    args = ["grpo", "-c", "tiny", "--engine", "verl", "--device", "npu", "--dry-run"]
    result = CliRunner().invoke(main, [*args, "--preflight-command", str(never), "-o", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["dry_run"] is True and "trainer.device=npu" in summary["overrides"]
    assert summary["overrides"][0] == "--config-name=ppo_trainer"
    assert (tmp_path / "run" / "verl-overrides.txt").is_file()
    assert "by verl's validate_config" in result.stderr
    refused = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "bad"), "actor_rollout_ref.x=1"])
    assert refused.exit_code == 2  # our own config refuses an unknown key first


def test_cli_235b_megatron_dry_run_composes_and_passes_verls_validate_config(tmp_path):
    args = ["grpo", "-c", "grpo-qwen3-235b-a22b-a2", "--engine", "verl", "--strategy", "megatron",
            "--dry-run", "-o", str(tmp_path / "run")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["overrides"][0] == "--config-name=ppo_megatron_trainer"
    assert "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4" in summary["overrides"]
    assert "memory plan: peak" in result.stderr and "tp=4 pp=8 ep=8" in result.stderr
    # nothing verl would refuse is written: the 7B config with 6 generations is refused by ours, first
    bad = CliRunner().invoke(main, ["grpo", "-c", "grpo-qwen2.5-7b-a2", "--engine", "verl", "--dry-run",
                                    "-o", str(tmp_path / "bad"), "grpo.num_generations=6"])
    assert bad.exit_code == 2 and "a step's 252 completions" in bad.stderr
    assert not (tmp_path / "bad" / "verl-overrides.txt").exists()
    fsdp = CliRunner().invoke(main, [*args[:6], "fsdp", "--dry-run", "-o", str(tmp_path / "f")])
    # the same job under --strategy fsdp: full sharding cannot hold it, and the plan says so first
    assert fsdp.exit_code == 1 and "memory plan refused" in fsdp.stderr and "FSDP full shard" in fsdp.stderr


def test_verl_loads_the_reward_hook_from_the_installed_package_not_a_file():
    """What verl's workers do with reward.custom_reward_function (verl.trainer.ppo.reward): the module
    path our overrides give, imported as a package module on any node that has ascend-ready."""
    pytest.importorskip("tensordict", reason="importing verl needs the [verl] extra")
    from verl.utils.import_utils import load_extern_object

    o = as_dict(overrides_for("tiny", "grpo", "launch.device=npu"))
    path, name = o["reward.custom_reward_function.path"], o["reward.custom_reward_function.name"]
    assert path.startswith("pkg://") and "/" not in path.removeprefix("pkg://")
    fn = load_extern_object(module_path=path, object_name=name)
    assert fn is vd.compute_score


def test_the_node_probe_reports_the_pinned_packages_as_installed_here():
    """The probe the launcher runs with each node's interpreter, run with this one: its JSON names the
    versions the engine gate compares with the matrix's pins."""
    import subprocess
    import sys
    from importlib.metadata import version

    from ascend_ready.training import verl_glue

    code = verl_glue._RUNTIME_PROBE % (verl_glue.VERL_RUNTIME, verl_glue.PINNED_PACKAGES)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    data = json.loads(out.strip().splitlines()[-1])
    assert data["ray"] == version("ray") and "vllm" in data["missing"]
    assert data["packages"]["verl"] == "0.9.1" and data["packages"]["vllm-ascend"] is None
    assert data["packages"]["megatron-core"] == version("megatron-core")


def test_hccl_settings_reach_the_ray_workers_and_strategy_needs_the_verl_engine(tmp_path):
    extra_env = "launch.hccl.extra_env={HCCL_BUFFSIZE: \"it's 200\"}"
    o = overrides_for("tiny", "grpo", "launch.device=npu", extra_env)
    composed = vg.validate_overrides(o)
    env = composed.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.HCCL_CONNECT_TIMEOUT == "1800" and env.HCCL_BUFFSIZE == "it's 200"
    refused = CliRunner().invoke(main, ["grpo", "-c", "tiny", "--strategy", "megatron", "--dry-run",
                                        "-o", str(tmp_path / "run")])
    assert refused.exit_code == 2 and "--engine verl" in refused.stderr


# ------------------------------------------------ one node: the trainer runs here, so here is compared

#: what verl's row verl-0.9.1 pins (provision/matrix.yml), as a node that follows it has installed
PINNED = {"verl": "0.9.1", "vllm": "0.11.0", "vllm-ascend": "0.11.0rc1", "megatron-core": "0.12.1",
          "triton-ascend": "3.2.0rc4", "torchvision": "0.22.1", "transformers": "5.9.0",
          "transferqueue": "0.1.11", "megatron-bridge": "0.5.2"}
STACK = {"cann": "8.3.RC1", "torch": "2.7.1", "torch_npu": "2.7.1"}


def test_one_node_runs_the_releases_its_verl_row_pins_or_is_refused_naming_them():
    """Issue 28: across nodes every node's engine packages are compared with the row before Ray starts; a
    single-node verl run (its trainer in this interpreter) was not compared at all."""
    from ascend_ready.errors import MatrixError
    from ascend_ready.training import verl_glue

    fsdp, logs = load_config("tiny"), []
    # fsdp: Megatron's packages are not loaded, so not compared
    verl_glue.check_this_node(fsdp, STACK, {**PINNED, "megatron-core": None}, logs.append)
    assert logs and "verl-0.9.1" in logs[0]
    with pytest.raises(MatrixError) as exc:
        verl_glue.check_this_node(fsdp, STACK, {**PINNED, "vllm-ascend": "0.10.0rc1"}, logs.append)
    assert ": vllm-ascend 0.10.0rc1, not 0.11.0rc1" in exc.value.message
    with pytest.raises(MatrixError) as exc:
        verl_glue.check_this_node(fsdp, {**STACK, "torch": "2.6.0"}, PINNED, logs.append)
    assert "verl does not support these nodes" in exc.value.message and "torch 2.6.0" in exc.value.message
    with pytest.raises(MatrixError) as exc:
        verl_glue.check_this_node(fsdp, {**STACK, "cann": None}, PINNED, logs.append)
    assert "CANN version is not read" in exc.value.message and "set_env.sh" in exc.value.hint


def test_the_local_stack_is_read_from_the_toolkit_set_env_points_at(tmp_path, monkeypatch):
    from pathlib import Path

    from ascend_ready.training import verl_glue

    real = (Path(__file__).parents[1] / "parsers/real"
            / "ascend_toolkit_install.info_8.2.RC1-x86_64_vllm-ascend-2732.txt")
    (tmp_path / "x86_64-linux").mkdir()
    (tmp_path / "x86_64-linux" / "ascend_toolkit_install.info").write_text(real.read_text())
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path))
    found = verl_glue.local_stack()
    assert found["cann"] == "8.2.RC1" and found["torch"] and found["torch_npu"] is None
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path / "absent"))
    assert verl_glue.local_stack()["cann"] is None
