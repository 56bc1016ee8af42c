"""Issue 28: verl as verl reads it. For every bundled config and both strategies, the overrides are composed
into verl 0.9.1's config and turned into the dataclasses its workers build from it (verl's own
omega_conf_to_dataclass: FSDPActorConfig/McoreActorConfig with their engine configs, RolloutConfig, the
critic's config and its engine), and each setting of ours is asserted where the run reads it, with our
meaning: per-device micro-batches, prompts in the global batches, the clip ratios the loss reads, the
engine's torch.compile, the seeds, the critic's engine. A combination verl cannot run is refused by name."""

from __future__ import annotations

import warnings

import pytest

from ascend_ready.errors import ConfigError
from ascend_ready.training import memory_plan as mp
from ascend_ready.training import verl_overrides as vo
from ascend_ready.training.config import load_config

pytest.importorskip("hydra", reason="needs the [verl] extra")
pytest.importorskip("verl.utils.config", reason="needs verl 0.9.1 (pip install --no-deps verl==0.9.1)")

A = "actor_rollout_ref"
CONFIGS = [("tiny", "grpo", ("launch.device=npu",)), ("tiny", "ppo", ("launch.device=npu",)),
           ("grpo-qwen2.5-7b-a2", "grpo", ()), ("grpo-qwen3-235b-a22b-a2", "grpo", ()),
           ("ppo-qwen3-lora", "ppo", ()),
           # the tiny model in bf16: the Megatron critic's engine keys too (fp32 is refused under Megatron)
           ("tiny", "ppo", ("launch.device=npu", "precision=bf16"))]
CASES = [(n, a, e, s) for n, a, e in CONFIGS for s in ("fsdp", "megatron")]
IDS = [f"{n}-{a}-{s}" + ("-bf16" if "precision=bf16" in e else "") for n, a, e, s in CASES]


