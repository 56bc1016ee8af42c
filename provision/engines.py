"""The RL engines of the matrix (verl, vllm-ascend, MindSpeed-RL): which of their rows accept an
installed stack, and the refusal of a fleet an engine does not support (the launcher's gate).

The rows themselves are the matrix file's `engines:` (matrix.EngineRow); matrix re-exports these names.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ascend_ready.errors import MatrixError
from ascend_ready.provision.versions import base_version, same_version, version_key

if TYPE_CHECKING:
    from ascend_ready.provision.matrix import EngineRow, Matrix

ENGINES = ("verl", "vllm-ascend", "mindspeed-rl")

_CLAUSE_OPS = ("==", ">=", "<=", ">", "<")


def parse_clause(clause: str) -> tuple[str, str]:
    """'>=8.3.RC1' -> ('>=', '8.3.RC1'); raises ValueError for anything else."""
    text = clause.strip()
    op = next((o for o in _CLAUSE_OPS if text.startswith(o)), None)
    if op is None:
        raise ValueError(f"bad version clause {clause!r}: start with one of {' '.join(_CLAUSE_OPS)}")
    version = text[len(op):].strip()
    version_key(version)
    return op, version


def clauses_hold(clauses: list[str], version: str) -> bool:
    """Whether `version` satisfies every clause (== compares as the matrix does: 8.2.rc1 == 8.2.RC1)."""
    key = version_key(version)
    for clause in clauses:
        op, want = parse_clause(clause)
        other = version_key(want)
        ok = {"==": same_version(version, want), ">=": key >= other, "<=": key <= other,
              ">": key > other, "<": key < other}[op]
        if not ok:
            return False
    return True


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


def check_engine_fleet(engine: str, fingerprints: dict[str, dict[str, str | None]],
                       matrix: Matrix | None = None) -> dict[str, list[str]]:
    """Refuse a fleet that `engine` does not support: node -> {cann, torch, torch_npu} as read on it.

    Returns node -> the engine rows it satisfies; raises MatrixError naming every node that is off (or
    that lacks a version) and the stack `ascend-matrix resolve --engine` recommends instead.
    """
    # matrix imports this module (its resolver takes an `engine` pin), so its loader comes in here
    from ascend_ready.provision.matrix import load_matrix, resolve

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
