"""Fixtures for the training tests: one CPU thread, a restored environment, and the real ascend-check run
on snapshots of simulated nodes (training_fakecheck.py) in place of live hosts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from training_fakecheck import healthy, write_ascend_check


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


@pytest.fixture
def ascend_check(tmp_path):
    """`ascend_check(*host_snapshots)` -> path of an ascend-check that judges those hosts."""
    return lambda *hosts: write_ascend_check(tmp_path, *hosts)


@pytest.fixture
def passing_check(tmp_path) -> Path:
    return write_ascend_check(tmp_path, healthy())


@pytest.fixture
def no_ssh(monkeypatch):
    """Fails the test if the launcher opens any SSH session."""
    from ascend_ready.training import multinode

    def refuse(*_a, **_k):
        raise AssertionError("an SSH session was opened")

    monkeypatch.setattr(multinode, "open_sessions", refuse)
