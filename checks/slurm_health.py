"""Slurm acts on a node-local verdict: drain a failing node with the failing checks as the reason, resume
it only when it passes again and the drain was ours (the LBNL NHC contract), never an admin's drain.

Called by `ascend-check node --slurm-health` (HealthCheckProgram) and `--prolog` (Prolog); see
docs/slurm.md. The node's state is read with `sinfo` and changed with `scontrol update`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ascend_ready.checks.drain_policy import (
    PARTITION_FORMAT,
    REASON_PREFIX,
    DrainPolicy,
    breaker_verdict,
    parse_partition_nodes,
)
from ascend_ready.checks.report import Report
from ascend_ready.errors import RemoteError

__all__ = [
    "REASON_PREFIX",
    "NodeState",
    "SlurmAction",
    "act_on_verdict",
    "drain_reason",
    "parse_node_state",
]

#: Slurm keeps reasons of any length, but `sinfo -R` and `scontrol show node` are read by people:
#: the ids that fit, then "+N more"; the full report is in the file on the node
REASON_MAX = 96
#: `sinfo -h -N -n NODE -o FORMAT`: the reason last, so a `|` in an admin's reason stays in it
SINFO_FORMAT = "%N|%T|%u|%E"
#: seconds one sinfo/scontrol call may take (slurmctld unreachable: the call fails, the run goes on)
SLURM_CALL_TIMEOUT_S = 10.0

Runner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True)
class NodeState:
    """One node as `sinfo -N -o '%N|%T|%u|%E'` prints it."""

    name: str
    state: str  # sinfo's long state: idle, drained, draining, mixed, down*, ...
    reason_user: str
    reason: str  # "none" when no reason is set

    @property
    def drained(self) -> bool:
        """drained (nothing running) or draining (jobs still running, no new ones)."""
        return "drain" in self.state

    @property
    def ours(self) -> bool:
        """The drain reason is one ascend-check set (so ascend-check may lift it)."""
        return self.reason.startswith(REASON_PREFIX)


@dataclass(frozen=True)
class SlurmAction:
    """What was done to the node: drain, resume or none, and why (one line for the log)."""

    action: str
    reason: str
    note: str


def parse_node_state(text: str, node: str) -> NodeState:
    """The line of `node` in sinfo's output with SINFO_FORMAT; RemoteError when it is not there."""
    for line in text.splitlines():
        parts = line.split("|", 3)
        if len(parts) == 4 and parts[0] == node:
            return NodeState(
                name=parts[0], state=parts[1].strip(), reason_user=parts[2].strip(), reason=parts[3].strip()
            )
    raise RemoteError(
        f"sinfo does not list node {node!r} (it printed {text.strip()[:200]!r})",
        hint="the node name must be Slurm's (SLURMD_NODENAME, NodeName= in slurm.conf): give --node-name",
    )


def drain_reason(report: Report, node: str) -> str | None:
    """The drain reason for `node`'s verdict, or None when it passes: failed checks by id, then the checks
    that could not be judged ("cannot judge ..."), or why the node could not be probed at all."""
    hosts = {h.name: h for h in report.hosts}
    host = hosts.get(node)
    if host is not None and not host.reachable:
        return _shorten(f"{REASON_PREFIX} cannot judge: {host.error or 'the probe batch did not run'}")
    failed = sorted({r.check_id for r in report.results if r.host == node and r.status == "fail"})
    unjudged = sorted({r.check_id for r in report.results if r.host == node and r.status == "error"})
    if not failed and not unjudged:
        return None
    parts = [", ".join(failed)] if failed else []
    if unjudged:
        parts.append("cannot judge " + ", ".join(unjudged))
    return _shorten(f"{REASON_PREFIX} " + "; ".join(parts))


def _shorten(reason: str) -> str:
    """At most REASON_MAX characters, cut at an id boundary with the count of what was left out; no `"`
    or newline (the reason goes into a scontrol argument and a one-line sinfo column)."""
    reason = " ".join(reason.replace('"', "'").split())
    if len(reason) <= REASON_MAX:
        return reason
    words = reason.split(" ")
    for keep in range(len(words) - 1, 0, -1):
        left = len(words) - keep
        text = " ".join(words[:keep]).rstrip(",;") + f" +{left} more"
        if len(text) <= REASON_MAX:
            return text
    return reason[: REASON_MAX - 3] + "..."


def _run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    argv = [_tool(argv[0]), *argv[1:]]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def _tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/local/bin:/opt/slurm/bin")
    if path is None:
        raise RemoteError(
            f"{name} is not installed on this node (Slurm's client commands)",
            hint="install slurm-client (Debian/Ubuntu) or slurm (RHEL), or run without --slurm-health",
        )
    return path


def _call(run: Runner, argv: list[str], timeout: float) -> str:
    try:
        proc = run(argv, timeout)
    except subprocess.TimeoutExpired:
        raise RemoteError(
            f"`{' '.join(argv)}` did not answer within {timeout:g} s",
            hint="is slurmctld up and reachable from this node (scontrol ping)?",
        ) from None
    if proc.returncode != 0:
        raise RemoteError(
            f"`{' '.join(argv)}` failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}",
            hint="run it by hand on the node; the health check runs as root (SlurmdUser)",
        )
    return proc.stdout


def node_state(node: str, *, run: Runner | None = None, timeout: float = SLURM_CALL_TIMEOUT_S) -> NodeState:
    out = _call(run or _run, ["sinfo", "-h", "-N", "-n", node, "-o", SINFO_FORMAT], timeout)
    return parse_node_state(out, node)


