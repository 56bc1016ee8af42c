"""Reward functions shared by GRPO, PPO and evaluation: numeric answer match, format, a reward model, or a
user function by import path. All follow TRL's calling convention: f(prompts=, completions=, **columns)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence

from ascend_ready.errors import ConfigError
from ascend_ready.training.config import TrainConfig

RewardFn = Callable[..., list[float]]
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
FINAL_ANSWER = re.compile(r"####\s*(-?[\d,]*\.?\d+)")
BARE_NUMBER = re.compile(r"^\s*-?\d+(?:\.\d+)?\s*$")


def completion_text(completion) -> str:
    """TRL passes plain strings, or message lists for conversational data (the last message is the reply)."""
    if isinstance(completion, list):
        return str(completion[-1].get("content", "")) if completion else ""
    return str(completion)


def extract_answer(text: str) -> str | None:
    """The number after `####` if present, else the last number in the text (commas dropped)."""
    m = FINAL_ANSWER.search(text)
    if m:
        return m.group(1).replace(",", "")
    found = NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None


def numbers_equal(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    try:
        return abs(float(a) - float(b)) < 1e-6
    except ValueError:
        return a.strip() == b.strip()


def answer_match(
    prompts: Sequence, completions: Sequence, answer: Sequence[str] | None = None, **kwargs
) -> list[float]:
    """1.0 when the completion's final number equals the reference answer, else 0.0."""
    if answer is None:
        raise ConfigError("answer_match needs an 'answer' column in the data")
    return [
        1.0 if numbers_equal(extract_answer(completion_text(c)), str(a)) else 0.0
        for c, a in zip(completions, answer, strict=True)
    ]


def format_reward(prompts: Sequence, completions: Sequence, **kwargs) -> list[float]:
    """1.0 when the completion gives its answer in an accepted form (a bare number or a `#### N` line)."""
    out = []
    for c in completions:
        text = completion_text(c)
        out.append(1.0 if BARE_NUMBER.match(text) or FINAL_ANSWER.search(text) else 0.0)
    return out


class RewardModelScorer:
    """A local sequence-classification model (num_labels=1) scoring prompt + completion."""

    def __init__(self, path: str, device=None):
        from ascend_ready.runtime import require
        from ascend_ready.training.models import load_tokenizer, local_dir

        transformers = require("transformers")
        d = local_dir(path, "model.reward_model_path")
        self.tokenizer = load_tokenizer(d)
        self.tokenizer.padding_side = "right"
        self.model = transformers.AutoModelForSequenceClassification.from_pretrained(str(d), num_labels=1)
        self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.model.eval()
        if device is not None:
            self.model.to(device)
        self.__name__ = "reward_model"

    def __call__(self, prompts: Sequence, completions: Sequence, **kwargs) -> list[float]:
        import torch

        texts = [completion_text(p) + completion_text(c) for p, c in zip(prompts, completions, strict=True)]
        batch = self.tokenizer(texts, return_tensors="pt", padding=True, truncation=True)
        batch = {k: v.to(self.model.device) for k, v in batch.items()}
        with torch.no_grad():
            return self.model(**batch).logits[:, 0].float().tolist()


def import_reward(spec: str) -> RewardFn:
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ConfigError(
            f"reward '{spec}' is neither a built-in nor 'module:function'",
            hint="built-ins: answer_match, format, reward_model",
        )
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import reward function '{spec}': {exc}") from exc
    if not callable(fn):
        raise ConfigError(f"reward '{spec}' is not callable")
    return fn


def build_reward_funcs(cfg: TrainConfig) -> tuple[list[RewardFn], list[float]]:
    """The configured reward callables and their weights."""
    funcs: list[RewardFn] = []
    for name in cfg.reward.functions:
        if name == "answer_match":
            funcs.append(answer_match)
        elif name == "format":
            funcs.append(format_reward)
        elif name == "reward_model":
            if not cfg.model.reward_model_path:
                raise ConfigError("reward 'reward_model' needs model.reward_model_path")
            funcs.append(RewardModelScorer(cfg.model.reward_model_path))
        else:
            funcs.append(import_reward(name))
    weights = list(cfg.reward.weights) if cfg.reward.weights else [1.0] * len(funcs)
    return funcs, weights


def total_reward(
    funcs: Sequence[RewardFn],
    weights: Sequence[float],
    prompts: Sequence,
    completions: Sequence,
    columns: dict[str, Sequence],
) -> list[float]:
    """Weighted sum of every reward for each completion (what GRPO's default aggregation also computes)."""
    totals = [0.0] * len(completions)
    for fn, w in zip(funcs, weights, strict=True):
        scores = fn(prompts=list(prompts), completions=list(completions), **columns)
        if len(scores) != len(completions):
            raise ConfigError(
                f"reward {getattr(fn, '__name__', fn)} returned {len(scores)} scores "
                f"for {len(completions)} completions"
            )
        totals = [t + w * (0.0 if s is None else float(s)) for t, s in zip(totals, scores, strict=True)]
    return totals
