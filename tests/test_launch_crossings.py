"""The launch-spec walk from the CLI (training/cli.py) to where the nodes are reached crosses top-level
folders at most 10 times (issue 27), counted by scripts/launch_crossings.py on this tree."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def lc():
    script = ROOT / "scripts" / "launch_crossings.py"
    spec = importlib.util.spec_from_file_location("launch_crossings", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.INDEX = mod.Index(ROOT)
    return mod


def crossings(lc, launcher: str | None = None, reach: bool = True) -> list:
    index = copy.copy(lc.INDEX)
    if launcher:
        index.registry = [r for r in index.registry if r[0].endswith(lc.LAUNCHER_MODULES.get(launcher, "?"))]
    starts = [("ascend_ready.training.cli", "launch_request"), ("ascend_ready.training.cli", "_finish")]
    return lc.walk(index, starts, set(), reach=reach)[0]


def test_the_launch_spec_walk_to_the_nodes_crosses_folders_at_most_10_times(lc):
    assert len(crossings(lc, "ssh")) <= 10
    # every launcher the CLI registers reaches its nodes through the seam, the fleet layer and node_facts
    assert len(crossings(lc)) <= 16


def test_the_count_sees_the_calls_it_claims_to(lc):
    found = {(a[0], a[1], b[0], b[1]) for a, b in crossings(lc, "ssh")}
    assert ("ascend_ready.training.multinode", "launch", "ascend_ready.fleet.job", "run_job") in found
    batch = ("ascend_ready.checks.collect", "collect_host", "ascend_ready.fleet.transport", "run_script")
    assert batch in found
    assert crossings(lc, "none") == []  # the walk reaches the nodes only through the launcher registry
    assert len(crossings(lc, "ssh", reach=False)) > len(crossings(lc, "ssh"))  # --all counts local work too
