"""The offline package directory: `ascend-matrix packages` (names from the matrix's resolver),
`ascend-matrix manifest`, and the playbooks' package check naming every problem in one run."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ascend_ready import __version__
from ascend_ready.errors import ConfigError, MatrixError
from ascend_ready.provision import matrix as mx
from ascend_ready.provision import packages as pk
from ascend_ready.provision import resolver as rv
from ascend_ready.provision import training_sets
from ascend_ready.provision.cli import main

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
STACK = "cann-8.2.RC1-torch-2.5.1"


def _plugin(kind: str, name: str):
    path = PLAYBOOKS / "plugins" / kind / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"h8_{kind}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lookup = _plugin("lookup", "ascend_packages")


def run(*args: str):
    return CliRunner().invoke(main, list(args))


# ---------------------------------------------------------------- what the directory must hold


@pytest.mark.parametrize(("os_id", "arch", "product"), [
    ("kylinv10sp3", "aarch64", None), ("ubuntu22.04", "x86_64", None), (None, "aarch64", "910_93"),
])
def test_installer_names_are_the_resolvers(os_id, arch, product):
    row = next(s for s in mx.load_matrix().stacks if s.id == STACK)
    want = rv.resolve(cann=row.cann, torch=row.torch, torch_npu=row.torch_npu, os=os_id, arch=arch,
                      product=product)
    plan = pk.package_plan(STACK, os=os_id, arch=arch, product=product)
    # the .run files, then the standalone CPython where the OS's python3 is too old (Kylin V10's 3.7), then
    # the optional MindCluster ToolBox
    needed = [f for f in plan.installers if not f.optional]
    assert [f.name for f in needed] == [n for n in want.packages.model_dump().values() if n] + (
        [want.python_build.file] if want.python_build else [])
    assert [f.name for f in plan.installers if f.optional] == [f"Ascend-mindx-toolbox_7.3.0_linux-{arch}.run"]
    assert (want.python_build is not None) == (os_id == "kylinv10sp3")
    assert plan.python == want.python
    # and the playbook checks exactly these files and requirements
    assert pk.required_files(want) == [f.name for f in needed] + [f"wheel:{w.requirement}"
                                                                  for w in plan.wheels]


def test_a2_plan_on_kylin_names_the_hdk_zip_the_wheels_and_the_download_command():
    plan = pk.package_plan(STACK, os="kylinv10sp3", arch="aarch64")
    driver, firmware = plan.installers[0], plan.installers[1]
    assert driver.name == "Ascend-hdk-910b-npu-driver_25.0.rc1.1_linux-aarch64.run"
    assert firmware.name == "Ascend-hdk-910b-npu-firmware_7.7.0.1.231.run"
    assert driver.comes_in == firmware.comes_in == "Ascend-hdk-910b-npu_25.0.rc1.1_linux-aarch64.zip"
    assert "Firmware and Drivers" in driver.download and "Ascend HDK 25.0.RC1.1" in driver.download
    assert [f.component for f in plan.installers] == ["driver", "firmware", "toolkit", "kernels", "nnal",
                                                      "python", "toolbox"]
    reqs = [w.requirement for w in plan.wheels]
    assert reqs[:3] == ["pip", "torch==2.5.1", "torch_npu==2.5.1.post1"]
    cann = len(pk.CANN_PYTHON_REQUIREMENTS)
    assert reqs[3:3 + cann] == list(pk.CANN_PYTHON_REQUIREMENTS)
    # ascend-ready of this version, then the node extra with the training set of the stack's torch line
    assert reqs[3 + cann:] == pk.training_requirements(torch="2.5.1")
    assert plan.wheels[3 + cann].file == f"wheelhouse/ascend_ready-{__version__}-py3-none-any.whl"
    assert plan.wheels[1].file == "wheelhouse/torch-2.5.1-cp311-cp311-*_aarch64.whl"
    argv = plan.pip_download
    assert argv[:4] == ["pip", "download", "--dest", "wheelhouse"]
    assert "--python-version" in argv and argv[argv.index("--python-version") + 1] == "3.11"
    assert "manylinux2014_aarch64" in argv and "--extra-index-url" not in argv
    # the index has no ascend-ready of an unreleased version: its wheel is built (a note says how)
    want = training_sets.set_for("2.5.1").packages
    assert f"transformers=={want['transformers']}" in argv and f"trl=={want['trl']}" in argv
    assert f"ascend-ready=={__version__}" not in argv
    assert not {"ansible-core", "paramiko", "cryptography"} & {pk._requirement_name(a).lower() for a in argv}
    assert any("pip wheel --no-deps --wheel-dir wheelhouse ." in n for n in plan.notes)


def test_training_requirements_are_this_version_and_the_node_extra():
    """One source of truth: ascend-ready of this version (installed with --no-deps), then its node extra
    (pyproject.toml): the base dependencies less the controller's (ansible-core, paramiko) plus the train
    extra, torch left to the stack's pin; python_env's filter installs the same."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    controller = {"ansible-core", "paramiko"}
    base = [r for r in project["dependencies"] if pk._requirement_name(r).lower() not in controller]
    assert len(base) == len(project["dependencies"]) - len(controller)
    assert extras["node"] == base + extras["train"]  # kept in step by hand: this test says where
    reqs = pk.training_requirements()
    assert reqs[0] == f"ascend-ready=={__version__}"
    names = [pk._requirement_name(r).lower() for r in reqs[1:]]
    assert "torch" not in names and "transformers" in names and "trl" in names and "pydantic" in names
    assert not controller & set(names)
    assert reqs[1:] == [r for r in extras["node"] if pk._requirement_name(r) != "torch"]
    filters = _plugin("filter", "ascend")
    assert filters.training_requirements(True) == reqs
    assert filters.training_requirements(False) == []


