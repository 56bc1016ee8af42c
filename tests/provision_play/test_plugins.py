"""The playbooks' lookup and filter plugins, called directly (no Ansible run, no simulator)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError, AnsibleLookupError

from ascend_ready.provision import packages as pk
from ascend_ready.provision import resolver as rv

PLUGINS = Path(__file__).resolve().parents[2] / "playbooks" / "plugins"


def _load(kind: str, name: str):
    spec = importlib.util.spec_from_file_location(f"h7_{kind}_{name}", PLUGINS / kind / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


stack = _load("lookup", "ascend_stack")
packages = _load("lookup", "ascend_packages")
filters = _load("filter", "ascend")


def test_stack_id_resolves_like_the_cli():
    got = stack.resolve_stack("cann-8.2.RC1-torch-2.5.1", product="910b", os="centos7.6", arch="x86_64")
    want = rv.resolve(cann="8.2.RC1", torch="2.5.1", product="910b", os="centos7.6", arch="x86_64")
    assert got == want.model_dump(mode="json")
    assert got["packages"]["driver"] == "Ascend-hdk-910b-npu-driver_25.0.rc1.1_linux-x86-64.run"
    assert got["layout"]["name"] == "legacy"


def test_stack_id_and_a_contradicting_pin_are_refused():
    with pytest.raises(AnsibleLookupError, match=r"torch: pinned 2.9.0 but stack cann-8.2.RC1-torch-2.5.1 "):
        stack.resolve_stack("cann-8.2.RC1-torch-2.5.1", torch="2.9.0")


def test_unknown_stack_id_is_refused_with_an_example():
    with pytest.raises(AnsibleLookupError, match=r"unknown stack id 'cann-1.0-torch-0.1'.*hint: ids are"):
        stack.resolve_stack("cann-1.0-torch-0.1")


def test_too_old_glibc_is_refused_by_the_matrix():
    with pytest.raises(AnsibleLookupError, match=r"invalid Ascend stack: no stack fits.*glibc 2.28 but"):
        stack.resolve_stack(cann="8.5.0", os="centos7.6", arch="x86_64")


def test_new_layout_for_cann_85():
    got = stack.resolve_stack(cann="8.5.0", torch="2.9.0", product="910b", arch="aarch64")
    assert got["layout"]["name"] == "cann-8.5"
    assert got["packages"]["ops"] == "Ascend-cann-910b-ops_8.5.0_linux-aarch64.run"


@pytest.mark.parametrize(("installed", "wanted", "action"), [
    ("", "25.0.rc1.1", "install"),
    ("none", "25.0.rc1.1", "install"),
    ("25.0.rc1.1", "25.0.RC1.1", "skip"),
    ("24.1.rc2", "25.0.rc1.1", "upgrade"),
    ("25.0.rc1", "25.0.rc1.1", "upgrade"),
    ("8.2.RC1", "8.1.RC1", "downgrade"),
    ("7.7.0.1.231", "7.3.0.1.231", "downgrade"),
])
def test_install_action(installed, wanted, action):
    assert filters.install_action(installed, wanted) == action


def test_install_action_refuses_garbage():
    with pytest.raises(AnsibleFilterError, match="bad version"):
        filters.install_action("25.x!", "25.0.rc1")


def test_key_values_read_version_files():
    text = "Version=24.1.rc1\nascendhal_version=7.35.19\n# comment\npath='/usr/local/Ascend'\nnoise\n"
    assert filters.key_values(text) == {"Version": "24.1.rc1", "ascendhal_version": "7.35.19",
                                        "path": "/usr/local/Ascend"}
    assert filters.key_values(None) == {}


@pytest.mark.parametrize(("distribution", "version", "os_id"), [
    ("CentOS", "7.6", "centos7.6"),
    ("Ubuntu", "22.04", "ubuntu22.04"),
    ("openEuler", "22.03", "openeuler22.03"),
    ("Kylin Linux Advanced Server", "V10", "kylinv10sp2"),
    ("Fedora", "40", ""),
])
def test_os_id(distribution, version, os_id):
    assert stack.os_id(distribution, version) == os_id


def test_nodes_resolve_in_one_call_and_fail_alone():
    nodes = {
        "node01": {"stack": "cann-8.2.RC1-torch-2.5.1", "distribution": "Kylin Linux Advanced Server",
                   "distribution_version": "V10", "product": "910b", "arch": "x86_64"},
        "node02": {"torch": "2.9.0", "distribution": "CentOS", "distribution_version": "7.6",
                   "product": "910b", "arch": "x86_64"},
        "node03": {"os": "ubuntu22.04", "distribution": "Fedora", "distribution_version": "40",
                   "stack": "cann-8.2.RC1-torch-2.5.1", "product": "910_93", "arch": "aarch64"},
        "node04": {"distribution": "Fedora", "distribution_version": "40", "product": "910b",
                   "arch": "x86_64"},
    }
    got = stack.resolve_nodes(nodes)
    assert got["node01"] == {"os": "kylinv10sp2", "stack": stack.resolve_stack(
        "cann-8.2.RC1-torch-2.5.1", product="910b", os="kylinv10sp2", arch="x86_64")}
    assert got["node02"]["os"] == "centos7.6"
    assert got["node02"]["error"].startswith("invalid Ascend stack: no stack fits: os centos7.6 (glibc 2.17)")
    assert got["node03"]["os"] == "ubuntu22.04"  # the stack_os pin wins over the facts
    assert got["node03"]["stack"]["product"] == "910_93"
    assert got["node04"]["os"] == ""  # untracked OS: the role's assert names it


def test_install_plan_reads_several_version_files_at_once():
    grep = ("/a/driver/version.info:Version=24.1.rc2\n/a/driver/version.info:ascendhal_version=7.35.19\n"
            "/a/firmware/version.info:Version=7.7.0.1.231\n/c/ascend_toolkit_install.info:version=8.2.RC1\n")
    files = {"driver": "/a/driver/version.info", "firmware": "/a/firmware/version.info",
             "toolkit": "/c/ascend_toolkit_install.info", "nnal": "/c/missing.info"}
    wanted = {"firmware": "7.7.0.1.231", "toolkit": "8.5.0", "nnal": "8.2.RC1"}
    plan = filters.install_plan(grep, files, wanted)
    assert plan == {"driver": {"installed": "24.1.rc2", "action": ""},
                    "firmware": {"installed": "7.7.0.1.231", "action": "skip"},
                    "toolkit": {"installed": "8.2.RC1", "action": "upgrade"},
                    "nnal": {"installed": "", "action": "install"}}


def test_check_failures_per_node():
    report = {"hosts": [{"name": "node01", "reachable": True}, {"name": "node02", "reachable": True},
                        {"name": "node03", "reachable": False, "error": "ssh: connection refused"}],
              "results": [
                  {"host": "node01", "check_id": "hccl.link_up", "status": "fail", "message": "dev 2 down"},
                  {"host": "node01", "check_id": "os.thp", "status": "warn", "message": "madvise"},
                  {"host": "node02", "check_id": "os.thp", "status": "pass", "message": ""}]}
    text = json.dumps(report)
    hosts = ["node01", "node02", "node03", "node04"]
    assert filters.check_failures(text, hosts) == {
        "node01": ["hccl.link_up: dev 2 down"], "node02": [],
        "node03": ["unreachable: ssh: connection refused"], "node04": ["unreachable: not in the report"]}
    assert filters.check_failures(text, hosts, strict=True)["node01"] == [
        "hccl.link_up: dev 2 down", "os.thp: madvise"]
    with pytest.raises(AnsibleFilterError, match="not an ascend-check JSON report"):
        filters.check_failures("Traceback ...", hosts)


def test_npu_product_reads_lspci_with_the_checks_parser():
    # a garbled line is an error naming it, not an NPU product nobody saw
    with pytest.raises(AnsibleFilterError, match=r"ascend_npu_product: .*line 1"):
        filters.npu_product("not lspci output\n")
    assert filters.npu_product("") == ""


def test_hccn_settings_reads_hccn_tool_output_with_the_checks_parsers():
    # as hccn_tool prints them (sim/render/hccn.py renders these shapes from the captures it cites)
    read = ("conf 644 root:root 0123abcd\n"
            "@@hccn 0 ip\nipaddr:192.168.100.101\nnetmask:255.255.255.0\n"
            "@@hccn 0 gateway\ndefault gateway:192.168.100.1, Iface:eth0\n"
            "@@hccn 0 netdetect\nnetdetect address: 192.168.100.1\n"
            "@@hccn 1 ip\nGet ipconf failed, because no ip was preset there!\n"
            "@@hccn 1 gateway\ndefault gateway:, Iface:eth1\n"
            "@@hccn 1 netdetect\nnetdetect address: \n"
            "@@hccn 2 ip\n@@hccn 2 gateway\nerror: garbled\n@@hccn 2 netdetect\n")
    assert filters.hccn_settings(read) == [
        "conf 644 root:root 0123abcd",
        "0 192.168.100.101 255.255.255.0 192.168.100.1 192.168.100.1",
        "1    ",
        "2    ",  # no hccn_tool output: nothing is known, so every value differs from what is wanted
    ]
    # swapped values are not a setting that matches: the parser refuses them, so the device is set again
    swapped = "@@hccn 0 ip\nipaddr:255.255.255.0\nnetmask:192.168.100.101\n"
    assert filters.hccn_settings(swapped) == ["0    "]


def test_npu_product_from_lspci():
    lspci = ("00:00.0 0604: 19e5:a120 (rev 21)\n"
             "c1:00.0 1200: 19e5:d802 (rev 20)\n"
             "c2:00.0 1200: 19e5:d802 (rev 20)\n")
    assert filters.npu_product(lspci) == "910b"
    assert filters.npu_product("9d:00.0 1200: 19e5:d803 (rev 20)\n") == "910_93"
    assert filters.npu_product("00:00.0 0604: 19e5:a120 (rev 21)\n") == ""
    with pytest.raises(AnsibleFilterError, match="mixed NPU products"):
        filters.npu_product(lspci + "01:00.0 1200: 19e5:d500 (rev 23)\n")


def _package_dir(tmp_path: Path) -> Path:
    src = tmp_path / "pkgs"
    (src / "wheelhouse").mkdir(parents=True)
    files = {
        "Ascend-hdk-910b-npu-driver_25.5.1_linux-aarch64.run": b"driver",
        "wheelhouse/torch-2.9.0-cp311-cp311-manylinux_2_28_aarch64.whl": b"t311",
        "wheelhouse/torch-2.9.0-cp310-cp310-manylinux_2_28_aarch64.whl": b"t310",
        "wheelhouse/torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl": b"tx86",
        "wheelhouse/pip-23.2.1-py3-none-any.whl": b"pip",
    }
    for name, data in files.items():
        (src / name).write_bytes(data)
    (src / "SHA256SUMS").write_text("".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n"
                                            for n, d in files.items()))
    return src


def test_packages_verified_and_wheels_picked_for_python_and_arch(tmp_path):
    src = _package_dir(tmp_path)
    cache = str(tmp_path / "cache.json")
    got = packages.verify(["Ascend-hdk-910b-npu-driver_25.5.1_linux-aarch64.run", "wheel:torch==2.9.0",
                           "wheel:pip"], str(src), cache_file=cache, python="3.11", arch="aarch64")
    assert sorted(got) == ["Ascend-hdk-910b-npu-driver_25.5.1_linux-aarch64.run",
                           "wheelhouse/pip-23.2.1-py3-none-any.whl",
                           "wheelhouse/torch-2.9.0-cp311-cp311-manylinux_2_28_aarch64.whl"]
    any_python = packages.verify(["wheel:torch==2.9.0"], str(src), cache_file=cache, arch="aarch64")
    assert len(any_python) == 2


def test_corrupt_missing_and_unlisted_packages_are_named(tmp_path):
    src = _package_dir(tmp_path)
    cache = str(tmp_path / "cache.json")
    driver = "Ascend-hdk-910b-npu-driver_25.5.1_linux-aarch64.run"
    packages.verify([driver], str(src), cache_file=cache)  # cached digest of the good file
    (src / driver).write_bytes(b"driveR")  # same size: the cache must notice the new mtime
    os.utime(src / driver, ns=(1, 1))
    with pytest.raises(AnsibleLookupError, match=rf"package {driver} is corrupt: sha256 [0-9a-f]{{64}}, but"):
        packages.verify([driver], str(src), cache_file=cache)
    (src / driver).unlink()
    with pytest.raises(AnsibleLookupError, match=rf"package {driver} is missing from"):
        packages.verify([driver], str(src), cache_file=cache)
    with pytest.raises(AnsibleLookupError, match=r"package other\.run is not listed in"):
        packages.verify(["other.run"], str(src), cache_file=cache)
    with pytest.raises(AnsibleLookupError, match=r"no torch 2\.1\.0 wheel for CPython 3\.11 on aarch64"):
        packages.verify(["wheel:torch==2.1.0"], str(src), cache_file=cache, python="3.11", arch="aarch64")


def test_a_garbled_manifest_line_is_named(tmp_path):
    src = _package_dir(tmp_path)
    (src / "SHA256SUMS").write_text("abc  file.run\n")
    with pytest.raises(AnsibleLookupError, match=r"SHA256SUMS line 1 is not"):
        packages.verify(["file.run"], str(src), cache_file=str(tmp_path / "c.json"))


def _wheelhouse(tmp_path, names) -> Path:
    src = tmp_path / "wheels"
    (src / "wheelhouse").mkdir(parents=True)
    for name in names:
        (src / "wheelhouse" / name).write_bytes(name.encode())
    (src / "SHA256SUMS").write_text("".join(f"{hashlib.sha256(n.encode()).hexdigest()}  wheelhouse/{n}\n"
                                            for n in names))
    return src


#: a wheelhouse as `pip download` fills it for two stacks and both arches (PyPI's file names) -> the
#: (Python, arch, glibc) nodes of the test below it fits
X86_311 = {("3.11", "x86_64", "2.35"), ("3.11", "x86_64", "2.17")}
ARM_311 = {("3.11", "aarch64", "2.28")}
ANY = X86_311 | ARM_311 | {("3.7", "x86_64", "2.17")}
X86 = {n for n in ANY if n[1] == "x86_64"}
WHEELHOUSE = {
    "pip-23.2.1-py3-none-any.whl": ANY,
    "filelock-3.13.1-py3-none-any.whl": ANY,
    "six-1.16.0-py2.py3-none-any.whl": ANY,
    "psutil-6.0.0-cp36-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": X86,
    "psutil-6.0.0-cp36-abi3-manylinux_2_17_aarch64.manylinux2014_aarch64.whl": ARM_311,
    "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": X86_311,
    "numpy-1.26.4-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl": ARM_311,
    "numpy-1.21.6-cp37-cp37m-manylinux_2_12_x86_64.manylinux2010_x86_64.whl": {("3.7", "x86_64", "2.17")},
    "numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": set(),
    "scipy-1.14.0-cp311-cp311-manylinux_2_28_x86_64.whl": {("3.11", "x86_64", "2.35")},  # glibc >= 2.28
    "numpy-2.1.0-cp311-cp311-musllinux_1_2_x86_64.whl": set(),
    "torch-2.5.1+cpu-cp311-cp311-linux_x86_64.whl": X86_311,
    "torch-2.9.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl": set(),  # another stack's torch: not staged
    "torch-2.5.1-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl": ARM_311,
}


@pytest.mark.parametrize("node", sorted(ANY), ids="-".join)
def test_python_env_stages_every_wheel_that_fits_the_node(tmp_path, node):
    python, arch, glibc = node
    src = _wheelhouse(tmp_path, WHEELHOUSE)
    terms = ["wheel:pip", "wheel:torch==2.5.1"] if python == "3.11" else ["wheel:pip"]
    files, problems = packages.check(terms, str(src), cache_file=str(tmp_path / "c.json"), python=python,
                                     arch=arch, glibc=glibc, fitting_wheels=True)
    assert problems == []
    assert set(files) == {f"wheelhouse/{n}" for n, fits in WHEELHOUSE.items() if node in fits}
    # the package list's own judgement (one function serves both)
    assert set(pk.node_wheels(files, python, arch, glibc)) == set(files)


def test_the_aarch64_stack_names_the_aarch64_packages(tmp_path):
    got = stack.resolve_stack("cann-8.2.RC1-torch-2.5.1", product="910b", os="kylinv10sp3", arch="aarch64")
    runs = [t for t in packages.stack_terms(got, requirements=[]) if not t.startswith("wheel:")]
    assert runs and all("aarch64" in name for name in runs if "firmware" not in name), runs
    src = _wheelhouse(tmp_path, WHEELHOUSE)
    files = packages.verify(["wheel:torch==2.5.1"], str(src), cache_file=str(tmp_path / "c.json"),
                            python="3.11", arch="aarch64")
    assert list(files) == [
        "wheelhouse/torch-2.5.1-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"]


def test_cann_requirements_for_the_nodes_python_come_from_the_package_list():
    defaults = yaml.safe_load((PLUGINS.parent / "roles/python_env/defaults/main.yml").read_text())
    role = defaults["python_env_cann_requirements"]
    cann = filters.FilterModule().filters()["ascend_cann_requirements"]
    row = stack.resolve_stack("cann-8.2.RC1-torch-2.5.1", product="910b", arch="x86_64")
    for python in ("3.7", "3.11", "3.12", "3.13", "3.14"):
        assert cann(role, python) == pk.cann_requirements(python)
        assert [w.requirement for w in pk.wheel_requirements(row, python=python, training=False)][3:] == cann(
            role, python)
    assert cann(role, "3.11")[0] == "numpy>=1.19.2,<2.0" and cann(role, "3.13")[0] == "numpy>=1.19.2"
    # an inventory's own list gets the same rule
    assert cann(["numpy<2,>=1.24", "scipy"], "3.13") == ["numpy>=1.24", "scipy"]
    assert cann(["numpy<2,>=1.24"], "3.12") == ["numpy<2,>=1.24"]



def test_node_profile_is_what_the_controller_judges_the_node_by(tmp_path):
    from ascend_ready.checks.profile import load_profile

    recorded = filters.FilterModule().filters()["ascend_node_profile"]
    # no ascend_check_profile: ascend-check's default, and a bundled name as ascend-check loads it
    assert load_profile(_written(tmp_path / "a", recorded(""))) == load_profile(None)
    assert load_profile(_written(tmp_path / "b", recorded("atlas-800t-a3"))) == load_profile("atlas-800t-a3")
    # an operator's file with group overrides: the node's groups applied, as ascend-check -i applies them
    own = load_profile("atlas-800t-a2").model_dump(mode="json")
    own.update(min_disk_free_gb=7, overrides={"lab": {"min_disk_free_gb": 3}})
    spec = _written(tmp_path / "own.yml", yaml.safe_dump(own))
    in_groups = [load_profile(_written(tmp_path / name, recorded(spec, groups))).min_disk_free_gb
                 for name, groups in (("c", ["ascend_nodes"]), ("d", ["ascend_nodes", "lab"]))]
    assert in_groups == [7, 3]
    with pytest.raises(AnsibleFilterError, match="no hardware profile 'atlas-9000'"):
        recorded("atlas-9000")
    # the training user and venv the controller resolves from the inventory go in too (issue 25): the
    # node's own `ascend-check node` judges them, not root and python3
    venv = "/home/ascend/venvs/ascend-cann-8.2.RC1-torch-2.6.0/bin/python"
    named = load_profile(_written(tmp_path / "e", recorded("", [], training_user="ascend", python=venv)))
    assert (named.training_user, named.python) == ("ascend", venv)
    assert named.model_copy(update={"training_user": "root", "python": "python3"}) == load_profile(None)


def _written(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)
