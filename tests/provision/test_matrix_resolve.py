"""resolve(): full stacks from partial pins, and the reasons when nothing fits."""

from __future__ import annotations

import pytest

from ascend_ready.errors import MatrixError
from ascend_ready.provision.matrix import load_matrix, os_id_for
from ascend_ready.provision.resolver import resolve


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def test_no_pins_gives_newest_recommended_a2_stack(m):
    r = resolve(m)
    assert (r.id, r.product, r.arch) == ("cann-9.0.0-torch-2.9.0", "910b", "aarch64")
    assert (r.driver, r.firmware, r.torch_npu) == ("25.5.1", "7.8.0.6.201", "2.9.0.post2")


def test_centos76_gets_newest_manylinux2014_stack(m):
    r = resolve(m, os="centos7.6")
    assert r.id == "cann-8.3.RC1-torch-2.1.0"
    assert (r.glibc_floor, r.manylinux) == ("2.17", "manylinux2014")
    assert "centos7.6 ships python3 3.6; install Python 3.11 for this stack" in r.warnings


def test_centos76_with_torch_2_6_is_refused_with_the_glibc_reason(m):
    with pytest.raises(MatrixError) as info:
        resolve(m, os="centos7.6", torch="2.6.0")
    msg = str(info.value.message)
    assert "os centos7.6 (glibc 2.17) rules out the 3 remaining candidate(s) after torch 2.6.0" in msg
    assert "wheels are manylinux_2_28 and need glibc 2.28 but centos7.6 has 2.17" in msg
    assert info.value.hint.startswith(
        "newest stack for os centos7.6 (glibc 2.17) alone is cann-8.3.RC1-torch-2.1.0")


def test_cann_8_5_layout_paths_and_ops_package(m):
    r = resolve(m, cann="8.5.0", arch="x86_64")
    assert r.id == "cann-8.5.0-torch-2.9.0"
    assert r.layout.install_root == "/usr/local/Ascend/cann-8.5.0"
    assert r.layout.set_env == "/usr/local/Ascend/cann/set_env.sh"
    assert r.layout.version_file == "/usr/local/Ascend/cann/x86_64-linux/ascend_toolkit_install.info"
    assert (r.layout.op_package, r.layout.nnae) == ("ops", False)
    assert r.packages.ops == "Ascend-cann-910b-ops_8.5.0_linux-x86_64.run"
    assert r.packages.driver == "Ascend-hdk-910b-npu-driver_25.5.1_linux-x86-64.run"
    assert r.packages.toolkit == "Ascend-cann-toolkit_8.5.0_linux-x86_64.run"


def test_legacy_layout_uses_kernels_and_toolkit_paths(m):
    r = resolve(m, cann="8.0.0", torch_npu="2.1.0.post10")
    assert r.id == "cann-8.0.0-torch-2.1.0"
    assert r.layout.set_env == "/usr/local/Ascend/ascend-toolkit/set_env.sh"
    assert r.layout.install_root == "/usr/local/Ascend/ascend-toolkit/8.0.0"
    assert r.packages.ops == "Ascend-cann-kernels-910b_8.0.0_linux-aarch64.run"
    assert r.packages.nnal == "Ascend-cann-nnal_8.0.0_linux-aarch64.run"
    assert (r.driver, r.firmware) == ("24.1.rc2", "7.3.0.1.231")


def test_python_3_6_fits_nothing(m):
    with pytest.raises(MatrixError) as info:
        resolve(m, python="3.6")
    assert "python 3.6 rules out the 24 remaining candidate(s)" in info.value.message
    assert info.value.hint.startswith("no stack in the matrix satisfies python 3.6")


def test_310p_firmware_differs_from_910b_on_cann_7(m):
    a2 = resolve(m, cann="7.0.0")
    duo = resolve(m, cann="7.0.0", product="310p")
    assert (a2.driver, a2.firmware) == ("23.0.3", "7.1.0.5.220")
    assert (duo.driver, duo.firmware, duo.hdk) == ("23.0.1", "7.1.0.4.220", "23.0.2.1")
    assert duo.packages.firmware == "Ascend-hdk-310p-npu-firmware_7.1.0.4.220.run"
    assert duo.packages.ops == "Ascend-cann-kernels-310p_7.0.0_linux.run"  # 7.0.x kernels had no arch
    assert duo.packages.nnal is None


