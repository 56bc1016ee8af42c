"""`ascend-check node`: this node's preflight run on the node itself (no SSH), for a scheduler or a timer,
and its verdict acted on: Slurm's health check and prolog (checks/slurm_health.py), node_exporter's textfile.

The probes go through the same local execution path as `ascend-check` with no --hosts (one /bin/sh batch,
the same checks and judging as a run over SSH). Fleet checks compare this node with the fingerprints the
controller recorded (`ascend-check -i INVENTORY --fleet-fingerprints FILE`), or skip saying so.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
import time
from pathlib import Path

import click
from rich.console import Console

# the modules, not their names: the recorded profile's path and the atomic writer are read at call time
from ascend_ready.checks import drain_policy
from ascend_ready.checks import profile as profile_mod
from ascend_ready.checks import report as report_mod
from ascend_ready.checks.burn_in import MARGIN_S
from ascend_ready.checks.cli_options import burn_in_duration, duration_option, tier_option
from ascend_ready.checks.cluster.fleet_file import load_fleet_fingerprints
from ascend_ready.checks.cluster.launchspec import healthy_devices
from ascend_ready.checks.drain_policy import DrainPolicy
from ascend_ready.checks.html_report import check_output_path
from ascend_ready.checks.node_unjudged import render_unjudged
from ascend_ready.checks.preflight import PreflightOptions, collect_snapshot, judge_snapshot
from ascend_ready.checks.registry import check_select
from ascend_ready.checks.report import exit_code, render_json, render_prometheus, render_table
from ascend_ready.checks.slurm_health import (
    REASON_PREFIX,
    act_on_verdict,
    clear_comment,
    drain_reason,
    gres_conf_line,
)
from ascend_ready.errors import AscendReadyError, ConfigError, ExitCode
from ascend_ready.fleet.transport import LOCAL, FanoutOptions, Target

__all__ = ["node_command", "run_node"]

#: where a node keeps its latest full report (the drain reason is short; this says everything)
DEFAULT_REPORT = "/var/lib/ascend-ready/node-check.json"
#: checks of a node's idle state: a health check also runs while a job holds the NPUs, so it leaves them to
#: the prolog, which runs before a job starts, when the NPUs must be idle
BUSY_STATE_CHECKS = ("npu.processes", "npu.hbm_idle", "npu.hbm_usage")
#: the prolog's fast subset: one npu-smi pass and the device NICs' links, nothing that reads sysfs or
#: lspci -vvv (the health check covers those every interval)
PROLOG_CHECKS = (
    "npu.count",
    "npu.health",
    "npu.device_nodes",
    "npu.processes",
    "npu.hbm_idle",
    "hccl.link_up",
)
#: seconds of the run's deadline kept for judging and acting after the probe batch
_JUDGE_MARGIN_S = 4.0
#: --deadline's default: under Slurm's 60 s HealthCheckProgram limit
DEFAULT_DEADLINE_S = 50.0
#: the shortest --deadline: the judging margin plus a batch that can judge a node (one quick-tier batch
#: takes 1-5 s on an idle node, npu-smi being the slowest probe): a shorter one would judge nothing and,
#: under --slurm-health, drain a healthy node as "cannot judge"
MIN_DEADLINE_S = 10.0


def _deadline(given: float | None, duration_s: float | None) -> float:
    """--deadline, or its default; a burn-in's must also cover the load (D) and its last round."""
    if duration_s is None:
        return DEFAULT_DEADLINE_S if given is None else given
    need = duration_s + MARGIN_S + MIN_DEADLINE_S
    if given is None:
        return DEFAULT_DEADLINE_S + duration_s + MARGIN_S
    if given < need:
        raise ConfigError(f"--deadline {given:g} is shorter than the burn-in it must hold: --duration "
                          f"{duration_s:g} s, {MARGIN_S:g} s for the load's last round and "
                          f"{MIN_DEADLINE_S:g} s to judge",
                          hint=f"give --deadline {need:g} or more, or leave it out")
    return given


def node_name(given: str | None = None) -> str:
    """Slurm's name for this node under slurmd (SLURMD_NODENAME), else the short host name."""
    return given or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0] or "localhost"


def recorded_profile() -> str | None:
    """The profile provisioning left on this node (python_env), or None where there is none: with it the
    node is judged as the controller's `ascend-check -i` judges it (thresholds, training user and venv)."""

    return profile_mod.NODE_PROFILE if Path(profile_mod.NODE_PROFILE).is_file() else None


