"""The preflight as a library call: pick checks, give each host its profile, collect, judge, report.

`ascend-check` and `ascend-train` (which starts only after a passing preflight) both go through here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ascend_ready.checks.catalog import plan
from ascend_ready.checks.profile import DEFAULT_PROFILE, HardwareProfile, bundled_profiles, load_profile
from ascend_ready.checks.registry import CheckSpec, select_checks
from ascend_ready.checks.report import Report
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import HostSnapshot, Snapshot
from ascend_ready.checks.transport import FanoutOptions, Target, collect

from ascend_ready import __version__
from ascend_ready.errors import ConfigError

__all__ = ["PreflightOptions", "collect_snapshot", "judge_snapshot", "preflight", "profiles_for"]

#: inventory variable naming a host's (or group's) hardware profile: a bundled name or a file
PROFILE_VAR = "ascend_check_profile"
#: what `ascend-sim inventory` writes for each node: its hardware model, named like our bundled profiles
SIM_HARDWARE_VAR = "ascend_sim_hardware"


@dataclass
class PreflightOptions:
    tier: str = "quick"
    select: Sequence[str] = ()
    skip: Sequence[str] = ()
    profile: str | None = None
    fanout: FanoutOptions = field(default_factory=FanoutOptions)

    def checks(self) -> list[CheckSpec]:
        specs = select_checks(self.tier, self.select, self.skip)  # type: ignore[arg-type]
        if not specs:
            raise ConfigError(
                "no check matches --select/--skip in this tier", hint="see `ascend-check list` for the ids"
            )
        return specs


def _profile_spec(groups_vars: dict[str, str], default: str | None) -> str:
    """Inventory's own choice first, then --profile, then the simulator's hardware name, then the default."""
    if groups_vars.get(PROFILE_VAR):
        return groups_vars[PROFILE_VAR]
    if default:
        return default
    sim = groups_vars.get(SIM_HARDWARE_VAR)
    if sim and sim in bundled_profiles():
        return sim
    return DEFAULT_PROFILE


def profiles_for(hosts: Sequence[Target | HostSnapshot], default: str | None) -> dict[str, HardwareProfile]:
    """host name -> its profile with the overrides of its inventory groups applied."""
    cache: dict[str, HardwareProfile] = {}
    out = {}
    for h in hosts:
        spec = _profile_spec(h.vars, default)
        if spec not in cache:
            cache[spec] = load_profile(spec)
        out[h.name] = cache[spec].for_groups(list(h.groups))
    return out


def collect_snapshot(
    targets: Sequence[Target],
    options: PreflightOptions,
    progress: Callable[[HostSnapshot], None] | None = None,
    specs: Sequence[CheckSpec] | None = None,
) -> Snapshot:
    """Run the probes the selected checks read on every target (one exec per host)."""
    specs = options.checks() if specs is None else specs
    wanted = {p for s in specs for p in s.probes}
    profiles = profiles_for(targets, options.profile)

    def host_plan(t: Target):
        prof = profiles[t.name]
        return plan(prof, wanted), prof.training_user

    hosts = collect(list(targets), host_plan, options.fanout, progress=progress)
    return Snapshot(tool_version=__version__, hosts={h.name: h for h in hosts})


def judge_snapshot(
    snapshot: Snapshot,
    options: PreflightOptions,
    *,
    source: str = "live",
    specs: Sequence[CheckSpec] | None = None,
    started: float | None = None,
) -> Report:
    specs = options.checks() if specs is None else specs
    profiles = profiles_for(list(snapshot.hosts.values()), options.profile)
    names = sorted({p.product for p in profiles.values()})
    return run_checks(
        snapshot,
        profiles,
        specs,
        tier=options.tier,
        profile_name=", ".join(names),
        source=source,
        tool_version=__version__,
        started=started,
    )


def preflight(
    targets: Sequence[Target],
    options: PreflightOptions,
    progress: Callable[[HostSnapshot], None] | None = None,
) -> Report:
    """Collect from `targets` and judge: the whole `ascend-check` run."""
    started = time.monotonic()
    specs = options.checks()
    snap = collect_snapshot(targets, options, progress=progress, specs=specs)
    return judge_snapshot(snap, options, specs=specs, started=started)
