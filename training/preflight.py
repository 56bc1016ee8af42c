"""The preflight gate: training starts only after `ascend-check` passes on the nodes it will use.

It runs the ascend-check CLI as a subprocess (exit 0 = pass) and summarises the failed checks from its JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ascend_ready.errors import ConfigError, TrainingError

SKIP_BANNER = (
    "=" * 78 + "\nWARNING: PREFLIGHT SKIPPED (--skip-preflight). The nodes were NOT validated;\n"
    "driver, HCCL or NPU faults will surface as hangs or crashes mid-run.\n" + "=" * 78
)
HINT = "fix the failures or pass --skip-preflight"


@dataclass
class PreflightResult:
    exit_code: int
    failed: list[str] = field(default_factory=list)
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
    return [*cmd, "--format", "json"]


NOT_FAILURES = {"pass", "passed", "ok", "skip", "skipped", "warn", "warning", "info"}
MAX_LISTED = 15


def failed_checks(stdout: str) -> list[str]:
    """`host: id: status: message` for every failed or errored check of an ascend-check JSON report.

    Tolerant by design: the checks may sit under "results" (ascend-check's report) or "checks", the id under
    "check_id" or "id"; anything that is not JSON yields no lines (the caller then shows stderr instead)."""
    try:
        report = json.loads(stdout)
    except (json.JSONDecodeError, ValueError):
        return []
    if not isinstance(report, dict):
        return []
    checks = report.get("results", report.get("checks"))
    out = []
    for c in checks if isinstance(checks, list) else []:
        if not isinstance(c, dict) or str(c.get("status", "")).lower() in NOT_FAILURES:
            continue
        check_id = c.get("check_id", c.get("id", "?"))
        out.append(
            f"{c.get('host', '?')}: {check_id}: {c.get('status', '?')}: {c.get('message', '')}".rstrip()
        )
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
    return PreflightResult(proc.returncode, failed_checks(proc.stdout), proc.stderr)


def gate(
    command: str | None,
    hosts: list[str],
    inventory: str | None,
    timeout_s: int,
    skip: bool,
    log=lambda msg: print(msg, file=sys.stderr),
) -> None:
    """Return if training may start; raise TrainingError (exit 1) with the failures otherwise."""
    if skip:
        log(SKIP_BANNER)
        return
    where = f"inventory {inventory}" if inventory else (", ".join(hosts) if hosts else "the local node")
    log(f"preflight: ascend-check on {where}")
    result = run_preflight(command, hosts, inventory, timeout_s)
    if result.exit_code == 0:
        log("preflight: passed")
        return
    kind = {1: "checks failed", 2: "usage or configuration error", 3: "hosts unreachable"}.get(
        result.exit_code, f"exit code {result.exit_code}"
    )
    lines = result.failed or [ln for ln in result.stderr.strip().splitlines()[-5:] if ln.strip()]
    detail = "".join(f"\n  - {ln}" for ln in lines)
    raise TrainingError(f"preflight failed ({kind}); refusing to train{detail}", hint=HINT)
