"""Prompt sets with reference answers: the bundled synthetic arithmetic task, JSONL and GSM8K-format files.

Every loader returns plain rows {"prompt", "answer"} split into train and a held-out evaluation set.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from ascend_ready.errors import ConfigError
from ascend_ready.training.config import DataConfig

GSM8K_ANSWER = re.compile(r"####\s*(-?[\d,]*\.?\d+)\s*$")


@dataclass(frozen=True)
class PromptSet:
    train: list[dict]
    eval: list[dict]


def arithmetic_rows(n: int, max_operand: int, operators: str, seed: int) -> list[dict]:
    """`a+b=` prompts with the integer result as the answer; deterministic for a seed."""
    rng = random.Random(seed)
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
    rows = []
    for _ in range(n):
        a, b, op = rng.randint(0, max_operand), rng.randint(0, max_operand), rng.choice(operators)
        rows.append({"question": f"{a}{op}{b}=", "answer": str(ops[op](a, b))})
    return rows


def read_jsonl(path: str | Path, limit: int = 0) -> list[dict]:
    """Parse a JSONL file, naming the line that is not a JSON object."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"data file not found: {path}")
    rows = []
    with p.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{line_no}: not valid JSON: {exc.msg}") from exc
            if not isinstance(row, dict):
                raise ConfigError(f"{path}:{line_no}: expected a JSON object")
            rows.append(row)
            if limit and len(rows) >= limit:
                break
    if not rows:
        raise ConfigError(f"{path}: no examples")
    return rows


def gsm8k_rows(path: str | Path, limit: int = 0) -> list[dict]:
    """GSM8K lines {"question", "answer": "reasoning ... #### 42"}: the number after #### is the answer."""
    rows = []
    for i, row in enumerate(read_jsonl(path, limit), 1):
        if "question" not in row or "answer" not in row:
            raise ConfigError(f"{path}: example {i} lacks 'question' or 'answer'")
        m = GSM8K_ANSWER.search(str(row["answer"]))
        if not m:
            raise ConfigError(f"{path}: example {i}: answer has no '#### <number>' line")
        rows.append(
            {"question": row["question"], "answer": m.group(1).replace(",", ""), "solution": row["answer"]}
        )
    return rows


def _jsonl_prompt_rows(path: str | Path, limit: int) -> list[dict]:
    rows = read_jsonl(path, limit)
    for i, row in enumerate(rows, 1):
        if "prompt" not in row:
            raise ConfigError(f"{path}: example {i} lacks 'prompt'")
        row.setdefault("question", row["prompt"])
    return rows


def load_prompts(cfg: DataConfig, seed: int) -> PromptSet:
    """Rows with `prompt` (template applied) and `answer`, shuffled with `seed`, the tail held out."""
    if cfg.source == "arithmetic":
        rows = arithmetic_rows(cfg.num_examples, cfg.max_operand, cfg.operators, seed)
    elif cfg.source == "gsm8k":
        rows = gsm8k_rows(cfg.path, cfg.num_examples)
    else:
        rows = _jsonl_prompt_rows(cfg.path, cfg.num_examples)
    for row in rows:
        if cfg.source != "jsonl" or cfg.prompt_template != "{question}":
            row["prompt"] = cfg.prompt_template.replace("{question}", str(row["question"]))
        row["answer"] = str(row.get("answer", ""))
    random.Random(seed).shuffle(rows)
    n_eval = min(cfg.eval_size, len(rows) - 1)
    return PromptSet(train=rows[: len(rows) - n_eval], eval=rows[len(rows) - n_eval :])


def sft_rows(rows: list[dict]) -> list[dict]:
    """prompt/completion pairs: the row's completion, else its worked solution, else the bare answer."""
    return [
        {"prompt": r["prompt"], "completion": str(r.get("completion") or r.get("solution") or r["answer"])}
        for r in rows
    ]


def preference_rows(rows: list[dict], seed: int) -> list[dict]:
    """prompt/chosen/rejected triples; rows without them get the right answer vs a perturbed wrong one."""
    rng = random.Random(seed)
    out = []
    for r in rows:
        if "chosen" in r and "rejected" in r:
            out.append({"prompt": r["prompt"], "chosen": str(r["chosen"]), "rejected": str(r["rejected"])})
            continue
        try:
            wrong = str(int(float(r["answer"])) + rng.choice([-3, -2, -1, 1, 2, 3]))
        except ValueError as exc:
            raise ConfigError(
                f"example {r['prompt']!r}: no chosen/rejected and a non-numeric answer"
            ) from exc
        out.append({"prompt": r["prompt"], "chosen": r["answer"], "rejected": wrong})
    return out
