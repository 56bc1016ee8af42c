"""provision/training_sets.yml: one training dependency set per torch line of the matrix, found by a real
resolver (uv pip compile) from the packages' own metadata; resolve, packages and python_env use it.

The resolver test runs offline over uv's cache under the simulator's wheel cache
($ASCEND_SIM_CACHE_DIR/wheels/uv: PyPI's simple pages and wheel metadata). Where that cache is empty (a
fresh CI machine) the test fills it once from the index (PyPI is reachable there), then resolves offline.
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from ascend_ready.errors import SimError
from ascend_ready.provision import matrix as mx
from ascend_ready.provision import resolver as rv
from ascend_ready.provision import training_sets as ts
from ascend_ready.provision.cli import main
from ascend_ready.sim.harness import training_sets as gen


def test_every_stack_of_the_matrix_has_a_set_or_is_marked_with_the_reason():
    m = mx.load_matrix()
    lines = {s.torch for s in m.stacks}
    assert lines == {row.torch for row in ts.load_training_sets().sets}  # one row per torch line
    for stack in m.stacks:
        r = rv.resolve(m, cann=stack.cann, torch=stack.torch, torch_npu=stack.torch_npu)
        assert r.training is not None and r.training.torch == stack.torch
        if r.training.none:
            assert any(w.startswith(f"no training set exists for torch {stack.torch}: Because")
                       for w in r.warnings), r.warnings
            assert r.training.packages is None
        else:
            assert list(r.training.packages) == list(ts.PACKAGES)
    # the mission's torch 2.1 trains; torch 1.11 cannot (peft's own floor), and resolve says so
    assert ts.set_for("2.1.0").packages["trl"] and ts.set_for("2.1.0+cpu") == ts.set_for("2.1.0")
    assert "peft depend on torch>=1.13.0" in ts.set_for("1.11.0").none


def test_resolve_and_packages_show_the_set_and_its_absence():
    out = CliRunner().invoke(main, ["resolve", "--cann", "7.0.0", "--torch", "1.11.0"])
    assert out.exit_code == 0, out.output
    assert "training set" in out.output and "warning: no training set exists for torch 1.11.0" in out.output
    out = CliRunner().invoke(main, ["resolve", "--os", "centos7.6", "--product", "910b", "--format", "json"])
    data = json.loads(out.output)
    assert data["training"]["packages"] == ts.set_for(data["torch"]).packages
    out = CliRunner().invoke(main, ["packages", data["id"], "--os", "centos7.6", "--format", "json"])
    assert out.exit_code == 0, out.output
    reqs = [w["requirement"] for w in json.loads(out.output)["wheels"]]
    assert set(ts.set_for(data["torch"]).requirements()) <= set(reqs)
    controller = ("ansible-core", "paramiko", "cryptography")
    assert not [r for r in reqs if r.split("=")[0].split(">")[0] in controller]
    out = CliRunner().invoke(main, ["packages", "cann-7.0.0-torch-1.11.0"])
    assert out.exit_code == 0 and "no training set exists for torch 1.11.0" in out.output
    assert "transformers" not in out.output.split("fill wheelhouse/")[0]


@pytest.fixture(scope="module")
def uv_cache():
    if shutil.which("uv") is None and not gen.Path(gen.sys.executable).with_name("uv").exists():
        pytest.skip("uv is not installed (make venv installs it)")
    sets = ts.load_training_sets()
    for row in sets.sets:
        # a fresh machine, or a cache that lacks this line's metadata (another uv pruned it, or an earlier
        # fill asked for another torch): ask the index once for that line; the test then resolves offline
        try:
            gen.compile_set(row.torch, row.python, row.platform, sets.exclude_newer, online=False)
        except SimError:
            gen.compile_set(row.torch, row.python, row.platform, sets.exclude_newer, online=True)
    return sets


def test_a_real_resolver_finds_each_recorded_set_offline(uv_cache):
    """uv pip compile --offline, torch pinned to the line's version, the data file's Python, platform and
    date: each row's versions are what the resolver picks, and a `none` row is the resolver's own refusal."""
    sets = uv_cache

    def one(row):
        return row, gen.compile_set(row.torch, row.python, row.platform, sets.exclude_newer, online=False)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, sets.sets))
    for row, (pins, why) in results:
        if row.none:
            assert pins is None and why == row.none, (row.torch, why)
        else:
            assert pins == row.packages, (row.torch, pins)
