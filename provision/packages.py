"""The offline package directory of a stack: every file it must hold (the `.run` installers named as
`resolve()` names them, the standalone CPython of an OS whose python3 is too old, the wheelhouse), where
each is downloaded, and its SHA256SUMS manifest.

`ascend-matrix packages` and `ascend-matrix manifest` show and write these; the playbooks' package
check (lookup `ascend_packages`) verifies a directory against the same list.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field

from ascend_ready import __version__
from ascend_ready.errors import ConfigError, MatrixError
from ascend_ready.provision import training_sets
from ascend_ready.provision.matrix import DEFAULT_ARCH, Matrix, MatrixModel, load_matrix
from ascend_ready.provision.resolver import ResolvedStack, resolve
from ascend_ready.provision.versions import version_key

MANIFEST = "SHA256SUMS"
WHEELHOUSE = "wheelhouse"

#: CANN's Python dependencies (CANN install guide, "安装依赖", instg_0045 of the 9.0.0 guide; the same
#: list since 7.0): numpy >= 1.19.2 (< 2.0 below Python 3.13), decorator >= 4.4.0, sympy >= 1.5.1,
#: cffi >= 1.12.3, protobuf 3.20.x, and attrs, cython, pyyaml, pathlib2, scipy, requests, psutil,
#: absl-py. The python_env role installs the same list (python_env_cann_requirements; a test keeps the
#: two equal).
CANN_PYTHON_REQUIREMENTS: tuple[str, ...] = (
    "numpy>=1.19.2,<2.0",
    "decorator>=4.4.0",
    "sympy>=1.5.1",
    "cffi>=1.12.3",
    "protobuf>=3.20,<3.21",
    "attrs",
    "cython",
    "pyyaml",
    "pathlib2",
    "scipy",
    "requests",
    "psutil",
    "absl-py",
)
#: The project itself, and the extra of it a node runs: python_env installs `ascend-ready==<this version>`
#: with --no-deps into the node's training venv, then its `node` extra's requirements (node-local
#: ascend-check, the trainers and what they import; not the controller's ansible-core and paramiko), with
#: transformers, TRL, accelerate, peft and datasets pinned to the stack's training set
#: (provision/training_sets.yml). torch is left to the stack's pin.
PROJECT = "ascend-ready"
NODE_EXTRA = "node"
#: The extra a controller that trains locally installs (`pip install 'ascend-ready[train]'`).
TRAINING_EXTRA = "train"

#: PyTorch's CPU build for x86_64 (the default PyPI wheel pulls in the CUDA libraries); aarch64's PyPI
#: wheel is already CPU-only. Ascend/pytorch README: `pip3 install torch==X+cpu --index-url ...`.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# Where each file is downloaded, by page name (the pages move; their names stay). docs/packages.md
# walks through both sites: the Ascend community site (community editions) and Huawei Support (commercial).
HDK_PAGE = ("hiascend.com > Firmware and Drivers > {product} > CANN {cann} > Ascend HDK {hdk} ({arch}); "
            "or Huawei Support > Ascend HDK > {hdk}")
CANN_PAGE = "hiascend.com > Downloads > CANN {cann} ({arch}); or Huawei Support > CANN > {cann}"
PYPI_PAGE = "PyPI: {project} {version}"

Component = Literal["driver", "firmware", "toolkit", "kernels", "ops", "nnal", "python", "toolbox"]
#: where the MindCluster ToolBox is downloaded (matrix source mindx-toolbox-*)
TOOLBOX_PAGE = ("hiascend.com > Downloads > MindCluster {version} > ToolBox ({arch}); or "
                "https://ascend-repo.obs.cn-east-2.myhuaweicloud.com/MindX/MindX%20{version}/{file}")


class PackageFile(MatrixModel):
    """One installer the directory must hold, at its top level, under this exact name: a `.run` file, or
    (component python) the standalone CPython archive of a node whose OS python3 the wheels do not fit."""

    name: str = Field(description="file name, as Huawei publishes it")
    component: Component
    download: str = Field(description="the page it is downloaded from")
    comes_in: str | None = Field(None, description="the archive it is published in, when it is one")
    optional: bool = Field(False, description="needed only where the inventory turns its role on "
                           "(the toolbox: toolbox_install: true)")


class WheelRequirement(MatrixModel):
    """One requirement the wheelhouse must satisfy for the node's Python and arch (plus what it requires)."""

    requirement: str = Field(description="PEP 508 requirement, e.g. torch==2.5.1 or numpy>=1.19.2,<2.0")
    file: str = Field(description="the wheel file it resolves to (a glob), under wheelhouse/")
    why: str
    download: str


