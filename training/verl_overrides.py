"""Our TrainConfig in verl 0.9.1's vocabulary: the Hydra overrides of its PPO trainer, our own check of
what verl's `validate_config` would refuse (said first, in our words), and the composition against the
installed verl's config tree (`ppo_trainer` for fsdp, `ppo_megatron_trainer` for megatron).

Which field becomes which verl key, or why verl 0.9.1 cannot take it, is data: verl_translation.yml
(docs/verl.md is generated from it; a test fails when a config field has no entry there).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import json
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ascend_ready.errors import ConfigError, MissingExtraError
from ascend_ready.training.memory_plan import BUNDLED_MODEL_DIR, resolve_model_shape
from ascend_ready.training.verl_data import REWARD_FUNCTION, REWARD_MODULE, VERL_EXTRA_HINT

VERL_VERSION = "0.9.1"
TABLE_PATH = Path(__file__).with_name("verl_translation.yml")
#: verl's Hydra config per training strategy
VERL_CONFIGS = {"fsdp": "ppo_trainer", "megatron": "ppo_megatron_trainer"}
#: verl's loss aggregation for our GRPO loss types (verl core_algos.agg_loss)
LOSS_AGG = {"grpo": "seq-mean-token-mean", "dapo": "token-mean", "dr_grpo": "seq-mean-token-sum-norm",
            "bnpo": "token-mean"}
#: our KL estimators -> verl's kl_penalty names (core_algos.kl_penalty): k1 = "kl", k3 = "low_var_kl"
KL_TYPE = {"k1": "kl", "k3": "low_var_kl"}
#: our schedules -> verl's: the FSDP optimizer's lr_scheduler_type (constant, cosine), Megatron's
#: lr_decay_style (constant, linear, cosine, inverse_square_root); workers/config/optimizer.py
SCHEDULES = {"fsdp": {"constant": "constant", "cosine": "cosine"},
             "megatron": {"constant": "constant", "linear": "linear", "cosine": "cosine"}}
A = "actor_rollout_ref"
#: the largest LoRA rank vLLM serves (vllm/config/lora.py MaxLoRARanks; verl's fallback list ends there too)
MAX_LORA_RANK = 512


@functools.cache
def translation_table() -> dict[str, Any]:
    """verl_translation.yml: field -> {verl: [keys]} | {ours: why} | {moot: why} | {refused: why}."""
    return yaml.safe_load(TABLE_PATH.read_text())


def refused(field: str, why: str) -> ConfigError:
    """The one wording of a setting verl cannot take."""
    return ConfigError(f"{field}: not supported by verl {VERL_VERSION}: {why}",
                       hint=f"change {field}, or train with --engine trl (docs/verl.md lists every field)")


def verl_dir() -> Path:
    """Where the installed verl package lives, found without importing it (its __init__ needs ray/torch)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("the verl engine needs the verl package", hint=VERL_EXTRA_HINT)
    return Path(next(iter(spec.submodule_search_locations)))


def strategy_of(cfg: Any) -> str:
    """verl's training strategy for the config: distributed.strategy, `auto` by the parallel sizes."""
    d = cfg.distributed
    if d.strategy != "auto":
        return d.strategy
    sizes = (d.tensor_parallel, d.pipeline_parallel, d.expert_parallel, d.context_parallel)
    return "megatron" if any(s > 1 for s in sizes) else "fsdp"


# ---------------------------------------------------------------------------------------------------
# Batches: TRL's meaning of our fields, in verl's units


@dataclass(frozen=True)
class Batches:
    """One training step in verl's units. verl counts prompts in data.train_batch_size and
    ppo_mini_batch_size (each prompt gives rollout.n responses) and responses per device in the
    micro-batches."""

    n: int
    train_batch_size: int
    ppo_mini_batch_size: int
    micro_per_device: int
    world: int
    data_parallel: int


