"""Build the simulator's package source for the playbooks: fake `.run` installers, stand-in wheels, a pip
wheel, the standalone CPython archive old OSes need (from a local CPython, cached) and SHA256SUMS, named
exactly as provision/matrix.yml resolves them (one source of truth).

With --training, also what python_env installs for the training job (`ascend-matrix packages` lists it):
ascend-ready's own wheel built from this checkout, its training dependencies for this machine's Python
(pip download, cached), and this machine's CPU torch in place of the stand-in, under the stack's torch
version (sim.packages.wheels.relabel_wheel): simulated nodes train on CPU.

Usage: python -m ascend_ready.sim.harness.build_packages DEST --stack ID [--stack ID ...] [--arch x86_64]
       [--training]
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from ascend_ready.errors import SimError
from ascend_ready.provision import matrix as mx
from ascend_ready.provision import resolver as rv
from ascend_ready.provision.packages import no_training_set, training_requirements, write_manifest
from ascend_ready.provision.versions import version_key
from ascend_ready.sim.base import cache_root
from ascend_ready.sim.packages import build_package_dir, package_names, standalone_python, wheels
from ascend_ready.sim.packages.builder import Stack, toolbox_name

PRODUCTS = ("910b", "910_93")


def _stack(resolved: rv.ResolvedStack) -> Stack:
    return Stack.from_dict({
        "driver": resolved.driver, "firmware": resolved.firmware or resolved.driver, "cann": resolved.cann,
        "torch": resolved.torch, "torch_npu": resolved.torch_npu, "manylinux": resolved.manylinux,
        "python": sorted(set(resolved.python_versions) | {"3.11"}),
        "compatible_drivers": resolved.hdk_compatible, "nnal": resolved.cann})


def _pip_wheel(dest: Path) -> Path:
    """The pip wheel bundled with this interpreter's ensurepip (else one from the index), into dest."""
    bundled = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "ensurepip", "_bundled",
                                            "pip-*-py3-none-any.whl")))
    if bundled:
        shutil.copy2(bundled[-1], dest)
        return dest / os.path.basename(bundled[-1])
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest), "pip<25"],
                   check=True)
    return next(dest.glob("pip-*.whl"))


def _python_builds(dest: Path, m: mx.Matrix, stack_ids: list[str], arch: str) -> None:
    """The standalone CPython archive of each stack's Python (what CentOS 7.6 and Kylin V10 nodes resolve
    to); without a local CPython of it the archive is left out, and the package check names it missing."""
    for python in sorted({rv.preferred_python(s.python) for s in m.stacks if s.id in stack_ids}):
        build = rv.python_build_for(m, python, arch)
        if build is None:
            continue
        try:
            standalone_python.build_archive(dest, build.file, python)
        except SimError as exc:
            print(f"build_packages: {build.file} left out: {exc} ({exc.hint})", file=sys.stderr)


def _wheel_cache() -> Path:
    return cache_root() / "wheels"