def test_training_requirements_pin_the_training_set_of_the_torch_line():
    found = training_sets.set_for("2.1.0")
    reqs = pk.training_requirements(torch="2.1.0")
    for name in ("transformers", "trl", "accelerate", "peft", "datasets"):
        assert f"{name}=={found.packages[name]}" in reqs
    assert not any(r.startswith("deepspeed") for r in reqs)  # only where ZeRO is used
    # the set's pins are within the node extra's ranges: the trainers' floors are the oldest set's
    from packaging.requirements import Requirement

    ranges = {Requirement(r).name: Requirement(r).specifier for r in pk.training_requirements()[1:]}
    for row in training_sets.load_training_sets().sets:
        for name, version in (row.packages or {}).items():
            assert name not in ranges or ranges[name].contains(version), (row.torch, name, version)
    # a torch line with no set is refused, with the resolver's reason, by the filter too
    with pytest.raises(MatrixError, match=r"torch 1\.11\.0: no training set exists: Because all versions"):
        pk.training_requirements(torch="1.11.0")
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="no training set exists"):
        _plugin("filter", "ascend").training_requirements(True, "1.11.0")


def test_x86_takes_the_cpu_torch_and_python_313_a_numpy_2():
    plan = pk.package_plan("cann-8.5.0-torch-2.9.0", os="ubuntu22.04", arch="x86_64", python="3.13")
    assert plan.installers[0].name == "Ascend-hdk-910b-npu-driver_25.5.1_linux-x86-64.run"
    assert plan.installers[0].comes_in == "Ascend-hdk-910b-npu_25.5.1_linux-x86-64.zip"
    assert plan.installers[3].component == "ops"
    assert "torch==2.9.0+cpu" in plan.pip_download and pk.TORCH_CPU_INDEX in plan.pip_download
    assert "manylinux_2_28_x86_64" in plan.pip_download
    assert plan.wheels[1].file == "wheelhouse/torch-2.9.0+cpu-cp313-cp313-*_x86_64.whl"
    assert "numpy>=1.19.2" in [w.requirement for w in plan.wheels]  # numpy 1.x has no 3.13 wheels


def test_cann_requirements_equal_what_python_env_installs():
    defaults = yaml.safe_load((PLAYBOOKS / "roles/python_env/defaults/main.yml").read_text())
    assert defaults["python_env_cann_requirements"] == list(pk.CANN_PYTHON_REQUIREMENTS)


