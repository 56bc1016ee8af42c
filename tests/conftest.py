"""Shared test fixtures: the real vendor-output samples from ../shared/ascend-samples."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES_DIR = Path(os.environ.get("ASCEND_SAMPLES_DIR", REPO.parent / "shared" / "ascend-samples"))


def read_sample(name: str) -> str:
    """The output text of a shared sample, without its `# source/device/notes ... # ---` header."""
    text = (SAMPLES_DIR / name).read_text()
    _head, sep, body = text.partition("\n# ---\n")
    if not sep:
        raise ValueError(f"{name}: no '# ---' header terminator")
    return body


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    if not SAMPLES_DIR.is_dir():
        pytest.fail(f"samples not found at {SAMPLES_DIR}; set ASCEND_SAMPLES_DIR")
    return SAMPLES_DIR


@pytest.fixture
def sample():
    """`sample(name)` -> the sample's output text (header stripped)."""
    return read_sample
