"""A resumed run writes each step's metrics once: one held-out evaluation per evaluated step, none repeated at
the checkpoint it resumed from (a killed worker then --resume used to log the resumed step's eval twice)."""

from __future__ import annotations

import collections

import pytest

pytest.importorskip("trl")
from ascend_ready.runtime import setup_runtime
from ascend_ready.training import grpo, ppo
from ascend_ready.training.config import load_config
from ascend_ready.training.metrics import read_metrics


@pytest.mark.parametrize("algo", [grpo, ppo], ids=["grpo", "ppo"])
def test_resume_logs_every_evaluation_once(algo, tmp_path):
    common = ["save_every=2", "eval_every=2", "eval_max_examples=4"]
    rt = setup_runtime("cpu", "fp32")
    algo.train(load_config("tiny", [*common, "max_steps=4"]), rt, tmp_path)
    algo.train(load_config("tiny", [*common, "max_steps=6"]), rt, tmp_path, resume=True)
    evals = [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl") if "eval/accuracy" in r]
    repeated = {s: n for s, n in collections.Counter(evals).items() if n > 1}
    assert not repeated, f"eval rows repeated at steps {repeated}: {evals}"
    assert evals == [0, 2, 4, 6]