def test_unknown_stack_and_unfitting_pins_are_refused():
    with pytest.raises(MatrixError, match=r"unknown stack id 'cann-1\.0'"):
        pk.package_plan("cann-1.0")
    with pytest.raises(MatrixError, match="glibc"):
        pk.package_plan("cann-8.5.0-torch-2.9.0", os="centos7.6")


def test_packages_cli_table_and_json():
    r = run("packages", STACK, "--os", "kylinv10sp3", "--arch", "aarch64")
    assert r.exit_code == 0, r.output
    for text in ("Ascend-cann-toolkit_8.2.RC1_linux-aarch64.run",
                 "Ascend-hdk-910b-npu_25.0.rc1.1_linux-aarch64.zip", "torch_npu==2.5.1.post1", "absl-py",
                 "pip download --dest wheelhouse", "ascend-matrix manifest DIR"):
        assert text in r.output
    data = json.loads(run("packages", STACK, "--format", "json").output)
    assert data["stack"] == STACK and data["arch"] == "aarch64"
    bad = run("packages", "no-such-stack")
    assert bad.exit_code == 2 and "error: stack: unknown stack id" in bad.output and "hint:" in bad.output


# ---------------------------------------------------------------- the manifest


def _tree(root: Path) -> dict[str, bytes]:
    files = {"b.run": b"bee", "a.run": b"ay", "wheelhouse/z-1.0-py3-none-any.whl": b"zed",
             "wheelhouse/a-1.0-py3-none-any.whl": b"a", ".partial.run": b"not yet", "SHA256SUMS": b"old"}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def test_manifest_is_sorted_sha256sum_format(tmp_path):
    files = _tree(tmp_path)
    r = run("manifest", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "wrote" in r.output and "4 file(s)" in r.output
    want = sorted(n for n in files if not n.startswith(".") and n != "SHA256SUMS")
    lines = (tmp_path / "SHA256SUMS").read_text().splitlines()
    assert [line.split("  ", 1)[1] for line in lines] == want
    assert lines[0] == f"{hashlib.sha256(b'ay').hexdigest()}  a.run"
    if shutil.which("sha256sum"):
        check = subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=tmp_path,
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    # the playbooks' lookup reads it
    assert lookup.parse_manifest((tmp_path / "SHA256SUMS").read_text(), "m") == {
        n: hashlib.sha256(files[n]).hexdigest() for n in want}


def test_manifest_refuses_a_missing_file_or_unwritable_directory_before_hashing(tmp_path, monkeypatch):
    r = run("manifest", str(tmp_path / "nope"))
    assert r.exit_code == 2 and "does not exist" in r.output and "hint:" in r.output
    (tmp_path / "f").write_text("x")
    r = run("manifest", str(tmp_path / "f"))
    assert r.exit_code == 2 and "error:" in r.output
    _tree(tmp_path / "d")
    hashed = []
    monkeypatch.setattr(pk.os, "access", lambda path, mode: False)
    monkeypatch.setattr(pk, "sha256_file", lambda path: hashed.append(path))
    with pytest.raises(ConfigError, match="not writable"):
        pk.write_manifest(tmp_path / "d")
    assert hashed == [] and (tmp_path / "d" / "SHA256SUMS").read_bytes() == b"old"
    monkeypatch.undo()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="holds no files"):
        pk.write_manifest(empty)


# ---------------------------------------------------------------- the playbooks' package check


def _sim_packages(tmp_path: Path) -> tuple[Path, dict]:
    """The simulator's package builder (named through the matrix too), and the stack it was built for."""
    from ascend_ready.sim.harness.build_packages import build

    src = build(tmp_path / "pkgs", [STACK], "aarch64")
    resolved = rv.resolve(cann="8.2.RC1", torch="2.5.1", product="910b", arch="aarch64")
    return src, resolved.model_dump(mode="json")


