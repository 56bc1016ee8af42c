"""Version order of Ascend, CANN, firmware, torch and torch_npu releases (23.0.rc3 < 23.0.0).

Pure standard library, so the Ansible filters load it in every forked worker without pydantic or YAML.
"""

from __future__ import annotations

import re

# Rank of a version component: builds and pre-releases sort below the release they lead to, rc below
# any number at the same place (23.0.rc3 < 23.0.0), post/spc patches above it.
_RANKS = {"dev": -4, "alpha": -3, "beta": -2, "b": -2, "t": -2, "rc": 0, "post": 2, "spc": 2}
_NUMBER = 1
_COMPONENT = re.compile(r"^(?:(\d+)|(dev|alpha|beta|b|t|rc|post|spc)(\d*))$")
_KEY_LENGTH = 12


def _components(text: str) -> tuple[tuple[int, int], ...]:
    """`text` as (rank, number) pairs; raises ValueError naming the part it cannot read."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"bad version {text!r}: empty")
    public = text.strip().lower().split("+", 1)[0]  # a local tag (2.1.0+cpu) does not order
    parts: list[tuple[int, int]] = []
    for i, part in enumerate(public.split(".")):
        m = _COMPONENT.match(part)
        if m is None or (i == 0 and m.group(1) is None):
            raise ValueError(f"bad version {text!r}: cannot read {part!r}")
        if m.group(1) is not None:
            parts.append((_NUMBER, int(m.group(1))))
        else:
            parts.append((_RANKS[m.group(2)], int(m.group(3) or 0)))
    return tuple(parts)


def version_key(text: str) -> tuple[tuple[int, int], ...]:
    """Sort key for Ascend, CANN, firmware, torch and torch_npu versions (RC case-insensitive).

    23.0.rc3 < 23.0.0 < 24.1.rc1 < 25.0.rc1 < 25.0.rc1.1 < 25.5.1 < 26.0.rc1; 8.0.RC1 < 8.0.0 < 8.1.RC1;
    2.1.0.post8 < 2.1.0.post10; 2.1.0.post8.dev20241009 < 2.1.0.post8. Raises ValueError if unreadable.
    """
    parts = _components(text)
    if len(parts) > _KEY_LENGTH:
        raise ValueError(f"bad version {text!r}: more than {_KEY_LENGTH} parts")
    # Missing parts count as ".0" so 25.5.0.b061 < 25.5.0 < 25.5.0.1 and 8.0.0 == 8.0.0.0.
    return parts + ((_NUMBER, 0),) * (_KEY_LENGTH - len(parts))


def same_version(a: str, b: str) -> bool:
    return version_key(a) == version_key(b)


def version_has_prefix(version: str, prefix: str) -> bool:
    """True if `version` lies in the release line `prefix`: 25.5 holds 25.5.1 and 25.5.0.b061."""
    v, p = _components(version), _components(prefix)
    return v[: len(p)] == p


def base_version(version: str) -> str:
    """The leading numeric release of a version: torch_npu 2.1.0.post10 -> 2.1.0 (its torch)."""
    _components(version)
    nums = []
    for part in version.strip().lower().split("+", 1)[0].split("."):
        if not part.isdigit():
            break
        nums.append(str(int(part)))
    return ".".join(nums)


def python_minor(text: str) -> str:
    """'3.10.13' or '3.10' or 'python3.10' -> '3.10'."""
    m = re.fullmatch(r"(?:python)?\s*(\d+)\.(\d+)(?:\.\d+)?", text.strip().lower())
    if m is None:
        raise ValueError(f"bad Python version {text!r}: expected MAJOR.MINOR such as 3.10")
    return f"{m.group(1)}.{m.group(2)}"


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
