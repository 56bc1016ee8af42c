"""The resolver: a few pins (CANN, torch, product, OS, arch, Python, engine) over a loaded `Matrix`
(matrix.py) become one full install stack, with its layout, package names and the standalone CPython an
old OS needs, and which RL engine rows accept a stack. A pure function over the loaded matrix.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from ascend_ready.errors import MatrixError
from ascend_ready.provision import training_sets
from ascend_ready.provision.matrix import (
    ARCHES,
    DEFAULT_ARCH,
    DEFAULT_PRODUCT,
    NNAL_PYTHONS,
    PYTHON_BUILD_DIR,
    PYTHON_BUILD_FILE,
    PYTHON_BUILD_PAGE,
    Arch,
    EngineRow,
    HdkRelease,
    Matrix,
    MatrixModel,
    OsEntry,
    StackRow,
    load_matrix,
)
from ascend_ready.provision.versions import (
    base_version,
    clauses_hold,
    python_minor,
    same_version,
    version_has_prefix,
    version_key,
)

# ---------------------------------------------------------------------------------------------------
# Engine rows (the `engine` pin)


def _release_key(version: str) -> tuple:
    """Orders engine releases: 0.11.0rc1 < 0.11.0, 2025.08.15 < 2025.12.11 (PEP 440-ish)."""
    match = re.match(r"(\d+(?:\.\d+)*)\.?(.*)", version)
    if match is None:
        return ((), (0, version))
    nums = tuple(int(x) for x in match.group(1).split("."))
    tail = match.group(2)
    return nums, (0, tail) if tail.startswith(("rc", "a", "b", "dev")) else (1, tail)


def _row_holds(row: EngineRow, cann: str, torch: str, torch_npu: str) -> bool:
    return (clauses_hold(row.cann, cann) and clauses_hold(row.torch, base_version(torch))
            and clauses_hold(row.torch_npu, torch_npu))


def engine_pins(row: EngineRow) -> dict[str, str]:
    """The package versions an engine row pins: its companions, and the engine's own release where the
    row names one (a row dated after the docs revision it copies, such as 2025.08.15, pins no release)."""
    pins = dict(row.companions)
    first = row.version.split(".", 1)[0]
    if first.isdigit() and int(first) < 1900:
        pins = {row.engine: row.version, **pins}
    return pins


def engine_rows_for(m: Matrix, engine: str, cann: str, torch: str, torch_npu: str) -> list[EngineRow]:
    """The newest row of `engine` that accepts the set, followed by the vllm-ascend row it installs
    (which must accept the set too); empty when none does."""
    rows = sorted((r for r in m.engines if r.engine == engine and _row_holds(r, cann, torch, torch_npu)),
                  key=lambda r: _release_key(r.version), reverse=True)
    for row in rows:
        companion = row.companions.get("vllm-ascend") if engine != "vllm-ascend" else None
        if companion is None:
            return [row]
        vllm = [r for r in m.engines if r.engine == "vllm-ascend" and r.version.lower() == companion.lower()]
        if vllm and _row_holds(vllm[0], cann, torch, torch_npu):
            return [row, vllm[0]]
    return []


class ResolvedLayout(MatrixModel):
    name: str
    install_root: str
    home: str
    set_env: str
    version_file: str
    op_package: Literal["kernels", "ops"]
    nnae: bool


class ResolvedPackages(MatrixModel):
    """File names of the .run packages for one arch (None: this stack has no such package)."""

    driver: str
    firmware: str | None
    toolkit: str
    ops: str = Field(description="the operator package: kernels (< 8.5) or ops (>= 8.5)")
    nnal: str | None


class ResolvedPythonBuild(MatrixModel):
    """The standalone CPython a node needs because its OS python3 is not one the wheels support."""

    python: str
    version: str
    build: str
    file: str = Field(description="the archive's name in the package directory (top level)")
    install_dir: str = Field(description="where python_env unpacks it (the archive's python/ directory)")
    interpreter: str = Field(description="the venv's base interpreter once unpacked")
    download: str = Field(description="the page it is downloaded from")
    source: str


class ResolvedEngine(MatrixModel):
    """The engine row a resolved stack satisfies, and the companion rows it brings along."""

    engine: str
    rows: list[str] = Field(description="engine rows the stack satisfies (the engine's, then vllm-ascend's)")
    companions: dict[str, str]
    sources: list[str]


class ResolvedTraining(MatrixModel):
    """The training dependency set of the stack's torch line (provision/training_sets.yml)."""

    torch: str
    python: str = Field(description="the Python the set was resolved for")
    packages: dict[str, str] | None = Field(None, description="{name: version}; None: no set exists")
    none: str | None = Field(None, description="why no set exists (the resolver's reason)")


