"""The package list in pyproject.toml covers every folder of the mapped layout (no setup.py finds them)."""

from __future__ import annotations

import pytest
import tomllib
from sample_support import REPO


def _declared() -> tuple[dict[str, str], set[str]]:
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    return tool["package-dir"], set(tool["packages"])


def test_every_package_folder_is_listed():
    mapping, packages = _declared()
    found = set()
    for name, folder in mapping.items():
        root = REPO / folder
        for init in root.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(root).parts
            found.add(".".join((name, *rel)))
    assert found - packages == set(), f"add these to [tool.setuptools] packages: {sorted(found - packages)}"
    assert packages - found == set(), f"listed but no such folder: {sorted(packages - found)}"


def test_the_product_never_imports_the_simulator():
    offenders = []
    for folder in ("checks", "training", "provision", "common"):
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text()
            if "ascend_ready.sim" in text.replace("ascend_ready.sim_", ""):
                offenders += [f"{path.relative_to(REPO)}:{n}" for n, line in enumerate(text.splitlines(), 1)
                              if ("import ascend_ready.sim" in line or "from ascend_ready.sim" in line)]
    assert not offenders, offenders


@pytest.mark.slow
def test_the_wheel_holds_what_the_installed_package_reads(tmp_path):
    """A node's training venv holds ascend-ready as a wheel (python_env), not a checkout: the bundled
    hardware profiles and schemas, which sit in folders without an __init__.py, must be in it."""
    import zipfile

    from ascend_ready.sim.harness.build_packages import _own_wheel

    names = zipfile.ZipFile(_own_wheel(tmp_path)).namelist()
    profiles = sorted(p.name for p in (REPO / "checks" / "profiles").glob("*.yml"))
    assert profiles and all(f"ascend_ready/checks/profiles/{p}" in names for p in profiles)
    assert "ascend_ready/checks/schemas/launch-spec.schema.json" in names
