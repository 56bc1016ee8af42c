"""The launcher's gate on the RL engines of the matrix (verl, vllm-ascend, MindSpeed-RL): a fleet whose
stack no row of the engine accepts, or whose nodes run other engine releases than the row pins, is refused.

The rows are the matrix file's `engines:` (matrix.EngineRow); which rows accept a stack is resolver.py's.
"""

from __future__ import annotations

from ascend_ready.errors import MatrixError
from ascend_ready.provision.matrix import Matrix, load_matrix
from ascend_ready.provision.resolver import engine_rows_for, resolve

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