def test_a3_packages_use_atlas_names(m):
    r = resolve(m, product="910_93", cann="8.5.0")
    assert (r.hdk, r.driver, r.firmware) == ("25.3.RC1", "25.3.rc1", "7.8.0.2.212")
    assert r.packages.driver == "Atlas-A3-hdk-npu-driver_25.3.rc1_linux-aarch64.run"
    assert r.packages.ops == "Ascend-cann-A3-ops_8.5.0_linux-aarch64.run"


def test_a3_on_cann_without_a3_bundle_is_refused(m):
    with pytest.raises(MatrixError, match=r"CANN 8\.0\.0 has no recorded HDK bundle for 910_93"):
        resolve(m, product="910_93", cann="8.0.0")


def test_driver_pin_selects_a_cann_that_accepts_it(m):
    r = resolve(m, driver="24.1.rc2")
    assert r.cann == "8.2.RC1"  # newest CANN whose HDK list holds 24.1.rc2
    assert (r.hdk, r.firmware) == ("24.1.RC2", "7.3.0.1.231")


def test_unrecorded_driver_resolves_with_a_firmware_warning(m):
    r = resolve(m, driver="25.5.0.b061", cann="8.5.0")
    assert (r.hdk, r.firmware, r.packages.firmware) == (None, None, None)
    assert any("no recorded HDK bundle has 910b driver 25.5.0.b061" in w for w in r.warnings)


def test_driver_pin_no_cann_accepts(m):
    with pytest.raises(MatrixError, match=r"driver 22\.0\.0 rules out"):
        resolve(m, driver="22.0.0")


def test_os_default_python_preferred_when_supported(m):
    r = resolve(m, os="ubuntu22.04")
    assert r.python == "3.10" and not r.warnings
    assert resolve(m, os="openeuler22.03", cann="8.2.RC1").python == "3.9"


def test_unlisted_os_resolves_with_warning(m):
    r = resolve(m, os="debian12")
    assert r.python == "3.11"
    assert any("debian12 is not on CANN 9.0.0's supported OS list" in w for w in r.warnings)


def test_python_pin_and_torch_pin_together(m):
    r = resolve(m, torch="2.1.0", python="3.8")
    assert r.id == "cann-8.3.RC1-torch-2.1.0" and r.python == "3.8"


@pytest.mark.parametrize(("pins", "pattern"), [
    ({"os": "windows11"}, r"os: unknown OS 'windows11'"),
    ({"product": "910c"}, r"product: unknown NPU product '910c'"),
    ({"arch": "riscv64"}, r"arch: unknown arch 'riscv64'"),
    ({"cann": "8.4.0"}, r"cann: CANN 8.4.0 is not in the matrix"),
    ({"torch": "two"}, r"torch: bad version 'two'"),
    ({"python": "three"}, r"python: bad Python version 'three'"),
    ({"kernel": "5.10"}, r"unknown pin\(s\): kernel"),
])
def test_bad_pins_are_named(m, pins, pattern):
    with pytest.raises(MatrixError, match=pattern):
        resolve(m, **pins)


@pytest.mark.parametrize(("distribution", "version", "expected"), [
    ("CentOS", "7.6.1810", "centos7.6"),
    ("Ubuntu", "22.04", "ubuntu22.04"),
    ("openEuler", "22.03", "openeuler22.03"),
    ("Debian", "12", "debian12"),
    ("Kylin Linux Advanced Server", "V10", None),  # no SP in the facts: not guessed
    ("CentOS", "7.9.2009", None),
    ("Fedora", "40", None),
])
def test_os_id_for_ansible_facts(m, distribution, version, expected):
    assert os_id_for(distribution, version, m) == expected
