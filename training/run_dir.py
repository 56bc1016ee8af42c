"""Nothing is lost: a run directory that holds a run is never written into by a new run, and an output
directory on any node that the job's user cannot write, or that has no room, stops the launch before
anything is written.

    ascend-train grpo -c tiny -o runs/a                 # runs/a holds a run: refused, naming it
    ascend-train grpo -c tiny -o runs/a --resume        # continue it
    ascend-train grpo -c tiny -o 'runs/a/{run}'         # a fresh subdirectory each time (runs/a/grpo-...)

Here: the `{run}` template of -o/--node-output-dir (expand), the controller's own refusal (refuse_run_here),
the nodes' (refuse_node_dirs, the `output-dir` resource of checks/resources/output_dir.py read through the
preflight's Host, one probe batch per node before the controller writes anything), and the hint after a
failed job that fits what the run directory holds (after_failure_hint).
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from ascend_ready.checks.collect import collect
from ascend_ready.checks.profile import DEFAULT_PROFILE, load_profile
from ascend_ready.checks.resources import Host
from ascend_ready.checks.resources.output_dir import OUTPUT_DIR, RUN_FILES
from ascend_ready.checks.snapshot import HostSnapshot
from ascend_ready.errors import AscendReadyError, ConfigError
from ascend_ready.fleet.transport import FanoutOptions, Target
from ascend_ready.training.checkpoint import latest_checkpoint

__all__ = ["RUN_TEMPLATE", "after_failure_hint", "expand", "held_run", "judge_node_dirs", "output_profile",
           "refuse_node_dirs", "refuse_run_here"]

#: in -o / --node-output-dir: replaced by a name of its own for this run (`grpo-20261202-053000-1a2b`)
RUN_TEMPLATE = "{run}"
_FRESH = f"another -o, or -o 'DIR/{RUN_TEMPLATE}' for a fresh subdirectory each run"


def run_name(algo: str) -> str:
    return f"{algo}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def expand(output_dir: str | None, node_output_dir: str | None, algo: str) -> tuple[str | None, str | None]:
    """-o and --node-output-dir with `{run}` replaced by one new run name (the same in both); a path
    without it is returned as given. ConfigError for any other `{...}` (a typo would otherwise be a
    directory named `{rnu}`)."""
    name = run_name(algo)
    out = []
    for option, value in (("--output-dir", output_dir), ("--node-output-dir", node_output_dir)):
        if value is None:
            out.append(None)
            continue
        rest = value.replace(RUN_TEMPLATE, "")
        if "{" in rest or "}" in rest:
            raise ConfigError(f"{option} {value}: the only placeholder is {RUN_TEMPLATE}",
                              hint=f"e.g. -o 'runs/x/{RUN_TEMPLATE}'")
        out.append(value.replace(RUN_TEMPLATE, name))
    return out[0], out[1]


def held_run(path: Path) -> list[str]:
    """What of a run `path` holds here (RUN_FILES that exist), [] for a new or empty directory."""
    return [f for f in RUN_FILES if (path / f).exists()]


def refuse_run_here(path: Path, *, resume: bool, option: str = "--output-dir") -> None:
    """ConfigError (exit 2), before anything is written, when `path` holds a run and this is no --resume:
    its checkpoints, final/, config.yaml and metrics.jsonl would be overwritten or mixed with the new
    run's."""
    held = held_run(path)
    if held and not resume:
        raise ConfigError(f"{option} {path} already holds a run ({', '.join(held)}); nothing was written",
                          hint=f"continue it with --resume, or start a new run in {_FRESH}")


def output_profile(node_output: str, user: str, min_free_gb: float, base=None):
    """The profile the `output-dir` resource reads a node with: its checkpoint_dir the job's output dir,
    its training user the job's user, its free-space bound the job's."""
    return (base or load_profile(DEFAULT_PROFILE)).model_copy(
        update={"checkpoint_dir": node_output, "training_user": user, "min_disk_free_gb": min_free_gb})


