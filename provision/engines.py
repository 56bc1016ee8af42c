"""The launcher's gate on the RL engines of the matrix (verl, vllm-ascend, MindSpeed-RL): a fleet whose
stack no row of the engine accepts, or whose nodes run other engine releases than the row pins, is refused.

The rows are the matrix file's `engines:` (matrix.EngineRow); which rows accept a stack is resolver.py's.
"""

from __future__ import annotations

import re

from ascend_ready.errors import MatrixError
from ascend_ready.provision.matrix import Matrix, load_matrix
from ascend_ready.provision.resolver import engine_pins, engine_rows_for, resolve
from ascend_ready.provision.versions import same_version

ENGINES = ("verl", "vllm-ascend", "mindspeed-rl")


def check_engine_fleet(engine: str, fingerprints: dict[str, dict[str, str | None]],
                       matrix: Matrix | None = None) -> dict[str, list[str]]:
    """Refuse a fleet that `engine` does not support: node -> {cann, torch, torch_npu} as read on it.

    Returns node -> the engine rows it satisfies; raises MatrixError naming every node that is off (or
    that lacks a version) and the stack `ascend-matrix resolve --engine` recommends instead.
    """
    m = matrix or load_matrix()
    if not [e for e in m.engines if e.engine == engine]:
        raise MatrixError(f"engine: no rows for engine {engine!r}",
                          hint=f"engines in the matrix: {', '.join(sorted({e.engine for e in m.engines}))}")
    ok: dict[str, list[str]] = {}
    bad: list[str] = []
    for node, fp in sorted(fingerprints.items()):
        missing = [k for k in ("cann", "torch", "torch_npu") if not fp.get(k)]
        if missing:
            bad.append(f"{node}: {', '.join(missing)} not read")
            continue
        rows = engine_rows_for(m, engine, fp["cann"], fp["torch"], fp["torch_npu"])
        if rows:
            ok[node] = [r.id for r in rows]
        else:
            bad.append(f"{node}: CANN {fp['cann']}, torch {fp['torch']}, torch_npu {fp['torch_npu']}")
    if bad:
        try:
            want = resolve(m, engine=engine)
            hint = (f"{engine} supports e.g. CANN {want.cann} / torch {want.torch} / "
                    f"torch_npu {want.torch_npu} "
                    f"(`ascend-matrix resolve --engine {engine}`)")
        except MatrixError:
            hint = f"see the {engine} rows in `ascend-matrix show --format json`"
        raise MatrixError(f"{engine} does not support these nodes: " + "; ".join(bad), hint=hint)
    return ok


def _same_release(have: str, want: str) -> bool:
    """Two Python package versions (0.11.0rc1, 0.12.1+npu) as the matrix compares them."""
    def norm(v: str) -> str:
        return re.sub(r"(\d)(rc|a|b|post|dev)", r"\1.\2", v.strip().lower())
    try:
        return same_version(norm(have), norm(want))
    except ValueError:
        return norm(have) == norm(want)


def check_engine_versions(engine: str, rows: dict[str, list[str]], installed: dict[str, dict[str,
                                                                                             str | None]],
                          matrix: Matrix | None = None, skip: tuple[str, ...] = ()) -> None:
    """Refuse nodes whose installed engine packages differ from what their engine rows pin (verl's own
    release, vllm-ascend, megatron-core, ...), naming node, package, the version found and the pinned one.

    `rows`: node -> the row ids check_engine_fleet returned for it; `installed`: node -> distribution name ->
    version as read with the node's interpreter (None: not installed). All nodes must also agree with each
    other, which the pins imply. `skip`: packages this job does not load (megatron-core under fsdp)."""
    m = matrix or load_matrix()
    by_id = {r.id: r for r in m.engines}
    bad: list[str] = []
    pinned: dict[str, str] = {}
    for node in sorted(rows):
        pins: dict[str, str] = {}
        for row_id in rows[node]:
            pins.update(engine_pins(by_id[row_id]))
        pinned.update(pins)
        found = installed.get(node, {})
        for package, want in pins.items():
            if package in skip:
                continue
            have = found.get(package)
            if have is None:
                bad.append(f"{node}: {package} not installed (pinned {want})")
            elif not _same_release(have, want):
                bad.append(f"{node}: {package} {have}, not {want}")
    if bad:
        line = " ".join(f"{k}=={v}" for k, v in pinned.items())
        raise MatrixError(f"{engine}: nodes run other releases than the matrix pins: " + "; ".join(bad),
                          hint=f"install the pinned set on each node named ({line}; `ascend-matrix resolve "
                               f"--engine {engine}` prints it)")
