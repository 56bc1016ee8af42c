"""The files a multi-node job moves between the controller and its nodes: where they do not share the run
dir, the resume checkpoint out before the start and the results back at the end (after a failure, the
tails of every node's CANN plogs come through checks/diagnose/probes.py's fetch_plogs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ascend_ready.errors import AscendReadyError
from ascend_ready.fleet.plan import LOGS_DIR
from ascend_ready.fleet.sessions import Session

if TYPE_CHECKING:
    from ascend_ready.fleet.plan import JobPlan

__all__ = ["fetch_results", "push_resume_state"]

#: the run dir's folder of the ranks' profiler traces, a subfolder per run (its logs: fleet.plan.LOGS_DIR,
#: written on the controller, never fetched)
PROFILE_DIR = "profile"


def _checkpoint_dirs(root: Path) -> list[Path]:
    from ascend_ready.training.checkpoint import checkpoints

    return [p for _, p in checkpoints(root)]


def push_resume_state(plan: JobPlan, sessions: Mapping[str, Session], log: Callable[[str], None]) -> None:
    """Without a shared filesystem: give every node the newest committed checkpoint the controller has
    (fetched from the nodes when the last run ended), so `--resume` starts from the same step on all."""
    from ascend_ready.training.checkpoint import MARKER
    from ascend_ready.training.trl_glue import CHECKPOINT_DIR

    root = plan.output_dir / CHECKPOINT_DIR
    found = _checkpoint_dirs(root)
    if not found:
        return  # the worker itself says there is nothing to resume from
    latest = found[-1]
    for h in plan.hosts:
        if h.facts is not None and h.facts.sees_output:
            continue
        remote = f"{plan.node_output}/{CHECKPOINT_DIR}/{latest.name}"
        session = sessions[h.name]
        files = sorted(p for p in latest.rglob("*") if p.is_file())
        have = set(session.walk(remote))
        need = [p for p in files if str(p.relative_to(latest)) not in have or p.name == MARKER]
        for p in need:
            session.put_file(p, f"{remote}/{p.relative_to(latest)}")
        log(f"resume: {h.name} has {latest.name} ({len(need)} file(s) copied)")


def fetch_results(plan: JobPlan, sessions: Mapping[str, Session], log: Callable[[str], None]) -> None:
    """Without a shared filesystem: rank 0's run dir comes back to the controller's --output-dir, and
    from every other node its ranks' own checkpoint files and profiler traces (the logs are here already)."""
    from ascend_ready.training.trl_glue import CHECKPOINT_DIR

    for h in plan.hosts:
        if (h.facts is not None and h.facts.sees_output) or h.name not in sessions:
            continue
        session, fetched = sessions[h.name], 0
        try:
            for rel in session.walk(plan.node_output):
                top = rel.split("/", 1)[0]
                if top == LOGS_DIR or (h.node_rank != 0 and top not in (CHECKPOINT_DIR, PROFILE_DIR)):
                    continue
                local = plan.output_dir / rel
                if h.node_rank != 0 and local.exists():
                    continue  # rank 0's copy is the one of record
                session.get_file(f"{plan.node_output}/{rel}", local)
                fetched += 1
        except (OSError, AscendReadyError) as exc:
            log(f"fetch: {h.name}: {exc}")
            continue
        log(f"fetch: {fetched} file(s) from {h.name}'s {plan.node_output}")