class ResolvedStack(MatrixModel):
    """Everything a node needs, decided: what Ansible installs and what ascend-check expects."""

    id: str
    cann: str
    torch: str
    torch_npu: str
    torch_npu_branch: str
    python: str = Field(description="the Python to install the wheels into")
    python_versions: list[str] = Field(description="every Python the wheels support")
    glibc_floor: str
    manylinux: str
    product: str
    arch: Arch
    os: str | None
    hdk: str | None = Field(description="HDK bundle of the driver (None: a pinned driver with no bundle)")
    driver: str
    firmware: str | None
    hdk_compatible: list[str]
    layout: ResolvedLayout
    packages: ResolvedPackages
    warnings: list[str]
    engine: ResolvedEngine | None = Field(None, description="the RL engine asked for with `engine`")
    python_build: ResolvedPythonBuild | None = Field(
        None, description="the standalone CPython to unpack where the OS's python3 does not fit (None: fits)")
    training: ResolvedTraining | None = Field(
        None, description="the training set of its torch line (None: the training sets have no row for it)")


_PIN_NAMES = ("cann", "torch", "torch_npu", "driver", "product", "os", "arch", "python", "engine")


def normalized_pins(m: Matrix, pins: dict[str, str | None]) -> dict[str, str]:
    """Check each given pin; raise MatrixError naming the bad one."""
    unknown = sorted(set(pins) - set(_PIN_NAMES))
    if unknown:
        raise MatrixError(f"unknown pin(s): {', '.join(unknown)}", hint=f"pins are: {', '.join(_PIN_NAMES)}")
    out = {k: str(v).strip() for k, v in pins.items() if v is not None and str(v).strip()}
    for key in ("cann", "torch", "torch_npu", "driver"):
        if key in out:
            try:
                version_key(out[key])
            except ValueError as exc:
                raise MatrixError(f"{key}: {exc}",
                                  hint="versions look like 8.0.0, 8.2.RC1, 2.1.0.post10") from None
    if "python" in out:
        try:
            out["python"] = python_minor(out["python"])
        except ValueError as exc:
            raise MatrixError(f"python: {exc}", hint="e.g. --python 3.10") from None
    if "product" in out and m.product(out["product"]) is None:
        raise MatrixError(f"product: unknown NPU product {out['product']!r}",
                          hint=f"known products: {', '.join(p.id for p in m.products)}")
    if "os" in out and m.os_entry(out["os"]) is None:
        raise MatrixError(f"os: unknown OS {out['os']!r}",
                          hint=f"known OS ids: {', '.join(o.id for o in m.os)}")
    if "arch" in out and out["arch"] not in ARCHES:
        raise MatrixError(f"arch: unknown arch {out['arch']!r}", hint=f"one of: {', '.join(ARCHES)}")
    if "engine" in out:
        out["engine"] = out["engine"].lower()
        if not [e for e in m.engines if e.engine == out["engine"]]:
            known = ", ".join(sorted({e.engine for e in m.engines}))
            raise MatrixError(f"engine: no rows for engine {out['engine']!r}",
                              hint=f"engines in the matrix: {known}")
    if "cann" in out and m.cann_release(out["cann"]) is None:
        raise MatrixError(f"cann: CANN {out['cann']} is not in the matrix",
                          hint=f"known CANN versions: {', '.join(c.version for c in m.cann)}")
    return out


def _stack_order(s: StackRow) -> tuple:
    """Newest CANN first, then that CANN's recommended row, then newest torch."""
    return (version_key(s.cann), s.recommended, version_key(s.torch))


def hdk_bundle_for_driver(m: Matrix, product: str, driver: str) -> HdkRelease | None:
    return next((h for h in m.hdk
                 if product in h.products and same_version(h.products[product].driver, driver)), None)


