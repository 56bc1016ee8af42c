"""The training config: bundled files validate, overrides apply, every field is documented."""

from __future__ import annotations

import pytest

from ascend_ready.errors import ConfigError
from ascend_ready.training.config import BUNDLED_CONFIGS, TrainConfig, load_config


@pytest.mark.parametrize("path", sorted(BUNDLED_CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_bundled_configs_validate(path):
    assert isinstance(load_config(path), TrainConfig)


def test_overrides_are_typed_and_nested():
    cfg = load_config(
        "tiny",
        [
            "max_steps=7",
            "grpo.beta=0.01",
            "reward.functions=[answer_match]",
            "reward.weights=null",
            "model.lora={r: 4}",
        ],
    )
    assert cfg.max_steps == 7 and cfg.grpo.beta == 0.01 and cfg.reward.functions == ["answer_match"]
    assert cfg.model.lora.r == 4 and cfg.model.lora.alpha == 32


def test_every_field_has_a_description():
    schema = TrainConfig.model_json_schema()
    models = [schema, *schema["$defs"].values()]
    missing = [
        f"{m['title']}.{name}"
        for m in models
        for name, f in m["properties"].items()
        if not f.get("description")
    ]
    assert missing == []


@pytest.mark.parametrize(
    "override,message",
    [
        ("max_steps", "not key=value"),
        ("reward.weights=[1.0]", "reward.weights has 1 entries for 2 functions"),
        ("data.source=jsonl", "data.path is required"),
        ("max_steps.x=1", "'max_steps' is not a section"),
    ],
)
def test_bad_overrides(override, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        load_config("tiny", [override])


def test_unknown_config_names_the_bundled_ones():
    with pytest.raises(ConfigError) as exc:
        load_config("no-such-config")
    assert "tiny" in exc.value.hint