def test_the_simulators_package_directory_holds_what_the_list_names(tmp_path):
    src, stack = _sim_packages(tmp_path)
    sums = (src / "SHA256SUMS").read_text()
    pk.write_manifest(src)  # the product's manifest writer agrees with the simulator's, byte for byte
    assert (src / "SHA256SUMS").read_text() == sums
    terms = lookup.stack_terms(stack, requirements=[], training=False)
    files, problems = lookup.check(terms, str(src), cache_file=str(tmp_path / "c.json"), arch="aarch64")
    assert problems == []
    assert set(stack["packages"].values()) <= set(files)
    # without the CANN list override, every missing CANN dependency is named in the same run
    files, problems = lookup.check(lookup.stack_terms(stack, training=False), str(src),
                                   cache_file=str(tmp_path / "c.json"), arch="aarch64")
    assert len(problems) == len(pk.CANN_PYTHON_REQUIREMENTS)
    assert any("no numpy>=1.19.2,<2.0 wheel for any Python on aarch64" in p for p in problems)
    # a source built without the training wheels (build_packages without --training) is refused for a
    # python_env that installs them (its default), naming ascend-ready's own wheel first
    files, problems = lookup.check(lookup.stack_terms(stack, requirements=[]), str(src),
                                   cache_file=str(tmp_path / "c.json"), arch="aarch64")
    assert len(problems) == len(pk.training_requirements())
    assert problems[0].startswith(f"no ascend-ready {__version__} wheel for any Python on aarch64")
    pinned = training_sets.set_for("2.5.1").packages["transformers"]  # the set of the stack's torch line
    assert any(p.startswith(f"no transformers {pinned} wheel") for p in problems), [p[:40] for p in problems]


def test_the_toolbox_is_listed_as_optional_and_checked_only_where_its_role_installs_it(tmp_path):
    """`ascend-matrix packages` lists the MindCluster ToolBox (optional); the package check wants it, with
    its checksum like the others, only with toolbox=true (the stack role passes toolbox_install)."""
    plan = pk.package_plan(STACK, arch="aarch64")
    box = plan.installers[-1]
    assert (box.name, box.component, box.optional) == ("Ascend-mindx-toolbox_7.3.0_linux-aarch64.run",
                                                        "toolbox", True)
    assert "MindX%207.3.0/Ascend-mindx-toolbox_7.3.0_linux-aarch64.run" in box.download
    assert any("toolbox_install: true" in n for n in plan.notes)
    res = run("packages", STACK)
    assert res.exit_code == 0 and "toolbox (optional)" in res.output
    src, stack = _sim_packages(tmp_path)
    assert box.name not in lookup.stack_terms(stack, requirements=[], training=False)
    terms = lookup.stack_terms(stack, requirements=[], training=False, toolbox=True)
    assert box.name in terms
    sums = lookup.parse_manifest((src / "SHA256SUMS").read_text(), "m")
    files, problems = lookup.check(terms, str(src), cache_file=str(tmp_path / "c.json"), arch="aarch64")
    assert problems == [] and files[box.name] == sums[box.name]
    (src / box.name).write_bytes(b"truncated")
    files, problems = lookup.check(terms, str(src), cache_file=str(tmp_path / "c2.json"), arch="aarch64")
    assert problems and f"package {box.name} is corrupt" in problems[0]


def test_one_check_names_the_missing_and_the_corrupt_file_with_their_checksums(tmp_path):
    src, stack = _sim_packages(tmp_path)
    sums = lookup.parse_manifest((src / "SHA256SUMS").read_text(), "m")
    driver, toolkit = stack["packages"]["driver"], stack["packages"]["toolkit"]
    (src / driver).unlink()
    with open(src / toolkit, "ab") as fh:
        fh.write(b"\0")
    terms = lookup.stack_terms(stack, requirements=[], training=False)
    files, problems = lookup.check(terms, str(src), cache_file=str(tmp_path / "c.json"), arch="aarch64")
    assert len(problems) == 2, problems
    assert f"package {driver} is missing from {src} (SHA256SUMS expects sha256 {sums[driver]})" in problems[0]
    assert f"package {toolkit} is corrupt: sha256 " in problems[1] and f"says {sums[toolkit]}" in problems[1]
    assert driver not in files and toolkit not in files and stack["packages"]["firmware"] in files
    # raising (the lookup's default) puts both in one message
    with pytest.raises(lookup.AnsibleLookupError) as err:
        lookup.verify(terms, str(src), cache_file=str(tmp_path / "c.json"), arch="aarch64")
    assert "2 problems with the package source" in err.value.message
    assert driver in err.value.message and toolkit in err.value.message