def _run_pip(args: list[str], what: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        raise SimError(f"pip could not {what}: {' / '.join(tail)}",
                       hint="the training wheels come from the package index pip is configured with "
                            "(and the CPU torch from its find-links); check that it is reachable")


def _training_dependencies(torch: str, line: str | None = None) -> list[Path]:
    """The training job's dependencies for this Python and machine, with the CPU torch `torch` (its exact
    local version: no index holds a CUDA build under it) and the training set of torch line `line` (the
    stack's torch; provision/training_sets.yml), downloaded once per requirement list into the
    simulator's cache (`pip download` a second time would ask the index again)."""
    reqs = [f"torch=={torch}", *training_requirements(torch=line)[1:]]
    recipe = json.dumps([sys.version_info[:2], os.uname().machine, reqs])
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    cached = _wheel_cache() / f"train-{key}"
    done = cached / ".complete"
    if not done.is_file():
        cached.mkdir(parents=True, exist_ok=True)
        _run_pip(["download", "-q", "--only-binary=:all:", "--dest", str(cached), *reqs],
                 "download the training dependencies")
        done.write_text("\n".join(reqs) + "\n")
    _older_glibc_builds(cached)
    return sorted(cached.glob("*.whl"))


#: the glibc of the simulated OSes below this machine's (Kylin V10 2.28, CentOS 7.6 2.17, sim/profiles.yaml):
#: their pip, reading that glibc (sim/osident.py), takes only wheels of that floor or older
NODE_GLIBC_FLOORS = ("2.28", "2.17")


def _manylinux_platforms(glibc: str, arch: str) -> list[str]:
    """pip `--platform` tags a node with this glibc accepts (pip does not widen manylinux_2_NN itself)."""
    minor = int(glibc.split(".")[1])
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags = [f"manylinux_2_{m}_{arch}" for m in range(minor, 4, -1)]
    return tags + [f"{legacy[m]}_{arch}" for m in legacy if m <= minor]


def _older_glibc_builds(cached: Path) -> None:
    """Beside each downloaded wheel pip picked for this machine's newer glibc (cryptography's manylinux_2_34,
    tensorboard-data-server's 2_31, ...), the same release's build for each older node glibc where the
    project publishes one, else its newest release that has one (numpy 2.3+ has no glibc 2.17 build: 2.2),
    with what that release requires, once per cache: what pip on such a node finds on the index, and
    backtracks to."""
    done = cached / ".older-glibc-with-deps"
    if done.is_file():
        return
    arch, py = os.uname().machine, f"{sys.version_info[0]}{sys.version_info[1]}"
    have = [w.name for w in cached.glob("*.whl")]
    got = []
    for name in sorted(have):
        floor = wheels.glibc_floor(name) or ("2.17" if "manylinux2014" in name else None)
        dist, version = name.split("-")[:2]
        if floor is None or dist == "torch":  # torch: relabelled with its stack's floor (training_wheels)
            continue
        for target in NODE_GLIBC_FLOORS:
            fits = [n for n in have if n.split("-")[:2] == [dist, version]
                    and version_key(wheels.glibc_floor(n) or "2.17") <= version_key(target)]
            if version_key(floor) <= version_key(target) or fits:
                continue
            plats = [a for p in _manylinux_platforms(target, arch) for a in ("--platform", p)]
            for spec in (f"{dist}=={version}", dist):
                # another release may require what this machine's did not (pandas 2.3 needs pytz, 3.x
                # does not): it comes with its dependencies, for that glibc too
                deps = ["--no-deps"] if spec != dist else []
                proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", *deps,
                                       "--only-binary=:all:", "--python-version", py,
                                       "--implementation", "cp", *plats, "--dest", str(cached), spec],
                                      capture_output=True, text=True)
                if proc.returncode == 0:
                    new = sorted({w.name for w in cached.glob("*.whl")} - set(have))
                    have = [w.name for w in cached.glob("*.whl")]
                    got.append(f"{spec} for glibc {target}: {' '.join(new) or 'already there'}")
                    break
    done.write_text("".join(f"{line}\n" for line in got))


def _own_wheel(dest: Path) -> Path:
    """ascend-ready's wheel, built from this checkout (what `pip wheel --no-deps .` makes)."""
    checkout = Path(__file__).resolve().parents[2]
    if not (checkout / "pyproject.toml").is_file():
        raise SimError(f"{checkout} is not an ascend-ready checkout: no pyproject.toml to build a wheel from",
                       hint="run the simulator from a checkout (pip install -e .)")
    with tempfile.TemporaryDirectory() as tmp:
        # from a copy: setuptools builds in the source tree (build/, *.egg-info), which is the user's
        source = Path(tmp) / "src"
        shutil.copytree(checkout, source, ignore=shutil.ignore_patterns(
            ".*", "build", "runs", "*.egg-info", "__pycache__", "node_modules"))
        _run_pip(["wheel", "-q", "--no-deps", "--no-build-isolation", "--wheel-dir", tmp, str(source)],
                 f"build ascend-ready's wheel from {checkout}")
        built = next(Path(tmp).glob("ascend_ready-*.whl"))
        shutil.copy2(built, dest / built.name)
        return dest / built.name


def _place(wheel: Path, wheelhouse: Path) -> None:
    """A cached wheel into the wheelhouse: a hard link where the file systems allow (hundreds of MB)."""
    target = wheelhouse / wheel.name
    target.unlink(missing_ok=True)
    try:
        os.link(wheel, target)
    except OSError:
        shutil.copy2(wheel, target)


