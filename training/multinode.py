"""One command trains on every node: from a launch spec (or a preflight it runs), start the same job
under torchrun on each host over SSH, stream every node's output, and stop it everywhere on a failure.

    ascend-train grpo -c CONFIG --launch-spec spec.json -o runs/x        # the spec ascend-check wrote
    ascend-train grpo -c CONFIG -i inventory.ini -o runs/x               # preflight first, then launch
    ascend-train grpo -c CONFIG -i inventory.ini --skip-preflight --dry-run

Per host: `/bin/sh -c SCRIPT` (as the training user through `sudo -n -u` where that is not the SSH user);
SCRIPT enters the run dir, sources CANN's set_env.sh, exports the HCCL/gloo NIC and IP, the HCCL
timeouts, ASCEND_RT_VISIBLE_DEVICES and the venv, then execs the node guard (fleet/node_guard.py),
which runs torchrun and stops every process of the job on this node when told, when the controller goes
silent, or when the connection drops. Every value in SCRIPT is shell-quoted; the config itself travels
as a file, never through a shell.

The run dir has the same path on every node as on the controller (--output-dir). Where the nodes see
the controller's directory (a shared filesystem, detected by a file only the controller wrote), rank 0
writes metrics, checkpoints and plots there once; elsewhere the config is copied to each node and rank
0's results (and every rank's checkpoint and profiler files) are fetched back when the job ends.

Here: what each host runs for this config (plan_job) and `launch`. The plan's shape and each host's exact
command line: fleet/plan.py; sessions and the job's run: fleet/sessions.py, fleet/job.py. Which nodes, and
what the read-only probe finds on each before the start: training/node_probe.py; the files moved to and
from nodes that do not share the run dir: training/node_files.py.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ascend_ready.checks.cluster.launch_routes import refuse_unrouted_nodes
from ascend_ready.checks.cluster.launchspec import LaunchSpec, LaunchSpecHost, asd_setting
from ascend_ready.checks.cluster.node_facts import FactQuery, node_facts
from ascend_ready.checks.cluster.port_plan import PortPlan
from ascend_ready.checks.diagnose.probes import fetch_plogs
from ascend_ready.checks.diagnose.render import explain_failure
from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.fleet.job import JobResult, root_cause, run_job, same_failure
from ascend_ready.fleet.plan import HostPlan, JobPlan, NodeFacts, remote_command, render_dry_run
from ascend_ready.fleet.sessions import open_sessions
from ascend_ready.fleet.transport import Target
from ascend_ready.training import job_ports, node_files, node_probe, numa, reach, run_dir, worker_hooks
from ascend_ready.training import launch as launch_mod
from ascend_ready.training.config import TrainConfig, dump_config
from ascend_ready.training.launcher import LaunchRequest, LaunchResult
from ascend_ready.training.node_files import PROFILE_DIR
from ascend_ready.training.node_probe import DEFAULT_SET_ENV, LaunchOptions

__all__ = ["DEFAULT_SET_ENV", "LaunchOptions", "SshLauncher", "launch", "plan_job"]

RESOLVED_CONFIG = "config.yaml"


def parse_profile_steps(text: str | None) -> tuple[int, int] | None:
    """`A:B` (1-based, inclusive) -> (A, B); ConfigError on anything else."""
    if not text:
        return None
    a, sep, b = text.partition(":")
    if not sep or not a.strip().isdigit() or not b.strip().isdigit() or not 1 <= int(a) <= int(b):
        raise ConfigError(f"--profile-steps {text!r} is not A:B with 1 <= A <= B",
                          hint="e.g. --profile-steps 3:5")
    return int(a), int(b)


# ----------------------------------------------------------------------------------- what runs where


def worker_argv(plan: JobPlan, resume: bool) -> list[str]:
    out = plan.node_output
    argv = [plan.algo, "--config", f"{out}/{RESOLVED_CONFIG}", "--output-dir", out]
    return [*argv, "--resume"] if resume else argv


def _host_env(cfg: TrainConfig, nic: str | None, ip: str | None, devices: list[int],
              bindings: list[numa.RankBinding], plan_profile: tuple[int, int] | None, out: str,
              run_id: str) -> dict[str, str]:
    """The job's environment on one node: HCCL settings from the config (launch.hccl_env, the same
    function the single-node launcher uses) with this node's NIC and IP, then the rest."""
    # A NIC pattern the config names holds for every node and wins; an address is each node's own.
    hccl = cfg.launch.hccl.model_copy(update={"socket_ifname": cfg.launch.hccl.socket_ifname or nic,
                                              "if_ip": ip or cfg.launch.hccl.if_ip})
    # environ={}: the controller's own exports are not the node's.
    env = launch_mod.hccl_env(cfg.launch.model_copy(update={"hccl": hccl}), environ={})
    if not nic and not hccl.socket_ifname:  # hccl_env fell back to the controller's NIC: not the node's
        env.pop("HCCL_SOCKET_IFNAME", None)
        env.pop("GLOO_SOCKET_IFNAME", None)
    if devices:
        env["ASCEND_RT_VISIBLE_DEVICES"] = ",".join(map(str, devices))
    if any(b.node is not None for b in bindings):
        env[numa.NUMA_ENV] = numa.encode(bindings)
    if plan_profile:
        env[worker_hooks.STEPS_ENV] = f"{plan_profile[0]}:{plan_profile[1]}"
        env[worker_hooks.DIR_ENV] = f"{out}/{PROFILE_DIR}/{run_id}"
    env[launch_mod.WORKER_ENV] = "1"
    env["PYTHONUNBUFFERED"] = "1"  # lines reach the controller as they are printed
    # A rank killed by SIGABRT/SIGSEGV in native code (HCCL, gloo, the CANN runtime) prints every
    # thread's Python stack before it dies, so its log says where it was, not only torchrun's signal.
    env["PYTHONFAULTHANDLER"] = "1"
    # torchrun sets 1 itself only for more than one process per node; a job across nodes has more than
    # one process too, and a second intra-op thread per rank made tiny CPU steps 2-20x slower on the
    # simulated nodes (accelerate raises an unset value to 2). launch.hccl.extra_env overrides it.
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def node_rank_order(hosts: Mapping[str, LaunchSpecHost], master_addr: str) -> list[str]:
    """Node rank order: the master's host first (torchrun's static rendezvous serves the store from node
    rank 0 at MASTER_ADDR), then the spec's order."""
    names = list(hosts)
    first = [n for n in names if master_addr in (hosts[n].ip, hosts[n].address, n)]
    if not first:
        raise ConfigError(f"no host of the job has the master address {master_addr}",
                          hint="the master must be one of the hosts, by its address or NIC address")
    return [first[0], *[n for n in names if n != first[0]]]