def act_on_verdict(
    node: str,
    reason: str | None,
    *,
    run: Runner | None = None,
    timeout: float = SLURM_CALL_TIMEOUT_S,
    policy: DrainPolicy | None = None,
    tier: str = "quick",
    judged: bool = True,
    now: datetime | None = None,
) -> SlurmAction:
    """Drain `node` with `reason` (None: it passed), or resume it if it passed and the drain was ours.

    A node an administrator drained (any reason not starting with REASON_PREFIX) is left as it is, failing
    or passing: their reason says more than ours, and lifting it is theirs to do. `policy` (checks/
    drain_policy.py): a pass of a tier not in its resume_tiers leaves our drain in place (awaiting an active
    re-check); `judged` False (only checks that could not judge) drains only with drain_on_error; a drain
    that would take more than the breaker's share of a partition is held back (action "held")."""
    run = run or _run
    policy = policy or DrainPolicy()
    state = node_state(node, run=run, timeout=timeout)
    scontrol = "scontrol"
    if reason is None:
        if state.drained and state.ours:
            if tier not in policy.resume_tiers:
                return SlurmAction(
                    "recheck",
                    "",
                    f"{node} passed the {tier} tier; stays drained ({state.reason!r}) until an active "
                    f"re-check passes: ascend-check node --slurm-health --tier {policy.resume_tiers[0]}"
                    + (" --duration 10m" if policy.resume_tiers[0] == "burn-in" else ""),
                )
            _call(run, [scontrol, "update", f"NodeName={node}", "State=RESUME"], timeout)
            return SlurmAction(
                "resume", "", f"{node} passed the {tier} tier: resumed (it was drained with {state.reason!r})"
            )
        note = (
            f"{node} passed; left drained: {state.reason!r} was set by {state.reason_user}, not by "
            "ascend-check"
            if state.drained
            else f"{node} passed ({state.state})"
        )
        return SlurmAction("none", "", note)
    if state.drained and not state.ours:
        return SlurmAction(
            "none",
            reason,
            f"{node} fails ({reason}); already drained by "
            f"{state.reason_user}: {state.reason!r}, left as it is",
        )
    if not judged and not policy.drain_on_error:
        kept = f"; stays drained ({state.reason!r})" if state.drained else ""
        return SlurmAction(
            "unjudged",
            reason,
            f"{node} could not be judged ({reason}): not drained for that (--drain-on-error drains){kept}",
        )
    if state.drained and _same_reason(state.reason, reason):
        return SlurmAction("none", reason, f"{node} still fails: stays drained ({reason})")
    if state.drained:  # ours, another reason: not a new drain, the breaker's count does not change
        _call(run, [scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"], timeout)
        return SlurmAction("drain", reason, f"{node} still drained, now for: {reason} (was {state.reason!r})")
    now = now or datetime.now()
    before = breaker_verdict(node, partition_nodes(run=run, timeout=timeout), policy, now, drained_self=False)
    if not before.allowed:
        return _hold(run, node, reason, before.note, timeout)
    _call(run, [scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"], timeout)
    after = breaker_verdict(node, partition_nodes(run=run, timeout=timeout), policy, now, drained_self=True)
    if not after.allowed:  # another node drained in the same second: the later ones (and ties) step back
        _call(run, [scontrol, "update", f"NodeName={node}", "State=RESUME"], timeout)
        why = after.note + " (drained at the same time as another: undone)"
        return _hold(run, node, reason, why, timeout)
    return SlurmAction("drain", reason, f"{node} drained: {reason}")


def _hold(run: Runner, node: str, reason: str, why: str, timeout: float) -> SlurmAction:
    """The breaker keeps `node` in service: said in Slurm's node Comment (scontrol show node), which a
    node in service can carry (a Reason cannot: Slurm keeps it only on a down or drained node)."""
    comment = _shorten(f"{REASON_PREFIX} drain held back by the breaker: {reason[len(REASON_PREFIX):]}")
    _call(run, ["scontrol", "update", f"NodeName={node}", f"Comment={comment}"], timeout)
    return SlurmAction("held", reason, f"{node} fails ({reason}) but is NOT drained: {why}")


def clear_comment(node: str, *, run: Runner | None = None, timeout: float = SLURM_CALL_TIMEOUT_S) -> None:
    """Lift the breaker's Comment once the node drains or passes."""
    _call(run or _run, ["scontrol", "update", f"NodeName={node}", "Comment="], timeout)


def partition_nodes(*, run: Runner | None = None, timeout: float = SLURM_CALL_TIMEOUT_S):
    """Every node of every partition as sinfo prints them in PARTITION_FORMAT (the breaker's count)."""
    return parse_partition_nodes(_call(run or _run, ["sinfo", "-h", "-N", "-o", PARTITION_FORMAT], timeout))


def _same_reason(current: str, wanted: str) -> bool:
    # scontrol show node appends " [user@time]"; sinfo's %E does not, but be tolerant of either
    return current == wanted or current.startswith(wanted + " [")


def gres_conf_line(node: str, devices: Sequence[int]) -> str:
    """gres.conf's line for `node`'s healthy NPUs: `NodeName=node01 Name=npu File=/dev/davinci[0-3,5-7]`
    (Slurm's bracket ranges). On the Atlas 800T A2 a chip's device id is its /dev/davinciN index."""
    if not devices:
        raise RemoteError(f"{node}: npu-smi shows no healthy NPU, so there is no GRES to declare",
                          hint="run ascend-check node --select 'npu.*' on the node and fix what it reports")
    ids = sorted(set(devices))
    runs: list[str] = []
    start = prev = ids[0]
    for i in [*ids[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    files = f"/dev/davinci{runs[0]}" if len(ids) == 1 else f"/dev/davinci[{','.join(runs)}]"
    return f"NodeName={node} Name=npu File={files}"