def _constraints(m: Matrix, pins: dict[str, str]) -> list[tuple[str, Any, Any]]:
    """(label, keep(stack) -> bool, why(stack) -> str) per pin, in the order they are applied."""
    out: list[tuple[str, Any, Any]] = []
    if "cann" in pins:
        out.append((f"cann {pins['cann']}", lambda s: same_version(s.cann, pins["cann"]),
                    lambda s: f"{s.id} is CANN {s.cann}"))
    if "torch" in pins:
        want = base_version(pins["torch"])
        out.append((f"torch {pins['torch']}", lambda s: same_version(s.torch, want),
                    lambda s: f"{s.id} is torch {s.torch}"))
    if "torch_npu" in pins:
        out.append((f"torch_npu {pins['torch_npu']}", lambda s: same_version(s.torch_npu, pins["torch_npu"]),
                    lambda s: f"{s.id} is torch_npu {s.torch_npu}"))
    if "python" in pins:
        py = pins["python"]

        def py_ok(s: StackRow) -> bool:
            cann_py = m.cann_release(s.cann).python
            return py in s.python and (cann_py is None or py in cann_py)

        out.append((f"python {py}", py_ok,
                    lambda s: f"{s.id} supports Python {', '.join(s.python)}"))
    if "os" in pins:
        os_e = m.os_entry(pins["os"])
        out.append((f"os {os_e.id} (glibc {os_e.glibc})",
                    lambda s: version_key(s.glibc) <= version_key(os_e.glibc),
                    lambda s: f"torch {s.torch}/torch_npu {s.torch_npu} wheels are {s.manylinux} and need "
                              f"glibc {s.glibc} but {os_e.id} has {os_e.glibc}"))
    if "engine" in pins:
        engine = pins["engine"]
        out.append((f"engine {engine}",
                    lambda s: bool(engine_rows_for(m, engine, s.cann, s.torch, s.torch_npu)),
                    lambda s: f"{s.id} (torch {s.torch}, torch_npu {s.torch_npu}) is outside every "
                              f"{engine} row"))
    product = pins.get("product", DEFAULT_PRODUCT)
    out.append((f"product {product}", lambda s: product in m.cann_release(s.cann).hdk.recommended,
                lambda s: f"CANN {s.cann} has no recorded HDK bundle for {product}"))
    if "driver" in pins:
        drv = pins["driver"]
        out.append((f"driver {drv}",
                    lambda s: any(version_has_prefix(drv, p) for p in m.cann_release(s.cann).hdk.compatible),
                    lambda s: f"CANN {s.cann} accepts drivers "
                              f"{', '.join(m.cann_release(s.cann).hdk.compatible)}, not {drv}"))
    return out


def resolve(matrix: Matrix | None = None, **pins: str | None) -> ResolvedStack:
    """The best full stack for any subset of pins {cann, torch, torch_npu, driver, product, os, arch, python}.

    Picks the newest CANN that fits, and its recommended (else newest-torch) row. Raises MatrixError
    saying which pin eliminated the last candidates and what the nearest fitting stack is.
    """
    m = matrix or load_matrix()
    p = normalized_pins(m, pins)
    product_id = p.get("product", DEFAULT_PRODUCT).lower()
    os_e = m.os_entry(p["os"]) if "os" in p else None
    arch = p.get("arch") or DEFAULT_ARCH
    if os_e is not None and arch not in os_e.arch:
        raise MatrixError(f"arch: {os_e.id} is not built for {arch}",
                          hint=f"{os_e.id} runs on {', '.join(os_e.arch)}")

    candidates = list(m.stacks)
    constraints = _constraints(m, p)
    for i, (label, keep, why) in enumerate(constraints):
        kept = [s for s in candidates if keep(s)]
        if kept:
            candidates = kept
            continue
        applied = [lab for lab, _k, _w in constraints[:i]]
        ranked = sorted(candidates, key=_stack_order, reverse=True)
        distinct = list(dict.fromkeys(why(s) for s in ranked))
        reasons = "; ".join(distinct[:3]) + (" ..." if len(distinct) > 3 else "")
        alone = sorted((s for s in m.stacks if keep(s)), key=_stack_order, reverse=True)
        hint = (f"newest stack for {label} alone is {alone[0].id}" if alone
                else f"no stack in the matrix satisfies {label}")
        context = f" after {', '.join(applied)}" if applied else ""
        raise MatrixError(f"no stack fits: {label} rules out the {len(candidates)} remaining candidate(s)"
                          f"{context} ({reasons})", hint=hint + "; relax or change that pin")
    stack = max(candidates, key=_stack_order)
    return _complete(m, stack, p, product_id, os_e, arch)


def _pick_python(m: Matrix, stack: StackRow, pins: dict[str, str], os_e: OsEntry | None) -> str:
    cann_py = m.cann_release(stack.cann).python
    usable = [v for v in stack.python if cann_py is None or v in cann_py]
    if "engine" in pins:
        rows = engine_rows_for(m, pins["engine"], stack.cann, stack.torch, stack.torch_npu)
        usable = [v for v in usable if all(v in r.python for r in rows)] or usable
    if "python" in pins:
        return pins["python"]
    if os_e is not None and os_e.python3 in usable:
        return os_e.python3  # nothing extra to install
    return preferred_python(usable)


