"""verl_translation.yml is the whole translation: every config field has a verl key or an explicit
refusal (or says why verl needs none), and every bundled config's overrides carry what the table says."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from ascend_ready.errors import ConfigError
from ascend_ready.training import memory_plan as mp
from ascend_ready.training import verl_overrides as vo
from ascend_ready.training.config import TrainConfig, load_config, resolve_config_path

pytest.importorskip("hydra", reason="needs the [verl] extra")
try:
    vo.verl_dir()
except ConfigError:
    pytest.skip("verl is not installed (pip install --no-deps verl==0.9.1)", allow_module_level=True)

TABLE = vo.translation_table()["fields"]
#: the sections that are one field each in the table (a model's LoRA or tiny shape is set as a whole)
WHOLE = {"model.tiny", "model.lora"}
BUNDLED = [("tiny", "grpo", ("launch.device=npu",)), ("tiny", "ppo", ("launch.device=npu",)),
           ("grpo-qwen2.5-7b-a2", "grpo", ()), ("grpo-qwen3-235b-a22b-a2", "grpo", ()),
           ("ppo-qwen3-lora", "ppo", ())]


def config_fields(model: type[BaseModel] = TrainConfig, prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        dotted = prefix + name
        sub = [a for a in (field.annotation, *typing.get_args(field.annotation))
               if isinstance(a, type) and issubclass(a, BaseModel)]
        out += config_fields(sub[0], dotted + ".") if sub and dotted not in WHOLE else [dotted]
    return out


def set_in_file(tree: dict, prefix: str = "") -> list[str]:
    """The fields a config file sets, as the table names them."""
    out = []
    for key, value in tree.items():
        dotted = prefix + key
        if isinstance(value, dict) and dotted not in WHOLE and dotted != "launch.hccl.extra_env":
            out += set_in_file(value, dotted + ".")
        else:
            out.append(dotted)
    return out


def test_every_config_field_has_a_verl_key_or_an_explicit_answer():
    fields = config_fields()
    missing = [f for f in fields if not {"verl", "ours", "moot", "refused"} & set(TABLE.get(f, {}))]
    assert not missing, f"verl_translation.yml has no verl key nor refusal for: {missing}"
    extra = set(TABLE) - set(fields)
    assert not extra, f"the table names fields the config lacks: {extra}"
    refusals = [f for f, e in TABLE.items() if "refused" in e]
    assert len(refusals) >= 10 and all(TABLE[f]["refused"].strip() for f in refusals)


def keys_for(entry: dict, conditions: set[str]) -> list[str]:
    """The entry's verl keys whose conditions hold, in override spelling."""
    out = []
    for item in entry.get("verl", []):
        key, _, cond = item.partition(" (")
        if set(cond.rstrip(")").split()) <= conditions:
            out.append(key.replace("A.", "actor_rollout_ref.", 1))
    return out


def translate(name: str, algo: str, extra: tuple[str, ...]):
    cfg = load_config(name, list(extra))
    plan, _, _ = mp.plan_for_config(cfg, algo, engine="verl")
    overrides = vo.to_overrides(cfg, algo, plan=plan, train_file="/d/train.parquet",
                                val_file="/d/val.parquet",
                                output_dir="/runs/x")
    return cfg, overrides


@pytest.mark.parametrize("name,algo,extra", BUNDLED, ids=[f"{n}-{a}" for n, a, _ in BUNDLED])
def test_each_bundled_config_round_trips_through_the_table(name, algo, extra):
    import yaml
    from omegaconf import OmegaConf

    cfg, overrides = translate(name, algo, extra)
    written = {o.split("=", 1)[0] for o in overrides}
    strategy = vo.strategy_of(cfg)
    conditions = {algo, strategy, "npu" if cfg.launch.device == "npu" else "cuda"}
    conditions |= {"lora"} if cfg.model.lora else set()
    if cfg.distributed.optimizer_on_host and strategy == "megatron":
        conditions.add("optimizer_on_host")
    fields = set(set_in_file(yaml.safe_load(resolve_config_path(name).read_text()))) | {
        k.split("=")[0] for k in extra}
    composed = vo.validate_overrides(overrides)
    vo.verl_validate(composed, cfg)  # verl's own checks pass too
    checked = 0
    for field in sorted(fields):
        entry = TABLE[field]
        for key in keys_for(entry, conditions):
            assert key in written or any(w.startswith(key + ".") for w in written), (field, key)
            checked += 1
        if entry.get("same"):
            key = keys_for(entry, conditions)[0]
            value = cfg
            for part in field.split("."):
                value = getattr(value, part)
            if value is not None:
                assert OmegaConf.select(composed, key.lstrip("+")) == value, (field, key)
    assert checked >= 15


@pytest.mark.parametrize("override,field", [
    ("optim.lr_scheduler=linear", "optim.lr_scheduler"),
    ("grpo.scale_rewards=batch", "grpo.scale_rewards"),
    ("distributed.tensor_parallel=2", "distributed.tensor_parallel"),  # fsdp asked for, with TP
    ("distributed.optimizer_on_host=true", "distributed.optimizer_on_host"),
    ("model.lora.dropout=0.1", "model.lora.dropout"),
    ("model.lora.r=1024", "model.lora.r"),
    ("reward.functions=[answer_match,reward_model]", "reward.functions"),
])
def test_what_verl_cannot_take_is_refused_by_name(override, field):
    extra = ["launch.device=npu", "distributed.strategy=fsdp", override]
    if field.startswith("model.lora"):
        extra.insert(0, "model.lora={r: 8}")
    with pytest.raises(ConfigError) as exc:
        translate("tiny", "grpo", tuple(extra))
    assert exc.value.message.startswith(f"{field}: not supported by verl {vo.VERL_VERSION}: ")
    assert "refused" in TABLE[field.rsplit(".", 1)[0] if field.startswith("model.lora.") else field]


def test_ppo_refusals_and_dropped_defaults_are_said():
    with pytest.raises(ConfigError, match=r"ppo\.whiten_advantages: not supported by verl"):
        translate("tiny", "ppo", ("launch.device=npu", "ppo.whiten_advantages=false"))
    with pytest.raises(ConfigError, match=r"ppo\.critic: not supported by verl"):
        translate("tiny", "ppo", ("launch.device=npu", "ppo.critic=shared"))
    notes = vo.dropped_defaults(load_config("tiny"), "ppo")
    assert any("separate critic" in n for n in notes)
    # the tiny config sets the penalty (off: its answers are one token), so it is no default left unsaid
    assert not any("missing_eos_penalty" in n for n in notes)
    notes = vo.dropped_defaults(load_config("ppo-qwen3-lora"), "ppo")  # the penalty left at our default
    assert any("missing_eos_penalty 1.0" in n for n in notes) and any("lora.dropout 0.05" in n for n in notes)