def test_the_stack_roles_assert_lists_every_problem_in_one_run(tmp_path):
    """The real tasks (roles/stack/tasks/packages.yml) on localhost: one failed assert naming both."""
    src, stack = _sim_packages(tmp_path)
    driver, toolkit = stack["packages"]["driver"], stack["packages"]["toolkit"]
    (src / driver).unlink()
    (src / toolkit).write_bytes(b"truncated")
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{
        "name": "package check", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "Verify",
                   "ansible.builtin.include_role": {"name": "stack", "tasks_from": "packages"}}],
    }]))
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({
        "_stack_plans": {"localhost": {"os": "debian12", "stack": stack}},
        "stack_package_source": str(src), "python_env_cann_requirements": [], "python_env_training": False,
    }))
    env = dict(os.environ, ANSIBLE_CONFIG=str(PLAYBOOKS / "ansible.cfg"),
               ANSIBLE_ROLES_PATH=str(PLAYBOOKS / "roles"),
               ANSIBLE_LOOKUP_PLUGINS=str(PLAYBOOKS / "plugins/lookup"), HOME=str(tmp_path),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    ansible = Path(sys.executable).with_name("ansible-playbook")
    result = subprocess.run([str(ansible), "-i", "localhost,", "-c", "local", str(play), "-e", f"@{extra}"],
                            capture_output=True, text=True, env=env, cwd=PLAYBOOKS, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "Ensure the package source holds every package of the stack, intact" in out
    assert f"package {driver} is missing" in out and f"package {toolkit} is corrupt" in out


@pytest.mark.slow  # two ansible-playbook runs: 20-50 s on the shared 2-core machine
def test_the_toolbox_role_installs_the_verified_installer_once_and_only_where_asked(tmp_path):
    """The real role on localhost, into a scratch root (the simulator's installers honour
    ASCEND_SIM_FSROOT; the role's root path is pointed there): off by default; on, it stages the file the
    package check verified and runs `--install --quiet`; a re-run changes nothing."""
    from ascend_ready.sim.packages.builder import toolbox_run

    box = pk.toolbox_file("aarch64").name
    src = tmp_path / "pkgs"
    src.mkdir()
    (src / box).write_bytes(toolbox_run(mx.load_matrix().toolbox.version, "aarch64"))
    pk.write_manifest(src)
    sums = lookup.parse_manifest((src / "SHA256SUMS").read_text(), "m")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{
        "name": "toolbox", "hosts": "localhost", "gather_facts": False,
        "environment": {"ASCEND_SIM_FSROOT": str(root)}, "roles": ["toolbox"]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(PLAYBOOKS / "ansible.cfg"),
               ANSIBLE_ROLES_PATH=str(PLAYBOOKS / "roles"), HOME=str(tmp_path),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    ansible = Path(sys.executable).with_name("ansible-playbook")

    def play_with(**extra) -> str:
        values = {"stack_package_source": str(src), "stack_packages": {box: sums[box]},
                  "ascend_common_cache_dir": str(tmp_path / "cache"),
                  "_toolbox_root": str(root / "usr/local/Ascend/toolbox"),
                  "ansible_python_interpreter": sys.executable, **extra}
        (tmp_path / "extra.json").write_text(json.dumps(values))
        result = subprocess.run([str(ansible), "-i", "localhost,", "-c", "local", str(play),
                                 "-e", f"@{tmp_path / 'extra.json'}"],
                                capture_output=True, text=True, env=env, cwd=PLAYBOOKS, timeout=300)
        return f"rc={result.returncode}\n{result.stdout}{result.stderr}"

    dmi = root / "usr/local/Ascend/toolbox/7.3.0/Ascend-DMI/bin/ascend-dmi"
    # off unless asked for: the default and its declaration agree
    role = PLAYBOOKS / "roles/toolbox"
    assert yaml.safe_load((role / "defaults/main.yml").read_text())["toolbox_install"] is False
    spec = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]
    assert spec["options"]["toolbox_install"]["default"] is False
    first = play_with(toolbox_install=True)
    assert first.startswith("rc=0") and "toolbox: install 7.3.0" in first and dmi.is_file(), first
    again = play_with(toolbox_install=True)
    assert again.startswith("rc=0") and "toolbox: skip 7.3.0" in again and "changed=0" in again, again
