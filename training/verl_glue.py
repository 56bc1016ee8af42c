"""`ascend-train grpo|ppo --engine verl`: the same TrainConfig handed to verl's PPO trainer, as Hydra
overrides checked against the installed verl's own config tree before any node is touched.

What happens here (CPU, no accelerator, no Ray): the prompts become the parquet files verl reads, the
config becomes `key=value` overrides, and they are composed with verl's `verl/trainer/config/
ppo_trainer.yaml` (Hydra, struct mode: an unknown or misspelt key is refused by name) and their values
checked against the choices verl's source accepts. The training itself needs accelerators and a Ray
cluster; `launch()` starts `python -m verl.trainer.main_ppo` with the validated overrides.

Install: `pip install 'ascend-ready[verl]'` (hydra-core, omegaconf, pandas, pyarrow) and
`pip install --no-deps verl==0.9.1`; verl's own requirements would pull a CUDA build of torch.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascend_ready.errors import ConfigError, MissingExtraError, TrainingError

VERL_EXTRA_HINT = "pip install 'ascend-ready[verl]' && pip install --no-deps verl==0.9.1"
VERL_CONFIG = "ppo_trainer"
#: verl's loss aggregation for our GRPO loss types (verl core_algos.agg_loss)
LOSS_AGG = {"grpo": "seq-mean-token-mean", "dapo": "token-mean", "dr_grpo": "seq-mean-token-sum-norm",
            "bnpo": "token-mean"}
#: our KL estimators -> verl's kl_penalty names (core_algos.kl_penalty): k1 = "kl", k3 = "low_var_kl"
KL_TYPE = {"k1": "kl", "k3": "low_var_kl"}


def verl_dir() -> Path:
    """Where the installed verl package lives, found without importing it (its __init__ needs ray/torch)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("the verl engine needs the verl package", hint=VERL_EXTRA_HINT)
    return Path(next(iter(spec.submodule_search_locations)))


def _require_hydra():
    try:
        import hydra  # noqa: F401
        import omegaconf  # noqa: F401
    except ImportError:
        raise MissingExtraError("the verl engine needs hydra-core and omegaconf", hint=VERL_EXTRA_HINT
                                ) from None


# ---------------------------------------------------------------------------------------------------
# Data: verl's RLHFDataset rows


def verl_rows(rows: list[dict], data_source: str, split: str, cfg: Any) -> list[dict]:
    """Our {"prompt", "answer"} rows as verl reads them: chat prompt, data_source, ground truth."""
    rewards = {"functions": list(cfg.reward.functions),
               "weights": list(cfg.reward.weights or [1.0] * len(cfg.reward.functions))}
    return [{"data_source": data_source,
             "prompt": [{"role": "user", "content": row["prompt"]}],
             "ability": "math",
             "reward_model": {"style": "rule", "ground_truth": str(row["answer"])},
             "extra_info": {"split": split, "index": i, "rewards": rewards}}
            for i, row in enumerate(rows)]


def write_parquet(cfg: Any, out_dir: Path) -> tuple[Path, Path]:
    """train.parquet and val.parquet of the configured prompts under out_dir/verl-data."""
    try:
        import pandas as pd
    except ImportError:
        raise MissingExtraError("writing verl's parquet files needs pandas and pyarrow", hint=VERL_EXTRA_HINT
                                ) from None
    from ascend_ready.training.data import load_prompts

    prompts = load_prompts(cfg.data, cfg.seed)
    data_dir = out_dir / "verl-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for split, rows in (("train", prompts.train), ("val", prompts.eval or prompts.train[:1])):
        path = data_dir / f"{split}.parquet"
        pd.DataFrame(verl_rows(rows, cfg.data.source, split, cfg)).to_parquet(path)
        paths.append(path)
    return paths[0], paths[1]


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None,
                  **kwargs) -> float:
    """verl's custom reward hook (reward.custom_reward_function): our reward functions, weighted."""
    from ascend_ready.training import rewards as rw

    spec = (extra_info or {}).get("rewards") or {"functions": ["answer_match"], "weights": [1.0]}
    total = 0.0
    for name, weight in zip(spec["functions"], spec["weights"], strict=True):
        fn = {"answer_match": rw.answer_match, "format": rw.format_reward}.get(name) or rw.import_reward(name)
        total += weight * fn(prompts=[""], completions=[solution_str], answer=[ground_truth])[0]
    return total


# ---------------------------------------------------------------------------------------------------
# Overrides


