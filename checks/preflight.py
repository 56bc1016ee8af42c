"""The preflight as a library call: pick checks, give each host its profile, collect, judge, report.

`ascend-check` and `ascend-train` (which starts only after a passing preflight) both go through here.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ascend_ready import __version__
from ascend_ready.checks.catalog import plan
from ascend_ready.checks.collect import collect
from ascend_ready.checks.profile import DEFAULT_PROFILE, HardwareProfile, load_profile
from ascend_ready.checks.registry import CheckSpec, select_checks
from ascend_ready.checks.report import Report
from ascend_ready.checks.snapshot import HostSnapshot, Snapshot
from ascend_ready.errors import ConfigError
from ascend_ready.fleet.inventory import var_origin
from ascend_ready.fleet.transport import FanoutOptions, Target

__all__ = [
    "PreflightOptions",
    "check_host_profiles",
    "collect_snapshot",
    "judge_snapshot",
    "override_profiles",
    "preflight",
    "profiles_for",
    "snapshot_options",
    "training_env",
]

#: inventory variable naming a host's (or group's) hardware profile: a bundled name or a file (the
#: simulator's inventory sets it for each node: the product never reads the simulator's own variables)
PROFILE_VAR = "ascend_check_profile"
#: Whose environment is judged, per host. ascend-check's own variables come first (a collect records
#: --training-user/--python in them, so judging its snapshot later sees the same user), then the
#: provisioning contract's (playbooks/README.md): the training user and the python_env role's venv.
USER_VARS = ("ascend_check_training_user", "ascend_training_user", "python_env_user")
PYTHON_VAR = "ascend_check_python"
VENV_VARS = ("python_env_venv", "python_env_path")
STACK_ID_VAR = "stack_id"
#: where the python_env role puts the venv when python_env_path is empty (roles/python_env/defaults)
VENV_PATTERN = "~{user}/venvs/ascend-{stack_id}"

_USER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\$?", re.ASCII)
#: An interpreter given with `~user/` or a glob is expanded by the node's shell, so it is left
#: unquoted there: only characters that cannot start another shell word are accepted.
_EXPANDED_PATH_RE = re.compile(r"~[A-Za-z0-9_.-]*(/[A-Za-z0-9_.@+*?-]+)*", re.ASCII)


@dataclass
class PreflightOptions:
    tier: str = "quick"
    select: Sequence[str] = ()
    skip: Sequence[str] = ()
    profile: str | None = None
    #: --training-user / --python: beat the inventory and the profile on every host
    training_user: str | None = None
    python: str | None = None
    fanout: FanoutOptions = field(default_factory=FanoutOptions)
    #: --duration of the burn-in tier, in seconds (None: no burn-in)
    duration_s: float | None = None

    def checks(self) -> list[CheckSpec]:
        specs = select_checks(self.tier, self.select, self.skip)  # type: ignore[arg-type]
        if not specs:
            raise ConfigError(
                "no check matches --select/--skip in this tier", hint="see `ascend-check list` for the ids"
            )
        return specs


def _profile_spec(groups_vars: dict[str, str], default: str | None) -> str:
    """Inventory's own choice first, then --profile, then the default."""
    if groups_vars.get(PROFILE_VAR):
        return groups_vars[PROFILE_VAR]
    return default or DEFAULT_PROFILE


def _var(hostvars: dict[str, str], names: Sequence[str]) -> str | None:
    """The first of `names` set for the host; Jinja templates are refused, not guessed at."""
    for name in names:
        value = hostvars.get(name)
        if value and ("{{" in value or "{%" in value):
            raise ConfigError(
                f"inventory variable {name}={value!r} is a Jinja template (not rendered here)",
                hint="give the value itself there, or --training-user / --python",
            )
        if value:
            return value
    return None


def training_env(
    hostvars: dict[str, str], profile: HardwareProfile, *, user: str | None = None, python: str | None = None
) -> tuple[str, str]:
    """(training user, interpreter on the node) a host is judged with.

    Each comes from, in order: the CLI (`user`, `python`), the host's inventory variables, the
    profile (whose defaults are root and python3). With no interpreter named, a venv path variable
    gives `<venv>/bin/python`; `stack_id` gives the python_env role's default venv; a training user
    named on the CLI or in the inventory gives the one venv under `~USER/venvs/ascend-*`.
    """
    named_user = user or _var(hostvars, USER_VARS)
    user = named_user or profile.training_user
    if not _USER_RE.fullmatch(user):
        raise ConfigError(f"training user {user!r} is not a user name", hint="e.g. --training-user ascend")
    if not python:
        python = _var(hostvars, (PYTHON_VAR,))
    if not python:
        venv = _var(hostvars, VENV_VARS)
        stack_id = _var(hostvars, (STACK_ID_VAR,))
        if venv:
            python = venv.rstrip("/") + "/bin/python"
        elif stack_id:
            python = VENV_PATTERN.format(user=user, stack_id=stack_id) + "/bin/python"
        elif named_user and profile.python == HardwareProfile.model_fields["python"].default:
            python = VENV_PATTERN.format(user=user, stack_id="*") + "/bin/python"
        else:
            python = profile.python
    if (python.startswith("~") or any(c in python for c in "*?[")) and not _EXPANDED_PATH_RE.fullmatch(
        python
    ):
        raise ConfigError(
            f"interpreter {python!r}: a path with ~ or a glob may only use letters, digits and ._-@+*?",
            hint="give the absolute path of the venv's bin/python",
        )
    return user, python


