"""The suite's split across xdist workers keeps a group on one worker (tests/xdist_support.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("xdist")

TESTS = Path(__file__).resolve().parent


def test_each_module_and_the_shared_fixture_s_modules_run_on_one_worker(tmp_path):
    """Three modules of four tests, two of them sharing `provisioned_fleet`: under `-n 2 --dist loadgroup`
    every module's tests run on one worker and the two fleet modules on the same one. Before join_group,
    pytest 9.2 dropped xdist's group suffix and the tests of a module were dealt to both workers."""
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(TESTS)!r})
            import pytest
            from xdist_support import group_and_order

            @pytest.fixture(scope="session")
            def provisioned_fleet():
                return "fleet"

            def pytest_collection_modifyitems(config, items):
                items[:] = group_and_order(items, config.rootpath / "absent.json")
            """
        )
    )
    body = "\n".join(f"def test_{i}({{arg}}):\n    pass\n" for i in range(4))
    (tmp_path / "test_alone.py").write_text(body.format(arg=""))
    (tmp_path / "test_fleet_a.py").write_text(body.format(arg="provisioned_fleet"))
    (tmp_path / "test_fleet_b.py").write_text(body.format(arg="provisioned_fleet"))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", "-v",
         "-p", "no:cacheprovider", "-p", "no:randomly", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    workers: dict[str, set[str]] = {}
    for worker, module, group in re.findall(r"\[(gw\d)\].*PASSED (test_\w+\.py)::test_\d@(\S+)", run.stdout):
        workers.setdefault(module, set()).add(worker)
        assert group == ("provisioned_fleet" if "fleet" in module else module)
    assert sorted(workers) == ["test_alone.py", "test_fleet_a.py", "test_fleet_b.py"], run.stdout
    assert all(len(w) == 1 for w in workers.values()), workers
    assert workers["test_fleet_a.py"] == workers["test_fleet_b.py"]
