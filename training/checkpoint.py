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
