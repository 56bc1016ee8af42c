"""Check metadata and the helpers a check body uses: `@check(...)`, `evidence(...)`, `warn(...)`,
`not_judged(...)`, `fix_command(...)`.

A check is a pytest test function of one fact, parametrized per host by the runner; `@check` gives
it a stable id, a severity, a tier, the resources it reads (its probes are derived from them) and the
remediation shown when it fails.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ascend_ready.checks.resources.base import Resource, probe_ids
from ascend_ready.errors import AscendReadyError, ConfigError

__all__ = [
    "CHECKS",
    "CheckSpec",
    "CheckWarning",
    "NotJudged",
    "Remediation",
    "all_checks",
    "check",
    "evidence",
    "fix_command",
    "not_judged",
    "select_checks",
    "series",
    "warn",
]

Severity = Literal["critical", "major", "minor"]
Tier = Literal["quick", "full", "burn-in"]
#: each tier runs the checks of the tiers before it too (burn-in: the full tier's, then the sustained load)
TIERS: tuple[Tier, ...] = ("quick", "full", "burn-in")


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
    probes: tuple[str, ...]  # derived from `reads`
    remediation: Remediation | None
    function: str  # module:qualname, for `ascend-check list` and error messages
    reads: tuple[type[Resource], ...] = ()


#: check id -> spec, filled when the suite modules are imported.
CHECKS: dict[str, CheckSpec] = {}


def check(
    id: str,
    *,
    title: str,
    severity: Severity = "major",
    tier: Tier = "quick",
    reads: Iterable[type[Resource]],
    fix: str | None = None,
    command: str | None = None,
    disruptive: bool = False,
) -> Callable[[Callable], Callable]:
    """Declare a test function as check `id` (dotted, e.g. `pcie.link_width`).

    `reads` names the resources the check reads (`reads=[NpuSmi]`); its probes are theirs, and while
    it runs it can read nothing else.
    """
    remediation = Remediation(text=fix, command=command, disruptive=disruptive) if fix else None
    declared = tuple(reads)
    if not declared:
        raise ValueError(f"check {id}: give reads=[resources], the resources it reads")
    ids = probe_ids(declared)

    def register(fn: Callable) -> Callable:
        spec = CheckSpec(
            id=id,
            title=title,
            severity=severity,
            tier=tier,
            probes=ids,
            remediation=remediation,
            function=f"{fn.__module__}:{fn.__qualname__}",
            reads=declared,
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


class NotJudged(AscendReadyError):
    """Raised by `not_judged`: a value the fact depends on was not printed (`NA`, a missing chip)."""

    exit_code = 1


def not_judged(message: str, *, hint: str | None = None) -> None:
    """End the check as `error`: what it needed to read is missing (never a pass)."""
    raise NotJudged(message, hint=hint)


#: Host-specific fix command of the check now running (the runner resets it before each call).
_FIX: list[str] = []


def fix_command(command: str) -> None:
    """The remediation command for this host (its real user, path, device), instead of the template."""
    _FIX[:] = [command]


def take_fix_command() -> str | None:
    out = _FIX[0] if _FIX else None
    _FIX.clear()
    return out


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


#: Time series of the check now running (burn-in): dicts of report.Series' fields (the runner resets it).
_SERIES: list[dict] = []


def series(metric: str, unit: str, subject: str, points: Iterable[tuple[float, float | None]]) -> None:
    """Record one curve the check judged (seconds into its window, value): the report carries it and the
    HTML page plots it."""
    pts = list(points)
    _SERIES.append({"metric": metric, "unit": unit, "subject": subject,
                    "t_s": [t for t, _ in pts], "values": [v for _, v in pts]})


def take_series() -> list[dict]:
    out = list(_SERIES)
    _SERIES.clear()
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
    """Checks of `tier` (full includes quick, burn-in both) matching a `select` glob (all if none) and no
    `skip` glob."""
    select, skip = list(select), list(skip)
    allowed = TIERS[: TIERS.index(tier) + 1]
    return [
        spec
        for spec in all_checks().values()
        if spec.tier in allowed
        and (not select or any(fnmatch.fnmatchcase(spec.id, g) for g in select))
        and not any(fnmatch.fnmatchcase(spec.id, g) for g in skip)
    ]


def check_select(select: tuple[str, ...], tier: str | None) -> None:
    """Refuse a --select glob that matches no check id (naming the nearest ids), or only checks of a later
    tier than `tier` (full-tier ones in the quick tier): mixed with a valid glob, either would silently shrink
    the run."""
    if not select:
        return
    import difflib
    import fnmatch

    checks = all_checks()
    for glob in select:
        hits = [spec for spec in checks.values() if fnmatch.fnmatchcase(spec.id, glob)]
        if not hits:
            near = difflib.get_close_matches(glob, list(checks), n=3, cutoff=0.7)
            raise ConfigError(
                f"no check matches --select/--skip: --select {glob!r} is no check id",
                hint=(f"did you mean {' or '.join(near)}? " if near else "")
                + "`ascend-check list --tier full` shows every id",
            )
        allowed = TIERS[: TIERS.index(tier) + 1] if tier in TIERS else TIERS
        if all(spec.tier not in allowed for spec in hits):
            need = min((spec.tier for spec in hits), key=TIERS.index)
            raise ConfigError(
                f"--select {glob!r} matches only {need}-tier checks ({', '.join(s.id for s in hits)})",
                hint=f"add --tier {need}",
            )