def check_host_profiles(targets: list[Target], inventory: str | Path) -> None:
    """Refuse a hardware profile named in the inventory's variables that cannot be loaded, naming the host
    and the file that names it (before any host is probed)."""
    problems: dict[str, ConfigError | None] = {}
    for t in targets:
        spec = t.vars.get(PROFILE_VAR)
        if not spec:
            continue
        if spec not in problems:
            try:
                load_profile(spec)
                problems[spec] = None
            except ConfigError as exc:
                problems[spec] = exc
        exc = problems[spec]
        if exc is not None:
            origin = var_origin(Path(inventory), t, PROFILE_VAR)
            raise ConfigError(
                f"inventory host {t.name}: {PROFILE_VAR} {spec!r} (set in {origin}): {exc.message}",
                hint=f"fix {PROFILE_VAR} in {origin}" + (f"; {exc.hint}" if exc.hint else ""),
            )


def profiles_for(
    hosts: Sequence[Target | HostSnapshot],
    default: str | None,
    *,
    training_user: str | None = None,
    python: str | None = None,
) -> dict[str, HardwareProfile]:
    """host name -> its profile with the overrides of its inventory groups applied, and the training
    user and interpreter `training_env` picks for it."""
    cache: dict[str, HardwareProfile] = {}
    out = {}
    for h in hosts:
        spec = _profile_spec(h.vars, default)
        if spec not in cache:
            cache[spec] = load_profile(spec)
        prof = cache[spec].for_groups(list(h.groups))
        user, py = training_env(h.vars, prof, user=training_user, python=python)
        if (user, py) != (prof.training_user, prof.python):
            prof = prof.model_copy(update={"training_user": user, "python": py})
        out[h.name] = prof
    return out


def _profiles(hosts: Sequence[Target | HostSnapshot], options: PreflightOptions):
    return profiles_for(hosts, options.profile, training_user=options.training_user, python=options.python)


def collect_snapshot(
    targets: Sequence[Target],
    options: PreflightOptions,
    progress: Callable[[HostSnapshot], None] | None = None,
    specs: Sequence[CheckSpec] | None = None,
    *,
    warm_up: bool = True,
) -> Snapshot:
    """Run the probes the selected checks read on every target (one exec per host).

    `warm_up`: a dry run of the checks while the hosts probe (see _prepare_judging); a node judging
    itself leaves it out, its probes and its judging share the node's CPUs.

    Each host's profile, training user and interpreter are resolved here, once, and recorded in the
    snapshot with the tier and selection, so judging it (now or later, elsewhere) reads the same."""
    specs = options.checks() if specs is None else specs
    wanted = {p for s in specs for p in s.probes}
    profiles = _profiles(targets, options)

    def host_plan(t: Target):
        prof = profiles[t.name]
        probes = plan(prof, wanted)
        if options.duration_s is not None:
            from ascend_ready.checks.resources.burn_in import for_duration  # start-up: burn-in runs only

            probes = [for_duration(p, prof, options.duration_s) for p in probes]
        return probes, prof.training_user

    first = next(iter(profiles.values()), None)
    hosts = collect(
        list(targets),
        host_plan,
        options.fanout,
        progress=progress,
        while_waiting=lambda: _prepare_judging(specs, first) if warm_up else _prepare_judging(),
    )
    if "hccl-mesh" in wanted:
        _attach_mesh(targets, hosts, options.fanout, profiles)
    if "hccl-collective" in wanted:  # npu.matmul, hccl.allreduce: torchrun across the hosts, after the mesh
        from ascend_ready.checks.cluster.collective_run import attach

        attach(targets, hosts, options.fanout, profiles)
    recorded = {USER_VARS[0]: options.training_user, PYTHON_VAR: options.python}
    for h in hosts:
        h.vars.update({k: v for k, v in recorded.items() if v})
        h.profile = profiles[h.name]
    return Snapshot(
        tool_version=__version__,
        tier=options.tier,  # type: ignore[arg-type]
        select=list(options.select),
        skip=list(options.skip),
        hosts={h.name: h for h in hosts},
    )


