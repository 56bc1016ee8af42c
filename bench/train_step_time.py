"""Seconds per step on the tiny CPU config: our GRPO vs plain TRL GRPOTrainer (target <= 1.05x) and our PPO
vs our GRPO (target <= 1.5x). Run: OMP_NUM_THREADS=1 .venv/bin/python bench/train_step_time.py

Steps are timed from one step start to the next, so logging, metric files and checkpoint commits count.
Both wall-clock and process CPU seconds are reported: on a shared box the CPU figure (one thread) is the one
that does not move with other people's load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback

from ascend_ready.runtime import setup_runtime
from ascend_ready.training import grpo, ppo
from ascend_ready.training.config import load_config


class StepClock(TrainerCallback):
    """(wall, cpu) stamps at every step start and at the end of training."""

    def __init__(self):
        self.stamps: list[tuple[float, float]] = []

    def tick(self) -> None:
        self.stamps.append((time.perf_counter(), time.process_time()))

    def on_step_begin(self, *a, **k):
        self.tick()

    def on_train_end(self, *a, **k):
        self.tick()

    def per_step(self, warmup: int = 3) -> dict[str, float]:
        gaps = list(zip(self.stamps, self.stamps[1:], strict=False))[warmup:]
        return {"wall": statistics.median(b[0] - a[0] for a, b in gaps),
                "cpu": statistics.median(b[1] - a[1] for a, b in gaps)}


def plain_trl(cfg, rt, out: Path) -> dict[str, float]:
    clock = StepClock()
    trainer, _, _ = grpo.build_trainer(cfg, rt, out, callbacks=[clock])
    trainer.remove_callback(PrinterCallback)  # ours removes it too: same console cost on both sides
    trainer.train()
    return clock.per_step()


def ours_grpo(cfg, rt, out: Path) -> dict[str, float]:
    clock = StepClock()
    grpo.train(cfg, rt, out, extra_callbacks=[clock])
    return clock.per_step()


def ours_ppo(cfg, rt, out: Path) -> dict[str, float]:
    clock = StepClock()
    original = ppo.batch_rows

    def stamped(*args, **kwargs):  # called once at the start of every PPO step
        clock.tick()
        return original(*args, **kwargs)

    ppo.batch_rows = stamped
    try:
        ppo.train(cfg, rt, out)
    finally:
        ppo.batch_rows = original
    clock.tick()
    return clock.per_step()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds; the best counts")
    args = ap.parse_args()
    torch.set_num_threads(1)
    # No evaluation and one checkpoint at the end: the bench times training steps, like TRL's own.
    cfg = load_config("tiny", [f"max_steps={args.steps}", f"save_every={args.steps}", "eval_every=0",
                               "eval_max_examples=0"])
    # PPO "matched": one optimiser update per batch, as GRPO with num_iterations=1 makes; "tiny" is the tiny
    # config's own PPO (2 epochs x 2 minibatches = 4 updates per batch).
    one_update = cfg.ppo.model_copy(update={"ppo_epochs": 1, "num_minibatches": 1})
    matched = cfg.model_copy(update={"ppo": one_update})
    rt = setup_runtime("cpu", "fp32")
    variants = {"plain_trl_grpo": (plain_trl, cfg), "ours_grpo": (ours_grpo, cfg),
                "ours_ppo_matched": (ours_ppo, matched), "ours_ppo_tiny": (ours_ppo, cfg)}
    runs: dict[str, list[dict]] = {k: [] for k in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):  # interleaved, so a load spike on a shared box hits every variant alike
            for name, (fn, c) in variants.items():
                runs[name].append(fn(c, rt, Path(tmp) / f"{name}{i}"))
    best = {k: {m: min(r[m] for r in v) for m in ("wall", "cpu")} for k, v in runs.items()}

    def ratio(a: str, b: str) -> dict[str, float]:
        return {m: best[a][m] / best[b][m] for m in ("wall", "cpu")}

    print(json.dumps({
        "steps": args.steps, "repeats": args.repeats, "s_per_step_best": best,
        "grpo_ours_over_trl": ratio("ours_grpo", "plain_trl_grpo"),
        "ppo_matched_over_grpo": ratio("ours_ppo_matched", "ours_grpo"),
        "ppo_tiny_over_grpo": ratio("ours_ppo_tiny", "ours_grpo"),
        "targets": {"grpo_ours_over_trl": 1.05, "ppo_matched_over_grpo": 1.5},
        "s_per_step_all": runs}, indent=1))


if __name__ == "__main__":
    main()
