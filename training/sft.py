"""Supervised fine-tuning (stage 1 of the three-stage RLHF pipeline) on TRL's SFTTrainer.

Launch (gated on a passing `ascend-check` by the CLI):
    ascend-train sft --config sft-qwen2.5-7b --output-dir runs/sft                 # one device
    ascend-train sft --config sft-qwen2.5-7b --nproc-per-node 8                    # one node
Data: prompt/completion pairs — a JSONL `completion` column, GSM8K worked solutions, or the synthetic task's
answers. The loss is on completion tokens only (TRL's default for prompt/completion data).
"""

from __future__ import annotations

from pathlib import Path

from ascend_ready.fleet.devices import Runtime, require
from ascend_ready.training.config import TrainConfig
from ascend_ready.training.data import load_prompts, sft_rows
from ascend_ready.training.evaluate import accuracy
from ascend_ready.training.metrics import MetricsLogger
from ascend_ready.training.models import load_tokenizer, model_dir, peft_config
from ascend_ready.training.trl_glue import AscendCallback, resume_point, run_trainer, training_arguments


def train(cfg: TrainConfig, rt: Runtime, output_dir: Path, resume: bool = False) -> dict:
    trl, datasets = require("trl"), require("datasets")
    resume_from, resume_step = resume_point(output_dir, resume)
    logger = MetricsLogger(output_dir, enabled=rt.is_main, resume_step=resume_step, max_steps=cfg.max_steps)
    path = model_dir(cfg, output_dir, rt)
    tokenizer = load_tokenizer(path)
    prompts = load_prompts(cfg.data, cfg.seed)
    eval_rows = prompts.eval[: cfg.eval_max_examples]

    def evaluate(model):
        return {"eval/accuracy": accuracy(model, tokenizer, eval_rows, cfg.generation.max_completion_length)}

    callback = AscendCallback(cfg, "sft", logger, evaluate if eval_rows else None, loss_key="loss/total")
    args = trl.SFTConfig(
        **training_arguments(cfg, rt, output_dir),
        max_length=cfg.max_length,
        model_init_kwargs={"dtype": "bfloat16" if rt.bf16 else "float32"},
    )
    trainer = trl.SFTTrainer(
        model=str(path),
        args=args,
        train_dataset=datasets.Dataset.from_list(sft_rows(prompts.train)),
        processing_class=tokenizer,
        peft_config=peft_config(cfg.model.lora),
        callbacks=[callback],
    )
    return run_trainer(trainer, callback, cfg, rt, output_dir, resume_from, logger)