def default_report() -> str:
    """DEFAULT_REPORT for root (the health check, the timer); another user (the training user trying its
    node by hand) keeps its report under its own home, where it may write."""
    if os.geteuid() == 0:
        return DEFAULT_REPORT
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(state) / "ascend-ready" / "node-check.json")


def run_node(name: str, options, fleet):
    """Collect this node's probes locally and judge them (the report, and the snapshot it judged)."""

    started = time.monotonic()
    specs = options.checks()
    snap = collect_snapshot([Target(name=name, address=LOCAL)], options, specs=specs, warm_up=False)
    report = judge_snapshot(
        snap, options, specs=specs, started=started, fleet_reference=fleet.fingerprints if fleet else None
    )
    return report, snap


def _write(path: str | Path, text: str, what: str) -> None:

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        report_mod.write_atomic(path, text)
    except OSError as exc:

        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            hint = f"free space on the file system of {path.parent} (df -h {path.parent}), or give another "
            hint += "path"
        elif os.geteuid() == 0:
            hint = f"check {path.parent} (a read-only mount, an attribute: lsattr), or give another path"
        else:
            hint = "give a path this user may write, or run as root"
        raise ConfigError(f"cannot write the {what} {path}: {exc.strerror or exc}", hint=hint) from None


def _write_unjudged(prometheus: str, name: str, reason: str) -> None:
    """Replace the textfile with 'could not judge' metrics (checks/node_unjudged.py); a write that fails
    here is said on stderr, never in place of the run's own error."""

    try:
        _write(prometheus, render_unjudged(name, reason), "textfile")
    except ConfigError as exc:
        click.echo(f"error: {exc.message}", err=True)


class _Watchdog:
    """Ends the run at its deadline whatever it is doing (a hung tool, a slow slurmctld), after `on_expiry`
    had a chance to act (the health check drains saying the run could not judge): Slurm kills a health
    check that runs too long, and a killed check acts on nothing."""

    def __init__(self, deadline_s: float, on_expiry):
        self.deadline_s = deadline_s
        self._timer = threading.Timer(deadline_s, self._expire, args=(on_expiry,))
        self._timer.daemon = True

    def _expire(self, on_expiry) -> None:
        msg = f"ascend-check node: the run passed its deadline of {self.deadline_s:g} s"
        try:
            on_expiry(msg)
        except Exception as exc:  # the exit below must happen whatever acting did
            msg += f" (and acting on it failed: {exc})"
        click.echo(f"error: {msg}", err=True)
        sys.stderr.flush()
        os._exit(int(ExitCode.FAILED))

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()