def training_wheels(wheelhouse: Path, stacks: list[Stack]) -> None:
    """What python_env installs for the training job, for this machine's Python: ascend-ready's wheel,
    its dependencies, and the real CPU torch relabelled as each stack's torch (nodes train on CPU)."""
    from importlib import metadata

    torch = metadata.version("torch")
    if "+cpu" not in torch and os.uname().machine == "x86_64":
        raise SimError(f"this Python's torch is {torch}, not a CPU build: simulated nodes train on CPU",
                       hint="make venv installs the CPU build (torch==X+cpu)")
    wheelhouse.mkdir(parents=True, exist_ok=True)
    _own_wheel(wheelhouse)
    real_torch = None
    # one training set per torch line (a line without one gets no trainers: python_env says why)
    lines = sorted({s.torch for s in stacks if not no_training_set(s.torch)}) or [None]
    for line in lines:
        for wheel in _training_dependencies(torch, line):
            if wheel.name.startswith(f"torch-{torch}-"):
                real_torch = wheel
            else:
                _place(wheel, wheelhouse)
    if real_torch is None:
        raise SimError(f"pip download did not fetch torch {torch}", hint="check pip's find-links")
    arch = os.uname().machine
    for version, floor in sorted({(s.torch, s.glibc) for s in stacks}):
        label = f"{version}+cpu" if "+cpu" in torch else version
        # the glibc floor of the stack's real torch wheels (manylinux2014 to 2.5, manylinux_2_28 from 2.6)
        plat = wheels.platform_tag(floor, arch).removesuffix(f".linux_{arch}")
        parts = real_torch.name[:-4].split("-")
        cached = _wheel_cache() / "relabelled" / ("-".join([parts[0], label, *parts[2:-1], plat]) + ".whl")
        if not cached.is_file():
            cached.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cached.parent) as tmp:
                os.replace(wheels.relabel_wheel(real_torch, Path(tmp), label, plat), cached)
        _place(cached, wheelhouse)


def build(dest: Path, stack_ids: list[str], arch: str, training: bool = False) -> Path:
    """Write the package source for the given matrix stack ids into dest (replacing its contents);
    `training`: with the training job's wheels (training_wheels)."""
    m = mx.load_matrix()
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    stacks: list[Stack] = []
    for stack_id in stack_ids:
        row = next(s for s in m.stacks if s.id == stack_id)
        for product in PRODUCTS:
            try:
                resolved = rv.resolve(m, cann=row.cann, torch=row.torch, product=product, arch=arch)
            except mx.MatrixError:
                continue  # this CANN has no recorded HDK for that product
            stacks.append(_stack(resolved))
            scratch = dest / f".build-{product}"
            build_package_dir(scratch, [_stack(resolved)], arch=arch, products=(product,))
            # package_names formats the matrix's own templates: the files are what resolve() names
            for name in package_names(_stack(resolved), arch, product).values():
                os.replace(scratch / name, dest / name)
            if m.toolbox is not None:  # the optional MindCluster ToolBox (the toolbox role's), once per arch
                box = toolbox_name(m.toolbox.version, arch)
                os.replace(scratch / box, dest / box)
            (dest / "wheelhouse").mkdir(exist_ok=True)
            for wheel in (scratch / "wheelhouse").iterdir():
                os.replace(wheel, dest / "wheelhouse" / wheel.name)
            shutil.rmtree(scratch)
    _pip_wheel(dest / "wheelhouse")
    if training:
        training_wheels(dest / "wheelhouse", stacks)
    _python_builds(dest, m, stack_ids, arch)
    write_manifest(dest)
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--stack", action="append", required=True, help="matrix stack id (repeatable)")
    parser.add_argument("--arch", default=os.uname().machine, choices=mx.ARCHES)
    parser.add_argument("--training", action="store_true",
                        help="with ascend-ready's wheel and the training job's (this Python, CPU torch)")
    args = parser.parse_args()
    out = build(args.dest, args.stack, args.arch, training=args.training)
    print(out)


if __name__ == "__main__":
    main()
