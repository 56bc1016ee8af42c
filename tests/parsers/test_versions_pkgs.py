"""Version files (driver, firmware, CANN toolkit/nnae, /etc/ascend_install.info) and Python packages."""

from __future__ import annotations

import pytest

from ascend_ready.checks.parsers.python_pkgs import (
    TORCH_VERSIONS_PROBE,
    major_minor,
    parse_pip_list,
    parse_pip_show,
    parse_torch_versions,
)
from ascend_ready.checks.parsers.version_info import (
    parse_ascend_install_info,
    parse_driver_version_info,
    parse_firmware_version_info,
    parse_nnae_install_info,
    parse_toolkit_install_info,
)
from ascend_ready.errors import ParseError


def test_driver_version_info(sample):
    info = parse_driver_version_info(sample("driver-version.info_23.0.7_mindcluster-faultdiag.txt"))
    assert (info.version, info.package_version) == ("23.0.7", "23.0.7")
    assert info.innerversion == "V100R001C15SPC012B220"
    assert info.compatible_version == ["V100R001C29", "V100R001C30", "V100R001C13", "V100R001C15"]
    assert [(r.low, r.high) for r in info.compatible_version_fw] == [("7.0.0", "7.1.99")]


def test_firmware_version_info(sample):
    info = parse_firmware_version_info(sample("firmware-version.info_7.1.0.11.220_mindcluster-faultdiag.txt"))
    assert (info.version, info.package_version) == ("7.1.0.11.220", "23.0.7")
    assert [(r.low, r.high) for r in info.compatible_version_drv] == [
        ("23.0.rc3", "23.0.rc3."), ("23.0.0", "23.0.0.")]


@pytest.mark.parametrize(("name", "version", "layout", "install_dir"), [
    ("ascend_toolkit_install.info_8.0.0_vllm-ascend-362.txt", "8.0.0", "ascend-toolkit",
     "/usr/local/Ascend/ascend-toolkit/8.0.0"),
    ("ascend_toolkit_install.info_8.2.RC1_vllm-ascend-2666.txt", "8.2.RC1", "ascend-toolkit",
     "/usr/local/Ascend/ascend-toolkit/8.2.RC1"),
    ("ascend_toolkit_install.info_8.5.0-newlayout_mindcluster-doc.txt", "8.5.0", "cann",
     "/usr/local/Ascend/cann-8.5.0"),
])
def test_toolkit_install_info_layouts(sample, name, version, layout, install_dir):
    info = parse_toolkit_install_info(sample(name))
    assert (info.package_name, info.version, info.arch) == ("Ascend-cann-toolkit", version, "aarch64")
    assert (info.layout, info.install_dir) == (layout, install_dir)


def test_toolkit_85_path_without_arch_suffix(sample):
    # the 8.5.0 vendor-doc file with `path=` as CANN 8.5 also writes it (no `<arch>-linux`), and the 8.0.0
    # capture with the `arm64-linux` suffix of old CANN 5.x installs: real files, one line edited each
    doc = sample("ascend_toolkit_install.info_8.5.0-newlayout_mindcluster-doc.txt")
    info = parse_toolkit_install_info(doc.replace("path=/usr/local/Ascend/cann-8.5.0/aarch64-linux",
                                                  "path=/usr/local/Ascend/cann-8.5.0"))
    assert (info.layout, info.install_dir) == ("cann", "/usr/local/Ascend/cann-8.5.0")
    old = parse_toolkit_install_info(sample("ascend_toolkit_install.info_8.0.0_vllm-ascend-362.txt").replace(
        "8.0.0/aarch64-linux", "8.0.0/arm64-linux"))
    assert (old.layout, old.install_dir) == ("ascend-toolkit", "/usr/local/Ascend/ascend-toolkit/8.0.0")


def test_nnae_from_collection(sample):
    text = sample("collection_8npu_23.0.7_mindcluster-faultdiag-worker0-before.txt")
    block = text.split("ascend_nnae_install.info\n", 1)[1].split("\n\n", 1)[0]
    info = parse_nnae_install_info(block)
    assert (info.version, info.arch, info.layout) == ("8.0.RC3", "x86_64", "nnae")
    assert info.compatible_version == [["V100R001C13", "V100R001C19"], ["V100R001C30"]]
    with pytest.raises(ParseError, match="not a Ascend-cann-toolkit package"):
        parse_toolkit_install_info(block)


def test_version_file_garbage_names_line():
    with pytest.raises(ParseError) as err:
        parse_driver_version_info("Version=23.0.7\ncompatible_version_fw=[7.0.0,7.1.99\n")
    assert err.value.line_no == 2
    with pytest.raises(ParseError, match="missing 'Version='"):
        parse_driver_version_info("package_version=23.0.7\n")


def test_ascend_install_info():
    info = parse_ascend_install_info("Driver_Install_Type=full\nUserName=HwHiAiUser\nUserGroup=HwHiAiUser\n"
                                     "Driver_Install_Path_Param=/usr/local/Ascend\nDriver_Install_Status=complete\n")
    assert (info.user_name, info.driver_install_path, info.driver_install_status) == (
        "HwHiAiUser", "/usr/local/Ascend", "complete")


def test_pip_list_sample_with_command_echoes(sample):
    pkgs = parse_pip_list(sample("pip-list-torch-npu_mismatch_mindcluster-faultdiag.txt"))
    assert pkgs.packages == {"torch": "1.11.0", "torch-npu": "2.1.0.post8.dev20241009", "mindspore": "2.3.0"}
    assert pkgs.version("torch_npu") == "2.1.0.post8.dev20241009"


def test_pip_list_full_table_and_errors():
    pkgs = parse_pip_list("Package    Version      Editable project location\n---------- ------------ ----\n"
                          "torch      2.1.0\nascend-ready 0.1.0  /work/main\n")
    assert pkgs.version("ascend_ready") == "0.1.0" and pkgs.locations == {"ascend-ready": "/work/main"}
    assert parse_pip_list("torch==2.1.0\ntorch_npu==2.1.0.post10\n").version("torch-npu") == "2.1.0.post10"
    with pytest.raises(ParseError) as err:
        parse_pip_list("torch 2.1.0\ntorch_npu ???\n")
    assert err.value.line_no == 2


def test_pip_show():
    show = parse_pip_show("Name: torch-npu\nVersion: 2.1.0.post10\nSummary: Ascend adapter\n---\n"
                          "Name: torch\nVersion: 2.1.0\n")
    assert show.version("torch_npu") == "2.1.0.post10" and show.version("torch") == "2.1.0"


def test_torch_versions_probe_output():
    versions = parse_torch_versions("python=3.10.13\ntorch=2.1.0\ntorch_npu=2.1.0.post8.dev20241009\n"
                                    "trl=NOT_INSTALLED\n")
    assert versions.python == "3.10.13" and versions.version("torch") == "2.1.0"
    assert versions.version("trl") is None
    npu = versions.torch_npu
    assert (npu.torch_release, npu.post, npu.dev_date) == ("2.1.0", 8, "20241009")
    assert major_minor(versions.version("torch_npu")) == major_minor(versions.version("torch")) == "2.1"


def test_torch_versions_probe_runs_here_and_parses():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", TORCH_VERSIONS_PROBE], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    versions = parse_torch_versions(out)
    assert versions.python == ".".join(map(str, sys.version_info[:3]))
    assert versions.version("torch") is not None  # the dev env installs torch (CPU)
    assert versions.version("torch_npu") is None
