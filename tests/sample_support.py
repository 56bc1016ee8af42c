"""Helpers shared by test modules (importable, unlike conftest.py): where the real samples are."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES_DIR = Path(os.environ.get("ASCEND_SAMPLES_DIR", REPO.parent / "shared" / "ascend-samples"))


def read_sample(name: str) -> str:
    """The output text of a shared sample, without its `# source/device/notes ... # ---` header."""
    text = (SAMPLES_DIR / name).read_text()
    _head, sep, body = text.partition("\n# ---\n")
    if not sep:
        raise ValueError(f"{name}: no '# ---' header terminator")
    return body
