"""The standalone CPython of old nodes: CentOS 7.6 ships Python 3.6, which no torch of the matrix supports,
so its package directory holds a python-build-standalone `install_only` archive that python_env unpacks
under /opt and builds the training venv from; check mode names it, a re-run changes nothing, and the
package check names the archive when it is corrupt.

One CentOS 7.6 node whose only Python is its 3.6 (no interpreter is lent for the venv).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascend_ready.provision import matrix as mx
from ascend_ready.provision import packages as pk
from ascend_ready.provision import resolver as rv

from .conftest import STACK, sim_fleet

NODE = "node01"
VENV = f"/home/ascend/venvs/ascend-{STACK}"


def _build(os_id: str, arch: str = "x86_64") -> rv.ResolvedPythonBuild | None:
    row = next(s for s in mx.load_matrix().stacks if s.id == STACK)
    return rv.resolve(cann=row.cann, torch=row.torch, os=os_id, arch=arch).python_build


# -- the plan: which OSes need the archive (no cluster) ------------------------------------------------


@pytest.mark.parametrize(("os_id", "arch"), [("centos7.6", "x86_64"), ("centos7.6", "aarch64"),
                                             ("kylinv10sp3", "aarch64"), ("kylinv10sp2", "x86_64")])
def test_old_oses_get_the_standalone_archive_in_their_package_list(os_id, arch):
    build = _build(os_id, arch)
    assert build is not None
    assert build.file == f"cpython-3.11.14+20251031-{arch}-unknown-linux-gnu-install_only.tar.gz"
    assert build.install_dir == "/opt/ascend-ready/python-3.11.14"
    assert build.interpreter == "/opt/ascend-ready/python-3.11.14/bin/python3.11"
    plan = pk.package_plan(STACK, os=os_id, arch=arch)
    python = [f for f in plan.installers if f.component == "python"]
    assert [f.name for f in python] == [build.file]
    assert "astral-sh/python-build-standalone > Releases > 20251031" in python[0].download
    stack = rv.resolve(cann="8.2.RC1", torch="2.5.1", os=os_id, arch=arch)
    assert build.file in pk.required_files(stack)
    assert build.file not in pk.required_files(stack, python_build=False)  # python_env_python is set


@pytest.mark.parametrize("os_id", ["ubuntu22.04", "debian12"])
def test_oses_whose_python3_fits_need_no_archive(os_id):
    assert _build(os_id) is None
    plan = pk.package_plan(STACK, os=os_id, arch="x86_64")
    assert not [f for f in plan.installers if f.component == "python"]
    stack = rv.resolve(cann="8.2.RC1", torch="2.5.1", os=os_id, arch="x86_64")
    assert not [n for n in pk.required_files(stack) if n.startswith("cpython-")]


def test_a_python_with_no_recorded_build_says_what_to_do():
    plan = pk.package_plan(STACK, os="centos7.6", arch="x86_64", python="3.10")
    assert not [f for f in plan.installers if f.component == "python"]
    assert any("records no standalone CPython 3.10" in n and "python_env_python" in n for n in plan.notes)


def test_the_package_check_of_an_old_os_names_a_missing_archive(tmp_path):
    import importlib.util

    plugin = Path(__file__).resolve().parents[2] / "playbooks/plugins/lookup/ascend_packages.py"
    spec = importlib.util.spec_from_file_location("standalone_ascend_packages", plugin)
    lookup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lookup)
    stack = rv.resolve(cann="8.2.RC1", torch="2.5.1", os="centos7.6", arch="x86_64").model_dump(mode="json")
    build = stack["python_build"]
    (tmp_path / "SHA256SUMS").write_text(f"{'0' * 64}  {build['file']}\n")
    _files, problems = lookup.check(lookup.stack_terms(stack, wheels=False), str(tmp_path),
                                   cache_file=str(tmp_path / "cache.json"))
    assert f"package {build['file']} is missing from {tmp_path} (SHA256SUMS expects sha256 {'0' * 64}); " \
           f"download it again" in problems
    # python_env_python names the interpreter: the archive is not asked for
    terms = lookup.stack_terms(stack, wheels=False, python_build=False)
    assert not [t for t in terms if t.startswith("cpython-")]


# -- on a simulated CentOS 7.6 node --------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet(fleet_factory):
    f = fleet_factory("a2-centos76", 7)
    f.group_vars = sim_fleet.group_vars(f.packages, STACK, run_dir=f.cluster.run_dir)
    f.host_vars = sim_fleet.host_vars([vars(n) for n in f.cluster.nodes])
    assert "python_env_python" not in f.host_vars[NODE]
    f.write_inventory(f.group_vars, f.host_vars)
    return f


@pytest.fixture(scope="module")
def build(fleet) -> rv.ResolvedPythonBuild:
    b = _build("centos7.6")
    assert (fleet.packages / b.file).is_file()
    return b


@pytest.mark.sim
@pytest.mark.slow  # test_site.py covers the unpack and the venv on its CentOS node in CI
def test_check_mode_names_the_archive_and_unpacks_nothing(fleet, build):
    assert fleet.sh(NODE, "python3 -V").strip().startswith("Python 3.6")
    assert fleet.sh(NODE, "command -v python3.11 || echo none").strip() == "none"
    result = fleet.play("--check", "--tags", "python_env")
    assert result.rc == 0, result.output[-4000:]
    assert f"would unpack {build.file} under {build.install_dir}" in " ".join(result.output.split())
    assert not (fleet.root(NODE) / build.install_dir.lstrip("/")).exists()
    assert not (fleet.root(NODE) / VENV.lstrip("/")).exists()


@pytest.mark.sim
@pytest.mark.slow  # test_site.py covers the unpack and the venv on its CentOS node in CI
def test_python_env_unpacks_it_under_opt_and_builds_the_venv_from_it(fleet, build):
    result = fleet.play("--tags", "python_env")
    assert result.rc == 0, result.output[-4000:]
    root = fleet.root(NODE)
    assert (root / build.interpreter.lstrip("/")).is_file()
    assert (root / f"var/cache/ascend-ready/packages/{build.file}").is_file()
    cfg = dict(line.split(" = ", 1) for line in fleet.read(NODE, f"{VENV}/pyvenv.cfg").splitlines()
               if " = " in line)
    assert cfg["home"] == f"{build.install_dir}/bin"
    out = fleet.sh(NODE, f"{VENV}/bin/python -c 'import sys, torch; print(sys.base_prefix, "
                         f"\"%d.%d\" % sys.version_info[:2], torch.__version__)'").split()
    assert out == [build.install_dir, "3.11", "2.5.1"]
    # the node's own python3 stays what CentOS ships
    assert fleet.sh(NODE, "python3 -V").strip().startswith("Python 3.6")

    again = fleet.play("--tags", "python_env")
    assert again.rc == 0 and again.changed(NODE) == 0, again.output[-4000:]


@pytest.mark.sim
@pytest.mark.slow  # test_site.py covers the unpack and the venv on its CentOS node in CI
def test_the_package_check_names_a_corrupt_archive_before_any_change(fleet, build):
    # (a missing one is named the same way: the lookup's own test, test_plugins.py)
    archive = fleet.packages / build.file
    kept = fleet.workdir / build.file
    archive.rename(kept)
    try:
        archive.write_bytes(kept.read_bytes()[:-1024] + b"\0" * 1024)
        corrupt = fleet.play("--tags", "stack")
    finally:
        archive.unlink(missing_ok=True)
        kept.rename(archive)
    assert corrupt.rc != 0 and corrupt.failed(NODE)
    said = " ".join(corrupt.output.split())  # the callback folds long messages
    assert re.search(rf"package {re.escape(build.file)} is corrupt: sha256 [0-9a-f]{{64}}, "
                     r"but SHA256SUMS says [0-9a-f]{64}; download it again", said), corrupt.output[-4000:]