@click.command("node")
@tier_option  # burn-in here: a return-to-service re-check, a new node's acceptance; --deadline grows by D
@duration_option
@click.option("--select", multiple=True, metavar="GLOB", help="Only checks whose id matches (repeatable).")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out checks whose id matches (repeatable).")
@click.option(
    "--profile",
    metavar="FILE|NAME",
    help="Hardware profile (bundled name or file); default: the one provisioning recorded, "
    "/etc/ascend-ready/profile.yml (the controller's thresholds, training user and venv), else "
    "atlas-800t-a2.",
)
@click.option(
    "--training-user", metavar="USER", help="User the training job runs as (default: the profile's)."
)
@click.option("--python", metavar="PATH", help="Training interpreter on this node (default: the profile's).")
@click.option(
    "--node-name",
    "given_name",
    metavar="NAME",
    help="This node's name in the report and in Slurm (default: $SLURMD_NODENAME, else the short host name).",
)
@click.option(
    "--fleet-fingerprints",
    "fleet_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="The fleet's fingerprints as the controller recorded them (ascend-check -i INVENTORY "
    "--fleet-fingerprints FILE), or a launch spec (its stack fingerprints, for fleet.stack): fleet.* "
    "checks compare this node with them; without it they skip.",
)
@click.option(
    "--timeout",
    "probe_timeout",
    type=click.FloatRange(0.1, 3600),
    default=10.0,
    show_default=True,
    help="Seconds each probe command may run (a hung tool is cut there and its checks error).",
)
@click.option(
    "--deadline",
    type=click.FloatRange(0.0, 86400),
    default=None,
    help=f"Seconds the whole run may take, acting included, at least {MIN_DEADLINE_S:g}: keep it under "
    f"Slurm's limit for a health check (60 s) or PrologEpilogTimeout. [default: {DEFAULT_DEADLINE_S:g}; "
    f"--tier burn-in: that plus D and {MARGIN_S:g} s for the load's last round]",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option(
    "--prometheus",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also write node_exporter textfile metrics here (atomically).",
)
@click.option(
    "--report",
    "report_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help=f"Where the full JSON report is kept on the node [default: {DEFAULT_REPORT}; as another user than "
    "root: ~/.local/state/ascend-ready/node-check.json].",
)
@click.option("--no-report", is_flag=True, help="Keep no report file (a one-off run, e.g. a launch gate).")
@click.option(
    "--slurm-health",
    is_flag=True,
    help="Act as Slurm's HealthCheckProgram: drain this node when a "
    'check fails or cannot be judged (Reason "ascend-check: <ids>"), resume it when it passes '
    "and the drain was ours. Leaves out the checks of an idle node (a job may hold the NPUs).",
)
@click.option(
    "--drain-max-share",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="--slurm-health: the drain breaker; never drain more than this share of a partition in one "
    "--drain-window (at least one node); a failing node past it stays in service, said in its Slurm Comment, "
    "a log line and the textfile metric ascend_check_drain_held_back.",
)
@click.option(
    "--drain-window",
    type=click.FloatRange(1.0, 30 * 86400),
    default=3600.0,
    show_default=True,
    help="--slurm-health: seconds the breaker counts ascend-check's drains over (Slurm's reason times).",
)
@click.option(
    "--resume-tier",
    type=click.Choice(["full", "burn-in"]),
    default="full",
    show_default=True,
    help="--slurm-health: the re-check whose pass returns a node ascend-check drained (a quick pass never "
    "does); burn-in: only a passing --tier burn-in run, for as long as its --duration says.",
)
@click.option(
    "--slurm-textfile",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="--slurm-health: write what was done in Slurm (ascend_check_slurm_action, "
    "ascend_check_drain_held_back) as node_exporter textfile metrics here, apart from --prometheus's file "
    "(the node_health timer's: two files must not carry the same series).",
)
@click.option(
    "--drain-on-error",
    is_flag=True,
    help="--slurm-health: also drain when checks could not be judged (by default a node is drained only "
    "for a check that failed; 'cannot judge' is logged and exported).",
)
@click.option(
    "--prolog",
    is_flag=True,
    help="Act as Slurm's Prolog: a fast subset of checks; exit 1 refuses "
    "the job (Slurm drains the node and requeues it).",
)
@click.option(
    "--gres-line",
    is_flag=True,
    help="Print gres.conf's line for this node's healthy NPUs (NodeName=N Name=npu File=/dev/davinci[...]) "
    "instead of the report (the slurm_health role writes gres.conf from it).",
)
@click.option(
    "--unjudged",
    metavar="REASON",
    help="Judge nothing: replace the --prometheus textfile with 'could not judge' metrics saying REASON "
    "(the node_health unit's ExecStopPost runs this after a killed or failed run).",
)
@click.option("-v", "--verbose", is_flag=True, help="List passing checks in the table too.")
def node_command(
    tier,
    duration,
    select,
    skip,
    profile,
    training_user,
    python,
    given_name,
    fleet_file,
    probe_timeout,
    deadline,
    fmt,
    prometheus,
    report_file,
    slurm_health,
    drain_max_share,
    drain_window,
    resume_tier,
    slurm_textfile,
    drain_on_error,
    prolog,
    gres_line,
    no_report,
    unjudged,
    verbose,
) -> None:
    """This node's preflight, run on the node (no SSH): for a Slurm health check or prolog, or a timer.

    \b
      ascend-check node --prometheus /var/lib/prometheus/node-exporter/ascend_check.prom
      ascend-check node --slurm-health --fleet-fingerprints /etc/ascend-ready/fleet.json
      ascend-check node --prolog
      ascend-check node --tier burn-in --duration 10m --slurm-health
    \b
    Exit codes: 0 all passed; 1 a check failed or could not be judged (--slurm-health: Slurm could not be
    told); 2 usage or configuration error.
    """

    duration_s = burn_in_duration({"duration": duration, "tier": tier})
    deadline = _deadline(deadline, duration_s)
    if prolog and duration_s is not None:
        raise ConfigError("--prolog runs before every job: a burn-in there would hold each job for its "
                          "duration", hint="run the burn-in as a re-check: --tier burn-in --slurm-health")
    if deadline < MIN_DEADLINE_S:
        raise ConfigError(
            f"--deadline {deadline:g}: a run needs at least {MIN_DEADLINE_S:g} s ({_JUDGE_MARGIN_S:g} s are "
            "kept for judging and acting, and the probe batch needs the rest to judge anything)",
            hint=f"give --deadline {MIN_DEADLINE_S:g} or more (Slurm's health check allows up to 60 s)",
        )
    if slurm_health and prolog:
        raise ConfigError(
            "--slurm-health and --prolog are two roles: give one",
            hint="HealthCheckProgram runs --slurm-health, Prolog runs --prolog",
        )
    if prolog and not select:
        select = PROLOG_CHECKS
    if slurm_health:
        skip = (*skip, *BUSY_STATE_CHECKS)
    check_output_path(prometheus, "--prometheus")
    check_output_path(slurm_textfile, "--slurm-textfile")
    name = node_name(given_name)
    if unjudged is not None:
        if not prometheus:
            raise ConfigError("--unjudged replaces the textfile: give --prometheus FILE too")
        _write_unjudged(prometheus, name, unjudged)
        sys.exit(int(ExitCode.OK))
    if report_file is None:
        report_file = default_report()
    if profile is None:
        profile = recorded_profile()
    if (
        not no_report and Path(report_file).is_dir()
    ):  # its folder is made when missing (/var/lib/ascend-ready on a fresh node)
        raise ConfigError(f"--report {report_file} is a directory", hint="give a file path")
    check_select(select, tier)
    if fleet_file:
        fleet = load_fleet_fingerprints(fleet_file)
    else:
        fleet = None
    batch_s = max(1.0, deadline - _JUDGE_MARGIN_S)
    options = PreflightOptions(
        tier=tier,
        select=select,
        skip=skip,
        profile=profile,
        training_user=training_user,
        python=python,
        fanout=FanoutOptions(
            concurrency=1, probe_timeout_s=min(probe_timeout, batch_s), host_deadline_s=batch_s
        ),
        duration_s=duration_s,
    )
    policy = DrainPolicy.resuming_from(resume_tier, max_share=drain_max_share, window_s=drain_window,
                                       drain_on_error=drain_on_error)

    def on_expiry(msg: str) -> None:
        if prometheus:
            _write_unjudged(prometheus, name, f"run passed its {deadline:g} s deadline")
        if slurm_health and policy.drain_on_error:
            act_on_verdict(
                name,
                f"{REASON_PREFIX} cannot judge: run passed its {deadline:g} s deadline",
                timeout=2.0,
                policy=policy,
                judged=False,
            )

    with _Watchdog(deadline, on_expiry):
        try:
            report, snap = run_node(name, options, fleet)
        except BaseException as exc:  # the verdict of the run before must not stand for this one
            if prometheus:
                why = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                _write_unjudged(prometheus, name, f"run failed: {why}")
            raise
        if gres_line:
            click.echo(gres_conf_line(name, healthy_devices(snap.hosts[name])[0]))
            sys.exit(int(ExitCode.OK))

        if fmt == "json":
            click.echo(render_json(report), nl=False)
        else:
            render_table(report, Console(soft_wrap=False, width=max(100, Console().width)), verbose=verbose)
        if prometheus:
            _write(prometheus, render_prometheus(report), "textfile")
        if not no_report:
            _write(report_file, render_json(report), "report")
        code = exit_code(report)
        if slurm_health:
            code = _slurm_health(name, report, report_file, policy, tier, slurm_textfile, no_report)
    sys.exit(code)


def _slurm_health(name: str, report, report_file: str, policy, tier: str, textfile, no_report) -> int:
    """Drain or resume this node as the verdict and the policy say (checks/drain_policy.py); exit 0 once
    Slurm was told, 1 when it could not be. The action goes into the node's drain history and textfile."""

    reason = drain_reason(report, name)
    judged = any(r.host == name and r.status == "fail" for r in report.results)
    history = drain_policy.history_path(report_file)
    try:
        action = act_on_verdict(name, reason, policy=policy, tier=tier, judged=judged)
        last = (drain_policy.read_history(history) or [{}])[-1]
        if last.get("action") == "held" and action.action != "held":
            clear_comment(name)
    except AscendReadyError as exc:
        click.echo(f"error: ascend-check node --slurm-health could not act: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        return int(ExitCode.FAILED)
    click.echo(f"slurm: {action.note} (full report: {report_file})", err=True)
    if textfile:
        _write(textfile, drain_policy.render_metrics(name, action), "textfile")
    # a node that stays held back, drained or unjudged says so every interval: the history keeps the change
    repeat = (last.get("action"), last.get("reason")) == (action.action, action.reason)
    if not no_report and action.action != "none" and not repeat:
        try:
            drain_policy.record(history, node=name, action=action.action, reason=action.reason, tier=tier,
                                note=action.note)
        except OSError as exc:
            click.echo(f"warning: the drain history {history} was not written: {exc}", err=True)
    return int(ExitCode.OK)
