"""The preflight gate: training starts only after `ascend-check` passes on the nodes it will use.

It runs the ascend-check CLI as a subprocess (exit 0 = pass) and reads its JSON report, the `Report` model.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ascend_ready.checks.report import Report
from ascend_ready.errors import ConfigError, ParseError, TrainingError
from ascend_ready.training.waivers import refuse_waived_judged

SKIP_BANNER = (
    "=" * 78 + "\nWARNING: PREFLIGHT SKIPPED (--skip-preflight). The nodes were NOT validated;\n"
    "driver, HCCL or NPU faults will surface as hangs or crashes mid-run.\n" + "=" * 78
)
HINT = "fix the failures or pass --skip-preflight"
#: training/slurm_launch.py's job step sets it to the job id once the gate passed on every allocated node
SLURM_GATED_ENV = "ASCEND_TRAIN_SLURM_GATED"
#: ascend-check's exit codes (checks/cli.py); on 2 it prints its error on stderr and no report on stdout
KINDS = {
    0: "exit 0 but no readable report",
    1: "checks failed",
    2: "usage or configuration error",
    3: "hosts unreachable",
}
USAGE_ERROR = 2
MAX_LISTED = 15
REPORT = "the ascend-check report"


@dataclass
class PreflightResult:
    exit_code: int
    report: Report | None
    """What ascend-check printed on stdout; None on a usage error or when it could not be read."""
    unreadable: str = ""
    """Why a report that should be there could not be read (empty when it was, or on a usage error)."""
    stderr: str = ""


def default_command() -> str:
    """ascend-check from the same environment as the running Python, else whatever is on PATH."""
    beside = Path(sys.executable).with_name("ascend-check")
    return str(beside) if beside.exists() else "ascend-check"


def check_command(command: str | None, hosts: list[str], inventory: str | None) -> list[str]:
    cmd = [command or default_command()]
    if inventory:
        cmd += ["-i", inventory]
    elif hosts:
        cmd += ["--hosts", ",".join(hosts)]
    else:
        # this node: the job runs here as this user in this interpreter (the venv the playbook built,
        # activated as the runbook says), so the gate judges exactly those
        import getpass

        cmd += ["--training-user", getpass.getuser(), "--python", sys.executable]
    return [*cmd, "--format", "json"]


def read_report(stdout: str) -> Report:
    """The report `ascend-check --format json` prints; ParseError naming the first field that is not."""
    if not stdout.strip():
        raise ParseError(REPORT, "nothing on stdout")
    try:
        return Report.model_validate_json(stdout)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        raise ParseError(REPORT, f"{where}: {first['msg']} ({exc.error_count()} error(s))") from None


def failed_checks(report: Report) -> list[str]:
    """`host: unreachable: why` for each host ascend-check could not reach, then `host: id: status: message`
    for each failed or errored check; at most MAX_LISTED lines and a count of the rest."""
    out = [f"{h.name}: unreachable: {h.error or 'no reason given'}" for h in report.unreachable]
    out += [
        f"{r.host}: {r.check_id}: {r.status}: {r.message}".rstrip()
        for r in report.results
        if r.status in ("fail", "error")
    ]
    if len(out) > MAX_LISTED:
        out = [*out[:MAX_LISTED], f"... and {len(out) - MAX_LISTED} more (run ascend-check to see them all)"]
    return out


def run_preflight(
    command: str | None, hosts: list[str], inventory: str | None, timeout_s: int
) -> PreflightResult:
    cmd = check_command(command, hosts, inventory)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as exc:
        raise ConfigError(
            f"preflight command not found: {cmd[0]}",
            hint="install ascend-ready on this node, set preflight.command, or " + HINT,
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise TrainingError(f"preflight did not finish within {timeout_s} s", hint=HINT) from exc
    if proc.returncode == USAGE_ERROR:
        return PreflightResult(proc.returncode, None, stderr=proc.stderr)
    try:
        return PreflightResult(proc.returncode, read_report(proc.stdout), stderr=proc.stderr)
    except ParseError as exc:
        return PreflightResult(proc.returncode, None, unreadable=exc.message, stderr=proc.stderr)


def slurm_step_of_judged_job(env: Mapping[str, str] | None = None) -> bool:
    """This process is the node step of a Slurm job whose launcher (training/slurm_launch.py, in the
    allocation) judged the job before starting the step: every node's preflight and the run directory
    (a run there is refused unless --resume). SLURM_GATED_ENV is the job id the launcher set for the step."""
    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID")
    return bool(job) and env.get(SLURM_GATED_ENV) == job


def gate(
    command: str | None,
    hosts: list[str],
    inventory: str | None,
    timeout_s: int,
    skip: bool,
    log=lambda msg: print(msg, file=sys.stderr),
    waive: tuple[str, ...] | list[str] = (),
) -> None:
    """Return if training may start; raise TrainingError (exit 1) with the failures otherwise, and
    LaunchSpecRefused (exit 1) when the preflight did not judge a check training needs (`waive`: those
    the operator lets go, printed)."""
    if skip and slurm_step_of_judged_job():
        log(f"preflight: judged on every node of Slurm job {os.environ['SLURM_JOB_ID']} before the start")
        return
    if skip:
        log(SKIP_BANNER)
        return
    where = f"inventory {inventory}" if inventory else (", ".join(hosts) if hosts else "the local node")
    log(f"preflight: ascend-check on {where}")
    result = run_preflight(command, hosts, inventory, timeout_s)
    refuse_waived_judged(result.report, waive)  # hook (ops-launch, training/waivers.py)
    report = require_pass(result)
    require_covered(report, waive, log)
    log("preflight: passed")


def require_covered(report: Report, waive, log) -> None:
    """Refuse unless `report` judged, on every host it reached, each check the host's profile requires for
    training (less `waive`, each printed): a preflight narrowed by --select/--skip or a preflight.command
    of its own never authorises a launch."""
    from ascend_ready.checks.cluster.launchspec import narrowing
    from ascend_ready.checks.cluster.launchspec import require_covered as refuse_uncovered

    for check_id in sorted(set(waive)):
        log(f"preflight: WAIVED {check_id} (--waive): training starts without it judged")
    hosts = {h.name: (report.judged(h.name), h.training_checks) for h in report.hosts if h.reachable}
    refuse_uncovered(hosts, list(waive), "the preflight",
                     narrowed=narrowing(report.tier, report.select, report.skip, report.schema_version))


def require_pass(result: PreflightResult) -> Report:
    """The report of a passing preflight; TrainingError (exit 1) listing the failures otherwise. The
    single-node gate and the multi-node launcher (which builds its launch spec from the report) share it."""
    if result.exit_code == 0 and result.report is not None:
        return result.report
    # An exit 0 without a readable report is no pass: the gate would be passing what it did not read.
    kind = KINDS.get(result.exit_code, f"exit code {result.exit_code}")
    lines = failed_checks(result.report) if result.report is not None else []
    if not lines:
        lines += [result.unreadable] if result.unreadable else []
        lines += [ln for ln in result.stderr.strip().splitlines()[-5:] if ln.strip()]
    detail = "".join(f"\n  - {ln}" for ln in lines)
    raise TrainingError(f"preflight failed ({kind}); refusing to train{detail}", hint=HINT)
