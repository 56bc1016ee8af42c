"""`ascend-train ALGO --launcher slurm`: the job inside a Slurm allocation (an sbatch script or salloc),
started with `srun` on the allocated nodes, one torchrun per node; and `--print-sbatch`, that script.

    ascend-train grpo -c tiny -o /shared/runs/x --launcher slurm --print-sbatch job.sh && sbatch job.sh
    salloc -N 2 ascend-train grpo -c CONFIG -o /shared/runs/x --launcher slurm

Inside the allocation: the nodes are SLURM_JOB_NODELIST's (`scontrol show hostnames`); the preflight
gate runs `ascend-check node` on exactly those nodes (one srun step) and refuses to start unless every one
passes; then one srun step runs this same ascend-train command on every node with its node rank
(SLURM_NODEID), the first node as the master and each node's NIC from its route to it, so each node's
torchrun starts the ranks there. srun prefixes each line with the task (= node rank, listed once at the
start); `--kill-on-bad-exit` ends every node's ranks when one node's command fails; `scancel` ends them
all (Slurm signals every process of the step). The output dir must be on a filesystem every node sees.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ascend_ready.checks.cluster.port_plan import make_plan
from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.paths import check_output_dir
from ascend_ready.training import run_dir, slurm_prestart
from ascend_ready.training.config import load_config
from ascend_ready.training.job_ports import roles_for, slurm_slot
from ascend_ready.training.launcher import LaunchResult
from ascend_ready.training.node_probe import DEFAULT_SET_ENV
from ascend_ready.training.preflight import SKIP_BANNER, SLURM_GATED_ENV, failed_checks, read_report
from ascend_ready.training.slurm_prestart import split_labelled

__all__ = ["Allocation", "SlurmLauncher", "allocation", "gate_nodes", "launch", "node_command",
           "sbatch_script"]

#: the master port of a job: a fixed base plus the job id, so two jobs sharing a node do not collide
PORT_BASE = 20000
PORT_SPAN = 10000
#: set on the nodes by the job step: this Slurm job's nodes passed the gate before it started
GATED_ENV = SLURM_GATED_ENV
#: the prefix of every NIC line the node step prints (the tests and people grep for it)
NIC_NOTE = "slurm: node rank"


@dataclass(frozen=True)
class Allocation:
    job_id: str
    nodes: tuple[str, ...]

    @property
    def master_port(self) -> int:
        return PORT_BASE + int(self.job_id) % PORT_SPAN if self.job_id.isdigit() else PORT_BASE


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def _run(argv: Sequence[str], **kw) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), text=True, check=False, **kw)
    except FileNotFoundError:
        raise ConfigError(
            f"{argv[0]} is not installed here (Slurm's client commands)",
            hint="run ascend-train --launcher slurm on a node of the Slurm cluster",
        ) from None


def allocation(env: dict[str, str] | None = None, run: Runner = _run) -> Allocation:
    """The allocation this command runs in; ConfigError (exit 2) outside one."""
    env = dict(os.environ if env is None else env)
    job, nodelist = env.get("SLURM_JOB_ID"), env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not job or not nodelist:
        raise ConfigError(
            "--launcher slurm runs inside a Slurm allocation: SLURM_JOB_ID/SLURM_JOB_NODELIST are not set",
            hint="submit it with sbatch (ascend-train ... --launcher slurm --print-sbatch job.sh), "
            "or run it under salloc",
        )
    proc = run(["scontrol", "show", "hostnames", nodelist], capture_output=True, timeout=30)
    nodes = tuple(proc.stdout.split())
    if proc.returncode != 0 or not nodes:
        raise ConfigError(
            f"scontrol show hostnames {nodelist} failed: {proc.stderr.strip()}",
            hint="is slurmctld reachable from this node (scontrol ping)?",
        )
    return Allocation(job_id=job, nodes=nodes)


def _srun(alloc: Allocation, *extra: str) -> list[str]:
    return [*srun_tasks(len(alloc.nodes)), *extra]


def srun_tasks(nodes: int) -> list[str]:
    """srun for one task on each of `nodes` nodes of this allocation."""
    return ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1"]


def gate_nodes(
    alloc: Allocation,
    check_command: str,
    skip: bool,
    log,
    run: Runner = _run,
    timeout_s: int = 600,
    extra: Sequence[str] = (),
) -> None:
    """`ascend-check node` on exactly the allocated nodes (one srun step); TrainingError unless all pass."""

    if skip:
        log(SKIP_BANNER)
        return
    log(f"preflight: ascend-check node on {', '.join(alloc.nodes)} (the allocation's nodes)")
    argv = [
        *_srun(alloc, "--label", "--kill-on-bad-exit=0"),
        check_command,
        "node",
        "--format",
        "json",
        "--no-report",
        *extra,
    ]
    try:
        proc = run(argv, capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise TrainingError(
            f"the preflight step did not finish within {timeout_s} s",
            hint="fix the failures or pass --skip-preflight",
        ) from None
    outputs = split_labelled(proc.stdout)
    problems = []
    for rank, node in enumerate(alloc.nodes):
        try:
            report = read_report(outputs.get(rank, ""))
        except Exception as exc:  # ParseError or a report that is not there: this node is not judged
            problems.append(f"{node}: no readable report ({exc}); srun: {proc.stderr.strip()[-300:]}")
            continue
        problems += failed_checks(report)
    if problems:
        detail = "".join(f"\n  - {p}" for p in problems)
        raise TrainingError(
            f"preflight failed on the allocation's nodes; refusing to train{detail}",
            hint="fix the failures (or exclude the node: sbatch --exclude) or pass --skip-preflight",
        )
    log("preflight: passed on every allocated node")


#: each node's prelude ($1 the master's address, $2 CANN's set_env.sh, then the command): that node's own
#: CANN environment (a Slurm task runs as the job's user with the environment sbatch was given, where no
#: login shell sourced set_env.sh, so torch_npu's import would not find libhccl.so), and its NIC toward the
#: master (the route the kernel takes), for gloo and HCCL
_PRELUDE = f"""# set_env.sh is written for an interactive shell: sourced without -e or -u, as over SSH
if [ -r "$2" ]; then . "$2"; fi
set -e
# the master itself: the interface holding its address (its route to itself is through lo)
dev=$(ip -o addr show to "$1" | awk '{{print $2; exit}}')
[ -n "$dev" ] || dev=$(ip -o route get "$1" | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')
[ -n "$dev" ] || {{ echo "$(hostname -s): no route to the master $1" >&2; exit 1; }}
export GLOO_SOCKET_IFNAME="$dev" HCCL_SOCKET_IFNAME="$dev" {GATED_ENV}="$SLURM_JOB_ID"
echo "{NIC_NOTE} $SLURM_NODEID, NIC $dev ($(hostname -s))" >&2
shift 2
exec "$@" --node-rank "$SLURM_NODEID"
"""


def node_command(alloc: Allocation, master_addr: str, train_argv: Sequence[str],
                 env: dict[str, str] | None = None, *, set_env: str = DEFAULT_SET_ENV) -> list[str]:
    """The srun step that runs `train_argv` (an ascend-train command line) on every node with its rank,
    with `env` (the job's port plan: checks/cluster/port_plan.py) set on every node, after that node's
    CANN `set_env`."""
    if env:  # PORT PLAN HOOK (Slurm): the job's HCCL ports on every node
        train_argv = ["env", *(f"{k}={v}" for k, v in sorted(env.items())), *train_argv]
    return [
        *_srun(alloc, "--label", "--kill-on-bad-exit=1"),
        "/bin/sh",
        "-c",
        _PRELUDE,
        "ascend-train-node",
        master_addr,
        set_env,
        *train_argv,
    ]


def _port_env(alloc: Allocation, opts: dict) -> dict[str, str]:
    """A job's HCCL ports without the pre-start step: its slot from the Slurm job id (job_ports.slurm_slot),
    the rendezvous port the job id picks (Allocation.master_port). The launch claims its slot instead
    (training/slurm_prestart.py)."""

    plan = make_plan(slurm_slot(alloc.job_id), f"slurm-{alloc.job_id}", ["train"],
                     {n: [] for n in alloc.nodes},
                     rendezvous_port=int(opts.get("master_port") or alloc.master_port),
                     pinned_rendezvous=True)
    return plan.env("train")


def _ports(alloc: Allocation, cfg, roles: list[str], out: Path, resume: bool, opts: dict, log, run: Runner):
    """The job's port plan: every allocated node read and its slot claimed there (slurm_prestart)."""
    given = opts.get("master_port")
    return slurm_prestart.prestart(
        srun_tasks, alloc.nodes, f"slurm-{alloc.job_id}-{secrets.token_hex(2)}", cfg, roles, str(out),
        resume=resume, rendezvous_port=int(given or cfg.launch.master_port),
        pinned_rendezvous=given is not None, run=run, log=log)


def _master_addr(alloc: Allocation) -> str:

    try:
        return socket.gethostbyname(alloc.nodes[0])
    except OSError as exc:
        raise ConfigError(
            f"cannot resolve the first allocated node {alloc.nodes[0]}: {exc}",
            hint="the nodes' names must resolve on every node (DNS or /etc/hosts)",
        ) from None


def train_argv(
    algo: str,
    config: str,
    output_dir: Path,
    alloc: Allocation,
    master_addr: str,
    *,
    resume: bool,
    overrides: Sequence[str],
    passed: dict,
    master_port: int | None = None,
) -> list[str]:
    """The command each node runs: this ascend-train, per-node mode, everything else as given; the
    rendezvous at `master_port` (the job's port plan), else --master-port, else the job id's."""
    port = str(master_port or passed.get("master_port") or alloc.master_port)
    # the gate judged every node before this step (gate_nodes); GATED_ENV says so on the nodes
    step = [
        "--nnodes",
        str(len(alloc.nodes)),
        "--master-addr",
        master_addr,
        "--master-port",
        port,
        "--skip-preflight",
    ]
    return _ascend_train(
        algo,
        config,
        output_dir,
        step,
        passed,
        ("nproc_per_node", "device", "preflight_command"),
        ["--resume"] if resume else [],
        overrides,
    )


def _ascend_train(
    algo: str,
    config: str,
    output_dir: Path,
    head: Sequence[str],
    opts: dict,
    passed_on: Sequence[str],
    tail: Sequence[str],
    overrides: Sequence[str],
) -> list[str]:
    """This ascend-train ALGO with `head`, the options of `passed_on` given here, `tail`, the overrides."""
    argv = [
        str(Path(sys.executable).with_name("ascend-train")),
        algo,
        "--config",
        config,
        "--output-dir",
        str(output_dir),
        *head,
    ]
    for flag in passed_on:
        if opts.get(flag) is not None:
            argv += [f"--{flag.replace('_', '-')}", str(opts[flag])]
    return [*argv, *tail, *overrides]


def launch(algo: str, config: str, output_dir: str | None, resume: bool, skip_preflight: bool,
           overrides: tuple[str, ...], opts: dict, *, log, run: Runner = _run, cfg=None,
           engine: str = "trl") -> int:
    """Run the job in this allocation (or write its sbatch script); the exit code of the srun step. `cfg`:
    the job's config as the command line made it (else read from `config` and `overrides`)."""
    out = Path(output_dir or f"runs/{algo}").absolute()
    # the SSH launcher's refusal (training/run_dir.py), before the script, the gate or any mkdir: the node
    # step is not judged again (preflight.slurm_step_of_judged_job)
    run_dir.refuse_run_here(out, resume=resume)
    config_path = Path(config)
    config_arg = str(config_path.absolute()) if config_path.exists() else config  # a bundled name stays
    if opts.get("print_sbatch"):
        return _write_sbatch(algo, config_arg, out, resume, skip_preflight, overrides, opts, log)
    alloc = allocation(run=run)
    master = _master_addr(alloc)
    for rank, node in enumerate(alloc.nodes):
        log(f"slurm: job {alloc.job_id}: task {rank} = {node}" + (" (master)" if rank == 0 else ""))
    check = opts.get("preflight_command") or str(Path(sys.executable).with_name("ascend-check"))
    gate_nodes(alloc, check, skip_preflight, log, run=run)
    cfg = cfg or load_config(config_arg, overrides)
    roles = roles_for(engine, algo, cfg)
    # PORT PLAN HOOK (Slurm): ports free and the output dir writable on every node, the slot claimed there
    plan, release = _ports(alloc, cfg, roles, out, resume, opts, log, run)
    try:
        out.mkdir(parents=True, exist_ok=True)
        argv = train_argv(algo, config_arg, out, alloc, master, resume=resume, overrides=overrides,
                          passed=opts, master_port=plan.rendezvous_port)
        cmd = node_command(alloc, master, argv, plan.env(roles[0] if len(roles) == 1 else None),
                           set_env=opts.get("set_env") or DEFAULT_SET_ENV)
        log("launch: " + shlex.join(cmd))
        return run(cmd).returncode
    finally:
        release()


def sbatch_script(
    algo: str,
    config: str,
    output_dir: Path,
    *,
    nodes: int,
    gres: str | None,
    time: str,
    partition: str | None,
    argv: Sequence[str],
) -> str:
    """A ready sbatch script: one task per node, the GRES, the time limit, Slurm's log in the output dir."""
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=ascend-{algo}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --time={time}",
        f"#SBATCH --output={output_dir}/slurm-%j.out",
    ]
    if gres:
        lines.append(f"#SBATCH --gres={gres}")
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    lines += [
        "# written by ascend-train --print-sbatch: the job runs inside the allocation with srun",
        "set -eu",
        f"mkdir -p {shlex.quote(str(output_dir))}",
        "exec " + shlex.join(argv),
        "",
    ]
    return "\n".join(lines)


def _write_sbatch(algo, config, out: Path, resume, skip_preflight, overrides, opts, log) -> int:

    cfg = load_config(config, overrides)
    nodes = opts.get("nnodes") or cfg.launch.nnodes
    nproc = opts.get("nproc_per_node") or cfg.launch.nproc_per_node
    gres = opts.get("sbatch_gres")
    gres = None if gres == "none" else (gres or f"npu:{nproc}")
    tail = (["--resume"] if resume else []) + (["--skip-preflight"] if skip_preflight else [])
    argv = _ascend_train(
        algo,
        config,
        out,
        ["--launcher", "slurm"],
        opts,
        ("nproc_per_node", "device", "preflight_command", "master_port", "set_env"),
        tail,
        (),
    )
    text = sbatch_script(
        algo,
        config,
        out,
        nodes=nodes,
        gres=gres,
        time=opts.get("sbatch_time") or "24:00:00",
        partition=opts.get("sbatch_partition"),
        argv=[*argv, *overrides],
    )
    dest = opts["print_sbatch"]
    check_output_dir(out, "--output-dir")  # a directory this user cannot write: refused, not a traceback
    out.mkdir(parents=True, exist_ok=True)  # Slurm opens its --output there before the script runs
    if dest == "-":
        sys.stdout.write(text)
        return 0
    Path(dest).write_text(text)
    os.chmod(dest, 0o755)
    log(f"sbatch script: {dest} ({nodes} node(s), {gres or 'no GRES'}); submit it: sbatch {dest}")
    print(json.dumps({"sbatch": dest, "nodes": nodes, "gres": gres}))
    return 0


class SlurmLauncher:
    """The `slurm` launcher (training/launcher.py): srun on this allocation's nodes, or its sbatch script."""

    name = "slurm"

    def launch(self, request):

        job, slurm, o = request.job, request.slurm, request.options
        # the flags this launcher writes into the nodes' (or the sbatch script's) ascend-train command
        passed = {"print_sbatch": slurm.print_sbatch, "sbatch_time": slurm.time, "sbatch_gres": slurm.gres,
                  "sbatch_partition": slurm.partition, "nnodes": o.nnodes, "nproc_per_node": o.nproc_per_node,
                  "master_port": o.master_port, "device": slurm.device,
                  "preflight_command": slurm.preflight_command,
                  # the sbatch script names only a --set-env that was given; each node step sources it
                  "set_env": None if o.set_env == DEFAULT_SET_ENV else o.set_env}
        code = launch(job.algo, job.config, str(job.output_dir), job.resume, request.gate.skip_preflight,
                      job.overrides, passed, log=request.log, cfg=job.cfg, engine=job.engine)
        return LaunchResult(exit_code=code)
