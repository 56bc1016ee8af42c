"""Reward-model training (stage 2 of the three-stage RLHF pipeline) on TRL's RewardTrainer.

Launch (gated on a passing `ascend-check` by the CLI):
    ascend-train rm --config rm-qwen2.5-7b --output-dir runs/rm                   # one device
    ascend-train rm --config rm-qwen2.5-7b --nproc-per-node 8                     # one node
Bradley-Terry loss on chosen/rejected pairs (JSONL `chosen`/`rejected`, else the reference answer against a
perturbed wrong number). The result, in <output>/final, is what `model.reward_model_path` of PPO/GRPO takes.
Evaluation: pairwise accuracy (chosen scored above rejected) on the held-out pairs.
"""

from __future__ import annotations

from pathlib import Path

from ascend_ready.fleet.devices import Runtime, require
from ascend_ready.training.config import TrainConfig
from ascend_ready.training.data import preference_rows
from ascend_ready.training.models import dtype_kwargs, peft_config
from ascend_ready.training.trl_glue import AscendCallback, run_trainer, start, training_arguments, trl_config


def pairwise_accuracy(model, tokenizer, pairs: list[dict]) -> float:
    """Fraction of pairs whose chosen text scores above the rejected one."""
    import torch

    was_training = model.training
    model.eval()
    try:

        def score(texts):
            enc = tokenizer(texts, return_tensors="pt", padding=True).to(model.device)
            with torch.no_grad():
                return model(**enc).logits[:, 0].float()

        chosen = score([p["prompt"] + p["chosen"] for p in pairs])
        rejected = score([p["prompt"] + p["rejected"] for p in pairs])
    finally:
        model.train(was_training)
    return (chosen > rejected).float().mean().item()


def train(cfg: TrainConfig, rt: Runtime, output_dir: Path, resume: bool = False) -> dict:
    trl, datasets, transformers = require("trl"), require("datasets"), require("transformers")
    begin = start(cfg, rt, output_dir, resume)
    logger, path, tokenizer, prompts = begin.logger, begin.model_path, begin.tokenizer, begin.prompts
    eval_pairs = preference_rows(prompts.eval[: cfg.eval_max_examples], cfg.seed + 1)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(path), num_labels=1, **dtype_kwargs("bfloat16" if rt.bf16 else "float32")
    )
    model.config.pad_token_id = tokenizer.pad_token_id  # the score is read at the last non-pad token

    def evaluate(m):
        return {"eval/pairwise_accuracy": pairwise_accuracy(m, tokenizer, eval_pairs)}

    callback = AscendCallback(cfg, "rm", logger, evaluate if eval_pairs else None, loss_key="loss/total")
    args = trl_config(trl.RewardConfig, **training_arguments(cfg, rt, output_dir), max_length=cfg.max_length)
    trainer = trl.RewardTrainer(
        model=model,
        args=args,
        train_dataset=datasets.Dataset.from_list(preference_rows(prompts.train, cfg.seed)),
        processing_class=tokenizer,
        peft_config=peft_config(cfg.model.lora, "SEQ_CLS"),
        callbacks=[callback],
    )
    return run_trainer(trainer, callback, cfg, rt, output_dir, begin.resume_from, logger)