def refuse_node_dirs(targets: Mapping[str, Target], fanout: FanoutOptions, node_output: str,
                     users: Mapping[str, str | None], *, resume: bool, min_free_gb: float,
                     profiles: Mapping[str, object] | None = None) -> None:
    """Read the `output-dir` resource of every node (one probe batch each, as the job's user: `users`
    host -> training user where it is not the SSH user) and refuse, naming each node, directory and user,
    a node whose output directory the job's user cannot write, that already holds a run (no --resume), or
    whose file system has less than `min_free_gb` free. Writes nothing (the try is removed at once)."""

    base = load_profile(DEFAULT_PROFILE)
    profile_of = {name: output_profile(node_output, users.get(name) or t.user or "root", min_free_gb,
                                       (profiles or {}).get(name) or base)
                  for name, t in targets.items()}
    run_on = [dataclasses.replace(t, become=True) if users.get(n) and not t.become else t
              for n, t in targets.items()]

    def plan(t: Target):
        prof = profile_of[t.name]
        return [OUTPUT_DIR(prof)], prof.training_user

    judge_node_dirs(collect(run_on, plan, fanout), profile_of, resume=resume)


def judge_node_dirs(snaps: Iterable[HostSnapshot], profile_of: Mapping[str, object], *, resume: bool) -> None:
    """ConfigError naming each node, directory and user whose `output-dir` probe (in `snaps`, read with
    `profile_of[node]`) says the job may not write its run there."""
    lines = []
    for snap in snaps:
        prof = profile_of[snap.name]
        if not snap.reachable:
            lines.append(f"{snap.name}: unreachable: {snap.error}")
            continue
        try:
            problems = Host(snap, prof).output_dir.problems(resume=resume)
        except AscendReadyError as exc:
            problems = [f"{prof.checkpoint_dir} could not be judged as user {prof.training_user}: "
                        f"{exc.message}"]
        lines += [f"{snap.name}: {p}" for p in problems]
    if lines:
        raise ConfigError("the job's output directory is not fit on every node; nothing was written:\n  "
                          + "\n  ".join(lines),
                          hint="give a --node-output-dir the training user may write, with room (free space "
                          "or pick a larger file system), or --resume / " + _FRESH)


def after_failure_hint(output_dir: Path, log_dir: Path, same_command: str = "the same command") -> str:
    """The hint of a failed job that fits what it left: --resume only where a committed checkpoint is."""
    latest = latest_checkpoint(output_dir / "checkpoints")  # trl_glue.CHECKPOINT_DIR
    if latest is not None:
        return (f"logs: {log_dir}/<host>.log; fix the cause, then run {same_command} with --resume to "
                f"continue from the last checkpoint ({latest.name}) on every node")
    return (f"logs: {log_dir}/<host>.log; no checkpoint was committed, so there is nothing to --resume: fix "
            f"the cause, then start again in {_FRESH} ({output_dir} keeps this attempt's config and logs)")



def missing_parts(path: Path) -> list[Path]:
    """`path` and its ancestors that do not exist yet (what `mkdir -p` will create), deepest first."""
    out = []
    while not path.exists() and path.parent != path:
        out.append(path)
        path = path.parent
    return out


def recheck_made_here(shared: Mapping[str, Target], fanout: FanoutOptions, node_output: str,
                      users: Mapping[str, str | None], created: list[Path], written: list[Path]) -> None:
    """After the controller made the run dir (`created`: what its mkdir created) on a filesystem the nodes
    share, refuse unless the job's user may write it on each of them (the controller's user owns it now,
    e.g. root's 0755: the job died with a PermissionError); on refusal, remove `written` and `created`
    (nothing is left behind). Nothing to do when the directory was there before (refuse_node_dirs tried
    it) or no node shares it."""
    if not shared or not created:
        return
    try:
        refuse_node_dirs(shared, fanout, node_output, users, resume=True, min_free_gb=0)
    except ConfigError:
        for path in written:
            path.unlink(missing_ok=True)
        for path in created:
            with contextlib.suppress(OSError):
                path.rmdir()
        raise