def to_overrides(cfg: Any, algorithm: str, *, plan: Any, train_file: str | Path, val_file: str | Path,
                 output_dir: str | Path) -> list[str]:
    """Our TrainConfig (and the memory plan's layout) as verl Hydra overrides, in verl's vocabulary."""
    if algorithm not in ("grpo", "ppo"):
        raise ConfigError(f"the verl engine runs grpo and ppo, not {algorithm}", hint="use --engine trl")
    if "reward_model" in cfg.reward.functions:
        raise ConfigError("reward 'reward_model' is not wired to verl yet",
                          hint="use rule rewards (answer_match, format, module:function) or --engine trl")
    layout = plan.layout
    world = layout.world
    gen = cfg.generation
    device = "cuda" if cfg.launch.device == "cuda" else "npu"
    model_path = cfg.model.path or str(Path(output_dir) / "tiny-model")
    strategy = "megatron" if layout.strategy == "megatron" else "fsdp"
    if algorithm == "grpo":
        n = cfg.grpo.num_generations
        prompts_per_step = max(1, cfg.batch_size * world * cfg.gradient_accumulation_steps // n)
    else:
        n = 1
        prompts_per_step = cfg.batch_size * world
    micro = max(1, cfg.batch_size // (cfg.ppo.num_minibatches if algorithm == "ppo" else 1))
    # optimiser steps per rollout batch: PPO's minibatches, GRPO's accumulated micro-batches
    minibatches = cfg.ppo.num_minibatches if algorithm == "ppo" else cfg.gradient_accumulation_steps
    # vLLM preallocates this share of each device; the plan's rollout bill plus a tenth for its workspace
    util = min(0.9, max(0.2, round(1.1 * (plan.components.get("rollout_weights", 0)
                                           + plan.components.get("rollout_kv_cache", 0))
                                    / (plan.device.hbm_mb * 2**20), 2)))
    a = "actor_rollout_ref"
    o = [
        f"algorithm.adv_estimator={'grpo' if algorithm == 'grpo' else 'gae'}",
        f"data.train_files={train_file}",
        f"data.val_files={val_file}",
        f"data.train_batch_size={prompts_per_step}",
        f"data.max_prompt_length={gen.max_prompt_length}",
        f"data.max_response_length={gen.max_completion_length}",
        "data.filter_overlong_prompts=True",
        "data.truncation=left",
        f"data.seed={cfg.seed}",
        f"{a}.model.path={model_path}",
        f"{a}.model.enable_gradient_checkpointing={cfg.model.gradient_checkpointing}",
        f"{a}.actor.strategy={strategy}",
        f"{a}.actor.optim.lr={cfg.optim.learning_rate}",
        f"{a}.actor.optim.weight_decay={cfg.optim.weight_decay}",
        f"{a}.actor.ppo_mini_batch_size={max(1, prompts_per_step // minibatches)}",
        f"{a}.actor.ppo_micro_batch_size_per_gpu={micro}",
        f"{a}.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        f"{a}.ref.log_prob_micro_batch_size_per_gpu={micro}",
        f"{a}.rollout.name=vllm",
        f"{a}.rollout.tensor_model_parallel_size={layout.rollout_tp}",
        f"{a}.rollout.gpu_memory_utilization={util}",
        f"{a}.rollout.n={n}",
        f"{a}.rollout.temperature={gen.temperature}",
        f"{a}.rollout.top_p={gen.top_p}",
        f"trainer.nnodes={layout.nodes}",
        f"trainer.n_gpus_per_node={layout.devices_per_node}",
        f"trainer.device={device}",
        f"trainer.total_training_steps={cfg.max_steps}",
        f"trainer.save_freq={cfg.save_every}",
        f"trainer.test_freq={cfg.eval_every or -1}",
        f"trainer.max_actor_ckpt_to_keep={cfg.keep_checkpoints}",
        f"trainer.default_local_dir={Path(output_dir) / 'checkpoints'}",
        "trainer.logger=[console]",
        "trainer.project_name=ascend-ready",
        f"trainer.experiment_name={algorithm}-{Path(model_path).name}",
        f"reward.custom_reward_function.path={Path(__file__).resolve()}",
        "reward.custom_reward_function.name=compute_score",
    ]
    if strategy == "fsdp":
        o += [f"{a}.actor.grad_clip={cfg.optim.max_grad_norm}",
              f"{a}.actor.fsdp_config.param_offload={layout.offload}",
              f"{a}.actor.fsdp_config.optimizer_offload={layout.offload}",
              f"{a}.ref.fsdp_config.param_offload={layout.offload}"]
    else:
        for role in ("actor", "ref"):
            o += [f"{a}.{role}.megatron.tensor_model_parallel_size={layout.tp}",
                  f"{a}.{role}.megatron.pipeline_model_parallel_size={layout.pp}",
                  f"{a}.{role}.megatron.expert_model_parallel_size={layout.ep}",
                  f"{a}.{role}.megatron.param_offload={layout.offload}"]
        o += [f"{a}.actor.optim.clip_grad={cfg.optim.max_grad_norm}",
              f"{a}.actor.megatron.optimizer_offload={layout.offload}",
              f"{a}.actor.megatron.expert_tensor_parallel_size=1"]
        o.insert(0, "model_engine=megatron")  # verl's defaults group: megatron actor, ref and critic
    if cfg.model.lora is not None:
        lora = cfg.model.lora
        o += [f"{a}.model.lora_rank={lora.r}", f"{a}.model.lora_alpha={lora.alpha}",
              f"{a}.model.target_modules=[{','.join(lora.target_modules)}]"]
    if algorithm == "grpo":
        g = cfg.grpo
        o += [f"{a}.actor.use_kl_loss={g.beta > 0}",
              f"{a}.actor.kl_loss_coef={g.beta}",
              f"{a}.actor.kl_loss_type=low_var_kl",
              f"{a}.actor.clip_ratio={g.epsilon}",
              f"{a}.actor.ppo_epochs={g.num_iterations}",
              f"{a}.actor.loss_agg_mode={LOSS_AGG[g.loss_type]}",
              f"algorithm.norm_adv_by_std_in_grpo={g.scale_rewards != 'none'}",
              "algorithm.use_kl_in_reward=False"]
    else:
        p = cfg.ppo
        critic_lr = p.critic_learning_rate or cfg.optim.learning_rate
        o += [f"{a}.actor.use_kl_loss=False",
              f"{a}.actor.clip_ratio={p.clip_range}",
              f"{a}.actor.ppo_epochs={p.ppo_epochs}",
              f"algorithm.use_kl_in_reward={p.kl_coef > 0}",
              f"algorithm.kl_penalty={KL_TYPE[p.kl_estimator]}",
              f"algorithm.kl_ctrl.kl_coef={p.kl_coef}",
              f"algorithm.gamma={p.gamma}",
              f"algorithm.lam={p.lam}",
              f"critic.strategy={strategy}",
              f"critic.model.path={model_path}",
              f"critic.model.enable_gradient_checkpointing={cfg.model.gradient_checkpointing}",
              f"critic.optim.lr={critic_lr}",
              f"critic.cliprange_value={p.clip_range_value}",
              f"critic.ppo_epochs={p.ppo_epochs}",
              f"critic.ppo_micro_batch_size_per_gpu={micro}",
              "trainer.critic_warmup=0"]
        if strategy == "fsdp":
            o += [f"critic.fsdp.param_offload={layout.offload}",
                  f"critic.fsdp.optimizer_offload={layout.offload}"]
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
    a = "actor_rollout_ref"
    return {
        "algorithm.adv_estimator": estimators,
        f"{a}.actor.loss_agg_mode": agg,
        f"{a}.actor.kl_loss_type": kl,
        "algorithm.kl_penalty": kl,
        # fixed vocabularies of verl's config docs (docs/examples/config.rst)
        f"{a}.actor.strategy": {"fsdp", "fsdp2", "megatron"},
        "critic.strategy": {"fsdp", "fsdp2", "megatron"},
        f"{a}.rollout.name": {"vllm", "sglang", "hf"},
        "trainer.device": {"cuda", "npu"},
    }


def _compose(overrides: list[str]):
    _require_hydra()
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    config_dir = verl_dir() / "trainer" / "config"
    if not (config_dir / f"{VERL_CONFIG}.yaml").is_file():
        raise MissingExtraError(f"{config_dir}/{VERL_CONFIG}.yaml is missing: not a verl install",
                                hint=VERL_EXTRA_HINT)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=VERL_CONFIG, overrides=overrides)


def validate_overrides(overrides: list[str]) -> Any:
    """Compose verl's config with the overrides; ConfigError naming an unknown key or a refused value."""
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        composed = _compose(overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        text = str(exc)
        key = re.search(r"Could not override '([^']+)'", text) or re.search(r"[Kk]ey '([^']+)'", text)
        named = [o.split("=", 1)[0] for o in overrides if o.split("=", 1)[0] in text]
        name = key.group(1) if key else (named[0] if named else "?")
        raise ConfigError(f"verl override {name}: not a key of verl's {VERL_CONFIG} config",
                          hint=f"check the spelling against verl {verl_dir()}/trainer/config: "
                               f"{text.splitlines()[0]}") from None
    defaults = _compose([])
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


# ---------------------------------------------------------------------------------------------------
# Launch


def prepare(algorithm: str, cfg: Any, out: Path, *, plan: Any | None = None) -> list[str]:
    """Parquet files, overrides, validation; writes out/verl-overrides.txt. Touches no node."""
    from ascend_ready.training.memory_plan import plan_for_config

    if plan is None:
        plan, _, _ = plan_for_config(cfg, algorithm, engine="verl")
    out.mkdir(parents=True, exist_ok=True)
    train, val = write_parquet(cfg, out)
    overrides = to_overrides(cfg, algorithm, plan=plan, train_file=train, val_file=val, output_dir=out)
    validate_overrides(overrides)
    (out / "verl-overrides.txt").write_text("\n".join(overrides) + "\n")
    return overrides


#: verl renders prompts with the tokenizer's chat template; the tiny character tokenizer has none
TINY_CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def ensure_tiny_model(cfg: Any, out: Path) -> Path | None:
    """Build the tiny model where the overrides point (out/tiny-model), with a chat template verl can use."""
    if cfg.model.path is not None or cfg.model.tiny is None:
        return None
    from ascend_ready.training.models import build_tiny_model

    directory = out / "tiny-model"
    if not (directory / "config.json").is_file():
        build_tiny_model(directory, cfg.model.tiny, seed=cfg.seed)
    tok_cfg = directory / "tokenizer_config.json"
    data = json.loads(tok_cfg.read_text())
    if not data.get("chat_template"):
        data["chat_template"] = TINY_CHAT_TEMPLATE
        tok_cfg.write_text(json.dumps(data, indent=2))
    return directory


def launch(algorithm: str, cfg: Any, out: Path, *, skip_preflight: bool = False, dry_run: bool = False,
           log: Callable[[str], None] = print, cluster: Any | None = None,
           run: Callable[[str, str], tuple[int, str, str]] | None = None,
           fingerprints: dict[str, dict[str, str | None]] | None = None) -> dict:
    """Validate everything here, gate on the preflight, then run verl's trainer with the overrides.

    With `fingerprints` (node -> cann/torch/torch_npu as read), a fleet verl does not support is refused
    first (provision.matrix.check_engine_fleet). With `cluster` (training.ray_cluster.RayCluster) and
    `run`, Ray is started on its nodes, the trainer joins it, and it is torn down afterwards; without,
    verl's trainer starts a one-node Ray of its own (docs/verl.md says what is left to wire).
    """
    from ascend_ready.training.preflight import gate

    if fingerprints:
        from ascend_ready.provision.matrix import check_engine_fleet

        check_engine_fleet("verl", fingerprints)
    overrides = prepare(algorithm, cfg, out)
    log(f"verl: {len(overrides)} overrides validated against {verl_dir()}/trainer/config/{VERL_CONFIG}.yaml "
        f"(written to {out / 'verl-overrides.txt'})")
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]
    if dry_run:
        log("launch: " + " ".join(cmd))
        return {"output_dir": str(out), "dry_run": True, "overrides": overrides}
    pf = cfg.preflight
    gate(pf.command, pf.hosts, pf.inventory, pf.timeout_s, skip_preflight)
    ensure_tiny_model(cfg, out)
    env = None
    if cluster is not None and run is not None:
        import os

        from ascend_ready.training import ray_cluster

        ray_cluster.start(cluster, run, log=log)
        env = {**os.environ, "RAY_ADDRESS": cluster.address}
    log("launch: " + " ".join(cmd))
    try:
        rc = subprocess.call(cmd, env=env)
    finally:
        if cluster is not None and run is not None:
            ray_cluster.stop(cluster, run, log=log)
    if rc != 0:
        raise TrainingError(f"verl's trainer exited with {rc}",
                            hint=f"its log is above; the overrides are in {out / 'verl-overrides.txt'}")
    return {"output_dir": str(out), "engine": "verl"}
