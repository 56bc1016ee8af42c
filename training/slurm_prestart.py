"""Before a Slurm job's training step: every allocated node read in one srun step (the listening ports and
the output directory as the job's user, the same probes and judging the SSH launcher's pre-start batch
uses), then the job's port slot claimed on every node (checks/cluster/port_claims.py, through srun), so
a port in use, a directory the job's user cannot write, or another job's slot refuses the launch naming
the node before anything starts. Runs whether or not the preflight gate is skipped: it judges the job's
fit to the nodes, not the nodes' health.
"""

from __future__ import annotations

import getpass
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from ascend_ready.checks.cluster.port_claims import NodeClaims, RunOn
from ascend_ready.checks.cluster.port_plan import LISTEN_PROBE, LISTEN_PROBE_ID, PortPlan, read_listeners
from ascend_ready.checks.probes import build_script, parse_stream
from ascend_ready.checks.resources.output_dir import OUTPUT_DIR
from ascend_ready.checks.snapshot import HostSnapshot
from ascend_ready.errors import TrainingError
from ascend_ready.training import job_ports, run_dir

__all__ = ["NODE_LINE", "prestart", "srun_each", "srun_runner"]

#: the first line each task of a step of ours prints: the Slurm node it runs on (tasks are not in the
#: order a --nodelist gives them)
NODE_LINE = "ascend-ready-node "
_WRAP = f'printf "%s\\n" "{NODE_LINE}${{SLURMD_NODENAME:-$(hostname -s)}}"; exec /bin/sh -c "$1"'


def split_labelled(stdout: str) -> dict[int, str]:
    """srun --label's stdout: task -> its own output (each line is `<task>: line`, the task number padded
    to the width of the largest)."""
    out: dict[int, list[str]] = {}
    for line in stdout.splitlines():
        task, sep, rest = line.partition(": ")
        if sep and task.strip().isdigit():
            out.setdefault(int(task), []).append(rest)
    return {task: "\n".join(lines) + "\n" for task, lines in out.items()}


def srun_each(srun: Sequence[str], nodes: Sequence[str], script: str, run: Callable[..., Any],
              timeout_s: float = 120) -> dict[str, tuple[int, str]]:
    """`script` on each of `nodes` (one task each, one srun step: `srun` is its argv up to the command),
    node -> (the step's exit status, the node's output). A node that printed nothing is absent."""
    argv = [*srun, f"--nodelist={','.join(nodes)}", "--label", "--kill-on-bad-exit=0",
            "/bin/sh", "-c", _WRAP, "ascend-ready-step", script]
    try:
        proc = run(argv, capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise TrainingError(f"the pre-start step on {', '.join(nodes)} did not finish within {timeout_s:g} s",
                            hint="is the allocation's srun working (srun hostname)?") from None
    out = {}
    for text in split_labelled(proc.stdout).values():
        first, _, rest = text.partition("\n")
        if first.startswith(NODE_LINE):
            out[first[len(NODE_LINE):].strip()] = (proc.returncode, rest)
    return out


def srun_runner(srun_of: Callable[[int], Sequence[str]], run: Callable[..., Any]) -> RunOn:
    """NodeClaims' `run` through srun steps: `srun_of(n)` is the srun argv for n nodes."""

    def on(nodes, script):
        return srun_each(srun_of(len(nodes)), nodes, script, run, timeout_s=60)

    return on


def read_nodes(srun: Sequence[str], nodes: Sequence[str], node_output: str, *, resume: bool,
               min_free_gb: float, run: Callable[..., Any]) -> dict[str, HostSnapshot]:
    """One srun step: each node's listening ports and the output directory as this (the job's) user."""
    user = getpass.getuser()
    prof = run_dir.output_profile(node_output, user, min_free_gb)
    probes = [OUTPUT_DIR(prof), LISTEN_PROBE]
    script, nonce = build_script(probes, user=user)
    outputs = srun_each(srun, nodes, script, run)
    snaps = {}
    for node in nodes:
        snap = HostSnapshot(name=node, profile=prof)
        if node not in outputs:
            snap.reachable, snap.error = False, "the pre-start step printed nothing on it (srun)"
        else:
            snap.probes = dict(parse_stream(outputs[node][1].encode(), nonce, probes).results)
        snaps[node] = snap
    run_dir.judge_node_dirs(snaps.values(), {n: prof for n in nodes}, resume=resume)
    return snaps


def prestart(srun_of: Callable[[int], Sequence[str]], nodes: Sequence[str], job_id: str, cfg: Any,
             roles: list[str], node_output: str, *, resume: bool, rendezvous_port: int,
             pinned_rendezvous: bool, run: Callable[..., Any], log: Callable[[str], None],
             ) -> tuple[PortPlan, Callable[[], None]]:
    """The nodes read (refused: a port of the plan in use, naming node, port and process; an output dir
    the job's user cannot write, naming node, directory and user), then the job's slot claimed on every
    node. Returns (plan, release)."""
    log(f"pre-start: ports and {node_output} as {getpass.getuser()} on {', '.join(nodes)}")
    snaps = read_nodes(srun_of(len(nodes)), nodes, node_output, resume=resume,
                       min_free_gb=cfg.launch.min_output_free_gb, run=run)
    listen = {}
    for node, snap in snaps.items():
        res = snap.probes.get(LISTEN_PROBE_ID)
        listen[node] = None if res is None or res.not_run else (res.rc, res.stdout)
    listeners = read_listeners(listen)
    claims = NodeClaims(srun_runner(srun_of, run), job_id)
    hosts = {n: _NoDevices() for n in nodes}
    return job_ports.claim(job_id, hosts, {}, cfg, roles, rendezvous_port=rendezvous_port,
                           pinned_rendezvous=pinned_rendezvous, log=log, listeners=listeners,
                           on_nodes=claims)


class _NoDevices:
    """A node of the allocation as the plan sees it: its device ids are not known before the step (each
    node's torchrun takes ASCEND_RT_VISIBLE_DEVICES or all), so the plan judges the whole HCCL block."""

    devices: tuple[int, ...] = ()