def plan_job(
    algo: str,
    cfg: TrainConfig,
    spec: LaunchSpec,
    hosts: Mapping[str, LaunchSpecHost],
    targets: Mapping[str, Target],
    output_dir: Path,
    opts: LaunchOptions,
    *,
    resume: bool = False,
    facts: Mapping[str, NodeFacts] | None = None,
    run_id: str | None = None,
    ports: PortPlan | None = None,
) -> JobPlan:
    """Every host's command and environment. `hosts` are the spec's hosts to start (spec.usable());
    `ports` the job's claimed port plan (its rendezvous port and HCCL ports win)."""
    facts = facts or {}
    master = opts.master_addr or spec.master_addr
    if not master:  # a spec without one: rank 0 is its first host
        first = next(iter(hosts.values()))
        master = first.ip or first.address
    port = opts.master_port or spec.master_port or cfg.launch.master_port
    if ports is not None:  # PORT PLAN HOOK (torchrun over SSH): the plan's rendezvous port
        port = ports.rendezvous_port
    nproc = opts.nproc_per_node or cfg.launch.nproc_per_node
    if opts.nnodes is not None and opts.nnodes != len(hosts):
        raise ConfigError(f"--nnodes {opts.nnodes}, but {len(hosts)} host(s) are to be started: "
                          + ", ".join(hosts), hint="drop --nnodes: the spec or inventory decides it")
    run_id = run_id or f"{algo}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    plan = JobPlan(algo, run_id, output_dir, master, port, nproc, [],
                   {n: f"{h.verdict}: {', '.join(h.failed_checks) or 'see the report'}"
                    for n, h in spec.hosts.items() if n not in hosts}, spec.checked, opts.node_output_dir)
    launch = cfg.launch
    for rank, name in enumerate(node_rank_order(hosts, master)):
        h, f = hosts[name], facts.get(name)
        if launch.device == "npu" and h.devices and len(h.devices) < nproc:
            raise ConfigError(f"{name} has {len(h.devices)} healthy NPU(s) {h.devices} for {nproc} processes",
                              hint="lower --nproc-per-node, or leave the host out")
        if opts.numa_bind:
            bindings = numa.rank_bindings(h.devices, nproc, f and f.topo, f and f.numa_nodes)
        else:
            bindings = [numa.RankBinding(i, None, None, reason="turned off (--no-numa-bind)")
                        for i in range(nproc)]
        python = opts.python or h.python or sys.executable
        node_launch = launch.model_copy(update={
            "nnodes": len(hosts), "nproc_per_node": nproc, "node_rank": rank, "master_addr": master,
            "master_port": port,
        })
        worker_module = numa.__name__ if any(b.node is not None for b in bindings) else numa.CLI_MODULE
        torchrun = launch_mod.torchrun_command(node_launch, worker_argv(plan, resume), python=python,
                                               module=worker_module)
        plan.hosts.append(HostPlan(
            name=name, target=targets[name], node_rank=rank, nic=h.nic, ip=h.ip, devices=list(h.devices),
            python=python, training_user=h.training_user, set_env=opts.set_env,
            env={**_host_env(cfg, h.nic, h.ip, h.devices, bindings, opts.profile_steps, plan.node_output,
                             run_id),
                 **(ports.env("train") if ports is not None else {})},  # PORT PLAN HOOK: HCCL ports
            torchrun=torchrun, bindings=bindings, facts=f,
        ))
    return plan


