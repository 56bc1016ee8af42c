"""The stand-in wheels install with the pip of the node Pythons and import like the real ones."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

PYENV = Path("/root/.pyenv/versions")
IMPORT = "import torch, torch_npu; print(torch.__version__, torch_npu.__version__)"


def make_venv(base: Path, where: Path) -> list[str]:
    """A venv of `base`; returns the pip command that installs into it.

    Seeding pip into a 3.11 venv costs ~10 s, so there the base interpreter's pip (>= 22.3) installs
    into the venv with --python; Python 3.6 keeps the pip 18.1 its venv ships, the oldest pip we meet.
    """
    modern = not base.parent.parent.name.startswith("3.6")
    subprocess.run([str(base), "-m", "venv", *(["--without-pip"] if modern else []), str(where)], check=True,
                   capture_output=True, timeout=120)
    py = str(where / "bin" / "python")
    return [str(base), "-m", "pip", "--python", py] if modern else [py, "-m", "pip"]


def pip_install(pip: list[str], wheelhouse: Path, *reqs: str) -> subprocess.CompletedProcess:
    return subprocess.run([*pip, "install", "--no-index", "--find-links", str(wheelhouse),
                           "--disable-pip-version-check", *reqs], capture_output=True, text=True, timeout=180,
                          check=False)


def run_py(py: Path, code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=env, timeout=60,
                          check=False)


@pytest.mark.parametrize("version", ["3.6.15", "3.11.7"])
def test_wheels_install_and_need_the_cann_environment(version, pkgdir, tmp_path):
    base = PYENV / version / "bin" / "python"
    if not base.exists():
        pytest.skip(f"Python {version} is not installed under {PYENV}")
    pip = make_venv(base, tmp_path / "venv")
    py = tmp_path / "venv/bin/python"
    res = pip_install(pip, pkgdir / "wheelhouse", "torch==2.1.0", "torch_npu==2.1.0.post3")
    assert res.returncode == 0, res.stdout + res.stderr
    assert run_py(py, "import torch; print(torch.__version__)").stdout == "2.1.0\n"
    bare = run_py(py, IMPORT, env={"PATH": "/usr/bin:/bin"})
    assert bare.returncode == 1
    assert bare.stderr.splitlines()[-1] == (
        "ImportError: libhccl.so: cannot open shared object file: No such file or directory")
    assert "from torch_npu import _C" in bare.stderr
    libs = tmp_path / "cann/lib64"
    libs.mkdir(parents=True)
    for lib in ("libhccl.so", "libascendcl.so"):
        (libs / lib).touch()
    ok = run_py(py, IMPORT, env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": f"/opt/none:{libs}"})
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "2.1.0 2.1.0.post3\n"


def test_torch_npu_fails_against_another_torch_and_loads_after_set_env(pkgdir, node, tmp_path):
    base = PYENV / "3.11.7" / "bin" / "python"
    if not base.exists():
        pytest.skip("Python 3.11.7 is not installed")
    pip = make_venv(base, tmp_path / "venv")
    py = tmp_path / "venv/bin/python"
    res = pip_install(pip, pkgdir / "wheelhouse", "torch==2.8.0", "torch_npu==2.1.0.post3")
    assert res.returncode == 0, res.stdout + res.stderr
    # A real toolkit install provides the libraries; its set_env.sh puts them on LD_LIBRARY_PATH.
    assert node.run("Ascend-cann-toolkit_8.0.0_linux-x86_64.run", "--install", "--quiet").returncode == 0
    script = f'. "$ASCEND_SIM_FSROOT/usr/local/Ascend/ascend-toolkit/set_env.sh" && {py} -c "{IMPORT}"'
    mismatch = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=node.env, check=False)
    assert mismatch.returncode == 1
    last = mismatch.stderr.splitlines()[-1]
    assert last.startswith("ImportError: ") and "torch_npu/lib/libtorch_npu.so: undefined symbol: " in last
    assert last.endswith("(torch_npu 2.1.0.post3 is built for torch 2.1.0, found torch 2.8.0)")
    assert pip_install(pip, pkgdir / "wheelhouse", "torch==2.1.0").returncode == 0
    ok = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=node.env, check=False)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "2.1.0 2.1.0.post3\n"
    # the fused ops transformers imports from torch_npu wherever it is installed (4.53:
    # integrations/npu_flash_attention.py takes both; 4.55 on only npu_fusion_attention)
    ops = script.replace(IMPORT, "from torch_npu import npu_fusion_attention, npu_rotary_mul")
    res = subprocess.run(["sh", "-c", ops], capture_output=True, text=True, env=node.env, check=False)
    assert res.returncode == 0, res.stderr


def test_torch_npu_sees_the_nodes_davinci_devices(pkgdir, node, tmp_path):
    """device_count()/is_available() count the chips the driver exposes, as torch.npu and torch_npu.npu."""
    base = PYENV / "3.11.7" / "bin" / "python"
    if not base.exists():
        pytest.skip("Python 3.11.7 is not installed")
    pip = make_venv(base, tmp_path / "venv")
    res = pip_install(pip, pkgdir / "wheelhouse", "torch==2.1.0", "torch_npu==2.1.0.post3")
    assert res.returncode == 0, res.stdout + res.stderr
    assert node.run("Ascend-cann-toolkit_8.0.0_linux-x86_64.run", "--install", "--quiet").returncode == 0
    code = ("import torch, torch_npu; n = torch_npu.npu; "
            "print(n.is_available(), n.device_count(), torch.npu.device_count(), torch.npu.is_available())")
    set_env = "$ASCEND_SIM_FSROOT/usr/local/Ascend/ascend-toolkit/set_env.sh"
    script = f'. "{set_env}" && {tmp_path}/venv/bin/python -c "{code}"'

    def npus(**env) -> str:
        out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env={**node.env, **env},
                             check=False)
        assert out.returncode == 0, out.stderr
        return out.stdout

    chips = len(list(node.path("/dev").glob("davinci[0-9]*")))
    assert chips >= 2
    assert npus() == f"True {chips} {chips} True\n"
    assert npus(ASCEND_RT_VISIBLE_DEVICES="1,0") == "True 2 2 True\n"
    assert npus(ASCEND_RT_VISIBLE_DEVICES=f"0,{chips},1") == "True 1 1 True\n"  # stops at the invalid id
    (node.path("/dev") / "davinci1").unlink()  # davinci_manager is there and is not a chip
    assert npus() == f"True {chips - 1} {chips - 1} True\n"
    (node.path("/dev") / "hisi_hdc").unlink()  # the runtime reaches no chip without the managers
    assert npus() == "False 0 0 False\n"
    (node.path("/dev") / "hisi_hdc").touch()
    for dev in node.path("/dev").glob("davinci[0-9]*"):
        dev.unlink()
    assert npus() == "False 0 0 False\n"


def test_a_relabelled_torch_is_the_stacks_version_to_pip_and_torch_npu_but_tells_its_own(tmp_path):
    """How nodes that train get this machine's CPU torch under the stack's pin (build_packages --training):
    the distribution says the pin, the code still says what it is."""
    import sys
    import zipfile

    from ascend_ready.sim.packages import wheels

    real = wheels.build_wheel(tmp_path, "torch", "2.13.0+cpu", "3.11", "2.28", "x86_64",
                              wheels.torch_files("2.13.0+cpu"), summary="stands for the real CPU torch")
    (tmp_path / "out").mkdir()
    relabelled = wheels.relabel_wheel(real, tmp_path / "out", "2.6.0+cpu")
    assert relabelled.name == real.name.replace("-2.13.0+cpu-", "-2.6.0+cpu-")
    with zipfile.ZipFile(relabelled) as zf:
        names = zf.namelist()
        assert "torch-2.6.0+cpu.dist-info/METADATA" in names and not any("2.13.0" in n for n in names)
        assert "Version: 2.6.0+cpu\n" in zf.read("torch-2.6.0+cpu.dist-info/METADATA").decode()
        record = zf.read("torch-2.6.0+cpu.dist-info/RECORD").decode()
        assert "torch-2.6.0+cpu.dist-info/METADATA,sha256=" in record
    npu = wheels.build_wheel(tmp_path / "out", "torch_npu", "2.6.0", "3.11", "2.28", "x86_64",
                             wheels.torch_npu_files("2.6.0"), summary="stand-in")
    site = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                          "--target", str(site), str(relabelled), str(npu)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    libs = tmp_path / "lib"
    libs.mkdir()
    for lib in ("libhccl.so", "libascendcl.so"):
        (libs / lib).touch()
    code = IMPORT + "; from importlib.metadata import version; print(version('torch'))"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "LD_LIBRARY_PATH": str(libs)}
    ok = run_py(Path(sys.executable), code, env=env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "2.13.0+cpu 2.6.0\n2.6.0+cpu\n"


def test_a_relabelled_torch_carries_the_stacks_glibc_floor(tmp_path):
    """torch 2.1's real wheels are manylinux2014: relabelled for such a stack, this machine's manylinux_2_28
    CPU torch says so in its file name and WHEEL tags, which is what pip and os.glibc read on the node."""
    import zipfile

    from ascend_ready.sim.packages import wheels

    real = wheels.build_wheel(tmp_path, "torch", "2.13.0+cpu", "3.11", "2.28", "x86_64",
                              wheels.torch_files("2.13.0+cpu"), summary="stands for the real CPU torch")
    plat = "manylinux_2_17_x86_64.manylinux2014_x86_64"
    (tmp_path / "out").mkdir()
    relabelled = wheels.relabel_wheel(real, tmp_path / "out", "2.1.0+cpu", plat)
    assert relabelled.name == f"torch-2.1.0+cpu-cp311-cp311-{plat}.whl"
    with zipfile.ZipFile(relabelled) as zf:
        wheel = zf.read("torch-2.1.0+cpu.dist-info/WHEEL").decode()
    assert [ln for ln in wheel.splitlines() if ln.startswith("Tag:")] == [
        "Tag: cp311-cp311-manylinux_2_17_x86_64", "Tag: cp311-cp311-manylinux2014_x86_64"]
    assert wheels.glibc_floor(relabelled.name) == "2.17"
