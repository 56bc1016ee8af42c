"""Checkpoint commit protocol shared by every algorithm: a checkpoint exists only once its marker is written.

PPO stages a whole checkpoint in a temporary directory and renames it; TRL-based trainers write in place and
then commit. Either way `latest_checkpoint` never returns a half-written directory.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from ascend_ready.checks.resources.output_dir import RUN_FILES

MARKER = "ascend-train.json"
CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with tmp.open("w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def commit_checkpoint(
    directory: Path, step: int, algo: str, config_json: dict, extra: dict | None = None
) -> None:
    """Mark a fully written checkpoint as usable."""
    _write_atomic(
        Path(directory) / MARKER,
        json.dumps(
            {"step": step, "algo": algo, "time": time.time(), **(extra or {}), "config": config_json},
            indent=1,
        ),
    )


def read_marker(directory: Path) -> dict:
    return json.loads((Path(directory) / MARKER).read_text())


def checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Committed checkpoints under `root`, oldest first."""
    found = []
    if Path(root).is_dir():
        for child in Path(root).iterdir():
            m = CHECKPOINT.match(child.name)
            if m and child.is_dir() and (child / MARKER).is_file():
                found.append((int(m.group(1)), child))
    return sorted(found)


def latest_checkpoint(root: Path) -> Path | None:
    found = checkpoints(root)
    return found[-1][1] if found else None


def prune(root: Path, keep: int) -> None:
    """Delete committed checkpoints beyond the newest `keep`, and stale staging directories."""
    for _, path in checkpoints(root)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)
    for stale in Path(root).glob(".staging-*"):
        shutil.rmtree(stale, ignore_errors=True)


def save_staged(
    root: Path,
    step: int,
    algo: str,
    config_json: dict,
    write: Callable[[Path], None],
    keep: int,
    extra: dict | None = None,
) -> Path:
    """Write a checkpoint into a staging dir with `write(dir)`, commit it, and rename it into place."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".staging-{step}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    write(staging)
    commit_checkpoint(staging, step, algo, config_json, extra)
    final = root / f"checkpoint-{step}"
    if final.exists():  # a re-save of the same step after resume replaces the older copy
        shutil.rmtree(final)
    os.replace(staging, final)
    prune(root, keep)
    return final


def rng_state() -> dict:
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if hasattr(torch, "npu") and torch.npu.is_available():
        state["npu"] = torch.npu.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "npu" in state and hasattr(torch, "npu") and torch.npu.is_available():
        torch.npu.set_rng_state_all(state["npu"])


#: config keys a checkpoint's tensors and optimizer state depend on: resuming with others cannot load it
SHAPE_KEYS: tuple[str, ...] = ("model.path", "model.tiny", "model.lora", "model.reward_model_path",
                               "distributed.zero_stage")


def check_resume(root: Path, algo: str, config_json: dict) -> int:
    """The step `--resume` continues from: the newest committed checkpoint under `root`, checked before
    anything is written. ConfigError (exit 2) when there is none, when it is another algorithm's, when the
    model or sharding of the config differ from the checkpoint's (naming both), or when max_steps is below
    its step (the run would train past the budget it was given)."""
    from ascend_ready.errors import ConfigError

    latest = latest_checkpoint(root)
    if latest is None:
        # hook (ops-launch, training/run_dir.py): the hint fits what the directory holds
        held = [f for f in RUN_FILES if (root.parent / f).exists()]
        raise ConfigError(f"--resume: no committed checkpoint under {root}" + (
            f" ({root.parent} holds only {', '.join(held)} of a run that stopped before its first checkpoint)"
            if held else ""),
            hint="there is nothing to --resume: start again in another -o, or -o 'DIR/{run}' for a fresh "
            "subdirectory each run" if held else
            "drop --resume to start a new run, or give the run's -o/--output-dir")
    try:
        marker = read_marker(latest)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--resume: cannot read {latest / MARKER}: {exc}",
                          hint="resume from another run directory, or drop --resume") from None
    step, was = int(marker.get("step", 0)), marker.get("algo")
    if was and was != algo:
        raise ConfigError(f"--resume: {latest} is a {was} checkpoint (step {step}); this is {algo}",
                          hint=f"resume it with `ascend-train {was} ... --resume`, or give {algo} a new "
                          "-o/--output-dir")
    then = marker.get("config") or {}
    changed = [f"{key} was {a!r}, is now {b!r}" for key, a, b in _differences(then, config_json, SHAPE_KEYS)]
    if changed:
        raise ConfigError(f"--resume: the config does not match {latest}'s: " + "; ".join(changed[:6])
                          + (f"; and {len(changed) - 6} more" if len(changed) > 6 else ""),
                          hint=f"resume with the config the run was started with "
                          f"({root.parent}/config.yaml), or start a new run in another -o/--output-dir")
    max_steps = int(config_json.get("max_steps", 0))
    if max_steps < step:
        raise ConfigError(f"--resume: max_steps={max_steps} is below the checkpoint's step {step} ({latest})",
                          hint=f"give max_steps={step + 1} or more to train on from step {step}, "
                          "or drop --resume to start a new run elsewhere")
    return step


def _differences(then: dict, now: dict, keys) -> list[tuple[str, object, object]]:
    """(dotted key, value then, value now) of the leaves under `keys` that differ; a key the checkpoint's
    config does not hold (an older version's) is not compared."""
    out = []

    def walk(prefix: str, a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                walk(f"{prefix}.{key}", a.get(key), b.get(key))
        elif a != b:
            out.append((prefix, a, b))

    for key in keys:
        a, b, present = then, now, True
        for part in key.split("."):
            present = isinstance(a, dict) and part in a
            a = a.get(part) if isinstance(a, dict) else None
            b = b.get(part) if isinstance(b, dict) else None
        if present:
            walk(key, a, b)
    return out
