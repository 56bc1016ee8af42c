"""The package directory: real file names, SHA256SUMS, wheel tags, stack parsing and the CLI."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from ascend_ready.errors import ConfigError
from ascend_ready.sim.packages import Stack, build_package_dir, package_names
from ascend_ready.sim.packages.cli import packages_command
from ascend_ready.sim.packages.wheels import glibc_floor

from .conftest import STACKS


def test_package_names_follow_the_vendor_scheme():
    old = Stack.from_dict(STACKS[0])
    assert package_names(old, "aarch64", "910b") == {
        "driver": "Ascend-hdk-910b-npu-driver_24.1.rc2_linux-aarch64.run",
        "firmware": "Ascend-hdk-910b-npu-firmware_7.3.0.1.231.run",
        "toolkit": "Ascend-cann-toolkit_8.0.0_linux-aarch64.run",
        "kernels": "Ascend-cann-kernels-910b_8.0.0_linux-aarch64.run",
        "nnal": "Ascend-cann-nnal_8.0.0_linux-aarch64.run",
    }
    new = package_names(Stack.from_dict(STACKS[1]), "x86_64", "310p")
    assert new["ops"] == "Ascend-cann-310p-ops_8.5.0_linux-x86_64.run"
    assert new["driver"].endswith("_linux-x86-64.run")  # HDK files spell the arch x86-64, CANN files x86_64
    assert "kernels" not in new
    a3 = package_names(old, "x86_64", "910_93")
    assert (a3["driver"], a3["firmware"], a3["kernels"]) == (
        "Atlas-A3-hdk-npu-driver_24.1.rc2_linux-x86-64.run", "Atlas-A3-hdk-npu-firmware_7.3.0.1.231.run",
        "Atlas-A3-cann-kernels_8.0.0_linux-x86_64.run")
    assert package_names(Stack.from_dict(STACKS[1]), "aarch64", "910_93")["ops"] == (
        "Ascend-cann-A3-ops_8.5.0_linux-aarch64.run")
    with pytest.raises(ConfigError, match="unknown product '910c'"):
        package_names(old, "x86_64", "910c")


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_package_names_are_the_resolvers(arch):
    """Every matrix stack on every product it has an HDK for: the files the playbooks look for exist."""
    from ascend_ready.provision import matrix as mx
    from ascend_ready.provision import resolver as rv

    m = mx.load_matrix()
    compared = 0
    for row in m.stacks:
        for product in (p.id for p in m.products):
            try:
                r = rv.resolve(m, cann=row.cann, torch=row.torch, product=product, arch=arch)
            except mx.MatrixError:
                continue
            stack = Stack.from_dict({"driver": r.driver, "firmware": r.firmware or r.driver, "cann": r.cann,
                                     "torch": r.torch, "torch_npu": r.torch_npu})
            names = package_names(stack, arch, product)
            wanted = r.packages.model_dump()
            assert names.pop(r.layout.op_package) == wanted.pop("ops")
            assert {k: v for k, v in names.items() if wanted[k] is not None} == {
                k: v for k, v in wanted.items() if v is not None}
            compared += 1
    assert compared >= 40


def test_directory_lists_every_package_and_sha256sums_verify(pkgdir):
    sums = (pkgdir / "SHA256SUMS").read_text().splitlines()
    listed = {line.split("  ", 1)[1] for line in sums}
    on_disk = {p.relative_to(pkgdir).as_posix() for p in pkgdir.rglob("*") if p.is_file()} - {"SHA256SUMS"}
    assert listed == on_disk
    assert "Ascend-cann-910b-ops_9.0.0_linux-x86_64.run" in listed
    assert "Ascend-hdk-910b-npu-driver_25.5.1_linux-x86-64.run" in listed
    # 6 Pythons for the 8.0.0 stack, 1 for the others (torch 2.8.0 shared): (6 + 1) * 2 wheels
    assert len([n for n in listed if n.startswith("wheelhouse/")]) == 14
    check = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=pkgdir, capture_output=True,
                           text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    index = json.loads((pkgdir / "packages.json").read_text())
    assert index["stacks"][1]["packages"]["910b"]["ops"] == "Ascend-cann-910b-ops_8.5.0_linux-x86_64.run"


def test_build_is_reproducible(tmp_path, pkgdir):
    again = build_package_dir(tmp_path / "again", STACKS, arch="x86_64")
    assert (again / "SHA256SUMS").read_text() == (pkgdir / "SHA256SUMS").read_text()


def test_wheel_tags_carry_python_abi_and_glibc_floor(pkgdir):
    names = sorted(p.name for p in (pkgdir / "wheelhouse").iterdir())
    assert ("torch_npu-2.1.0.post3-cp36-cp36m-manylinux_2_17_x86_64.manylinux2014_x86_64.linux_x86_64.whl"
            in names)
    # a 2.28 floor carries no linux_ alias (the real torch 2.6+ wheels have none): glibc 2.17 pips refuse it
    assert "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl" in names
    assert {glibc_floor(n) for n in names if n.startswith("torch_npu-2.1.0")} == {"2.17"}
    assert {glibc_floor(n) for n in names if n.startswith("torch_npu-2.8.0")} == {"2.28"}


def test_stack_from_dict_rejects_incomplete_and_contradictory_rows():
    with pytest.raises(ConfigError, match="lacks torch_npu"):
        Stack.from_dict({k: v for k, v in STACKS[0].items() if k != "torch_npu"})
    with pytest.raises(ConfigError, match="disagree"):
        Stack.from_dict({**STACKS[0], "glibc": "2.28"})
    with pytest.raises(ConfigError, match="unknown manylinux"):
        Stack.from_dict({**STACKS[0], "manylinux": "musllinux_1_2"})
    row = Stack.from_dict({**STACKS[1], "notes": "kept"})
    assert (row.glibc, row.compatible_drivers, row.extra) == ("2.28", ("25.5", "25.3", "25.2", "25.0"),
                                                             {"notes": "kept"})


def test_cli_builds_and_reports_bad_input(tmp_path):
    runner = CliRunner()
    stack = json.dumps({**STACKS[1], "python": ["3.10"]})
    out = tmp_path / "out"
    ok = runner.invoke(packages_command, ["build", str(out), "--stack", stack, "--arch", "aarch64"])
    assert ok.exit_code == 0, ok.output
    assert "Ascend-cann-toolkit_8.5.0_linux-aarch64.run" in ok.stdout.splitlines()
    assert (out / "wheelhouse/torch-2.8.0-cp310-cp310-manylinux_2_28_aarch64.whl").is_file()
    bad_json = runner.invoke(packages_command, ["build", str(tmp_path / "x"), "--stack", "{driver"])
    assert bad_json.exit_code == 2
    assert "not JSON" in bad_json.output
    missing = runner.invoke(packages_command, ["build", str(tmp_path / "y"), "--stack", '{"driver": "1"}'])
    assert missing.exit_code == 2
    assert "error: stack" in missing.stderr and "hint: a stack needs" in missing.stderr
