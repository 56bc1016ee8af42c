"""`ascend-train grpo|ppo --engine verl`: the same TrainConfig handed to verl's PPO trainer, as Hydra
overrides checked against the installed verl's own config tree before any node is touched.

What happens here (CPU, no accelerator): the prompts become the parquet files verl reads, the
config becomes `key=value` overrides, and they are composed with verl's `verl/trainer/config/
ppo_trainer.yaml` (Hydra, struct mode: an unknown or misspelt key is refused by name) and their values
checked against the choices verl's source accepts. The training itself needs accelerators and a Ray
cluster; `launch()` starts `python -m verl.trainer.main_ppo` with the validated overrides on this node,
`launch_across_nodes()` brings up Ray on a launch spec's nodes (training/ray_cluster.py) and runs it there.

Install: `pip install 'ascend-ready[verl]'` (hydra-core, omegaconf, pandas, pyarrow, ray) and
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


def prepare(algorithm: str, cfg: Any, out: Path, *, plan: Any | None = None,
            node_dir: str | None = None) -> list[str]:
    """Parquet files, overrides, validation; writes out/verl-overrides.txt. Touches no node.

    `node_dir`: the run dir as the nodes see it (a shared filesystem mounted elsewhere on them); the
    overrides name the data, model and checkpoints there."""
    from ascend_ready.training.memory_plan import plan_for_config

    if plan is None:
        plan, _, _ = plan_for_config(cfg, algorithm, engine="verl")
    out.mkdir(parents=True, exist_ok=True)
    train, val = write_parquet(cfg, out)
    seen = Path(node_dir) if node_dir else out
    train, val = seen / train.relative_to(out), seen / val.relative_to(out)
    overrides = to_overrides(cfg, algorithm, plan=plan, train_file=train, val_file=val, output_dir=seen)
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
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # its shard bar would sit among the launcher's lines
        build_tiny_model(directory, cfg.model.tiny, seed=cfg.seed)
    tok_cfg = directory / "tokenizer_config.json"
    data = json.loads(tok_cfg.read_text())
    if not data.get("chat_template"):
        data["chat_template"] = TINY_CHAT_TEMPLATE
        tok_cfg.write_text(json.dumps(data, indent=2))
    return directory


def launch(algorithm: str, cfg: Any, out: Path, *, skip_preflight: bool = False, dry_run: bool = False,
           log: Callable[[str], None] = print, cluster: Any | None = None,
           run: Callable[[str, str, float], tuple[int, str]] | None = None,
           fingerprints: dict[str, dict[str, str | None]] | None = None) -> dict:
    """Validate everything here, gate on the preflight, then run verl's trainer with the overrides.

    With `fingerprints` (node -> cann/torch/torch_npu as read), a fleet verl does not support is refused
    first (provision.matrix.check_engine_fleet). With `cluster` (training.ray_cluster.RayCluster) and
    `run` (ray_cluster.runner), Ray is started on its nodes, the trainer joins it from here, and it is
    torn down afterwards; without, verl's trainer starts a one-node Ray of its own. Across the nodes of a
    launch spec the CLI uses launch_across_nodes instead (the trainer runs on the head).
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


# ---------------------------------------------------------------------------------------------------
# Across the nodes of a launch spec: a Ray cluster, then verl's trainer as its driver on the head

#: the file of the run dir that records the Ray cluster's check (each node's hostname and NPUs)
RAY_CHECK_FILE = "ray-cluster.json"
#: what verl's trainer imports on every node besides Ray; the device kind adds torch_npu (NPU)
VERL_RUNTIME = ("verl", "vllm", "torch")
_RUNTIME_PROBE = """
import importlib.metadata as m, importlib.util as u, json
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
print(json.dumps({"ray": version("ray") if u.find_spec("ray") else None,
                  "missing": [x for x in %r if u.find_spec(x) is None]}))
"""


def _runtime(sessions: dict, cluster: Any, modules: tuple[str, ...]) -> dict[str, tuple[str | None, list]]:
    """node -> (its Ray version, the modules of verl's runtime it lacks), read with the node's interpreter."""
    import shlex

    from ascend_ready.training.multinode import as_user

    found = {}
    for node in cluster.nodes:
        code = _RUNTIME_PROBE % (modules,)
        script = f"exec {shlex.quote(node.python)} -c {shlex.quote(code)}\n"
        cmd = as_user(script, node.run_as, node.login_user)
        rc, out = sessions[node.name].capture(cmd, 60)
        try:
            data = json.loads(out.strip().splitlines()[-1])
            found[node.name] = (data["ray"], list(data["missing"]))
        except (ValueError, IndexError, KeyError, TypeError):
            raise TrainingError(f"{node.name}: cannot read what {node.python} has installed (exit {rc}): "
                                f"{out.strip()[-300:] or '(no output)'}",
                                hint=f"check that {node.python} runs on {node.name} (--python)") from None
    return found


