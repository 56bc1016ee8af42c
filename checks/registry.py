"""Check metadata and the helpers a check body uses: `@check(...)`, `evidence(...)`, `warn(...)`.

A check is a pytest test function of one fact, parametrized per host by the runner; `@check` gives
it a stable id, a severity, a tier, the probes it reads and the remediation shown when it fails.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CHECKS",
    "CheckSpec",
    "CheckWarning",
    "Remediation",
    "all_checks",
    "check",
    "evidence",
    "select_checks",
    "warn",
]

Severity = Literal["critical", "major", "minor"]
Tier = Literal["quick", "full"]
TIERS: tuple[Tier, ...] = ("quick", "full")


class Remediation(BaseModel):
    """What to do when the check fails: the command where one exists, and whether it disturbs jobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(description="what to do, in one sentence")
    command: str | None = Field(None, description="the command that fixes it, where one exists")
    disruptive: bool = Field(
        False, description="running the fix interrupts jobs on the node (reboot, driver reload, device reset)"
    )


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    severity: Severity
    tier: Tier
    probes: tuple[str, ...]
    remediation: Remediation | None
    function: str  # module:qualname, for `ascend-check list` and error messages


#: check id -> spec, filled when the suite modules are imported.
CHECKS: dict[str, CheckSpec] = {}


def check(
    id: str,
    *,
    title: str,
    severity: Severity = "major",
    tier: Tier = "quick",
    probes: Iterable[str],
    fix: str | None = None,
    command: str | None = None,
    disruptive: bool = False,
) -> Callable[[Callable], Callable]:
    """Declare a test function as check `id` (dotted, e.g. `pcie.link_width`)."""
    remediation = Remediation(text=fix, command=command, disruptive=disruptive) if fix else None

    def register(fn: Callable) -> Callable:
        spec = CheckSpec(
            id=id,
            title=title,
            severity=severity,
            tier=tier,
            probes=tuple(probes),
            remediation=remediation,
            function=f"{fn.__module__}:{fn.__qualname__}",
        )
        old = CHECKS.get(id)
        # pytest may import a suite module a second time under another name: same function, same id.
        if old is not None and old.function.split(":")[1] != fn.__qualname__:
            raise RuntimeError(f"two checks share the id {id!r}: {old.function} and {spec.function}")
        CHECKS[id] = spec
        fn.__check__ = spec
        return fn

    return register


class CheckWarning(Exception):
    """Raised by `warn`: the fact is off but not failing (e.g. chip health Warning, AER errors)."""


def warn(message: str) -> None:
    raise CheckWarning(message)


#: Evidence lines of the check now running (the runner resets it before each call).
_EVIDENCE: list[str] = []


def evidence(*items: str | Iterable[str]) -> None:
    """Record the raw lines a check judged; they are shown with its result."""
    for item in items:
        if isinstance(item, str):
            _EVIDENCE.extend(item.splitlines() or [item])
        else:
            for line in item:
                _EVIDENCE.append(str(line))


def take_evidence() -> list[str]:
    out = list(dict.fromkeys(_EVIDENCE))  # keep order, drop repeats
    _EVIDENCE.clear()
    return out


SUITE_PACKAGE = "ascend_ready.checks.suite"


def all_checks() -> dict[str, CheckSpec]:
    """Every check of the bundled suite, by id (imports the suite modules)."""
    pkg = importlib.import_module(SUITE_PACKAGE)
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("test_"):
            importlib.import_module(f"{SUITE_PACKAGE}.{info.name}")
    return dict(sorted(CHECKS.items()))


def select_checks(
    tier: Tier = "quick", select: Iterable[str] = (), skip: Iterable[str] = ()
) -> list[CheckSpec]:
    """Checks of `tier` (full includes quick) matching a `select` glob (all if none) and no `skip` glob."""
    select, skip = list(select), list(skip)
    allowed = TIERS[: TIERS.index(tier) + 1]
    return [
        spec
        for spec in all_checks().values()
        if spec.tier in allowed
        and (not select or any(fnmatch.fnmatchcase(spec.id, g) for g in select))
        and not any(fnmatch.fnmatchcase(spec.id, g) for g in skip)
    ]
