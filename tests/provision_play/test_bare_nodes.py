"""site.yml on bare nodes, the first thing a careful user runs on a new rack: check mode with diff runs
through on each OS family, lists every change the real run would make and changes nothing; the same on a
node reporting aarch64 (Kunpeng) picks the aarch64 packages; python_env stages every wheel of the
wheelhouse that fits the node, so pip installing offline finds the dependencies too.

One cluster for the module (Ubuntu 22.04, Kylin V10, CentOS 7.6), bare but for net-tools; the real run
of python_env comes last.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ascend_ready.provision import matrix as mx
from ascend_ready.provision import packages as pk
from ascend_ready.provision import resolver as rv

from .conftest import STACK, sim_fleet

# each play here is a minute or more on 2 cores: make test-e2e (tests/README.md says who runs it, when)
pytestmark = [pytest.mark.sim, pytest.mark.e2e]

PROFILES = "a2-ubuntu2204,a2-kylinv10,a2-centos76"
NODES = ("node01", "node02", "node03")
GLIBC = {"node01": "2.35", "node02": "2.28", "node03": "2.17"}
# What a real run would leave on a node: the run user, the stack, the staged packages, the tuning files,
# the training user's environment, the reboot marker. None of it may appear after check mode (Ansible's
# own ~/.ansible/tmp of the users it runs as is no change of the node's setup).
WATCHED = ("getent passwd HwHiAiUser; getent group HwHiAiUser; id -nG ascend; "
           "ls -a /usr/local /var/cache /etc/sysctl.d /etc/security/limits.d /etc/tmpfiles.d "
           "/etc/apt/sources.list.d /etc/yum.repos.d 2>/dev/null; ls /home/ascend; "
           "ls /run/ascend-ready.reboot-required 2>&1; "
           "md5sum /home/ascend/.bashrc /etc/hccn.conf 2>/dev/null; "
           "cat /sys/kernel/mm/transparent_hugepage/enabled; "
           "sysctl -n kernel.numa_balancing net.ipv4.ip_local_reserved_ports")
#: wheels a real wheelhouse holds besides torch's (names as PyPI publishes them) -> the nodes they fit
EXTRA_WHEELS = {
    "filelock-3.13.1-py3-none-any.whl": NODES,
    "pathlib2-2.3.7.post1-py2.py3-none-any.whl": NODES,
    "psutil-6.0.0-cp36-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": NODES,
    "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": NODES,
    "scipy-1.14.0-cp311-cp311-manylinux_2_28_x86_64.whl": ("node01", "node02"),  # glibc >= 2.28 only
    "numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": (),  # another Python
    "numpy-1.26.4-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl": (),  # another arch
    "numpy-2.1.0-cp313-cp313-musllinux_1_1_x86_64.whl": (),  # musl
}
#: a real, installable dependency (the stand-in torch requires nothing): python_env must stage it
DEP = "ascend_sim_dep-1.0-py3-none-any.whl"


def _real_wheel(path: Path) -> None:
    """A minimal pure-Python wheel pip installs (module ascend_sim_dep)."""
    dist = "ascend_sim_dep-1.0.dist-info"
    files = {"ascend_sim_dep.py": "VERSION = '1.0'\n",
             f"{dist}/METADATA": "Metadata-Version: 2.1\nName: ascend-sim-dep\nVersion: 1.0\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: ascend-ready-tests\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    record = []
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            data = text.encode()
            zf.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        zf.writestr(f"{dist}/RECORD", "\n".join([*record, f"{dist}/RECORD,,"]) + "\n")


@pytest.fixture(scope="module")
def fleet(fleet_factory):
    f = fleet_factory(PROFILES, 3)
    # The wheelhouse of a real package directory: torch's and CANN's dependencies next to torch.
    for name in EXTRA_WHEELS:
        (f.packages / "wheelhouse" / name).write_bytes(b"not installed by these tests: " + name.encode())
    _real_wheel(f.packages / "wheelhouse" / DEP)
    pk.write_manifest(f.packages)
    f.group_vars = sim_fleet.group_vars(f.packages, STACK, run_dir=f.cluster.run_dir)
    f.host_vars = sim_fleet.host_vars([vars(n) for n in f.cluster.nodes])
    f.write_inventory(f.group_vars, f.host_vars)
    return f


def assert_untouched(fleet, before: dict[str, str], nodes=NODES) -> None:
    for node in nodes:
        now = fleet.sh(node, WATCHED, check=False)
        assert now == before[node], f"{node} changed:\n" + "\n".join(
            difflib.unified_diff(before[node].splitlines(), now.splitlines(), "before", "after", lineterm=""))


@pytest.fixture(scope="module")
def untouched(fleet):
    """What the bare nodes looked like before any check-mode run."""
    return {n: fleet.sh(n, WATCHED, check=False) for n in NODES}


_HEADER = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(.*?)\] \**$", re.M)


def _said(output: str, task: str, node: str) -> list[str]:
    """The msg texts, loop item labels or bare "changed" that tasks named like `task` reported as changed
    for `node` (check mode's list of what the real run would do)."""
    out = []
    parts = _HEADER.split(output)
    for head, body in zip(parts[1::2], parts[2::2], strict=True):
        if task not in head:
            continue
        for m in re.finditer(rf"^changed: \[{node}\](?: => (.*?))?$\n((?:[ \t]+\S.*\n)*)", body, re.M):
            item = re.match(r"\(item=(.*)\)", (m.group(1) or "").strip())
            msg = re.search(r"msg: (.*)", m.group(2), re.S)
            out.append(item.group(1) if item else " ".join(msg.group(1).split()) if msg else "changed")
    return out


def test_check_mode_on_bare_nodes_lists_every_change_and_changes_nothing(fleet, untouched):
    result = fleet.play("--check", "--diff")
    assert result.rc == 0, result.output[-4000:]
    assert not any(result.failed(n) for n in NODES), result.output[-4000:]
    assert all(result.changed(n) > 0 for n in NODES)
    out = result.output
    for node in NODES:
        row = next(s for s in mx.load_matrix().stacks if s.id == STACK)
        want = rv.resolve(cann=row.cann, torch=row.torch, product="910b", arch="x86_64")
        # The package prerequisites (per OS family), the accounts, the tuning, each installer, the venv,
        # the device NICs and the reboot: every step of the real run shows up as a change.
        prereqs = _said(out, "Show the prerequisites the package manager would install", node)
        assert re.match(r"'?(apt|dnf|yum) would install: .*dkms", prereqs[0]), prereqs
        assert _said(out, "npu_user : Ensure the NPU run group exists", node)
        assert _said(out, "Show that the training user would join the NPU group", node) == [
            "ascend would be added to the group HwHiAiUser"]
        assert "THP enabled=never" in _said(out, "Show the runtime settings the real run would apply", node)
        assert _said(out, "Show the driver installer the real run would run", node) == [
            f"would run {want.packages.driver} (install {want.driver})"]
        assert _said(out, "Show the firmware installer the real run would run", node) == [
            f"would run {want.packages.firmware} (install {want.firmware})"]
        for component in ("toolkit", "ops", "nnal"):
            assert _said(out, f"Show the installer the real run would run for {component}", node)
        assert _said(out, "Show the requirements the real run would install", node)
        assert len(_said(out, "Show the device NIC settings the real run would apply", node)) == 8
        assert _said(out, "Mark the node as needing a reboot", node) == ["changed"]  # the handler, notified
    assert out.count("+* hard nofile 1048576") == len(NODES)  # the limits file, as a diff
    assert out.count("+address_7=192.168.7.") == len(NODES)  # /etc/hccn.conf, as a diff
    assert_untouched(fleet, untouched)
    for node in NODES:
        root = fleet.root(node)
        assert not (root / "usr/local/Ascend").exists() and not (root / "var/cache/ascend-ready").exists()
        assert "HwHiAiUser" not in fleet.read(node, "/etc/passwd")


def test_check_mode_stages_every_wheel_that_fits_the_node(fleet, untouched):
    result = fleet.play("--check", "--tags", "python_env")
    assert result.rc == 0, result.output[-4000:]
    for node in NODES:
        staged = set(_said(result.output, "ascend_common : Ensure the packages are staged on the node", node))
        extra = {f"wheelhouse/{n}" for n, fits in EXTRA_WHEELS.items() if node in fits}
        assert {s for s in staged if s.split("/")[-1] in EXTRA_WHEELS} == extra, (node, GLIBC[node])
        assert f"wheelhouse/{DEP}" in staged
        assert any(s.startswith("wheelhouse/torch-2.5.1-cp311-") for s in staged)
    assert_untouched(fleet, untouched)


def test_a_node_reporting_aarch64_gets_the_aarch64_packages(fleet, tmp_path, untouched):
    arm = tmp_path / "packages-aarch64"
    subprocess.run([sys.executable, "-m", "ascend_ready.sim.harness.build_packages", str(arm),
                    "--stack", STACK, "--arch", "aarch64"], check=True, capture_output=True)
    want = rv.resolve(cann="8.2.RC1", torch="2.5.1", product="910b", arch="aarch64")
    assert want.packages.driver.endswith("_linux-aarch64.run")
    result = fleet.play("--check", "--skip-tags", "os_prereqs", "--limit", "node02",
                        "-e", "stack_arch=aarch64", "-e", f"stack_package_source={arm}")
    assert result.rc == 0, result.output[-4000:]
    out = result.output
    assert re.search(r"stack cann-8\.2\.RC1-torch-2\.5\.1 for kylinv10\S* aarch64 910b", out), out[-4000:]
    assert _said(out, "Show the driver installer the real run would run", "node02") == [
        f"would run {want.packages.driver} (install {want.driver})"]
    for component, name in (("toolkit", want.packages.toolkit), ("ops", want.packages.ops),
                            ("nnal", want.packages.nnal)):
        assert name.endswith("_linux-aarch64.run")
        said = _said(out, f"Show the installer the real run would run for {component}", "node02")
        assert said[0].startswith(f"would run /var/cache/ascend-ready/packages/{name} ")
    wheels = [s for s in _said(out, "Ensure the packages are staged on the node", "node02")
              if s.startswith("wheelhouse/torch")]
    assert wheels and all(w.endswith("_aarch64.whl") for w in wheels), wheels
    assert "x86_64" not in " ".join(_said(out, "Ensure the packages are staged on the node", "node02"))
    assert_untouched(fleet, untouched, ("node02",))


def test_python_env_installs_offline_with_the_dependencies_from_the_staged_wheelhouse(fleet):
    # The real run, on one node: CANN's list here is the one real dependency; before, only pip, torch
    # and torch_npu were staged and pip --no-index could not find it.
    fleet.write_inventory({**fleet.group_vars, "python_env_cann_requirements": ["ascend-sim-dep>=1.0"]},
                          fleet.host_vars)
    try:
        result = fleet.play("--tags", "python_env", "--limit", "node01")
    finally:
        fleet.write_inventory(fleet.group_vars, fleet.host_vars)
    assert result.rc == 0, result.output[-4000:]
    venv = f"/home/ascend/venvs/ascend-{STACK}/bin/python"
    assert fleet.sh("node01", f"{venv} -c 'import ascend_sim_dep, torch; print(ascend_sim_dep.VERSION)'"
                    ).strip() == "1.0"
    assert (fleet.root("node01") / f"var/cache/ascend-ready/packages/wheelhouse/{DEP}").is_file()
