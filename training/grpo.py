"""GRPO on TRL's GRPOTrainer: group-normalised advantages, clipped objective, optional KL, optional LoRA.

Launch (the CLI gates every form on a passing `ascend-check` first):
    ascend-train grpo --config tiny --output-dir runs/tiny                      # one device / CPU
    ascend-train grpo --config grpo-qwen2.5-7b-a2 --nproc-per-node 8            # one Atlas 800T A2
    ascend-train grpo --config grpo-qwen2.5-7b-a2 --nnodes 2 --nproc-per-node 8 \\
        --node-rank 0 --master-addr 10.0.0.1                                     # run on each node

Differences from the paper (DeepSeekMath, Shao et al. 2024), all TRL 1.16 defaults unless configured:
token-level "dapo" loss aggregation instead of per-sequence means; beta=0 (no reference model, no KL)
unless `grpo.beta` is set; the KL, when on, is the k3 estimator added to the loss, as in the paper;
generation runs in the training process (colocated), without vLLM.

Scale-out: `batch_size` is per device (TRL's per_device_train_batch_size, in completions), so N ranks sample
N x batch_size completions a step (N x batch_size / num_generations prompts, each group on one rank); to
repeat a one-device run on N ranks, divide batch_size by N. Every rank samples with its own seed (TRL seeds
each process with seed + its index) and all ranks hold the same weights after every step (DDP).
"""

from __future__ import annotations

from pathlib import Path

from ascend_ready.fleet.devices import Runtime, require
from ascend_ready.training.config import TrainConfig
from ascend_ready.training.data import load_prompts
from ascend_ready.training.evaluate import accuracy
from ascend_ready.training.metrics import MetricsLogger
from ascend_ready.training.models import (
    dtype_kwargs,
    load_tokenizer,
    model_dir,
    peft_config,
    set_generation_ids,
)
from ascend_ready.training.rewards import build_reward_funcs
from ascend_ready.training.trl_glue import (
    AscendCallback,
    resume_point,
    run_trainer,
    training_arguments,
    trl_config,
)


def grpo_arguments(cfg: TrainConfig, rt: Runtime, output_dir: Path):
    """TRL's GRPOConfig for our config (also used by the bench to build the plain-TRL baseline)."""
    trl = require("trl")
    g, gen = cfg.grpo, cfg.generation
    return trl_config(
        trl.GRPOConfig,
        **training_arguments(cfg, rt, output_dir),
        num_generations=g.num_generations,
        beta=g.beta,
        epsilon=g.epsilon,
        loss_type=g.loss_type,
        scale_rewards=g.scale_rewards,
        num_iterations=g.num_iterations,
        max_completion_length=gen.max_completion_length,
        temperature=gen.temperature,
        top_p=gen.top_p,
        reward_weights=list(cfg.reward.weights) if cfg.reward.weights else None,
        log_completions=False,
        model_init_kwargs=dtype_kwargs("bfloat16" if rt.bf16 else "float32"),
    )


def build_trainer(cfg: TrainConfig, rt: Runtime, output_dir: Path, callbacks=()):
    """A GRPOTrainer on the config's model, data and rewards; returns (trainer, held-out rows, tokenizer)."""
    trl = require("trl")
    datasets = require("datasets")
    path = model_dir(cfg, output_dir, rt)
    tokenizer = load_tokenizer(path)
    prompts = load_prompts(cfg.data, cfg.seed)
    train = datasets.Dataset.from_list(
        [{"prompt": r["prompt"], "answer": r["answer"]} for r in prompts.train]
    )
    funcs, _weights = build_reward_funcs(cfg)
    trainer = trl.GRPOTrainer(
        # A path, not a module: TRL rebuilds the reference model from it when beta > 0.
        model=str(path),
        reward_funcs=funcs,
        args=grpo_arguments(cfg, rt, output_dir),
        train_dataset=train,
        processing_class=tokenizer,
        peft_config=peft_config(cfg.model.lora),
        callbacks=list(callbacks),
    )
    set_generation_ids(trainer.model, tokenizer)
    return trainer, prompts.eval, tokenizer


def train(cfg: TrainConfig, rt: Runtime, output_dir: Path, resume: bool = False, extra_callbacks=()) -> dict:
    resume_from, resume_step = resume_point(output_dir, resume)
    logger = MetricsLogger(output_dir, enabled=rt.is_main, resume_step=resume_step, max_steps=cfg.max_steps)
    callback = AscendCallback(cfg, "grpo", logger, evaluate=None, loss_key="loss/policy")
    trainer, eval_rows, tokenizer = build_trainer(cfg, rt, output_dir, callbacks=[callback, *extra_callbacks])
    eval_rows = eval_rows[: cfg.eval_max_examples]
    if eval_rows:

        def evaluate(model):
            return {
                "eval/accuracy": accuracy(model, tokenizer, eval_rows, cfg.generation.max_completion_length)
            }

        callback.evaluate = evaluate
    return run_trainer(trainer, callback, cfg, rt, output_dir, resume_from, logger)