def _complete(m: Matrix, stack: StackRow, pins: dict[str, str], product_id: str, os_e: OsEntry | None,
              arch: str) -> ResolvedStack:
    cann = m.cann_release(stack.cann)
    product = m.product(product_id)
    layout = m.layout(cann.layout)
    warnings: list[str] = []
    if "driver" in pins:
        hdk = hdk_bundle_for_driver(m, product_id, pins["driver"])
        driver = pins["driver"]
        firmware = hdk.products[product_id].firmware if hdk else None
        if hdk is None:
            warnings.append(f"no recorded HDK bundle has {product_id} driver {driver}; install the firmware "
                            f"shipped in the same HDK bundle as that driver")
    else:
        hdk = m.hdk_release(cann.hdk.recommended[product_id])
        driver, firmware = hdk.products[product_id].driver, hdk.products[product_id].firmware
    if hdk is not None and hdk.note:
        warnings.append(f"HDK {hdk.id}: {hdk.note}")
    python = _pick_python(m, stack, pins, os_e)
    if os_e is not None:
        if os_e.id not in cann.os:
            warnings.append(f"{os_e.id} is not on CANN {cann.version}'s supported OS list "
                            f"({', '.join(cann.os)}); the install may work but is unsupported")
        if python != os_e.python3:
            warnings.append(f"{os_e.id} ships python3 {os_e.python3}; install Python {python} for this stack")
    python_build = python_build_for(m, python, arch) if os_e is not None and python != os_e.python3 else None
    if python_build is not None:
        warnings.append(f"python_env unpacks CPython {python_build.version} ({python_build.file}, from the "
                        f"package directory) under {python_build.install_dir} where no Python {python} is "
                        f"found")
    hdk_arch = "x86-64" if arch == "x86_64" else arch
    fields = {"cann": cann.version, "arch": arch, "hdk_arch": hdk_arch, "driver": driver,
              "firmware": firmware or "", "nnal": cann.nnal or ""}
    if layout.op_package == "ops":
        ops_tpl = product.ops_file
    elif cann.kernels_noarch and product.kernels_file_noarch:
        ops_tpl = product.kernels_file_noarch
    else:
        ops_tpl = product.kernels_file
    packages = ResolvedPackages(
        driver=product.driver_file.format(**fields),
        firmware=product.firmware_file.format(**fields) if firmware else None,
        toolkit=layout.toolkit_file.format(**fields),
        ops=ops_tpl.format(**fields),
        nnal=layout.nnal_file.format(**fields) if cann.nnal else None,
    )
    resolved_layout = ResolvedLayout(
        name=layout.id, install_root=layout.install_root.format(**fields), home=layout.home.format(**fields),
        set_env=layout.set_env.format(**fields), version_file=layout.version_file.format(**fields),
        op_package=layout.op_package, nnae=layout.nnae)
    engine = None
    if "engine" in pins:
        rows = engine_rows_for(m, pins["engine"], stack.cann, stack.torch, stack.torch_npu)
        companions: dict[str, str] = {}
        for r in rows:
            companions.update(engine_pins(r))
        engine = ResolvedEngine(engine=pins["engine"], rows=[r.id for r in rows], companions=companions,
                                sources=list(dict.fromkeys(r.source for r in rows)))
        if not all(python in r.python for r in rows):
            warnings.append(f"Python {python} is outside {pins['engine']}'s stated Pythons "
                            f"({', '.join(rows[0].python)})")
    found = training_sets.set_for(stack.torch)
    training = None
    if found is not None:
        training = ResolvedTraining(torch=found.torch, python=found.python, packages=found.packages,
                                    none=found.none)
        if found.none:
            warnings.append(f"no training set exists for torch {stack.torch}: {found.none}; this stack "
                            f"provisions and passes the preflight but cannot run the trainers")
    return ResolvedStack(
        engine=engine, python_build=python_build, training=training,
        id=stack.id, cann=cann.version, torch=stack.torch, torch_npu=stack.torch_npu,
        torch_npu_branch=stack.branch, python=python, python_versions=list(stack.python),
        glibc_floor=stack.glibc, manylinux=stack.manylinux, product=product_id, arch=arch,
        os=os_e.id if os_e else None, hdk=hdk.id if hdk else None, driver=driver, firmware=firmware,
        hdk_compatible=list(cann.hdk.compatible), layout=resolved_layout, packages=packages,
        warnings=warnings)


def python_build_for(m: Matrix, python: str, arch: str) -> ResolvedPythonBuild | None:
    """The standalone CPython the matrix records for Python `python` (MAJOR.MINOR) on `arch`, or None."""
    b = next((b for b in m.python_builds if b.python == python), None)
    if b is None:
        return None
    fields = {"version": b.version, "build": b.build, "arch": arch}
    install_dir = PYTHON_BUILD_DIR.format(**fields)
    return ResolvedPythonBuild(python=b.python, version=b.version, build=b.build,
                               file=PYTHON_BUILD_FILE.format(**fields), install_dir=install_dir,
                               interpreter=f"{install_dir}/bin/python{b.python}",
                               download=PYTHON_BUILD_PAGE.format(**fields), source=b.source)


def preferred_python(pythons: list[str]) -> str:
    """Of the Pythons a stack's wheels support, the one to install: an NNAL one, else the newest."""
    return next((v for v in NNAL_PYTHONS if v in pythons), max(pythons, key=version_key))
