"""Build the simulator's package source for the playbooks: fake `.run` installers, stand-in wheels, a pip
wheel, the standalone CPython archive old OSes need (from a local CPython, cached) and SHA256SUMS, named
exactly as provision/matrix.yml resolves them (one source of truth).

Usage: python -m ascend_ready.sim.harness.build_packages DEST --stack ID [--stack ID ...] [--arch x86_64]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from ascend_ready.errors import SimError
from ascend_ready.provision import matrix as mx
from ascend_ready.provision import resolver as rv
from ascend_ready.provision.packages import write_manifest
from ascend_ready.sim.packages import build_package_dir, package_names, standalone_python
from ascend_ready.sim.packages.builder import Stack

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


def build(dest: Path, stack_ids: list[str], arch: str) -> Path:
    """Write the package source for the given matrix stack ids into dest (replacing its contents)."""
    m = mx.load_matrix()
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for stack_id in stack_ids:
        row = next(s for s in m.stacks if s.id == stack_id)
        for product in PRODUCTS:
            try:
                resolved = rv.resolve(m, cann=row.cann, torch=row.torch, product=product, arch=arch)
            except mx.MatrixError:
                continue  # this CANN has no recorded HDK for that product
            scratch = dest / f".build-{product}"
            build_package_dir(scratch, [_stack(resolved)], arch=arch, products=(product,))
            # package_names formats the matrix's own templates: the files are what resolve() names
            for name in package_names(_stack(resolved), arch, product).values():
                os.replace(scratch / name, dest / name)
            (dest / "wheelhouse").mkdir(exist_ok=True)
            for wheel in (scratch / "wheelhouse").iterdir():
                os.replace(wheel, dest / "wheelhouse" / wheel.name)
            shutil.rmtree(scratch)
    _pip_wheel(dest / "wheelhouse")
    _python_builds(dest, m, stack_ids, arch)
    write_manifest(dest)
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--stack", action="append", required=True, help="matrix stack id (repeatable)")
    parser.add_argument("--arch", default=os.uname().machine, choices=mx.ARCHES)
    args = parser.parse_args()
    out = build(args.dest, args.stack, args.arch)
    print(out)


if __name__ == "__main__":
    main()
