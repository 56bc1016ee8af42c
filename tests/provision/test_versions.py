"""provision/versions.py: the matrix's version order without pydantic, as the Ansible filters load it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ascend_ready.provision import matrix, versions

REPO = Path(__file__).resolve().parents[2]
FILTER = REPO / "playbooks" / "plugins" / "filter" / "ascend.py"


@pytest.mark.parametrize("name", ["version_key", "same_version", "version_has_prefix", "base_version",
                                  "python_minor"])
def test_matrix_reexports_the_same_functions(name):
    assert getattr(matrix, name) is getattr(versions, name)


@pytest.mark.parametrize(("a", "b"), [
    ("23.0.rc3", "23.0.0"), ("8.0.RC1", "8.0.0"), ("8.0.0", "8.1.RC1"),
    ("2.1.0.post8.dev20241009", "2.1.0.post8"), ("2.1.0.post8", "2.1.0.post10"), ("25.5.0.b061", "25.5.0"),
])
def test_order(a, b):
    assert versions.version_key(a) < versions.version_key(b)


def test_unreadable_version_names_the_part():
    with pytest.raises(ValueError, match="cannot read 'x1'"):
        versions.version_key("8.x1")


@pytest.mark.parametrize("code", [
    "import ascend_ready.provision.versions",
    # The filter plugin is imported by every forked Ansible worker that templates any filter.
    f"import importlib.util as u; s = u.spec_from_file_location('f', {str(FILTER)!r}); "
    "s.loader.exec_module(u.module_from_spec(s))",
])
def test_light_imports_do_not_load_pydantic_or_yaml(code):
    out = subprocess.run([sys.executable, "-c", code + "; import sys; print(sorted(m for m in sys.modules "
                          "if m.split('.')[0] in ('pydantic', 'yaml', 'ascend_ready')))"],
                         capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["ascend_ready", "ascend_ready.provision", "ascend_ready.provision.versions"]
