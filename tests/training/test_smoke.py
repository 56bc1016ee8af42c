"""Smoke tests: each subcommand on the tiny config for a few CPU steps, then an exact resume."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

pytest.importorskip("trl")
from ascend_ready.training.checkpoint import latest_checkpoint, read_marker
from ascend_ready.training.cli import main
from ascend_ready.training.metrics import read_metrics

LOSS_KEY = {"grpo": "loss/policy", "ppo": "loss/policy", "sft": "loss/total", "rm": "loss/total"}


def train(algo, out, check, *extra):
    result = CliRunner().invoke(
        main,
        [
            algo,
            "-c",
            "tiny",
            "-o",
            str(out),
            "--preflight-command",
            str(check),
            "save_every=2",
            "eval_every=0",
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output + repr(result.exception)
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("algo", ["grpo", "ppo", "sft", "rm"])
def test_tiny_run_then_resume(algo, tmp_path, passing_check):
    out = tmp_path / algo
    summary = train(algo, out, passing_check, "max_steps=3")
    assert summary["step"] == 3
    steps = [r for r in read_metrics(out / "metrics.jsonl") if LOSS_KEY[algo] in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    assert all(math.isfinite(r[LOSS_KEY[algo]]) for r in steps)
    if algo in ("grpo", "ppo"):
        assert all(0.0 <= r["reward/mean"] <= 1.5 for r in steps)
    ckpt = latest_checkpoint(out / "checkpoints")
    assert (
        ckpt.name == "checkpoint-3" and read_marker(ckpt)["step"] == 3 and read_marker(ckpt)["algo"] == algo
    )
    assert (out / "metrics.png").stat().st_size > 1000
    assert any((out / "tensorboard").iterdir())

    summary = train(algo, out, passing_check, "max_steps=5", "--resume")
    assert summary["step"] == 5
    steps = [r["step"] for r in read_metrics(out / "metrics.jsonl") if LOSS_KEY[algo] in r]
    assert steps == [1, 2, 3, 4, 5]  # resumed at 4, nothing repeated or skipped
    assert read_marker(latest_checkpoint(out / "checkpoints"))["step"] == 5


def test_resume_without_checkpoint_is_a_config_error(tmp_path, passing_check):
    result = CliRunner().invoke(
        main,
        ["ppo", "-c", "tiny", "-o", str(tmp_path), "--preflight-command", str(passing_check), "--resume"],
    )
    assert result.exit_code == 2
    assert "no committed checkpoint" in result.stderr


def test_nan_loss_stops_with_last_good_checkpoint(tmp_path, passing_check, monkeypatch):
    # A reward function that turns NaN on its third call poisons the advantages, hence the loss, at step 3.
    (tmp_path / "nan_reward.py").write_text(
        "calls = []\n"
        "def reward(prompts, completions, **kw):\n"
        "    calls.append(1)\n"
        "    return [float('nan') if len(calls) >= 3 else 0.0 for _ in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(
        main,
        [
            "ppo",
            "-c",
            "tiny",
            "-o",
            str(tmp_path / "run"),
            "--preflight-command",
            str(passing_check),
            "max_steps=6",
            "save_every=1",
            "reward.functions=[nan_reward:reward]",
            "reward.weights=null",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "loss became nan at step 3" in result.stderr
    assert "last good checkpoint" in result.stderr and "checkpoint-2" in result.stderr
    assert read_marker(latest_checkpoint(tmp_path / "run" / "checkpoints"))["step"] == 2