def _versions(fingerprint: dict[str, str]) -> dict[str, str | None]:
    """A launch spec's fingerprint as check_engine_fleet reads it: "(not installed)" is no version."""
    return {k: None if v == "(not installed)" else v for k, v in fingerprint.items()}


def _refuse_without_ray(versions: dict[str, tuple[str | None, list]], python: dict[str, str]) -> None:
    from importlib.metadata import version

    here = version("ray") if importlib.util.find_spec("ray") else None
    want = here or next((v for v, _ in versions.values() if v), None)
    bad = [f"{n}: {'no ray in ' + python[n] if v is None else f'ray {v}, not {want}'}"
           for n, (v, _) in versions.items() if v is None or v != want]
    if bad:
        raise ConfigError("the Ray cluster needs the same Ray on every node: " + "; ".join(bad),
                          hint=f"pip install 'ray=={want or '2.60.0'}' into the training venv of each node "
                               "named (the [verl] extra pins it)")


def launch_across_nodes(algorithm: str, cfg: Any, out: Path, *, opts: Any, join_timeout_s: float = 120.0,
                        cluster_options: dict | None = None) -> dict:
    """`--engine verl` with --launch-spec or -i/--hosts: Ray on every node the spec (or the preflight)
    lets start, a Ray task on each node checked (hostname, NPUs), then verl's trainer as the cluster's
    driver on the head, its output streamed; Ray is stopped on every node afterwards, also on a failure
    and Ctrl-C, and a Ray process left anywhere is reported.

    Where a node lacks verl's runtime (vllm, torch_npu, verl: a machine without accelerators, such as the
    simulated cluster), the trainer is not started: the Ray cluster is brought up, checked and stopped,
    and TrainingError names what is missing where. `opts` is multinode.LaunchOptions; `cluster_options`
    are RayCluster's (num_cpus, object_store_bytes, port).
    """
    import contextlib
    import secrets
    import time

    from ascend_ready.training import multinode as mn
    from ascend_ready.training import node_probe, ray_cluster
    from ascend_ready.training.remote import open_sessions, root_cause, run_job

    out = out.absolute()
    log = opts.log
    fleet = node_probe.resolve_fleet(cfg, opts)
    node_out = opts.node_output_dir or str(out)
    device = "cuda" if cfg.launch.device == "cuda" else "npu"
    modules = (*VERL_RUNTIME, "torch_npu") if device == "npu" else VERL_RUNTIME
    if not fleet.from_inventory and not opts.dry_run:
        node_probe.refuse_changed_versions(fleet.spec, fleet.hosts,
                                           {n: fleet.targets[n] for n in fleet.names}, opts)
    with contextlib.ExitStack() as stack:
        # A dry run connects only where it must: to read the NICs the spec does not give.
        need = not opts.dry_run or fleet.from_inventory or any(not fleet.hosts[n].ip for n in fleet.names)
        sessions = (stack.enter_context(open_sessions([fleet.targets[n] for n in fleet.names], opts.fanout))
                    if need else {})
        nonce = marker = None
        if not opts.dry_run:
            out.mkdir(parents=True, exist_ok=True)
            nonce = secrets.token_hex(8)
            marker = out / f".ascend-train-shared-{nonce}"
            marker.write_text(nonce)
            stack.callback(marker.unlink, missing_ok=True)
        probe_as = {n: u for n, u in fleet.users.items() if u and u != fleet.targets[n].user}
        facts = node_probe.probe_all(
            sessions, fleet.master,
            lambda n: node_probe.required_paths(cfg, fleet.python[n], opts.set_env, None),
            f"{node_out}/{marker.name}" if marker else None, nonce, probe_as) if sessions else {}
        hosts = fleet.hosts
        if fleet.from_inventory:
            spec = node_probe.spec_with_routes(fleet.report, {n: fleet.targets[n] for n in fleet.names},
                                               facts, fleet.master, fleet.port)
            hosts, master = spec.usable(), spec.master_addr
        else:
            spec, master = fleet.spec, opts.master_addr or fleet.master
        names = mn.node_rank_order(hosts, master)  # the master's host is the head
        if not opts.dry_run:
            node_probe.refuse_missing(facts, fleet.python)
            unshared = [n for n in names if not facts[n].sees_output]
            if unshared:
                raise ConfigError(f"verl needs the run dir on a filesystem every node shares: "
                                  f"{', '.join(unshared)} do not see {node_out}",
                                  hint="put --output-dir on the shared filesystem (mounted elsewhere on the "
                                       "nodes: --node-output-dir), as verl's data and checkpoints must be")
        cluster = ray_cluster.cluster_from_spec(
            {n: hosts[n] for n in names}, python=fleet.python, set_env=opts.set_env,
            run_as={n: u for n, u in fleet.users.items() if u},
            login_users={n: (facts[n].login_user if n in facts else None) or fleet.targets[n].user
                         for n in names},
            **(cluster_options or {}))
        nproc = opts.nproc_per_node or min((len(n.devices) for n in cluster.nodes), default=0) \
            or cfg.launch.nproc_per_node
        job = cfg.model_copy(deep=True)
        job.launch.nnodes, job.launch.nproc_per_node = len(names), nproc
        overrides = prepare(algorithm, job, out, node_dir=node_out)
        log(f"verl: {len(overrides)} overrides validated against {verl_dir()}/trainer/config/"
            f"{VERL_CONFIG}.yaml (written to {out / 'verl-overrides.txt'})")
        head = cluster.head
        run_id = f"verl-{algorithm}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        plan = mn.JobPlan(algorithm, run_id, out, head.ip, cluster.port, nproc, [], {
            n: f"{h.verdict}: {', '.join(h.failed_checks) or 'see the report'}"
            for n, h in spec.hosts.items() if n not in hosts}, spec.checked, opts.node_output_dir)
        env = {"RAY_ADDRESS": cluster.address, "PYTHONUNBUFFERED": "1", **cluster.node_env(head)}
        plan.hosts.append(mn.HostPlan(
            name=head.name, target=fleet.targets[head.name], node_rank=0, nic=head.nic, ip=head.ip,
            devices=list(head.devices), python=head.python, training_user=head.run_as, env=env,
            torchrun=[head.python, "-m", "verl.trainer.main_ppo", *overrides], bindings=[],
            set_env=opts.set_env, facts=facts.get(head.name)))
        if opts.dry_run:
            import sys

            lines = [f"ray cluster: {len(cluster.nodes)} node(s), head {head.name} at {cluster.address}"]
            lines += [f"== {n.name}: {'head' if n is head else 'worker'}, NIC {n.nic or '-'} {n.ip}, "
                      f"{len(n.devices)} NPU(s)\n{cluster.start_command(n)}" for n in cluster.nodes]
            lines.append(f"== verl's trainer: the driver on {head.name}, RAY_ADDRESS={cluster.address}")
            lines.append(mn.remote_command(plan.hosts[0], plan).rstrip("\n"))
            sys.stdout.write("\n".join(lines) + "\n")
            return {"dry_run": True, "hosts": names}
        runtime = _runtime(sessions, cluster, modules)
        _refuse_without_ray(runtime, fleet.python)
        if not any(miss for _v, miss in runtime.values()):
            # The trainer will start: the stack the preflight read on each node must be one verl supports
            # (a node lacking verl's runtime is named after the Ray check instead, and nothing trains).
            from ascend_ready.provision.engines import check_engine_fleet

            check_engine_fleet("verl", {n: _versions(hosts[n].fingerprint) for n in names})
        ensure_tiny_model(job, out)
        plan.log_dir.mkdir(parents=True, exist_ok=True)
        run = ray_cluster.runner(sessions)
        ray_cluster.start(cluster, run, join_timeout_s=join_timeout_s, log=log)
        result = left = None
        try:
            nodes = ray_cluster.check(cluster, run)
            record = {"address": cluster.address, "nodes": nodes}
            (out / RAY_CHECK_FILE).write_text(json.dumps(record, indent=1) + "\n")
            for row in nodes:
                log(f"ray: {row['node']}: a task ran on {row['hostname']} ({row['ip']}) holding "
                    f"{len(row['npu_ids'])} NPU(s) {row['npu_ids']}")
            lacking = {n: miss for n, (_v, miss) in runtime.items() if miss}
            if not lacking:
                result = run_job({head.name: mn.remote_command(plan.hosts[0], plan)},
                                 {head.name: sessions[head.name]}, plan.log_dir, echo=log)
        finally:
            left = ray_cluster.stop(cluster, run, log=log)
    leftover = ("; Ray processes LEFT on " + "; ".join(f"{n}: {', '.join(p)}" for n, p in left.items())
                if left else "")
    if result is None:
        what = "; ".join(f"{n} lacks {', '.join(m)}" for n, m in lacking.items())
        raise TrainingError(
            f"verl's trainer was not started: {what} (its interpreter {head.python}). The Ray cluster "
            f"came up on {len(nodes)} node(s), ran a task on each ({out / RAY_CHECK_FILE}) and was stopped"
            + leftover,
            hint=f"install verl's stack on every node (`ascend-matrix resolve --engine verl`; verl itself: "
                 f"{VERL_EXTRA_HINT.split('&& ')[-1]}); verl's trainer needs NPUs or GPUs (docs/verl.md)")
    if result.interrupted:
        log(f"ray: interrupted; stopped on every node{leftover}")
        raise KeyboardInterrupt
    if not result.ok:
        cause = root_cause(result.nodes)
        raise TrainingError(f"verl's trainer failed on {head.name}: "
                            f"{cause.lost or cause.error or f'exit code {cause.rc}'}" + leftover,
                            hint=f"its log: {plan.log_dir}/{head.name}.log; the overrides: "
                                 f"{out / 'verl-overrides.txt'}")
    if left:
        raise TrainingError(f"verl's trainer finished, but the teardown left Ray running{leftover}",
                            hint="stop it there: ray stop --force")
    return {"output_dir": str(out), "engine": "verl", "hosts": names, "run_id": run_id,
            "logs": str(plan.log_dir), "ray": cluster.address}
