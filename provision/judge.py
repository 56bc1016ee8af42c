"""Judge an installed set of Ascend components against the compatibility matrix: valid, or each component
that is off named with what it should be. A pure function over a loaded `Matrix` (provision/matrix.py);
ascend-check's versions.stack check and `ascend-matrix judge` call it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ascend_ready.errors import MatrixError
from ascend_ready.provision.matrix import (
    DEFAULT_PRODUCT,
    CannRelease,
    Matrix,
    MatrixModel,
    StackRow,
    load_matrix,
)
from ascend_ready.provision.resolver import hdk_bundle_for_driver, normalized_pins, preferred_python
from ascend_ready.provision.versions import base_version, same_version, version_has_prefix, version_key


class Finding(MatrixModel):
    """One installed component that is off, and what it should be."""

    component: str
    installed: str
    expected: str | None
    reason: str


class Judgement(MatrixModel):
    valid: bool
    stack: str | None = Field(description="the matrix row the installed set matches, if any")
    findings: list[Finding]
    unverified: list[str] = Field(description="facts the matrix has no record to check against")


_INSTALLED_KEYS = ("driver", "firmware", "cann", "torch", "torch_npu", "product", "os", "python", "arch")


def judge(installed: dict[str, str | None], matrix: Matrix | None = None) -> Judgement:
    """Judge an installed set (any of driver, firmware, cann, torch, torch_npu, product, os, python, arch).

    Valid when every given component agrees with the matrix; otherwise each finding names the
    component, what is installed and what it should be.
    """
    m = matrix or load_matrix()
    unknown = sorted(set(installed) - set(_INSTALLED_KEYS))
    if unknown:
        raise MatrixError(f"unknown component(s): {', '.join(unknown)}",
                          hint=f"components are: {', '.join(_INSTALLED_KEYS)}")
    pins = {k: v for k, v in installed.items() if k not in ("firmware", "cann")}
    got = normalized_pins(m, pins)
    for key in ("firmware", "cann"):
        value = installed.get(key)
        if value is not None and str(value).strip():
            try:
                version_key(str(value))
            except ValueError as exc:
                raise MatrixError(f"{key}: {exc}", hint="versions look like 7.3.0.1.231 or 8.2.RC1") from None
            got[key] = str(value).strip()
    product_id = got.get("product", DEFAULT_PRODUCT).lower()
    findings: list[Finding] = []
    unverified: list[str] = []

    def off(component: str, expected: str | None, reason: str) -> None:
        findings.append(Finding(component=component, installed=got[component], expected=expected,
                                reason=reason))

    cann = m.cann_release(got["cann"]) if "cann" in got else None
    if "cann" in got and cann is None:
        newest = max(m.cann, key=lambda c: version_key(c.version)).version
        off("cann", newest, f"CANN {got['cann']} is not in the matrix (known: "
            f"{', '.join(c.version for c in m.cann)})")

    torch, npu = got.get("torch"), got.get("torch_npu")
    if torch and npu and base_version(npu) != base_version(torch):
        off("torch_npu", _npu_for(m, cann, torch), f"torch_npu {npu} is built for torch {base_version(npu)}, "
            f"but torch {torch} is installed")

    stack = None
    if cann is not None:
        rows = m.stacks_for(cann.version)
        if npu:
            stack = next((s for s in rows if same_version(s.torch_npu, npu)), None)
            if stack is None and not any(f.component == "torch_npu" for f in findings):
                want = _npu_for(m, cann, torch or base_version(npu))
                if want is not None:
                    off("torch_npu", want, f"torch_npu {npu} is not a release for CANN {cann.version}; "
                        f"with torch {base_version(npu)} it should be {want}")
                else:
                    rec = _recommended(m, cann.version)
                    off("torch_npu", rec.torch_npu, f"CANN {cann.version} has no torch_npu for torch "
                        f"{base_version(npu)}; its releases are {', '.join(s.torch_npu for s in rows)}")
        if torch and not any(same_version(s.torch, base_version(torch)) for s in rows):
            rec = _recommended(m, cann.version)
            off("torch", rec.torch, f"CANN {cann.version} supports torch {', '.join(s.torch for s in rows)}, "
                f"not {torch}")
        if "driver" in got and not any(version_has_prefix(got["driver"], p) for p in cann.hdk.compatible):
            rec_id = cann.hdk.recommended.get(product_id)
            rec = m.hdk_release(rec_id) if rec_id else None
            off("driver", rec.products[product_id].driver if rec else None,
                f"driver {got['driver']} is not in CANN {cann.version}'s HDK list "
                f"({', '.join(cann.hdk.compatible)})")
    if "firmware" in got:
        _judge_firmware(m, got, product_id, off, unverified)

    _judge_unknown_versions(m, got, findings, off)

    if stack is not None:
        if "python" in got and got["python"] not in stack.python:
            off("python", preferred_python(stack.python), f"{stack.id} wheels support Python "
                f"{', '.join(stack.python)}, not {got['python']}")
        if "os" in got:
            os_e = m.os_entry(got["os"])
            if version_key(stack.glibc) > version_key(os_e.glibc):
                off("os", None, f"torch {stack.torch}/torch_npu {stack.torch_npu} wheels are "
                    f"{stack.manylinux} and need glibc {stack.glibc}, but {os_e.id} has {os_e.glibc}")
    return Judgement(valid=not findings, stack=stack.id if stack and not findings else None,
                     findings=findings, unverified=unverified)


def _judge_unknown_versions(m: Matrix, got: dict[str, str], findings: list[Finding], off: Any) -> None:
    """A version no stack (or, for a driver, no HDK bundle and no CANN's driver list) of the matrix
    has is never valid, whatever else was given: name the field and the nearest known versions."""
    known, keys, prefixes = _known_versions(m)
    listed = {
        "torch": lambda v: version_key(base_version(v)) in keys["torch"],
        "torch_npu": lambda v: version_key(v) in keys["torch_npu"],
        # a driver is known when a bundle ships it or a CANN release's HDK list accepts its prefix
        "driver": lambda v: version_key(v) in keys["driver"]
        or any(version_has_prefix(v, p) for p in prefixes),
        "python": lambda v: v in known["python"],
    }
    for component in ("driver", "torch", "torch_npu", "python"):
        value = got.get(component)
        if value is None or listed[component](value) or any(f.component == component for f in findings):
            continue
        near = _nearest(known[component], base_version(value) if component == "torch" else value)
        what = "is in no HDK bundle or CANN driver list" if component == "driver" else "is in no stack"
        off(component, near[-1] if near else None,
            f"{component} {value} {what} of the matrix (nearest known: {' and '.join(near) or 'none'})")


_KNOWN: dict[int, tuple[Matrix, tuple]] = {}


def _known_versions(m: Matrix) -> tuple[dict[str, list[str]], dict[str, set], list[str]]:
    """Per component the versions the matrix has (sorted) and their keys, and the CANN driver
    prefixes; worked out once per loaded matrix (ascend-check judges one host after another)."""
    hit = _KNOWN.get(id(m))
    if hit is None or hit[0] is not m:
        known = {
            "torch": sorted({s.torch for s in m.stacks}, key=version_key),
            "torch_npu": sorted({s.torch_npu for s in m.stacks}, key=version_key),
            "driver": sorted({p.driver for h in m.hdk for p in h.products.values()}, key=version_key),
            "python": sorted({v for s in m.stacks for v in s.python}, key=version_key),
        }
        keys = {k: {version_key(v) for v in vs} for k, vs in known.items() if k != "python"}
        prefixes = sorted({p for c in m.cann for p in c.hdk.compatible})
        hit = _KNOWN[id(m)] = (m, (known, keys, prefixes))
    return hit[1]


def _nearest(versions: list[str], value: str) -> list[str]:
    """The known versions just below and just above `value` (sorted, either may be missing)."""
    key = version_key(value)
    below = [v for v in versions if version_key(v) < key]
    above = [v for v in versions if version_key(v) > key]
    return [*below[-1:], *above[:1]]


def _judge_firmware(m: Matrix, got: dict[str, str], product_id: str, off: Any, unverified: list[str]) -> None:
    if "driver" not in got:
        unverified.append("firmware: no driver given to pair it with")
        return
    bundle = hdk_bundle_for_driver(m, product_id, got["driver"])
    if bundle is None:
        unverified.append(f"firmware: no recorded HDK bundle has {product_id} driver {got['driver']}")
        return
    want = bundle.products[product_id].firmware
    have = got["firmware"]
    if same_version(have, want):
        return
    age = "older" if version_key(have) < version_key(want) else "newer"
    off("firmware", want, f"firmware {have} is {age} than {want}, which HDK {bundle.id} pairs with "
        f"{product_id} driver {got['driver']} (firmware is per product and per driver)")


def _recommended(m: Matrix, cann: str) -> StackRow:
    rows = m.stacks_for(cann)
    return next((s for s in rows if s.recommended), max(rows, key=lambda s: version_key(s.torch)))


def _npu_for(m: Matrix, cann: CannRelease | None, torch: str | None) -> str | None:
    """The torch_npu release that pairs with `torch` under `cann` (None if that CANN has none)."""
    if cann is None or torch is None:
        return None
    row = next((s for s in m.stacks_for(cann.version) if same_version(s.torch, base_version(torch))), None)
    return row.torch_npu if row else None
