"""Output paths checked before any work: a CLI refuses a directory it could not create or write before
it probes a host, runs a preflight or writes a byte (ascend-check collect -o, ascend-train -o)."""

from __future__ import annotations

import os
from pathlib import Path

from ascend_ready.errors import ConfigError

__all__ = ["check_output_dir"]


def check_output_dir(path: str | os.PathLike, option: str) -> None:
    """ConfigError unless `path` is a writable directory or could be created as one; creates nothing."""
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{option} {path}: exists and is not a directory", hint="name a new directory")
    existing = target
    while not existing.exists():  # the nearest ancestor that exists decides whether mkdir -p can succeed
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(
            f"{option} {path}: {existing} is not a directory", hint="pick a path under a directory"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"{option} {path}: {existing} is not writable", hint="pick a directory you may write"
        )