def built(name: str, algo: str, extra: tuple[str, ...], tmp_path):
    """(cfg, batches, overrides, the dataclasses verl's workers build from the composed config)."""
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass

    cfg = load_config(name, list(extra))
    plan, _, _ = mp.plan_for_config(cfg, algo, engine="verl")
    overrides = vo.to_overrides(cfg, algo, plan=plan, train_file="/d/t.parquet", val_file="/d/v.parquet",
                                output_dir="/runs/x")
    composed = vo.validate_overrides(overrides)
    composed = OmegaConf.create(OmegaConf.to_container(composed, resolve=False))
    world = plan.layout.world
    d = cfg.distributed
    dp = world // (d.tensor_parallel * d.pipeline_parallel * d.context_parallel) \
        if vo.strategy_of(cfg) == "megatron" else world // d.sequence_parallel
    b = vo.batches(cfg, algo, world, dp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the reference as verl's ActorRolloutRefWorker rebuilds it (engine_workers.py: its log_prob_* keys
        # become the actor's ppo_* ones) before omega_conf_to_dataclass
        ref = OmegaConf.create(OmegaConf.to_container(composed[A].ref, resolve=False))
        OmegaConf.set_struct(ref, False)
        ref.ppo_mini_batch_size = composed[A].actor.ppo_mini_batch_size
        ref.ppo_micro_batch_size = ref.pop("log_prob_micro_batch_size", None)
        ref.ppo_micro_batch_size_per_gpu = ref.pop("log_prob_micro_batch_size_per_gpu", None)
        ref.use_dynamic_bsz = ref.pop("log_prob_use_dynamic_bsz", False)
        ref.ppo_max_token_len_per_gpu = ref.pop("log_prob_max_token_len_per_gpu", None)
        ref_root = OmegaConf.create({"actor_rollout_ref": {"ref": ref}, **{k: composed[k] for k in composed
                                                                         if k != A}})
        OmegaConf.update(ref_root, f"{A}.actor", composed[A].actor, force_add=True)
        OmegaConf.update(ref_root, f"{A}.rollout", composed[A].rollout, force_add=True)
        objs = {"actor": omega_conf_to_dataclass(composed[A].actor),
                "ref": omega_conf_to_dataclass(ref_root[A].ref),
                "rollout": omega_conf_to_dataclass(composed[A].rollout)}
        if algo == "ppo":
            model, tokenizer = vo._stand_in_model(cfg, tmp_path / "model")
            OmegaConf.update(composed, "critic.model.path", str(model))
            OmegaConf.update(composed, "critic.model.load_tokenizer", tokenizer)
            objs["critic"] = omega_conf_to_dataclass(composed.critic)
    return cfg, b, overrides, composed, objs


@pytest.mark.parametrize(("name", "algo", "extra", "strategy"), CASES,
                         ids=IDS)
def test_each_override_lands_where_verl_reads_it(name, algo, extra, strategy, tmp_path):
    base = load_config(name, list(extra))
    forced = (*extra, f"distributed.strategy={strategy}")
    if strategy == "fsdp" and vo.strategy_of(base) == "megatron":
        with pytest.raises(ConfigError, match=r"not supported by verl 0\.9\.1: the fsdp strategy has no"):
            built(name, algo, forced, tmp_path)
        return
    if strategy == "megatron" and base.model.lora is not None:
        with pytest.raises(ConfigError, match=r"model\.lora: not supported by verl 0\.9\.1: LoRA with"):
            built(name, algo, forced, tmp_path)
        return
    if strategy == "megatron" and base.precision == "fp32":
        with pytest.raises(ConfigError, match=r"precision: not supported by verl 0\.9\.1"):
            built(name, algo, forced, tmp_path)
        return
    cfg, b, overrides, composed, o = built(name, algo, forced, tmp_path)
    actor, ref, rollout = o["actor"], o["ref"], o["rollout"]
    engine_type = {"fsdp": "FSDPEngineConfig", "megatron": "McoreEngineConfig"}[strategy]
    assert type(actor.engine).__name__ == type(ref.engine).__name__ == engine_type
    # batches: prompts in the global ones, responses per device in the micro-batches
    assert composed.data.train_batch_size == b.train_batch_size
    assert actor.ppo_mini_batch_size == b.ppo_mini_batch_size and actor.rollout_n == b.n == rollout.n
    assert actor.ppo_micro_batch_size_per_gpu == cfg.batch_size if algo == "grpo" else b.micro_per_device
    assert not actor.use_dynamic_bsz  # so the engine splits by those micro-batches, not by tokens
    assert composed[A].rollout.log_prob_micro_batch_size_per_gpu == b.micro_per_device
    # the loss reads clip_ratio_low/high, not clip_ratio
    clip = cfg.grpo.epsilon if algo == "grpo" else cfg.ppo.clip_range
    assert actor.clip_ratio_low == actor.clip_ratio_high == clip
    # every seed verl has is ours
    assert composed.data.seed == actor.data_loader_seed == rollout.seed == cfg.seed
    # verl's loop stops at max_steps, never earlier at total_epochs
    assert composed.trainer.total_training_steps == cfg.max_steps <= composed.trainer.total_epochs
    assert OmegaConf_select(composed, f"{A}.nccl_timeout") == 600  # never written: nothing reads it
    assert not any(k.startswith(f"{A}.nccl_timeout") for k in overrides)
    d = cfg.distributed
    if strategy == "fsdp":
        for role in (actor, ref):
            assert role.engine.seed == cfg.seed
            assert role.engine.ulysses_sequence_parallel_size == d.sequence_parallel
            # the FSDP engine's own key; the role's use_torch_compile is not what it reads
            assert role.engine.use_torch_compile is (cfg.launch.device == "cuda")
            param = (role.engine.mixed_precision or {}).get("param_dtype", "bf16")
            assert param == ("fp32" if cfg.precision == "fp32" else "bf16")
        assert composed[A].model.enable_gradient_checkpointing is cfg.model.gradient_checkpointing
    else:
        e = actor.engine
        assert (e.tensor_model_parallel_size, e.pipeline_model_parallel_size, e.expert_model_parallel_size,
                e.context_parallel_size) == (d.tensor_parallel, d.pipeline_parallel, d.expert_parallel,
                                             d.context_parallel)
        # Megatron's default unless the config sets it (never a blanket 1)
        assert e.expert_tensor_parallel_size == d.expert_tensor_parallel
        assert e.seed == cfg.seed if "seed" in type(e).__dataclass_fields__ else True
        recompute = (e.override_transformer_config or {}).get("recompute_granularity")
        assert recompute == ("full" if cfg.model.gradient_checkpointing else None)
        assert f"{A}.model.enable_gradient_checkpointing" not in {k.split("=")[0] for k in overrides}
    if algo == "ppo":
        critic = o["critic"]
        micro = b.micro_per_device
        assert critic.engine.micro_batch_size_per_gpu == critic.ppo_micro_batch_size_per_gpu == micro
        assert critic.engine.infer_micro_batch_size_per_gpu == b.micro_per_device
        assert critic.engine.use_dynamic_bsz is False and critic.engine.seed == cfg.seed
        assert critic.ppo_mini_batch_size == b.ppo_mini_batch_size
        assert critic.model.lora_rank == 0  # verl's critic LoRA crashes in peft: full critic, said in the log
        if strategy == "fsdp":
            assert critic.engine.ulysses_sequence_parallel_size == d.sequence_parallel
            assert critic.engine.use_torch_compile is (cfg.launch.device == "cuda")
        if cfg.model.lora is not None:
            assert any("the critic trains in full" in n for n in vo.dropped_defaults(cfg, algo))


def OmegaConf_select(cfg, key):
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, key)