# ----------------------------------------------------------------------------------- the command


def launch(algo: str, cfg: TrainConfig, output_dir: Path, *, resume: bool, opts: LaunchOptions) -> dict:
    """The whole multi-node run from the controller; returns the summary, raises on a failed job."""
    import dataclasses

    output_dir = output_dir.absolute()
    fleet = node_probe.resolve_fleet(cfg, opts)
    spec, targets, from_inventory, report = fleet.spec, fleet.targets, fleet.from_inventory, fleet.report
    hosts_spec, start, master, port = fleet.hosts, fleet.names, fleet.master, fleet.port
    python_of, users = fleet.python, fleet.users
    # A dry run connects only where it must: to read the NICs the spec does not give.
    need_probe = not opts.dry_run or from_inventory or any(not hosts_spec[n].nic for n in start)
    # hook (ops-launch): the dry run binds NUMA from the same fact as the launch (the node's `npu-smi info
    # -t topo`, read-only), never from its absence
    need_probe = need_probe or (opts.numa_bind and any(hosts_spec[n].devices for n in start))
    if not from_inventory and not opts.dry_run:
        node_probe.refuse_changed_versions(spec, hosts_spec, {n: targets[n] for n in start}, opts)
    facts: dict[str, NodeFacts] = {}
    nonce = marker = None
    node_output = opts.node_output_dir or str(output_dir)
    config_path = f"{node_output}/{RESOLVED_CONFIG}"
    with contextlib.ExitStack() as stack:
        sessions = (stack.enter_context(open_sessions([targets[n] for n in start], opts.fanout))
                    if need_probe else {})
        if not opts.dry_run:
            # hook (ops-launch, training/run_dir.py): every node's output dir, as the job's user, first
            run_dir.refuse_node_dirs({n: targets[n] for n in start}, opts.fanout, node_output,
                                     {n: u for n, u in users.items() if u and u != targets[n].user},
                                     resume=resume, min_free_gb=cfg.launch.min_output_free_gb)
            created = run_dir.missing_parts(output_dir)
            output_dir.mkdir(parents=True, exist_ok=True)
            (output_dir / RESOLVED_CONFIG).write_text(dump_config(cfg))
            nonce = secrets.token_hex(8)
            marker = output_dir / f".ascend-train-shared-{nonce}"
            marker.write_text(nonce)
            stack.callback(marker.unlink, missing_ok=True)
        if sessions:
            probe_as = {n: u for n, u in users.items() if u and u != targets[n].user}
            facts = node_facts({n: targets[n] for n in sessions}, opts.fanout, {n: FactQuery(
                master, node_probe.required_paths(cfg, python_of[n], opts.set_env,
                                                  None if opts.dry_run else config_path),
                f"{node_output}/{marker.name}" if marker else None, nonce) for n in sessions}, probe_as)
        if facts:  # hook (ops-launch): a node without a route to the master never starts
            refuse_unrouted_nodes(facts, master)
        # the exact interpreter each node expanded (a ~ascend/venvs/... path of the inventory)
        python_of = {n: (facts[n].python if n in facts else None) or p for n, p in python_of.items()}
        if from_inventory:
            spec = node_probe.spec_with_routes(report, {n: targets[n] for n in start}, facts, master, port)
            hosts_spec = spec.usable()
            # the spec now holds the master as the master node resolved it, and each node's interpreter
            opts = dataclasses.replace(opts, master_addr=None)
            hosts_spec = {n: h.model_copy(update={"python": python_of[n]}) for n, h in hosts_spec.items()}
        if not opts.dry_run:
            for n in start:  # a node that does not see the controller's run dir gets the config copied
                if not facts[n].sees_output:
                    facts[n].missing.pop("config", None)
            node_probe.refuse_missing(facts, python_of)
            # hook (ops-launch, training/run_dir.py): a run dir this controller made on a share is one the
            # job's user may write, or the launch is refused and what was made removed
            run_dir.recheck_made_here({n: targets[n] for n in start if facts[n].sees_output}, opts.fanout,
                                      node_output, probe_as, created, [output_dir / RESOLVED_CONFIG, marker])
        # PORT PLAN HOOK (torchrun over SSH): the job's ports, claimed after the probe read every node's
        run_id = f"{algo}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        ports, release = job_ports.claim(
            run_id, hosts_spec, facts, cfg, job_ports.roles_for("trl", algo, cfg),
            rendezvous_port=opts.master_port or spec.master_port or cfg.launch.master_port,
            pinned_rendezvous=opts.master_port is not None, dry_run=opts.dry_run, log=opts.log,
            sessions=sessions)
        stack.callback(release)
        plan = plan_job(algo, cfg, spec, hosts_spec, targets, output_dir, opts, resume=resume, facts=facts,
                        run_id=run_id, ports=ports)
        if opts.dry_run:
            sys.stdout.write(render_dry_run(plan))
            return {"dry_run": True, "hosts": [h.name for h in plan.hosts]}
        for name, why in plan.not_started.items():
            opts.log(f"not started: {name} ({why})")
        shared = all(f.sees_output for f in facts.values())
        where = "shared by every node" if shared else "node-local: rank 0's results are fetched at the end"
        opts.log(f"run dir: {output_dir} ({where}); logs: {plan.log_dir}")
        plan.log_dir.mkdir(parents=True, exist_ok=True)
        (plan.log_dir / "launch.txt").write_text(render_dry_run(plan))
        asd = asd_setting(plan.hosts[0].env if plan.hosts else {}, cfg.precision, cfg.launch.device)
        if asd.warning:
            opts.log(f"warning: {asd.warning}")
        job_ports.write_job_spec(spec, hosts_spec, ports, plan.log_dir, asd=asd)
        for h in plan.hosts:
            opts.log(f"{h.name}: node rank {h.node_rank}, NIC {h.nic or '-'} {h.ip or ''}".rstrip())
            for b in h.bindings:
                opts.log(f"{h.name}: numa: {b.describe()}")
        for h in plan.hosts:
            if not h.facts.sees_output:
                sessions[h.name].put_file(output_dir / RESOLVED_CONFIG, config_path)
        if resume:
            node_files.push_resume_state(plan, sessions, opts.log)
        started = time.monotonic()
        result = run_job({h.name: remote_command(h, plan) for h in plan.hosts}, sessions, plan.log_dir,
                         echo=opts.log)
        if not shared:  # not from a node that was lost: its connection would only hang
            lost = {o.name for o in result.nodes if o.lost}
            node_files.fetch_results(plan, {n: ses for n, ses in sessions.items() if n not in lost}, opts.log)
    elapsed = time.monotonic() - started
    if result.interrupted:
        opts.log(_summary(result))
        raise KeyboardInterrupt
    if not result.ok:
        lost = {o.name for o in result.nodes if o.lost}
        fetch_plogs([targets[h.name] for h in plan.hosts if h.name not in lost], plan.log_dir, opts.fanout,
                    opts.log)
        # known signatures in the logs, each <host>.log read as that node's
        opts.log(explain_failure([plan.log_dir], [h.name for h in plan.hosts]).rstrip("\n"))
        cause, same = root_cause(result.nodes), same_failure(result.nodes)
        others = [o.name for o in result.nodes if o is not cause]
        # hook (ops-launch, training/reach.py): a rendezvous that timed out names the nodes that did not join
        rdzv = reach.rendezvous_failure(result.nodes, plan.master_addr, plan.master_port)
        raise TrainingError(
            (f"{rdzv}\n" if rdzv else "")
            + (f"the job failed the same way on every node ({', '.join(o.name for o in result.nodes)}): "
               f"{same}"
             if same else
             f"the job failed on {cause.name}: {cause.lost or cause.error or f'exit code {cause.rc}'}"
             + (f"; stopped on {', '.join(others)}" if others else "")) + "\n" + _summary(result),
            hint=run_dir.after_failure_hint(output_dir, plan.log_dir),  # hook (ops-launch): fits the state
        )
    return {"output_dir": str(output_dir), "hosts": [h.name for h in plan.hosts], "run_id": plan.run_id,
            "logs": str(plan.log_dir), "wall_s": round(elapsed, 1)}


def _summary(result: JobResult) -> str:
    lines = []
    for o in result.nodes:
        state = f"lost ({o.lost})" if o.lost else f"exit {o.rc}"
        state += " after the stop" if o.stopped_by_us else ""
        left = f"; processes LEFT: {o.leftover}" if o.leftover else "; no job process left"
        lines.append(f"  {o.name}: {state}{': ' + o.error if o.error and o.rc else ''}"
                     f"{left if o.lost is None else ''}")
    return "\n".join(lines)


class SshLauncher:
    """The `ssh` launcher (training/launcher.py): torchrun on every node over SSH, from here (`launch`)."""

    name = "ssh"

    def launch(self, request: LaunchRequest) -> LaunchResult:
        job = request.job
        return LaunchResult(launch(job.algo, job.cfg, job.output_dir, resume=job.resume,
                                   opts=request.options))