class PackagePlan(MatrixModel):
    """Everything the offline package directory needs for one stack on one OS, arch and Python."""

    stack: str
    product: str
    arch: str
    os: str | None
    python: str
    glibc_floor: str
    installers: list[PackageFile]
    wheels: list[WheelRequirement]
    wheel_platforms: list[str] = Field(description="pip platform tags the wheels may carry")
    pip_download: list[str] = Field(description="argv that fills wheelhouse/ on a connected machine")
    notes: list[str]


def cann_requirements(python: str | None = None, requirements: list[str] | None = None) -> list[str]:
    """CANN's Python dependencies for `python` (MAJOR.MINOR; None: the list as the guide gives it).

    `requirements` replaces the guide's list (python_env_cann_requirements); either way a numpy capped
    below 2.0 loses the cap on Python 3.13+, where numpy 1.x has no wheels (the guide caps it only below).
    """
    out = list(CANN_PYTHON_REQUIREMENTS if requirements is None else requirements)
    if python is None or version_key(python) < version_key("3.13"):
        return out
    for i, req in enumerate(out):
        if _requirement_name(req).lower() == "numpy":
            kept = [c for c in req[len("numpy"):].split(",") if c.strip() and not c.strip().startswith("<2")]
            out[i] = "numpy" + ",".join(c.strip() for c in kept)
    return out


