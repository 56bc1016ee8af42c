"""Fixtures for the training tests: one CPU thread, a fake ascend-check, a restored environment."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _one_thread_and_clean_env():
    # Two intra-op threads on a 2-core box under load make tiny steps 40x slower (REFERENCE §5 pitfall 2).
    import torch

    saved = dict(os.environ)
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    yield
    os.environ.clear()
    os.environ.update(saved)


def write_fake_check(directory: Path, exit_code: int, report: dict | None = None) -> Path:
    """An executable standing in for ascend-check: prints `report` as JSON, logs its argv, exits."""
    script = directory / f"fake-check-{exit_code}"
    body = json.dumps(report) if report is not None else ""
    script.write_text(
        f"#!/bin/sh\necho \"$@\" > {directory}/argv.txt\ncat <<'JSON'\n{body}\nJSON\n"
        f"echo 'ssh: node9: connection refused' >&2\nexit {exit_code}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.fixture
def fake_check(tmp_path):
    """`fake_check(exit_code, report)` -> path of a fake ascend-check in tmp_path."""
    return lambda exit_code, report=None: write_fake_check(tmp_path, exit_code, report)


@pytest.fixture
def passing_check(tmp_path) -> Path:
    return write_fake_check(
        tmp_path, 0, {"checks": [{"id": "npu_health", "host": "node01", "status": "passed"}]}
    )
