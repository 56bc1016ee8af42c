"""What the multi-node launcher adds inside each worker: the tiny model built on every node that does not
share rank 0's, the `--profile-steps A:B` profiler trace, and a digest of each rank's final weights.

Profiling: the launcher sets ASCEND_TRAIN_PROFILE_STEPS (A:B, 1-based, inclusive) and
ASCEND_TRAIN_PROFILE_DIR; torch_npu's profiler runs on NPUs, torch.profiler elsewhere. Steps are told apart
by optimizer steps, the one event every algorithm here has: GRPO, SFT and RM take one per training step,
PPO `ppo.ppo_epochs * ppo.num_minibatches`. After a resume, steps count from the resumed one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from ascend_ready.training.config import TrainConfig

STEPS_ENV = "ASCEND_TRAIN_PROFILE_STEPS"
DIR_ENV = "ASCEND_TRAIN_PROFILE_DIR"


def optimizer_steps_per_step(algo: str, cfg: TrainConfig) -> int:
    return cfg.ppo.ppo_epochs * cfg.ppo.num_minibatches if algo == "ppo" else 1


def _profiler_api(device_type: str):
    """(profile, schedule, trace handler, activities) of torch_npu's profiler on NPU, torch's elsewhere."""
    if device_type == "npu":
        import torch_npu

        p = torch_npu.profiler
        acts = [p.ProfilerActivity.CPU, p.ProfilerActivity.NPU]
        return p.profile, p.schedule, p.tensorboard_trace_handler, acts
    import torch

    p = torch.profiler
    acts = [p.ProfilerActivity.CPU] + ([p.ProfilerActivity.CUDA] if device_type == "cuda" else [])
    return p.profile, p.schedule, p.tensorboard_trace_handler, acts


@contextlib.contextmanager
def profiled(algo: str, cfg: TrainConfig, device_type: str, rank: int,
             environ: dict[str, str] | None = None) -> Iterator[Path | None]:
    """Profile steps A..B of the training inside the block when ASCEND_TRAIN_PROFILE_STEPS asks for it;
    yields the trace directory (None: not profiling)."""
    environ = os.environ if environ is None else environ
    steps = environ.get(STEPS_ENV)
    if not steps:
        yield None
        return

    first, last = (int(x) for x in steps.split(":"))
    out = Path(environ.get(DIR_ENV) or "profile")
    out.mkdir(parents=True, exist_ok=True)
    profile, schedule, handler, activities = _profiler_api(device_type)
    warmup = 1 if first >= 2 else 0  # one step to settle the profiler where the run has one to spare
    prof = profile(
        activities=activities,
        schedule=schedule(wait=first - 1 - warmup, warmup=warmup, active=last - first + 1, repeat=1),
        on_trace_ready=handler(str(out), worker_name=f"rank{rank}"),
        record_shapes=False,
    )
    per_step = optimizer_steps_per_step(algo, cfg)
    count = 0

    def after_optimizer_step(_optimizer, _args, _kwargs) -> None:
        nonlocal count
        count += 1
        if count % per_step == 0:
            prof.step()

    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(after_optimizer_step)
    prof.start()
    try:
        yield out
    finally:
        handle.remove()
        prof.stop()


def ensure_node_model(cfg: TrainConfig, output_dir: Path) -> None:
    """Local rank 0 of each node builds the tiny model before the ranks need it, where its node does not
    see rank 0's (no shared filesystem). Deterministic from the seed, so every node holds the same
    weights; built aside and renamed, so nodes that share the directory never see a half-written one."""
    if cfg.model.tiny is None or os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("RANK") == "0":
        return
    target = Path(cfg.model.path) if cfg.model.path else output_dir / "tiny-model"
    if (target / "config.json").is_file():
        return
    from ascend_ready.training.models import build_tiny_model

    aside = target.with_name(f".{target.name}.{os.uname().nodename}.{os.getpid()}")
    build_tiny_model(aside, cfg.model.tiny, seed=cfg.seed)
    try:
        os.rename(aside, target)
    except OSError:  # another node's copy won the rename: the same weights
        shutil.rmtree(aside, ignore_errors=True)


def weights_digest(model) -> str:
    """sha256 of every parameter's bytes, in name order: data-parallel ranks must print the same one."""
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(p.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def digest_callback(rank: int):
    """A TrainerCallback printing `weights sha256 rank R: HEX` at the end of training, on every rank."""
    from ascend_ready.runtime import require

    class _Digest(require("transformers").TrainerCallback):
        def on_train_end(self, args, state, control, model=None, **kw):
            if model is not None:
                print(f"weights sha256 rank {rank}: {weights_digest(model)}", file=sys.stderr, flush=True)

    return _Digest()