def batches(cfg: Any, algorithm: str, world: int, data_parallel: int) -> Batches:
    """GRPO as TRL runs it: batch_size x gradient_accumulation_steps x devices completions per optimizer
    step, generated together (TRL's steps_per_generation defaults to gradient_accumulation_steps), so one
    rollout of that many completions and ONE optimizer update over it (ppo_mini_batch_size = the whole
    batch), in micro-batches of batch_size per device. PPO: batch_size prompts per device per rollout,
    split into ppo.num_minibatches optimizer updates."""
    if algorithm == "grpo":
        n = cfg.grpo.num_generations
        prompts = max(1, cfg.batch_size * cfg.gradient_accumulation_steps * world // n)
        return Batches(n, prompts, prompts, cfg.batch_size, world, data_parallel)
    prompts = cfg.batch_size * world
    mini = max(1, prompts // cfg.ppo.num_minibatches)
    return Batches(1, prompts, mini, max(1, cfg.batch_size // cfg.ppo.num_minibatches), world, data_parallel)


def check_batches(cfg: Any, algorithm: str, layout: Any) -> list[tuple[str, str]]:
    """What verl would refuse about the batch arithmetic, said first and in our words: (where, message).

    `where` is "validate_config" for the conditions of verl's verl/utils/config.py validate_config and
    the ActorConfig/CriticConfig.validate behind it, "rollout" for RolloutConfig.__post_init__,
    "worker" for the assertion verl's training worker makes when it splits a mini-batch over its
    data-parallel ranks (verl/workers/engine_workers.py: `mini_batch_size % data_parallel_size == 0`).
    """
    d = cfg.distributed
    strategy = strategy_of(cfg)
    world = layout.world
    mp_size = d.tensor_parallel * d.pipeline_parallel * d.context_parallel if strategy == "megatron" else 1
    dp = world // mp_size if strategy == "megatron" else world // d.sequence_parallel
    b = batches(cfg, algorithm, world, dp)
    out: list[tuple[str, str]] = []
    what = ("completions (batch_size x gradient_accumulation_steps x devices, in whole groups of "
            f"grpo.num_generations={b.n})" if algorithm == "grpo" else "prompts (batch_size x devices)")
    if strategy == "megatron":
        if world % mp_size:
            out.append(("validate_config",
                        f"distributed: tensor x pipeline x context parallel = {mp_size} does "
                                           f"not divide the {world} devices"))
            return out
        minimal, unit = dp * b.micro_per_device, (f"{dp} data-parallel ranks x a micro-batch of "
                                                  f"{b.micro_per_device}")
    else:
        minimal, unit = world, f"the {world} devices"
    real = b.train_batch_size * b.n
    if real % minimal:
        out.append(("validate_config", f"a step's {real} {what} do not divide evenly over {unit}"))
    if b.train_batch_size < b.ppo_mini_batch_size:
        out.append(("validate_config", f"a mini-batch of {b.ppo_mini_batch_size} prompts is larger than the "
                                       f"step's {b.train_batch_size}"))
    r = cfg.rollout
    if r.expert_parallel > 1 and r.tensor_parallel and r.expert_parallel % r.tensor_parallel:
        out.append(("rollout", f"rollout.expert_parallel={r.expert_parallel} is not rollout.tensor_parallel="
                               f"{r.tensor_parallel} x a data-parallel size (vLLM's EP is TP x DP)"))
    mini_responses = b.ppo_mini_batch_size * b.n
    if algorithm == "ppo" and b.train_batch_size % cfg.ppo.num_minibatches:
        out.append(("worker", f"ppo.num_minibatches={cfg.ppo.num_minibatches} does not divide the "
                              f"{b.train_batch_size} prompts of a rollout"))
    if mini_responses % dp:
        out.append(("worker", f"a mini-batch of {mini_responses} responses does not split over the {dp} "
                              "data-parallel ranks"))
    return out


# ---------------------------------------------------------------------------------------------------
# Overrides


def _optim(prefix: str, cfg: Any, strategy: str, lr: float) -> list[str]:
    """An optimizer section: learning rate, decay, warmup, clipping (optim.clip_grad: the key verl 0.9.1's
    engines read; actor.grad_clip is only a deprecated alias) and the schedule."""
    o = cfg.optim
    schedule = SCHEDULES[strategy].get(o.lr_scheduler)
    if schedule is None:
        raise refused("optim.lr_scheduler", f"the {strategy} optimizer schedules "
                      f"{', '.join(SCHEDULES[strategy])}, not {o.lr_scheduler} (the megatron strategy "
                      "has linear)")
    key = "lr_scheduler_type" if strategy == "fsdp" else "lr_decay_style"
    return [f"{prefix}.lr={lr}", f"{prefix}.weight_decay={o.weight_decay}",
            f"{prefix}.lr_warmup_steps={o.warmup_steps}", f"{prefix}.clip_grad={o.max_grad_norm}",
            f"{prefix}.{key}={schedule}"]


def _refusals(cfg: Any, algorithm: str, strategy: str) -> None:
    """Settings verl 0.9.1 cannot honour: refused by name before anything is written."""
    if "reward_model" in cfg.reward.functions:
        raise refused("reward.functions", "the 'reward_model' reward is not wired to verl's reward workers; "
                                          "use rule rewards (answer_match, format, module:function)")
    d, lora = cfg.distributed, cfg.model.lora
    sizes = {"tensor_parallel": d.tensor_parallel, "pipeline_parallel": d.pipeline_parallel,
             "expert_parallel": d.expert_parallel, "context_parallel": d.context_parallel}
    above = [k for k, v in sizes.items() if v > 1]
    if strategy == "fsdp" and above:
        raise refused(f"distributed.{above[0]}", "the fsdp strategy has no tensor/pipeline/expert/context "
                                                 "parallelism (use --strategy megatron)")
    if strategy == "megatron" and d.sequence_parallel > 1:
        raise refused("distributed.sequence_parallel", "Ulysses sequence parallelism is the fsdp strategy's; "
                                                       "megatron splits sequences with context_parallel")
    if strategy == "fsdp" and d.optimizer_on_host:
        raise refused("distributed.optimizer_on_host", "the fsdp strategy steps the optimizer on the device "
                                                       "(distributed.offload parks it in host memory between "
                                                       "steps); megatron has a CPU optimizer")
    if strategy == "megatron" and lora is not None:
        raise refused("model.lora", "LoRA with the megatron strategy needs megatron-bridge; use fsdp")
    if strategy == "megatron" and cfg.precision == "fp32":
        raise refused("precision", "the megatron strategy trains in bf16")
    if lora is not None and lora.r > MAX_LORA_RANK:
        raise refused("model.lora.r", f"vLLM serves LoRA ranks up to {MAX_LORA_RANK} (its MaxLoRARanks; "
                      f"verl's "
                                      "validate_config checks it)")
    if lora is not None and "dropout" in lora.model_fields_set and lora.dropout:
        raise refused("model.lora.dropout",
                      "verl's LoRA (peft, through its model.lora_* keys) has no dropout")
    if algorithm == "grpo" and cfg.grpo.scale_rewards == "batch":
        raise refused("grpo.scale_rewards", "verl's GRPO advantage divides by the group's std "
                                            "(algorithm.norm_adv_by_std_in_grpo) or by nothing, not the "
                                            "batch's")
    if algorithm == "ppo":
        p = cfg.ppo
        if "critic" in p.model_fields_set and p.critic == "shared":
            raise refused("ppo.critic", "verl trains the critic as its own model (ppo.critic: separate)")
        if not p.whiten_advantages:
            raise refused("ppo.whiten_advantages", "verl's GAE always whitens the advantages")
        if "missing_eos_penalty" in p.model_fields_set and p.missing_eos_penalty is not None:
            raise refused("ppo.missing_eos_penalty",
                          "verl's reward managers add no penalty for a missing EOS "
                          "(set it to null, or score it in a module:function reward)")


def check_layout(cfg: Any, model: Any, devices_per_node: int) -> list[str]:
    """Layouts verl 0.9.1 accepts and that fail once the workers run, each refused naming the rule (verl's
    or Megatron's) it breaks. `model`: the memory plan's ModelShape (heads, layers)."""
    d, r = cfg.distributed, cfg.rollout
    out = []
    sp = d.sequence_parallel
    if sp > 1 and model.num_heads % sp:
        out.append(f"distributed.sequence_parallel={sp}: {model.num_heads} attention heads do not split over "
                   f"Ulysses SP {sp} (verl's models/transformers/monkey_patch.py asserts num_attention_heads "
                   "% ulysses_sp_size == 0 when the first attention runs)")
    elif sp > 1 and model.num_kv_heads % sp and sp % model.num_kv_heads:
        out.append(f"distributed.sequence_parallel={sp}: {model.num_kv_heads} KV heads neither divide nor "
                   "are divided by it (verl's monkey_patch.py asserts one or the other)")
    pp, layers = d.pipeline_parallel, model.num_layers
    if strategy_of(cfg) == "megatron" and pp > 1 and layers % pp and (layers + 2) % pp:
        out.append(f"distributed.pipeline_parallel={pp}: {layers} layers do not split over {pp} stages, "
                   f"nor {layers} + 2 counting the embedding and the loss as a layer each (Megatron's "
                   "account_for_embedding/loss_in_pipeline_split: (num_layers + 2) % pipeline size == 0)")
    tp = r.tensor_parallel
    dp = r.expert_parallel // tp if tp and r.expert_parallel > 1 else 1
    if tp and tp > devices_per_node:
        out.append(f"rollout.tensor_parallel={tp}: a vLLM tensor-parallel group is one node's devices "
                   f"({devices_per_node} here; verl's rollout replica fills a node before the next, "
                   "workers/rollout/replica.py, and vLLM-Ascend's TP runs over the node's HCCS)")
    elif tp and (tp * dp) % min(devices_per_node, tp * dp):
        out.append(f"rollout tensor x data parallel = {tp} x {dp} does not fill whole nodes of "
                   f"{devices_per_node} devices (verl workers/rollout/replica.py: world_size % "
                   "gpus_per_node == 0)")
    return out


def dropped_defaults(cfg: Any, algorithm: str) -> list[str]:
    """Defaults of ours that verl 0.9.1 has no key for, and which the job therefore runs without (set
    explicitly, each is refused instead): said in the launch log, never silently."""
    notes = []
    lora = cfg.model.lora
    if lora is not None and lora.dropout and "dropout" not in lora.model_fields_set:
        notes.append(f"model.lora.dropout {lora.dropout} (our default) is not passed: verl's LoRA has "
                     f"no dropout")
    if algorithm == "ppo" and lora is not None:
        notes.append("model.lora: the critic trains in full, not with adapters: verl 0.9.1's critic LoRA "
                     "crashes inside peft on verl's own call (its value head is not a peft target); the "
                     "actor keeps its LoRA")
    if algorithm == "ppo":
        p = cfg.ppo
        if "missing_eos_penalty" not in p.model_fields_set and p.missing_eos_penalty is not None:
            notes.append(f"ppo.missing_eos_penalty {p.missing_eos_penalty} (our default) is not "
                         f"applied: verl's "
                         "reward managers have no such penalty")
        if "critic" not in p.model_fields_set and p.critic == "shared":
            notes.append("ppo.critic: verl trains a separate critic (our default, shared, is not a verl "
                         "layout)")
    return notes


def to_overrides(cfg: Any, algorithm: str, *, plan: Any, train_file: str | Path, val_file: str | Path,
                 output_dir: str | Path, check: bool = True) -> list[str]:
    """Our TrainConfig (and the memory plan's rollout choices) as verl Hydra overrides, in verl's vocabulary.

    Raises ConfigError for a setting verl 0.9.1 cannot take (`not supported by verl 0.9.1: ...`) and for
    the batch arithmetic verl would refuse (check_batches; `check=False` skips that, for the tests that
    hand verl's own validate_config what ours refuses)."""
    if algorithm not in ("grpo", "ppo"):
        raise ConfigError(f"the verl engine runs grpo and ppo, not {algorithm}", hint="use --engine trl")
    strategy = strategy_of(cfg)
    _refusals(cfg, algorithm, strategy)
    layout = plan.layout

    bad = check_layout(cfg, resolve_model_shape(cfg), layout.devices_per_node)
    if bad:
        raise ConfigError(f"verl {VERL_VERSION} accepts this layout, and it fails once the workers run: "
                          + "; ".join(bad), hint="change the distributed/rollout sizes it names")
    problems = [msg for _, msg in check_batches(cfg, algorithm, layout)] if check else []
    if problems:
        raise ConfigError(f"verl {VERL_VERSION} would refuse this job's batches: " + "; ".join(problems),
                          hint="change batch_size, gradient_accumulation_steps, grpo.num_generations or "
                               "ppo.num_minibatches (docs/verl.md: how they map)")
    d, gen, r = cfg.distributed, cfg.generation, cfg.rollout
    world = layout.world
    dp = world // (d.tensor_parallel * d.pipeline_parallel * d.context_parallel) if strategy == "megatron" \
        else world // d.sequence_parallel
    b = batches(cfg, algorithm, world, dp)
    device = "cuda" if cfg.launch.device == "cuda" else "npu"
    model_path = cfg.model.path or str(Path(output_dir) / "tiny-model")
    rollout_tp = layout.rollout_tp
    rollout_dp = r.expert_parallel // rollout_tp if r.expert_parallel > 1 else 1
    util = plan.rollout_gpu_util if plan.rollout_gpu_util is not None else 0.5
    o = [
        f"algorithm.adv_estimator={'grpo' if algorithm == 'grpo' else 'gae'}",
        f"data.train_files={train_file}",
        f"data.val_files={val_file}",
        f"data.train_batch_size={b.train_batch_size}",
        f"data.max_prompt_length={gen.max_prompt_length}",
        f"data.max_response_length={gen.max_completion_length}",
        "data.filter_overlong_prompts=True",
        "data.truncation=left",
        f"data.seed={cfg.seed}",
        # verl seeds its shuffle, its rollout and each engine separately (all 42 by default): one seed, ours
        f"{A}.actor.data_loader_seed={cfg.seed}",
        f"{A}.rollout.seed={cfg.seed}",
        f"data.val_max_samples={cfg.eval_max_examples or -1}",
        f"{A}.model.path={model_path}",
        f"{A}.model.use_remove_padding=True",
        f"{A}.actor.strategy={strategy}",
        *_optim(f"{A}.actor.optim", cfg, strategy, cfg.optim.learning_rate),
        f"{A}.actor.ppo_mini_batch_size={b.ppo_mini_batch_size}",
        f"{A}.actor.ppo_micro_batch_size_per_gpu={b.micro_per_device}",
        f"{A}.rollout.log_prob_micro_batch_size_per_gpu={b.micro_per_device}",
        f"{A}.ref.log_prob_micro_batch_size_per_gpu={b.micro_per_device}",
        f"{A}.rollout.name=vllm",
        f"{A}.rollout.tensor_model_parallel_size={rollout_tp}",
        f"{A}.rollout.data_parallel_size={rollout_dp}",
        f"{A}.rollout.expert_parallel_size={r.expert_parallel}",
        f"{A}.rollout.gpu_memory_utilization={util}",
        f"{A}.rollout.max_num_seqs={r.max_num_seqs}",
        f"{A}.rollout.n={b.n}",
        f"{A}.rollout.temperature={gen.temperature}",
        f"{A}.rollout.top_p={gen.top_p}",
        f"{A}.rollout.val_kwargs.do_sample=False",  # our evaluation is greedy
        f"{A}.rollout.dtype={'float32' if cfg.precision == 'fp32' else 'bfloat16'}",
        f"trainer.nnodes={layout.nodes}",
        f"trainer.n_gpus_per_node={layout.devices_per_node}",
        f"trainer.device={device}",
        f"trainer.total_training_steps={cfg.max_steps}",
        # verl's loop also stops after total_epochs passes over the data (30 by default): never before
        # max_steps, as one pass is at least one step
        f"trainer.total_epochs={cfg.max_steps}",
        f"trainer.save_freq={cfg.save_every}",
        f"trainer.test_freq={cfg.eval_every or -1}",
        "trainer.val_before_train=True",
        f"trainer.max_actor_ckpt_to_keep={cfg.keep_checkpoints}",
        f"trainer.default_local_dir={Path(output_dir) / 'checkpoints'}",
        "trainer.logger=[console]",
        "trainer.project_name=ascend-ready",
        f"trainer.experiment_name={algorithm}-{Path(model_path).name}",
        f"reward.custom_reward_function.path={REWARD_MODULE}",
        f"reward.custom_reward_function.name={REWARD_FUNCTION}",
    ]
    env = {"HCCL_CONNECT_TIMEOUT": cfg.launch.hccl.connect_timeout,
           "HCCL_EXEC_TIMEOUT": cfg.launch.hccl.exec_timeout,
           **cfg.launch.hccl.extra_env}
    # Hydra's quoted strings: the value stays a string (Ray's env_vars take only strings), quotes escaped
    o += [f"+ray_kwargs.ray_init.runtime_env.env_vars.{k}='{_quoted(v)}'" for k, v in env.items()]
    roles = ["actor", "ref"]
    if strategy == "fsdp":
        o += [f"{A}.model.enable_gradient_checkpointing={cfg.model.gradient_checkpointing}",
              f"{A}.actor.fsdp_config.param_offload={d.offload}",
              f"{A}.actor.fsdp_config.optimizer_offload={d.offload}",
              f"{A}.ref.fsdp_config.param_offload={d.offload}",
              f"{A}.actor.ulysses_sequence_parallel_size={d.sequence_parallel}",
              f"{A}.ref.ulysses_sequence_parallel_size={d.sequence_parallel}"]
        o += [f"{A}.{role}.fsdp_config.seed={cfg.seed}" for role in roles]
        if device == "npu":
            # verl's NPU recipes (examples/grpo_trainer/run_qwen3-32b_npu.sh) turn torch.compile off; the
            # FSDP engine reads it from fsdp_config (FSDPEngineConfig.use_torch_compile), not the role's key
            o += [f"{A}.{role}.fsdp_config.use_torch_compile=False" for role in roles]
        if cfg.precision == "fp32":
            # the FSDP engine computes in mixed_precision.param_dtype (bf16 when unset), never in `dtype`
            o += [f"+{A}.{role}.fsdp_config.mixed_precision={{param_dtype:fp32,reduce_dtype:fp32,"
                  "buffer_dtype:fp32}" for role in roles]
    else:
        o += _megatron(cfg, plan, [f"{A}.{role}" for role in roles])
        if d.optimizer_on_host:
            # verl's Qwen3-235B recipe (examples/grpo_trainer/run_qwen3-235b_megatron_96gb.sh)
            p = f"+{A}.actor.optim.override_optimizer_config"
            o += [f"{p}.optimizer_cpu_offload=True", f"{p}.optimizer_offload_fraction=1.0",
                  f"{p}.overlap_cpu_optimizer_d2h_h2d=True"]
    if cfg.model.lora is not None:
        lora = cfg.model.lora
        o += [f"{A}.model.lora_rank={lora.r}", f"{A}.model.lora_alpha={lora.alpha}",
              f"{A}.model.target_modules=[{','.join(lora.target_modules)}]"]
    if algorithm == "grpo":
        g = cfg.grpo
        o += [f"{A}.actor.use_kl_loss={g.beta > 0}",
              f"{A}.actor.kl_loss_coef={g.beta}",
              f"{A}.actor.kl_loss_type=low_var_kl",
              f"{A}.actor.clip_ratio_low={g.epsilon}",
              f"{A}.actor.clip_ratio_high={g.epsilon}",
              f"{A}.actor.ppo_epochs={g.num_iterations}",
              f"{A}.actor.loss_agg_mode={LOSS_AGG[g.loss_type]}",
              # Dr. GRPO divides by a constant, the generation budget; verl's seq-mean-token-sum-norm by
              # the padded width of each micro-batch unless loss_scale_factor is set
              *([f"{A}.actor.loss_scale_factor={gen.max_completion_length}"] if g.loss_type == "dr_grpo"
                else []),
              f"algorithm.norm_adv_by_std_in_grpo={g.scale_rewards != 'none'}",
              "algorithm.use_kl_in_reward=False"]
    else:
        o += _critic(cfg, plan, strategy, b, model_path)
    return o


def _quoted(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("'", "\\'")


def _megatron(cfg: Any, plan: Any, prefixes: list[str]) -> list[str]:
    """Megatron's parallel sizes and offload for each model; a layer count the pipeline does not divide is
    split counting the embedding and the loss as a layer each, as verl's Qwen3-235B recipe does (94 + 2
    layers over 8 stages)."""
    d = cfg.distributed
    o = []
    layers = plan.model_layers or 1
    uneven = layers % d.pipeline_parallel and (layers + 2) % d.pipeline_parallel == 0
    for p in prefixes:
        o += [f"{p}.megatron.tensor_model_parallel_size={d.tensor_parallel}",
              f"{p}.megatron.pipeline_model_parallel_size={d.pipeline_parallel}",
              f"{p}.megatron.expert_model_parallel_size={d.expert_parallel}",
              f"{p}.megatron.context_parallel_size={d.context_parallel}",
              # unset: Megatron's own default (the TP size), as verl leaves it
              *([f"{p}.megatron.expert_tensor_parallel_size={d.expert_tensor_parallel}"]
                if d.expert_tensor_parallel else []),
              f"{p}.megatron.param_offload={d.offload}",
              f"{p}.megatron.seed={cfg.seed}"]
        if uneven and p.endswith(("actor", "critic")):  # the reference's transformer config is the actor's
            o += [f"+{p}.megatron.override_transformer_config.account_for_embedding_in_pipeline_split=True",
                  f"+{p}.megatron.override_transformer_config.account_for_loss_in_pipeline_split=True"]
        if p.endswith(("actor", "critic")):
            o += [f"{p}.megatron.optimizer_offload={d.offload}"]
            if cfg.model.gradient_checkpointing:  # Megatron's own recompute: every layer's, in full
                t = f"{p}.megatron.override_transformer_config"
                o += [f"{t}.recompute_granularity=full", f"{t}.recompute_method=uniform",
                      f"{t}.recompute_num_layers=1"]
    return o


def _critic(cfg: Any, plan: Any, strategy: str, b: Batches, model_path: str) -> list[str]:
    p, d = cfg.ppo, cfg.distributed
    o = [f"{A}.actor.use_kl_loss=False",
         f"{A}.actor.clip_ratio_low={p.clip_range}",
         f"{A}.actor.clip_ratio_high={p.clip_range}",
         f"{A}.actor.ppo_epochs={p.ppo_epochs}",
         f"algorithm.use_kl_in_reward={p.kl_coef > 0}",
         f"algorithm.kl_penalty={KL_TYPE[p.kl_estimator]}",
         f"algorithm.kl_ctrl.kl_coef={p.kl_coef}",
         f"algorithm.gamma={p.gamma}",
         f"algorithm.lam={p.lam}",
         "critic.enable=True",
         f"critic.strategy={strategy}",
         f"critic.model.path={model_path}",
         *_optim("critic.optim", cfg, strategy, p.critic_learning_rate or cfg.optim.learning_rate),
         f"critic.cliprange_value={p.clip_range_value}",
         f"critic.ppo_epochs={p.ppo_epochs}",
         f"critic.ppo_mini_batch_size={b.ppo_mini_batch_size}",
         f"critic.ppo_micro_batch_size_per_gpu={b.micro_per_device}",
         f"trainer.max_critic_ckpt_to_keep={cfg.keep_checkpoints}",
         "trainer.critic_warmup=0"]
    # verl's trainer hands the critic's engine only its token budgets (ray_trainer.py, the critic's
    # TrainingWorkerConfig): its micro-batch, batching mode and seed are the engine section's own keys
    engine = "critic.fsdp" if strategy == "fsdp" else "critic.megatron"
    o += [f"+{engine}.use_dynamic_bsz=False", f"+{engine}.micro_batch_size_per_gpu={b.micro_per_device}",
          f"+{engine}.infer_micro_batch_size_per_gpu={b.micro_per_device}"]
    if strategy == "fsdp":
        o += [f"critic.fsdp.seed={cfg.seed}",
              f"critic.model.enable_gradient_checkpointing={cfg.model.gradient_checkpointing}",
              f"critic.fsdp.param_offload={d.offload}",
              f"critic.fsdp.optimizer_offload={d.offload}",
              # FSDPCriticConfig's own ulysses key is deprecated and not synced to its engine (the actor's is)
              f"critic.fsdp.ulysses_sequence_parallel_size={d.sequence_parallel}"]
        if cfg.launch.device != "cuda":
            o.append("critic.fsdp.use_torch_compile=False")
    else:
        o += _megatron(cfg, plan, ["critic"])
    return o


# ---------------------------------------------------------------------------------------------------
# Validation against the installed verl


def _choices_from_source(root: Path) -> dict[str, set[str]]:
    """Values verl's own code accepts, read from its source (importing it needs ray and torch)."""
    core = (root / "trainer" / "ppo" / "core_algos.py").read_text()
    adv = re.search(r"class AdvantageEstimator\b.*?(?=\nclass |\n@|\ndef )", core, re.S)
    estimators = set(re.findall(r'^\s+[A-Z_]+\s*=\s*"([a-z_]+)"', adv.group(0), re.M)) if adv else set()
    agg = set(re.findall(r'loss_agg_mode\s*==\s*"([a-z-]+)"', core))
    kl = set(re.findall(r'kl_penalty\s*==\s*"([a-z_0-9]+)"', core))
    for group in re.findall(r"kl_penalty in \(([^)]*)\)", core):
        kl |= set(re.findall(r'"([a-z_0-9]+)"', group))
    return {
        "algorithm.adv_estimator": estimators,
        f"{A}.actor.loss_agg_mode": agg,
        f"{A}.actor.kl_loss_type": kl,
        "algorithm.kl_penalty": kl,
        # fixed vocabularies of verl's config docs (docs/examples/config.rst)
        f"{A}.actor.strategy": {"fsdp", "fsdp2", "megatron"},
        "critic.strategy": {"fsdp", "fsdp2", "megatron"},
        f"{A}.rollout.name": {"vllm", "sglang", "hf"},
        "trainer.device": {"cuda", "npu"},
    }


def config_name(overrides: list[str]) -> str:
    """verl's Hydra config the overrides are for: the megatron trainer's when the actor is Megatron."""
    return VERL_CONFIGS["megatron" if f"{A}.actor.strategy=megatron" in overrides else "fsdp"]


def compose(overrides: list[str], name: str | None = None):
    """verl's Hydra config composed with the overrides (struct mode: an unknown key is refused)."""
    try:
        from hydra import compose as hydra_compose  # the [verl] extra
        from hydra import initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra
    except ImportError:
        raise MissingExtraError("the verl engine needs hydra-core and omegaconf",
                                hint=VERL_EXTRA_HINT) from None
    name = name or config_name(overrides)
    config_dir = verl_dir() / "trainer" / "config"
    if not (config_dir / f"{name}.yaml").is_file():
        raise MissingExtraError(f"{config_dir}/{name}.yaml is missing: not a verl {VERL_VERSION} install",
                                hint=VERL_EXTRA_HINT)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra_compose(config_name=name, overrides=overrides)


def validate_overrides(overrides: list[str]) -> Any:
    """Compose verl's config with the overrides; ConfigError naming an unknown key or a refused value."""
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    name = config_name(overrides)
    try:
        composed = compose(overrides, name)
    except (HydraException, OmegaConfBaseException) as exc:
        text = str(exc)
        key = re.search(r"Could not override '([^']+)'", text) or re.search(r"[Kk]ey '([^']+)'", text)
        named = [o.split("=", 1)[0] for o in overrides if o.split("=", 1)[0] in text]
        found = key.group(1) if key else (named[0] if named else "?")
        raise ConfigError(f"verl override {found}: not a key of verl's {name} config",
                          hint=f"check the spelling against verl {verl_dir()}/trainer/config: "
                               f"{text.splitlines()[0]}") from None
    defaults = compose([], name)
    choices = _choices_from_source(verl_dir())
    problems = []
    for item in overrides:
        key, _, _ = item.partition("=")
        key = key.lstrip("+~")
        value = OmegaConf.select(composed, key)
        if key in choices and choices[key] and value not in choices[key]:
            problems.append(f"{key}: {value!r} is not one of {', '.join(sorted(choices[key]))}")
            continue
        default = OmegaConf.select(defaults, key, throw_on_missing=False)
        if default is None or value is None or (isinstance(default, str) and default == "???"):
            continue
        if isinstance(default, bool) != isinstance(value, bool):
            problems.append(f"{key}: {value!r} must be a boolean like verl's default {default!r}")
        elif isinstance(default, (int, float)) and not isinstance(default, bool) and not isinstance(
                value, (int, float)):
            problems.append(f"{key}: {value!r} must be a number like verl's default {default!r}")
        elif (isinstance(default, int) and not isinstance(default, bool) and isinstance(value, float)
              and not value.is_integer()):
            problems.append(f"{key}: {value!r} must be an integer like verl's default {default!r}")
    if problems:
        raise ConfigError("verl refuses these values:\n" + "\n".join(problems),
                          hint="fix the training config fields (or overrides) they come from")
    return composed


def _stand_in_model(cfg: Any, where: Path) -> tuple[Path, bool]:
    """A directory verl's model config can read on this machine for cfg's model: the model itself when it
    is here (with its tokenizer), else its config.json alone (the bundled copy, or the tiny model's shape)
    under `where`. Returns (directory, whether it has a tokenizer)."""
    path = Path(cfg.model.path) if cfg.model.path else None
    if path is not None and (path / "config.json").is_file():
        return path, (path / "tokenizer_config.json").is_file()
    where.mkdir(parents=True, exist_ok=True)
    stem = path.name.lower().removesuffix("-instruct") if path else ""
    bundled = [BUNDLED_MODEL_DIR / f"model-{stem}.json"] if path else []
    if bundled and bundled[0].is_file():
        (where / "config.json").write_text(bundled[0].read_text())
    elif cfg.model.tiny is not None:
        t = cfg.model.tiny
        (where / "config.json").write_text(json.dumps({
            "model_type": t.architecture, "architectures": [f"{t.architecture.capitalize()}ForCausalLM"],
            "hidden_size": t.hidden_size, "num_hidden_layers": t.num_layers,
            "num_attention_heads": t.num_heads,
            "num_key_value_heads": t.num_heads, "intermediate_size": t.intermediate_size, "vocab_size": 21,
            "tie_word_embeddings": True}))
    else:
        raise ConfigError(f"no config.json for model {path} on this machine",
                          hint="verl's checks read the model's config.json: give model.path a local copy")
    return where, False


def verl_validate(composed: Any, cfg: Any | None = None) -> None:
    """verl's own checks on a composed config, as its trainer runs them before starting Ray
    (main_ppo: validate_config with need_reference_policy/need_critic) plus the rollout's dataclass.

    Needs verl importable (its CPU dependencies: tensordict, codetiming, megatron-core). The critic's
    check reads its model's config.json and tokenizer: where the model is not on this machine, `cfg`'s
    stand-in (the config.json alone) is read instead. Raises ConfigError with verl's own message."""

    try:  # verl itself and its CPU dependencies: the [verl] extra, imported only when checking
        from omegaconf import OmegaConf
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.workers.config import RolloutConfig
    except ImportError as exc:
        raise MissingExtraError(f"verl's own checks need its CPU dependencies ({exc})", hint=VERL_EXTRA_HINT
                                ) from None
    with tempfile.TemporaryDirectory(prefix="ascend-verl-check-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Disabled critic as algorithm.adv_estimator != gae": GRPO's way
        use_critic = need_critic(composed)
        composed = OmegaConf.create(OmegaConf.to_container(composed, resolve=False))
        if use_critic and cfg is not None:
            model, tokenizer = _stand_in_model(cfg, Path(tmp) / "model")
            OmegaConf.update(composed, "critic.model.path", str(model))
            OmegaConf.update(composed, "critic.model.load_tokenizer", tokenizer)
        if importlib.util.find_spec("vllm") is None:
            # its LoRA-rank check imports verl's vLLM rollout, which refuses to load without vllm; the rule
            # it applies (rank <= 512, vLLM's MaxLoRARanks) is in _refusals
            OmegaConf.update(composed, "actor_rollout_ref.model.lora_rank", 0)
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # its "All configuration checks passed" line
                validate_config(composed, use_reference_policy=need_reference_policy(composed),
                                use_critic=use_critic)
                # the rollout section's _target_ is RolloutConfig, whose __post_init__ checks its EP
                rollout = omega_conf_to_dataclass(composed.actor_rollout_ref.rollout)
                assert isinstance(rollout, RolloutConfig), type(rollout)
        except (AssertionError, ValueError) as exc:
            raise ConfigError(f"verl {VERL_VERSION}'s validate_config refuses the overrides: {exc}",
                              hint="ascend-train's own check should have said this first: please report it"
                              ) from None