def training_requirements(version: str = __version__, torch: str | None = None) -> list[str]:
    """What the node's training venv needs besides the stack's torch and torch_npu: `ascend-ready==V`
    (this version, installed with --no-deps) first, then its `node` extra's requirements as its installed
    metadata (pyproject.toml) declares them, markers dropped, torch left out (the stack pins it). With
    `torch` (the stack's), the packages of that torch line's training set replace their ranges by its pins.

    ConfigError when this ascend-ready is not installed (a bare checkout on sys.path has no metadata);
    MatrixError when the torch line has no training set (the resolver's reason)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    try:
        declared = metadata.requires(PROJECT) or []
    except metadata.PackageNotFoundError:
        raise ConfigError(f"{PROJECT} is not installed in {sys.executable}: its training requirements "
                          "are read from its metadata", hint="pip install -e . (or make venv)") from None
    pins: dict[str, str] = {}
    if torch is not None:
        found = training_sets.set_for(torch)
        if found is not None and found.none:
            raise MatrixError(f"torch {torch}: no training set exists: {found.none}",
                              hint="pick a stack whose torch has one (`ascend-matrix resolve` says), or set "
                                   "python_env_training: false to provision it without the trainers")
        if found is not None:
            pins = {n: v for n, v in found.packages.items() if n not in training_sets.OPTIONAL}
    out = [f"{PROJECT}=={version}"]
    for text in declared:
        req = Requirement(text)
        if req.marker is None or not req.marker.evaluate({"extra": NODE_EXTRA}):
            continue
        if req.name.lower() in ("torch", "torch-npu", "torch_npu"):
            continue
        pin = pins.get(req.name.lower())
        out.append(f"{req.name}=={pin}" if pin else f"{req.name}{req.specifier}")
    return out


def no_training_set(torch: str) -> str | None:
    """Why torch line `torch` has no training set (provision/training_sets.yml), or None when it has one."""
    found = training_sets.set_for(torch)
    return found.none if found is not None else None


def _wheel_glob(project: str, version: str, python: str | None, arch: str) -> str:
    dist = project.replace("-", "_")
    py = f"cp{python.replace('.', '')}-cp{python.replace('.', '')}" if python else "*"
    return f"{WHEELHOUSE}/{dist}-{version}-{py}-*_{arch}.whl"


def _requirement_name(requirement: str) -> str:
    for i, c in enumerate(requirement):
        if c in "<>=!~;[ ":
            return requirement[:i]
    return requirement


def wheel_requirements(stack: ResolvedStack | dict, python: str | None = None,
                       cann: list[str] | None = None, training: bool = True) -> list[WheelRequirement]:
    """What the wheelhouse must hold for `stack`: pip, torch, torch_npu, CANN's Python dependencies and
    (`training`) ascend-ready of this version with what the training job imports (training_requirements).

    `python` is the node's Python (default: the stack's); `cann` replaces CANN's list (the playbook
    passes python_env_cann_requirements where the inventory sets it).
    """
    s = stack if isinstance(stack, dict) else stack.model_dump(mode="json")
    python = python or s["python"]
    arch = s["arch"]
    torch_file = (_wheel_glob("torch", f"{s['torch']}+cpu", python, arch) if arch == "x86_64"
                  else _wheel_glob("torch", s["torch"], python, arch))
    torch_from = (f"the PyTorch index {TORCH_CPU_INDEX} (CPU build torch=={s['torch']}+cpu)"
                  if arch == "x86_64" else PYPI_PAGE.format(project="torch", version=s["torch"]))
    out = [
        WheelRequirement(requirement="pip", file=f"{WHEELHOUSE}/pip-*-py3-none-any.whl",
                         why="python_env bootstraps the venv's pip from the wheelhouse",
                         download=PYPI_PAGE.format(project="pip", version="(any)")),
        WheelRequirement(requirement=f"torch=={s['torch']}", file=torch_file,
                         why=f"PyTorch of stack {s['id']}", download=torch_from),
        WheelRequirement(requirement=f"torch_npu=={s['torch_npu']}",
                         file=_wheel_glob("torch_npu", s["torch_npu"], python, arch),
                         why=f"torch_npu of stack {s['id']} (branch {s['torch_npu_branch']})",
                         download=PYPI_PAGE.format(project="torch-npu", version=s["torch_npu"])),
    ]
    for req in cann_requirements(python, cann):
        name = _requirement_name(req)
        out.append(WheelRequirement(
            requirement=req, file=f"{WHEELHOUSE}/{name.replace('-', '_')}-*.whl",
            why="CANN Python dependency (CANN install guide, instg_0045)",
            download=PYPI_PAGE.format(project=name, version=req[len(name):] or "(any)")))
    if not training or no_training_set(s["torch"]):
        return out
    own, *deps = training_requirements(torch=s["torch"])
    out.append(WheelRequirement(
        requirement=own, file=f"{WHEELHOUSE}/ascend_ready-{__version__}-py3-none-any.whl",
        why="the training job's own code, at the controller's version (ascend-train refuses another); "
            "installed with --no-deps: its controller dependencies stay off the node",
        download=f"built from the checkout: pip wheel --no-deps --wheel-dir {WHEELHOUSE} . "
                 f"(or PyPI: {PROJECT} {__version__})"))
    for req in deps:
        name = _requirement_name(req)
        out.append(WheelRequirement(
            requirement=req, file=f"{WHEELHOUSE}/{name.replace('-', '_').lower()}-*.whl",
            why=(f"training set of torch {s['torch']} (provision/training_sets.yml)" if "==" in req else
                 f"{PROJECT}'s {NODE_EXTRA} extra: node-local ascend-check or the training job imports it"),
            download=PYPI_PAGE.format(project=name, version=req[len(name):] or "(any)")))
    return out


def toolbox_file(arch: str, matrix: Matrix | None = None) -> PackageFile | None:
    """The MindCluster ToolBox installer for `arch` (None where the matrix names no toolbox release)."""
    box = (matrix or load_matrix()).toolbox
    if box is None:
        return None
    name = box.file(arch)
    return PackageFile(name=name, component="toolbox", optional=True,
                       download=TOOLBOX_PAGE.format(version=box.version, arch=arch, file=name))


def _offer_toolbox(installers: list[PackageFile], notes: list[str], arch: str, matrix: Matrix) -> None:
    """The optional ToolBox installer of the plan, with the note saying when it is needed."""
    box = toolbox_file(arch, matrix)
    if box is not None:
        installers.append(box)
        notes.append(f"{box.name} (MindCluster ToolBox: ascend-dmi, the full tier's FLOPS and bandwidth "
                     "tests) is optional: the toolbox role installs it where the inventory sets "
                     "toolbox_install: true; without it the bandwidth checks measure with torch")


def required_files(stack: ResolvedStack | dict, cann: list[str] | None = None,
                   python_build: bool = True, training: bool = True, toolbox: bool = False) -> list[str]:
    """The package check's terms: every installer name (with the standalone CPython archive where the
    stack names one, unless `python_build` is false: the node's interpreter is given; with the toolbox's
    where `toolbox`: toolbox_install), then `wheel:REQUIREMENT` per wheel requirement
    (`training`: ascend-ready's and the job's too)."""
    s = stack if isinstance(stack, dict) else stack.model_dump(mode="json")
    runs = [name for name in s["packages"].values() if name]
    if python_build and s.get("python_build"):
        runs.append(s["python_build"]["file"])
    box = toolbox_file(s["arch"]) if toolbox else None
    if toolbox and box is None:
        raise MatrixError("toolbox_install is true but the matrix names no toolbox release",
                          hint="add `toolbox: {version: ..., source: ...}` to provision/matrix.yml")
    if box is not None:
        runs.append(box.name)
    return runs + [f"wheel:{w.requirement}" for w in wheel_requirements(s, cann=cann, training=training)]


#: glibc of the manylinux tags that name no version (PEP 513, 571, 599).
_MANYLINUX_GLIBC = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}


def _platform_fits(tag: str, arch: str, glibc: str | None) -> bool:
    if tag == "any":
        return True
    if not tag.endswith(f"_{arch}"):
        return False
    base = tag[: -len(arch) - 1]
    if base == "linux":
        return True
    if base in _MANYLINUX_GLIBC:
        floor = _MANYLINUX_GLIBC[base]
    elif base.startswith("manylinux_") and base.count("_") == 2:
        floor = base[len("manylinux_"):].replace("_", ".")
    else:
        return False  # musllinux, macOS, Windows
    return glibc is None or version_key(glibc) >= version_key(floor)


def wheel_fits(name: str, python: str | None, arch: str, glibc: str | None = None) -> bool:
    """The wheel file `name` (a path; `dist-ver[-build]-py-abi-plat.whl`) installs on CPython `python`
    (MAJOR.MINOR; None: any) on `arch` with glibc `glibc` (None: any manylinux), as pip judges its tags:
    cpXY-cpXY, cpXY-abi3 from XY up, pyX/pyXY-none, and any, linux, manylinux platforms."""
    base = name.rsplit("/", 1)[-1]
    parts = base[:-4].split("-") if base.endswith(".whl") else []
    if len(parts) < 5:
        return False
    pys, abis, plats = (parts[-3].split("."), parts[-2].split("."), parts[-1].split("."))
    if not any(_platform_fits(p, arch, glibc) for p in plats):
        return False
    if python is None:
        return True
    major, minor = (int(x) for x in python.split(".")[:2])
    node = f"cp{major}{minor}"

    def older(tag: str, prefix: str) -> bool:  # cp38 / py37 at or below the node's Python 3
        rest = tag[len(prefix):]
        return tag.startswith(f"{prefix}{major}") and rest.isdigit() and int(rest[1:] or 0) <= minor

    for abi in abis:
        if abi == "abi3" and any(older(t, "cp") for t in pys):
            return True
        if abi.rstrip("m") == node and node in pys:
            return True
        if abi == "none" and any(t in (node, f"py{major}") or older(t, "py") for t in pys):
            return True
    return False


def node_wheels(names, python: str | None, arch: str, glibc: str | None = None,
                pins: dict[str, str] | None = None) -> list[str]:
    """Every wheel under wheelhouse/ among `names` that fits the node (wheel_fits): what python_env stages,
    so that pip, installing offline from the staged cache, finds torch's and CANN's dependencies too.
    `pins` ({project: version}) leaves out other versions of a pinned project (another stack's torch)."""
    pins = {k.replace("-", "_").lower(): v for k, v in (pins or {}).items()}
    out = []
    for name in names:
        if not name.startswith(f"{WHEELHOUSE}/") or not wheel_fits(name, python, arch, glibc):
            continue
        dist, version = name.rsplit("/", 1)[-1].split("-")[:2]
        pin = pins.get(dist.replace(".", "_").lower())
        if pin is None or version == pin or version.split("+", 1)[0] == pin:
            out.append(name)
    return sorted(out)


def hdk_zip(driver_file: str, driver: str, hdk: str) -> str | None:
    """The HDK archive a driver `.run` is published in: Ascend-hdk-910b-npu_<hdk>_linux-<arch>.zip holds
    Ascend-hdk-910b-npu-driver_<driver>_linux-<arch>.run and the firmware .run of the same HDK (the
    community site's names; A3: Atlas-A3-hdk-npu_<hdk>_linux-<arch>.zip)."""
    if "-npu-driver_" not in driver_file or not driver_file.endswith(".run"):
        return None
    name = driver_file.replace("-npu-driver_", "-npu_", 1).replace(f"_{driver}_", f"_{hdk.lower()}_", 1)
    return name[: -len(".run")] + ".zip"


def wheel_platforms(arch: str, glibc: str | None) -> list[str]:
    """pip `--platform` tags for a node with this glibc (None: the oldest, manylinux2014)."""
    tags = [f"manylinux2014_{arch}", f"manylinux_2_17_{arch}"]
    if glibc is not None and version_key(glibc) >= version_key("2.28"):
        tags.append(f"manylinux_2_28_{arch}")
    if arch == "x86_64":
        tags.append(f"linux_{arch}")  # the CPU torch builds of the PyTorch index carry only this tag
    return tags


def package_plan(stack_id: str, *, os: str | None = None, arch: str | None = None,
                 product: str | None = None, python: str | None = None,
                 matrix: Matrix | None = None) -> PackagePlan:
    """The files of stack `stack_id` (a matrix row id) for one OS, arch, NPU product and Python."""
    m = matrix or load_matrix()
    row = next((s for s in m.stacks if s.id.lower() == stack_id.strip().lower()), None)
    if row is None:
        raise MatrixError(f"stack: unknown stack id {stack_id!r}",
                          hint="ids are listed by `ascend-matrix show`, e.g. " + m.stacks[-1].id)
    r = resolve(m, cann=row.cann, torch=row.torch, torch_npu=row.torch_npu, os=os, arch=arch or DEFAULT_ARCH,
                product=product, python=python)
    os_entry = m.os_entry(r.os) if r.os else None
    product_name = m.product(r.product).name
    fields = {"product": product_name, "cann": r.cann, "hdk": r.hdk or "(the bundle of that driver)",
              "arch": r.arch}
    zip_name = hdk_zip(r.packages.driver, r.driver, r.hdk) if r.hdk else None
    installers = [PackageFile(name=r.packages.driver, component="driver", download=HDK_PAGE.format(**fields),
                              comes_in=zip_name)]
    notes = list(r.warnings)
    if r.packages.firmware:
        installers.append(PackageFile(name=r.packages.firmware, component="firmware",
                                      download=HDK_PAGE.format(**fields), comes_in=zip_name))
    else:
        notes.append("no firmware is recorded for this driver: add the firmware .run of the driver's HDK "
                     "bundle, or pin a driver the matrix knows (`ascend-matrix show --format json`)")
    installers.append(PackageFile(name=r.packages.toolkit, component="toolkit",
                                  download=CANN_PAGE.format(**fields)))
    installers.append(PackageFile(name=r.packages.ops, component=r.layout.op_package,
                                  download=CANN_PAGE.format(**fields)))
    if r.packages.nnal:
        installers.append(PackageFile(name=r.packages.nnal, component="nnal",
                                      download=CANN_PAGE.format(**fields)))
    if r.python_build is not None:
        installers.append(PackageFile(name=r.python_build.file, component="python",
                                      download=r.python_build.download))
        notes.append(f"{r.os} ships python3 {os_entry.python3}, which torch {r.torch} does not support: "
                     f"python_env unpacks {r.python_build.file} under {r.python_build.install_dir} on nodes "
                     f"without a Python {r.python} (python_env_python names another one instead)")
    elif os_entry is not None and r.python != os_entry.python3:
        notes.append(f"{r.os} ships python3 {os_entry.python3} and the matrix records no standalone CPython "
                     f"{r.python}: install one on the nodes and set python_env_python to it")
    _offer_toolbox(installers, notes, r.arch, m)
    why_not = no_training_set(r.torch)
    if why_not:
        notes.append(f"no training set exists for torch {r.torch}: {why_not}; the wheelhouse holds no "
                     "trainers "
                     "for this stack (set python_env_training: false, or pick a stack with a training set)")
    else:
        found = training_sets.set_for(r.torch)
        if found is not None:
            notes.append(f"training set of torch {r.torch}: " + ", ".join(found.requirements(optional=True))
                         + " (provision/training_sets.yml; deepspeed only for ZeRO: pip download it too "
                           "where distributed.zero_stage > 0)")
    glibc = os_entry.glibc if os_entry else None
    platforms = wheel_platforms(r.arch, glibc)
    wheels = wheel_requirements(r)
    argv = ["pip", "download", "--dest", WHEELHOUSE, "--only-binary=:all:", "--implementation", "cp",
            "--python-version", r.python]
    for tag in platforms:
        argv += ["--platform", tag]
    if r.arch == "x86_64":
        argv += ["--extra-index-url", TORCH_CPU_INDEX]
    cpu_torch = r.arch == "x86_64"
    own = f"{PROJECT}=={__version__}"
    argv += [f"{w.requirement}+cpu" if cpu_torch and w.requirement.startswith("torch==") else w.requirement
             for w in wheels if w.requirement != own]
    notes.append(f"wheelhouse/ holds {PROJECT} {__version__} itself (the training job's code, the version "
                 f"ascend-train accepts): `pip wheel --no-deps --wheel-dir {WHEELHOUSE} .` in its checkout, "
                 f"or `pip download --no-deps --dest {WHEELHOUSE} {own}`")
    notes.append(f"wheelhouse/ also needs what these wheels require (e.g. torch: filelock, "
                 f"typing-extensions, networkx, jinja2, fsspec, sympy, mpmath); the pip download command "
                 f"fetches it all for CPython {r.python} on {r.arch}")
    return PackagePlan(stack=r.id, product=r.product, arch=r.arch, os=r.os, python=r.python,
                       glibc_floor=r.glibc_floor, installers=installers, wheels=wheels,
                       wheel_platforms=platforms, pip_download=argv, notes=notes)


# ---------------------------------------------------------------------------------------------------
# The manifest


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest_files(directory: Path) -> list[str]:
    """Every file below `directory` (relative POSIX paths, sorted) except the manifest and dot files."""
    out = []
    seen: set[str] = set()
    # A symlinked wheelhouse/ is common (one shared download); a link back up the tree is not followed twice.
    for root, dirs, files in os.walk(directory, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if name.startswith(".") or (name == MANIFEST and Path(root) == directory):
                continue
            rel = (Path(root) / name).relative_to(directory).as_posix()
            if "\n" in rel or "\\" in rel:
                raise ConfigError(f"{directory / rel!r}: a file name with a newline or backslash cannot be "
                                  f"listed in {MANIFEST}", hint="rename the file")
            out.append(rel)
    return sorted(out)


def write_manifest(directory: str | Path) -> tuple[Path, int]:
    """Write DIR/SHA256SUMS (`sha256sum` format, sorted by path) over every file; returns (path, count).

    Refuses, before hashing anything, a DIR that is missing, not a directory or not writable.
    """
    d = Path(directory)
    if not d.exists():
        raise ConfigError(f"package directory {d} does not exist",
                          hint="create it and put the .run files and wheelhouse/ in it (docs/packages.md)")
    if not d.is_dir():
        raise ConfigError(f"{d} is not a directory", hint="pass the package directory itself")
    if not os.access(d, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write {d / MANIFEST}: the directory is not writable",
                          hint="run as a user who may write there, or copy the directory first")
    names = manifest_files(d)
    if not names:
        raise ConfigError(f"package directory {d} holds no files",
                          hint="`ascend-matrix packages STACK` lists what it must hold")
    lines = [f"{sha256_file(d / name)}  {name}\n" for name in names]
    out = d / MANIFEST
    tmp = d / f".{MANIFEST}.tmp"
    tmp.write_text("".join(lines))
    tmp.replace(out)
    return out, len(names)
