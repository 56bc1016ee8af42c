"""What GRPO, SFT and RM share on top of TRL's trainers: common TrainingArguments, our metric names, held-out
evaluation, checkpoint commit markers, the NaN stop, the OOM advice, and the end-of-run plot."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.runtime import OOM_HINT, Runtime, is_oom, require
from ascend_ready.training.checkpoint import commit_checkpoint, latest_checkpoint, read_marker
from ascend_ready.training.config import TrainConfig
from ascend_ready.training.data import PromptSet, load_prompts
from ascend_ready.training.metrics import PLOT_FILE, MetricsLogger, finite, plot_metrics
from ascend_ready.training.models import load_tokenizer, model_dir
from ascend_ready.training.sniff import sniff_model
from ascend_ready.training.throughput import Tracker

CHECKPOINT_DIR = "checkpoints"
FINAL_DIR = "final"
# TRL's log keys -> ours; anything unlisted is kept under its own name.
RENAMES = {
    "reward": "reward/mean",
    "reward_std": "reward/std",
    "kl": "kl",
    "entropy": "policy/entropy",
    "grad_norm": "optim/grad_norm",
    "learning_rate": "optim/lr",
    "frac_reward_zero_std": "reward/frac_zero_std",
    "clip_ratio/region_mean": "policy/clipfrac",
}
DROP = {"epoch", "total_flos", "step_time", "num_tokens"}


def metric_name(trl_key: str) -> str:
    """TRL key -> ours: `rewards/answer_match/mean` -> `reward/answer_match`, `reward` -> `reward/mean`."""
    if trl_key in RENAMES:
        return RENAMES[trl_key]
    if trl_key.startswith("rewards/"):
        return "reward/" + trl_key.removeprefix("rewards/").removesuffix("/mean")
    return trl_key


def deepspeed_config(cfg: TrainConfig) -> dict | None:
    """A ZeRO config for the TRL trainers (sizes left to DeepSpeed's 'auto')."""
    ds = cfg.distributed
    if ds.zero_stage == 0:
        return None
    # Not in the train extra: it builds ops for the local accelerator (it supports Ascend NPUs natively).
    require("deepspeed",
            hint="pip install 'ascend-ready[deepspeed]', or set distributed.zero_stage: 0")
    zero: dict = {"stage": ds.zero_stage, "overlap_comm": True, "contiguous_gradients": True}
    if ds.offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
        if ds.zero_stage == 3:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    if ds.zero_stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    return {
        "zero_optimization": zero,
        "bf16": {"enabled": "auto"},
        "gradient_clipping": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "train_batch_size": "auto",
    }


def trl_config(cls, **kwargs):
    """`cls(**kwargs)` (GRPOConfig, SFTConfig, RewardConfig) for the installed TRL: the one place our
    configs meet TRL releases that name a field or a value differently (the training sets hold TRL 0.19.1
    to 1.16, provision/training_sets.yml). Feature-detected from the config class itself, not by version:

    - `scale_rewards` is a bool before TRL 0.22 ("group" -> True, "none" -> False; "batch" did not exist);
    - `loss_type: dapo` (token-level, normalised over the global batch) is older TRL's `bnpo` (normalised
      over the local batch): the same on one process without gradient accumulation, close otherwise;
    - a field the release does not have is refused, naming it, unless it holds its default (None/False).
    """

    fields = {f.name: f for f in dataclasses.fields(cls)}
    trl_version = require("trl").__version__
    out = {}
    for name, value in kwargs.items():
        field = fields.get(name)
        if field is None:
            if value in (None, False):
                continue
            raise ConfigError(f"{name}: TRL {trl_version} has no such {cls.__name__} field",
                              hint="install the training set of the stack's torch (ascend-matrix packages)")
        if name == "scale_rewards" and isinstance(field.default, bool) and isinstance(value, str):
            if value == "batch":
                raise ConfigError(f"grpo.scale_rewards: batch needs TRL 0.22 or later, this is {trl_version}",
                                  hint="use scale_rewards: group or none")
            value = value != "none"
        if name == "loss_type" and value == "dapo" and "dapo" not in field.metadata.get("help", ""):
            value = "bnpo"
        out[name] = value
    return cls(**out)


def training_arguments(cfg: TrainConfig, rt: Runtime, output_dir: Path) -> dict:
    """TrainingArguments fields every TRL trainer here gets from our config."""
    o = cfg.optim
    return dict(
        output_dir=str(output_dir / CHECKPOINT_DIR),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=o.learning_rate,
        weight_decay=o.weight_decay,
        warmup_steps=o.warmup_steps,
        lr_scheduler_type=o.lr_scheduler,
        max_grad_norm=o.max_grad_norm,
        seed=cfg.seed,
        data_seed=cfg.seed,
        logging_steps=cfg.logging_steps,
        save_strategy="steps",
        save_steps=cfg.save_every,
        save_total_limit=cfg.keep_checkpoints,
        bf16=rt.bf16,
        fp16=False,
        use_cpu=rt.device_type == "cpu",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        gradient_checkpointing=cfg.model.gradient_checkpointing,
        deepspeed=deepspeed_config(cfg),
    )


class AscendCallback(require("transformers").TrainerCallback):
    """Routes TRL's logs to our MetricsLogger, evaluates, commits checkpoints and stops on NaN/inf."""

    def __init__(
        self,
        cfg: TrainConfig,
        algo: str,
        logger: MetricsLogger,
        evaluate: Callable[[object], dict[str, float]] | None,
        loss_key: str,
    ):
        self.cfg, self.algo, self.logger, self.evaluate, self.loss_key = cfg, algo, logger, evaluate, loss_key
        self.bad_step: int | None = None
        self.bad_value = None
        self._last_time = self._last_tokens = None
        self.last_metrics: dict[str, float] = {}
        self.throughput = None  # throughput.Tracker, made at train begin (it needs the world size)

    def _eval(self, state, model) -> None:
        if self.evaluate is not None and model is not None:
            self.logger.log(state.global_step, self.evaluate(model), console=True)

    def on_train_begin(self, args, state, control, model=None, **kw):
        self._last_time = time.perf_counter()
        gen = self.cfg.generation
        # TrainingArguments, or nothing where a caller drives the callback itself (tests, a custom loop)
        device = "cpu" if getattr(args, "use_cpu", False) else str(getattr(getattr(args, "device", None),
                                                                          "type", "cpu"))
        self.throughput = Tracker(self.algo, device, getattr(args, "world_size", 1), gen.max_prompt_length,
                                  gen.max_completion_length)
        # A resumed run starts at its checkpoint's step, whose evaluation the metrics already hold (it ran
        # before that checkpoint was committed): evaluating again would write a second row for that step.
        if state.global_step == 0:
            self._eval(state, model)

    def on_step_end(self, args, state, control, model=None, **kw):
        if self.cfg.sniff_every and state.global_step % self.cfg.sniff_every == 0 and model is not None:
            sniff_model(state.global_step, model, args.process_index, self.logger.path.parent)
        every = self.cfg.eval_every
        if every and state.global_step % every == 0 and state.global_step < state.max_steps:
            self._eval(state, model)

    def on_log(self, args, state, control, logs=None, **kw):
        logs = dict(logs or {})
        if "train_runtime" in logs:  # the summary line at the very end, not a step
            return
        now = time.perf_counter()
        out = {metric_name(k): v for k, v in logs.items() if k not in DROP and isinstance(v, (int, float))}
        if "loss" in out:
            out[self.loss_key] = out.pop("loss")
        steps = max(1, self.cfg.logging_steps)
        out["perf/step_time_s"] = (now - self._last_time) / steps
        tokens = logs.get("num_tokens")
        if tokens is not None and self._last_tokens is not None:
            out["perf/tokens_per_s"] = (tokens - self._last_tokens) / max(now - self._last_time, 1e-9)
        self._last_tokens, self._last_time = tokens, now
        if self.throughput is not None:
            out.update(self.throughput.step(out, kw.get("model")))
        loss = out.get(self.loss_key)
        if loss is not None and not finite(loss):
            self.bad_step, self.bad_value = state.global_step, loss
            control.should_save = False  # never commit the weights the bad step produced
            control.should_training_stop = True
        self.last_metrics = out
        self.logger.log(state.global_step, out)

    def on_save(self, args, state, control, **kw):
        if state.is_world_process_zero:
            directory = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            commit_checkpoint(directory, state.global_step, self.algo, self.cfg.model_dump(mode="json"))

    def on_train_end(self, args, state, control, model=None, **kw):
        if self.bad_step is None:
            self._eval(state, model)
        if self.throughput is not None and state.is_world_process_zero:
            for line in self.throughput.report():
                print(line, file=sys.stderr)


@dataclass
class Start:
    """What a TRL entrypoint (sft.py, rm.py) has before it builds its trainer."""

    resume_from: Path | None
    logger: MetricsLogger
    model_path: Path
    tokenizer: object
    prompts: PromptSet


def start(cfg: TrainConfig, rt: Runtime, output_dir: Path, resume: bool) -> Start:
    """The checkpoint to resume from, the metrics logger that continues its rows, the model (made or found),
    its tokenizer and the prompts: the same first steps for every TRL entrypoint."""
    resume_from, resume_step = resume_point(output_dir, resume)
    logger = MetricsLogger(output_dir, enabled=rt.is_main, resume_step=resume_step, max_steps=cfg.max_steps)
    path = model_dir(cfg, output_dir, rt)
    return Start(resume_from, logger, path, load_tokenizer(path), load_prompts(cfg.data, cfg.seed))


def resume_point(output_dir: Path, resume: bool) -> tuple[Path | None, int | None]:
    if not resume:
        return None, None
    ckpt = latest_checkpoint(output_dir / CHECKPOINT_DIR)
    if ckpt is None:
        raise ConfigError(
            f"--resume: no committed checkpoint under {output_dir / CHECKPOINT_DIR}",
            hint="drop --resume to start fresh",
        )
    return ckpt, read_marker(ckpt)["step"]


def run_trainer(
    trainer,
    callback: AscendCallback,
    cfg: TrainConfig,
    rt: Runtime,
    output_dir: Path,
    resume_from: Path | None,
    logger: MetricsLogger,
) -> dict:
    """Train, turn NaN/OOM into TrainingError, save the final weights and the plot; returns a summary."""
    # TRL's console printer would duplicate our per-step line as a raw dict.
    trainer.remove_callback(require("transformers").trainer_callback.PrinterCallback)
    try:
        trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    except RuntimeError as exc:
        if is_oom(exc):
            raise TrainingError(f"{type(exc).__name__}: {str(exc).splitlines()[0]}", hint=OOM_HINT) from exc
        raise
    finally:
        logger.close()
    if callback.bad_step is not None:
        last = latest_checkpoint(output_dir / CHECKPOINT_DIR)
        raise TrainingError(
            f"loss became {callback.bad_value} at step {callback.bad_step}; training stopped",
            hint=f"last good checkpoint: {last or 'none yet'}; lower optim.learning_rate or use fp32, "
            "then restart with --resume",
        )
    final = output_dir / FINAL_DIR
    trainer.save_model(str(final))
    summary = {"step": trainer.state.global_step, "final": str(final), "metrics": str(logger.path)}
    if rt.is_main:
        if trainer.processing_class is not None:
            trainer.processing_class.save_pretrained(str(final))
        png = plot_metrics(logger.path, output_dir / PLOT_FILE)
        summary["plot"] = str(png) if png else None
    return summary
