"""Data loaders and reward functions."""

from __future__ import annotations

import json

import pytest

from ascend_ready.errors import ConfigError
from ascend_ready.training import rewards
from ascend_ready.training.config import DataConfig, TrainConfig
from ascend_ready.training.data import arithmetic_rows, gsm8k_rows, load_prompts, preference_rows


def test_arithmetic_rows_are_correct_and_seeded():
    rows = arithmetic_rows(50, 9, "+-*", seed=3)
    assert rows == arithmetic_rows(50, 9, "+-*", seed=3)
    for r in rows:
        q = r["question"].rstrip("=")
        assert str(eval(q)) == r["answer"]  # the question is plain arithmetic


def test_gsm8k_loader_takes_the_number_after_hashes(tmp_path):
    f = tmp_path / "gsm8k.jsonl"
    f.write_text(
        json.dumps({"question": "Q1?", "answer": "3 + 4 = 7\n#### 1,007"})
        + "\n\n"
        + json.dumps({"question": "Q2?", "answer": "so #### -2"})
        + "\n"
    )
    rows = gsm8k_rows(f)
    assert [r["answer"] for r in rows] == ["1007", "-2"]
    f.write_text(json.dumps({"question": "Q", "answer": "no marker"}) + "\n")
    with pytest.raises(ConfigError, match="example 1: answer has no"):
        gsm8k_rows(f)
    f.write_text("{not json\n")
    with pytest.raises(ConfigError, match=r"gsm8k\.jsonl:1: not valid JSON"):
        gsm8k_rows(f)


def test_load_prompts_holds_out_eval_and_applies_template(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(10)))
    ps = load_prompts(
        DataConfig(source="jsonl", path=str(f), eval_size=3, prompt_template="Q: {question}"), 0
    )
    assert len(ps.train) == 7 and len(ps.eval) == 3
    assert not {r["prompt"] for r in ps.train} & {r["prompt"] for r in ps.eval}
    assert all(r["prompt"].startswith("Q: ") for r in ps.train)


def test_preference_rows_reject_a_wrong_number():
    pairs = preference_rows([{"prompt": "2+2=", "answer": "4"}], seed=0)
    assert (
        pairs[0]["chosen"] == "4"
        and pairs[0]["rejected"] != "4"
        and pairs[0]["rejected"].lstrip("-").isdigit()
    )


@pytest.mark.parametrize(
    "text,answer,match,fmt",
    [
        ("7", "7", 1.0, 1.0),
        (" 7 ", "7", 1.0, 1.0),
        ("17", "7", 0.0, 1.0),
        ("x7", "7", 1.0, 0.0),
        ("so 3 then\n#### 1,200", "1200", 1.0, 1.0),
        ("", "0", 0.0, 0.0),
        ("7.0", "7", 1.0, 1.0),
    ],
)
def test_answer_and_format_rewards(text, answer, match, fmt):
    assert rewards.answer_match(["p"], [text], answer=[answer], trainer_state=None) == [match]
    assert rewards.format_reward(["p"], [text], log_metric=None) == [fmt]


def test_conversational_completions_use_the_last_message():
    assert rewards.answer_match(["p"], [[{"role": "assistant", "content": "it is 5"}]], answer=["5"]) == [1.0]


def test_user_reward_by_import_path_and_weighting(tmp_path, monkeypatch):
    (tmp_path / "myreward.py").write_text(
        "def short(prompts, completions, **kw):\n"
        "    return [1.0 if len(c) < 3 else 0.0 for c in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = TrainConfig.model_validate(
        {
            "model": {"tiny": {}},
            "reward": {"functions": ["answer_match", "myreward:short"], "weights": [1.0, 0.5]},
        }
    )
    funcs, weights = rewards.build_reward_funcs(cfg)
    assert rewards.total_reward(funcs, weights, ["a", "b"], ["4", "four"], {"answer": ["4", "4"]}) == [
        1.5,
        0.0,
    ]


def test_bad_reward_names_fail_clearly():
    cfg = TrainConfig.model_validate({"model": {"tiny": {}}, "reward": {"functions": ["nope"]}})
    with pytest.raises(ConfigError, match="neither a built-in"):
        rewards.build_reward_funcs(cfg)
