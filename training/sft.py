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
from ascend_ready.training.data import sft_rows
from ascend_ready.training.evaluate import accuracy
from ascend_ready.training.models import dtype_kwargs, peft_config
from ascend_ready.training.trl_glue import AscendCallback, run_trainer, start, training_arguments, trl_config


def train(cfg: TrainConfig, rt: Runtime, output_dir: Path, resume: bool = False) -> dict:
    trl, datasets = require("trl"), require("datasets")
    begin = start(cfg, rt, output_dir, resume)
    logger, path, tokenizer, prompts = begin.logger, begin.model_path, begin.tokenizer, begin.prompts
    eval_rows = prompts.eval[: cfg.eval_max_examples]

    def evaluate(model):
        return {"eval/accuracy": accuracy(model, tokenizer, eval_rows, cfg.generation.max_completion_length)}

    callback = AscendCallback(cfg, "sft", logger, evaluate if eval_rows else None, loss_key="loss/total")
    args = trl_config(
        trl.SFTConfig,
        **training_arguments(cfg, rt, output_dir),
        max_length=cfg.max_length,
        model_init_kwargs=dtype_kwargs("bfloat16" if rt.bf16 else "float32"),
    )
    trainer = trl.SFTTrainer(
        model=str(path),
        args=args,
        train_dataset=datasets.Dataset.from_list(sft_rows(prompts.train)),
        processing_class=tokenizer,
        peft_config=peft_config(cfg.model.lora),
        callbacks=[callback],
    )
    return run_trainer(trainer, callback, cfg, rt, output_dir, begin.resume_from, logger)