def test_dr_grpo_divides_by_the_generation_budget_not_the_micro_batch_width(tmp_path):
    cfg, _, _, _, o = built("grpo-qwen2.5-7b-a2", "grpo", ("grpo.loss_type=dr_grpo",), tmp_path)
    assert o["actor"].loss_agg_mode == "seq-mean-token-sum-norm"
    assert o["actor"].loss_scale_factor == cfg.generation.max_completion_length
    _, _, _, _, plain = built("grpo-qwen2.5-7b-a2", "grpo", (), tmp_path)
    assert plain["actor"].loss_scale_factor is None  # other losses keep verl's


def _refusal(name: str, algo: str, *extra: str) -> str:
    cfg = load_config(name, list(extra))
    plan, _, _ = mp.plan_for_config(cfg, algo, engine="verl")
    with pytest.raises(ConfigError) as exc:
        vo.to_overrides(cfg, algo, plan=plan, train_file="t", val_file="v", output_dir="/runs/x")
    return exc.value.message


def test_ulysses_sp_8_with_28_heads_is_refused_naming_verls_rule():
    msg = _refusal("grpo-qwen2.5-7b-a2", "grpo", "distributed.sequence_parallel=8")  # Qwen2.5-7B: 28 heads
    assert "28 attention heads do not split over Ulysses SP 8" in msg and "monkey_patch.py" in msg


def test_pp_5_with_64_layers_is_refused_with_the_embedding_and_loss_accounting():
    msg = _refusal("grpo-qwen3-235b-a22b-a2", "grpo", "model.path=/data/models/Qwen3-32B",
                   "distributed.pipeline_parallel=5", "distributed.tensor_parallel=1",
                   "distributed.expert_parallel=1", "rollout.expert_parallel=1", "launch.nnodes=5")
    assert "64 layers do not split over 5 stages, nor 64 + 2" in msg and "account_for_embedding" in msg


def test_rollout_tp_16_with_dp_2_on_8_device_nodes_is_refused():
    msg = _refusal("grpo-qwen3-235b-a22b-a2", "grpo", "rollout.tensor_parallel=16",
                   "rollout.expert_parallel=32")
    assert "rollout.tensor_parallel=16: a vLLM tensor-parallel group is one node's devices (8 here" in msg
    assert "replica.py" in msg


def test_etp_is_megatrons_default_unless_set():
    cfg = load_config("grpo-qwen3-235b-a22b-a2", ["distributed.expert_tensor_parallel=null",
                                                  "distributed.expert_parallel=4"])
    plan, _, _ = mp.plan_for_config(cfg, "grpo", engine="verl")
    assert plan.layout.etp == 4  # = tp: experts over EP 4 x ETP 4 x PP 8 = 128 devices
    o = vo.to_overrides(cfg, "grpo", plan=plan, train_file="t", val_file="v", output_dir="/runs/x")
    assert not [k for k in o if "expert_tensor_parallel_size" in k]


def test_the_plan_follows_the_configs_engine_and_strategy():
    from click.testing import CliRunner

    from ascend_ready.training.cli import main

    r = CliRunner().invoke(main, ["plan", "-c", "grpo-qwen3-235b-a22b-a2", "--nodes", "16"])
    assert r.exit_code == 0, r.output
    assert "engine: verl (the config's distributed.strategy is megatron" in r.stderr
    assert "engine verl" in r.stdout and "Megatron ZeRO-1 tp=4 pp=8 ep=8" in r.stdout
    forced = CliRunner().invoke(main, ["plan", "-c", "grpo-qwen3-235b-a22b-a2", "--nodes", "16",
                                       "--engine", "trl"])
    assert forced.exit_code == 1 and "engine trl" in forced.stdout  # the flag still wins
    assert mp.engine_of(load_config("tiny"))[0] == "trl"