def _attach_mesh(targets: Sequence[Target], hosts: Sequence[HostSnapshot], fanout: FanoutOptions,
                 profiles: Mapping[str, HardwareProfile]) -> None:
    """Run the device-NIC mesh across the reachable hosts and record it in their snapshots (hccl.mesh).

    With fewer than two reachable hosts there is nothing to ping between: the check skips then."""
    from ascend_ready.checks.cluster.mesh_run import mesh, record

    up = [h for h in hosts if h.reachable]
    if len(up) < 2:
        return
    names = {h.name for h in up}
    run = mesh([t for t in targets if t.name in names], fanout, profiles)
    record(run, up)


#: PreflightOptions fields a snapshot records and judging defaults to
SNAPSHOT_OPTIONS = ("tier", "select", "skip")
#: what decides a host's profile, training user and interpreter
PROFILE_OPTIONS = ("profile", "training_user", "python")


def snapshot_options(
    snapshot: Snapshot, options: PreflightOptions, given: set[str] | frozenset[str] = frozenset()
) -> tuple[PreflightOptions, list[str]]:
    """The options to judge `snapshot` with: its recorded tier, --select and --skip unless `given`
    names them (an option typed for this judging wins), and a warning where a given tier differs."""
    changes, notes = {}, []
    for name in SNAPSHOT_OPTIONS:
        recorded = getattr(snapshot, name)
        if recorded is None:  # a snapshot of an older version
            continue
        wanted = getattr(options, name)
        if name not in given:
            changes[name] = recorded if name == "tier" else tuple(recorded)
        elif name == "tier" and wanted != recorded:
            notes.append(
                f"judging with --tier {wanted}, but the snapshot was collected with --tier {recorded}: "
                "checks whose probes it lacks report an error"
            )
    if not changes:
        return options, notes
    return dataclasses.replace(options, **changes), notes


def override_profiles(snapshot: Snapshot, options: PreflightOptions) -> list[str]:
    """Resolve each host's profile again from `options` (--profile, --training-user, --python given
    to the judging command win over what the snapshot recorded); one warning per host that changes."""
    hosts = list(snapshot.hosts.values())
    profiles = _profiles(hosts, options)
    notes = []
    for h in hosts:
        new, old = profiles[h.name], h.profile
        if old is not None and new != old:
            what = [
                f"{label} {getattr(new, field)!r} (recorded: {getattr(old, field)!r})"
                for label, field in (("profile", "product"), ("training user", "training_user"),
                                     ("interpreter", "python"))
                if getattr(new, field) != getattr(old, field)
            ] or ["a profile that differs from the recorded one"]
            notes.append(f"{h.name}: judged with {', '.join(what)}, as given on the command line")
        h.profile = new
    return notes


def _prepare_judging(specs: Sequence[CheckSpec] = (), profile: HardwareProfile | None = None) -> None:
    """Load what judging needs (pytest, the check suite's imports, the matrix) while the hosts run their
    probes, instead of after: on one host that is most of a CLI run's own time. A dry run of the
    checks on a host with no outputs also gets pytest's first session (plugins, collection,
    assertion rewriting) out of the way: the real judging then takes a third of the time. Errors are
    left for the judging itself to raise."""
    try:
        from ascend_ready.checks.runner import run_checks
        from ascend_ready.provision.matrix import load_matrix

        load_matrix()
        if specs and profile is not None:
            dry = Snapshot(hosts={"ascend-check-warm-up": HostSnapshot(name="ascend-check-warm-up")})
            run_checks(dry, {"ascend-check-warm-up": profile}, specs)
    except Exception:  # a prefetch only: judging imports and loads these again, and raises then
        pass


def judge_snapshot(
    snapshot: Snapshot,
    options: PreflightOptions,
    *,
    source: str = "live",
    specs: Sequence[CheckSpec] | None = None,
    started: float | None = None,
    fleet_reference: dict | None = None,
) -> Report:
    specs = options.checks() if specs is None else specs
    # The profiles recorded at collect time; only a snapshot of an older version resolves them here.
    older = [h for h in snapshot.hosts.values() if h.profile is None]
    profiles = _profiles(older, options) if older else {}
    profiles.update({h.name: h.profile for h in snapshot.hosts.values() if h.profile is not None})
    names = sorted({p.product for p in profiles.values()})
    from ascend_ready.checks.runner import run_checks

    report = run_checks(
        snapshot,
        profiles,
        specs,
        tier=options.tier,
        profile_name=", ".join(names),
        source=source,
        tool_version=__version__,
        started=started,
        fleet_reference=fleet_reference,
    )
    # what the run covered: a launch judges from it whether every check training needs was judged
    report.select, report.skip = list(options.select), list(options.skip)
    report.selected_checks = sorted(s.id for s in specs)
    for host in report.hosts:
        if host.name in profiles:
            host.training_checks = list(profiles[host.name].training_checks)
    return report


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
