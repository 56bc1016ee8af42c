"""GRPO and PPO learn. Fast: a few steps raise the log-probability of rewarded completions (a broken
gradient path, a flipped advantage or a detached loss fails it), and our PPO samples what the reference PPO
loop samples, step for step, given the same randomness (a difference in the update maths fails it). Slow: at
three seeds, each trainer reaches on the tiny task's 150 steps the held-out accuracy its reference reaches on
the same budget (plain TRL GRPOTrainer; the TRL 1.12-maths PPO loop of bench/learning_parity.py)."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest

pytest.importorskip("trl")
import torch

from ascend_ready.runtime import setup_runtime
from ascend_ready.training import grpo, ppo
from ascend_ready.training.config import load_config
from ascend_ready.training.data import load_prompts
from ascend_ready.training.models import load_tokenizer

BENCH = Path(__file__).resolve().parents[2] / "bench" / "learning_parity.py"
REWARDED = "7"


def reward_seven(prompts, completions, **kw):
    """1 for a completion that starts with `7`, whatever the question: one token the policy is pushed to."""
    return [1.0 if str(c).startswith(REWARDED) else 0.0 for c in completions]


def logprob_of(model_dir: Path, prompts: list[str], token: str) -> float:
    """Mean over prompts of log p(first completion token = `token` | prompt), the model in `model_dir`."""
    from transformers import AutoModelForCausalLM

    tok = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    (target,) = tok(token, add_special_tokens=False)["input_ids"]
    total = 0.0
    with torch.no_grad():
        for prompt in prompts:
            ids = tok(prompt, add_special_tokens=False)["input_ids"]
            total += torch.log_softmax(model(torch.tensor([ids])).logits[0, -1], -1)[target].item()
    return total / len(prompts)


@pytest.mark.parametrize("algo", [grpo, ppo], ids=["grpo", "ppo"])
def test_a_few_steps_raise_the_logprob_of_rewarded_completions(algo, tmp_path):
    cfg = load_config("tiny", ["max_steps=4", "save_every=100", "eval_every=0", "eval_max_examples=0",
                               f"reward.functions=[{__name__}:reward_seven]", "reward.weights=null",
                               "optim.learning_rate=1e-2", "ppo.kl_coef=0.0"])
    prompts = [r["prompt"] for r in load_prompts(cfg.data, cfg.seed).eval[:16]]
    algo.train(cfg, setup_runtime("cpu", "fp32"), tmp_path)
    before = logprob_of(tmp_path / "tiny-model", prompts, REWARDED)
    after = logprob_of(tmp_path / "final", prompts, REWARDED)
    print(f"{algo.__name__}: log p('{REWARDED}' first) {before:.3f} -> {after:.3f}")
    # A random start gives it about log(1/21) = -3.0; four updates towards it lift it by well over a nat.
    assert after > before + 1.0, (before, after)


def _bench():
    spec = importlib.util.spec_from_file_location("learning_parity", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ppo_and_the_reference_loop_sample_the_same_completions_given_the_same_randomness(tmp_path):
    """Same seed, same prompts, TRL's temperature epsilon off: every completion our PPO samples depends on
    every earlier update, so the mean score of each step matches the reference loop's only while the two
    updates agree (a different whitening, KL, GAE or value-loss term moves the weights and the samples)."""
    from ascend_ready.training.metrics import read_metrics

    cfg = load_config("tiny", ["max_steps=12", "save_every=100", "eval_every=100", "eval_max_examples=0"])
    rt = setup_runtime("cpu", "fp32")
    trace: list[float] = []
    _bench().reference_ppo(cfg, rt, tmp_path / "reference", trace=trace, temperature_eps=0.0)
    ppo.train(cfg, rt, tmp_path / "ours")
    ours = [r["reward/mean"] for r in read_metrics(tmp_path / "ours" / "metrics.jsonl") if "reward/mean" in r]
    assert len(ours) == len(trace) == 12
    assert len(set(ours)) > 3, ours  # the samples change as the policy learns
    assert ours == pytest.approx(trace, abs=1e-6), (ours, trace)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_held_out_accuracy_reaches_the_references_at_three_seeds(algo, tmp_path):
    bench = _bench()
    rt = setup_runtime("cpu", "fp32")
    finals: dict[str, list[float]] = {"ours": [], "reference": []}
    for seed in (0, 1, 2):
        cfg = load_config("tiny", ["max_steps=150", "eval_every=50", "save_every=1000", f"seed={seed}"])
        for side, run in bench.VARIANTS[algo].items():
            curve = run(cfg, rt, tmp_path / f"{side}-{seed}")
            assert curve[0] == 0.0, curve  # nothing is known at the start
            finals[side].append(curve[max(curve)])
    ours, ref = finals["ours"], finals["reference"]
    print(f"{algo}: final held-out accuracy ours {ours}, reference {ref}")
    # Ours reaches what the reference reaches: our mean lies within the reference's range over the seeds,
    # and well beyond the 0.19-0.28 a policy answering one digit to every question scores here.
    assert min(ref) <= statistics.mean(ours) <= max(ref), (ours, ref)
    assert statistics.mean(ours) >= 0.4, ours
