"""One command trains on every node: from a launch spec (or a preflight it runs), start the same job
under torchrun on each host over SSH, stream every node's output, and stop it everywhere on a failure.

    ascend-train grpo -c CONFIG --launch-spec spec.json -o runs/x        # the spec ascend-check wrote
    ascend-train grpo -c CONFIG -i inventory.ini -o runs/x               # preflight first, then launch
    ascend-train grpo -c CONFIG -i inventory.ini --skip-preflight --dry-run

Per host: `/bin/sh -c SCRIPT` (as the training user through `sudo -n -u` where that is not the SSH user);
SCRIPT enters the run dir, sources CANN's set_env.sh, exports the HCCL/gloo NIC and IP, the HCCL
timeouts, ASCEND_RT_VISIBLE_DEVICES and the venv, then execs the node guard (training/node_guard.py),
which runs torchrun and stops every process of the job on this node when told, when the controller goes
silent, or when the connection drops. Every value in SCRIPT is shell-quoted; the config itself travels
as a file, never through a shell.

The run dir has the same path on every node as on the controller (--output-dir). Where the nodes see
the controller's directory (a shared filesystem, detected by a file only the controller wrote), rank 0
writes metrics, checkpoints and plots there once; elsewhere the config is copied to each node and rank
0's results (and every rank's checkpoint and profiler files) are fetched back when the job ends.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import secrets
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ascend_ready.checks.cluster.launchspec import LaunchSpec, LaunchSpecHost, load_launch_spec
from ascend_ready.checks.transport import FanoutOptions, Target
from ascend_ready.errors import AscendReadyError, ConfigError, TrainingError
from ascend_ready.training import launch as launch_mod
from ascend_ready.training import numa, worker_hooks
from ascend_ready.training.config import TrainConfig, dump_config
from ascend_ready.training.remote import GRACE_S, JobResult, Session, open_sessions, root_cause, run_job

__all__ = [
    "HostPlan",
    "JobPlan",
    "LaunchOptions",
    "NodeFacts",
    "launch",
    "plan_job",
    "probe_script",
    "read_probe",
    "remote_command",
    "render_dry_run",
]

GUARD_MODULE = "ascend_ready.training.node_guard"
RESOLVED_CONFIG = "config.yaml"
DEFAULT_SET_ENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
PROFILE_DIR = "profile"
LOGS_DIR = "logs"
#: a node's guard stops its job after this long without the controller's heartbeat (remote.HEARTBEAT_S)
GUARD_SILENCE_S = 30.0
PROBE_TIMEOUT_S = 30.0
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PROBE = "@@probe"


@dataclass
class LaunchOptions:
    """How the controller reaches the nodes and what it starts there (the CLI's multi-node flags)."""

    launch_spec: str | None = None
    inventory: str | None = None
    hosts: Sequence[str] = ()
    skip_preflight: bool = False
    dry_run: bool = False
    python: str | None = None
    set_env: str = DEFAULT_SET_ENV
    numa_bind: bool = True
    profile_steps: tuple[int, int] | None = None
    master_addr: str | None = None
    master_port: int | None = None
    node_output_dir: str | None = None
    nproc_per_node: int | None = None
    nnodes: int | None = None
    fanout: FanoutOptions = field(default_factory=FanoutOptions)
    preflight_command: str | None = None
    preflight_timeout_s: int = 900
    log: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True)


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


@dataclass
class NodeFacts:
    """What the read-only probe found on one node before anything starts."""

    login_user: str | None = None
    master_ip: str | None = None
    route: str | None = None
    addr: str | None = None
    topo: str | None = None
    numa_nodes: str | None = None
    sees_output: bool = False
    missing: dict[str, str] = field(default_factory=dict)  # label -> path that is not there


@dataclass
class HostPlan:
    """One node's part of the job: where it sits in it and exactly what is run there."""

    name: str
    target: Target
    node_rank: int
    nic: str | None
    ip: str | None
    devices: list[int]
    python: str
    training_user: str | None
    env: dict[str, str]
    torchrun: list[str]
    bindings: list[numa.RankBinding]
    set_env: str
    facts: NodeFacts | None = None

    @property
    def venv(self) -> str | None:
        """The venv the interpreter belongs to (`/x/venv` for `/x/venv/bin/python`), or None."""
        p = PurePosixPath(self.python)
        return str(p.parent.parent) if p.parent.name == "bin" and p.name.startswith("python") else None


@dataclass
class JobPlan:
    algo: str
    run_id: str
    output_dir: Path
    master_addr: str
    master_port: int
    nproc_per_node: int
    hosts: list[HostPlan]
    not_started: dict[str, str]  # host -> why
    checked: bool
    node_output_dir: str | None = None

    @property
    def log_dir(self) -> Path:
        return self.output_dir / LOGS_DIR / self.run_id

    @property
    def node_output(self) -> str:
        """The run dir on every node: --node-output-dir (a shared filesystem mounted elsewhere on the nodes
        than on the controller), else the controller's --output-dir path, shared or not."""
        return self.node_output_dir or str(self.output_dir)


def _q(value: object) -> str:
    return shlex.quote(str(value))


def _check_env(env: Mapping[str, str]) -> None:
    bad = [k for k in env if not _ENV_NAME.match(k)]
    if bad:
        raise ConfigError(f"environment variable name(s) {', '.join(map(repr, bad))} are not shell names",
                          hint="launch.hccl.extra_env keys: letters, digits and _, not starting with a digit")


def remote_script(host: HostPlan, plan: JobPlan) -> str:
    """The shell script one node runs: every value in it is shell-quoted (a test runs it on /bin/sh with
    `;`, `$(...)` and newlines in the values and checks that nothing but the job is run)."""
    _check_env(host.env)
    out = plan.node_output
    lines = [
        f"mkdir -p {_q(out)} && cd {_q(out)} || exit 97",
        # set_env.sh is written for an interactive shell: sourced without -e or -u.
        f"if [ -r {_q(host.set_env)} ]; then . {_q(host.set_env)}; fi",
    ]
    if host.venv:
        lines.append(f"VIRTUAL_ENV={_q(host.venv)}; export VIRTUAL_ENV")
        lines.append(f'PATH={_q(host.venv + "/bin")}:"$PATH"; export PATH')
    lines += [f"{k}={_q(v)}; export {k}" for k, v in host.env.items()]
    guard = [host.python, "-u", "-m", GUARD_MODULE, "--job", job_marker(plan, host),
             "--heartbeat-timeout", f"{GUARD_SILENCE_S:g}", "--grace", f"{GRACE_S:g}", "--", *host.torchrun]
    lines.append("exec " + " ".join(_q(a) for a in guard))
    return "\n".join(lines) + "\n"


def job_marker(plan: JobPlan, host: HostPlan) -> str:
    """The ASCEND_TRAIN_JOB value of one node's processes: the run and the host, so that two "nodes" on
    one machine (local tests, a controller that is also a node) never stop each other's processes."""
    return f"{plan.run_id}.{host.name}"


def as_user(script: str, training_user: str | None, login_user: str | None) -> str:
    """`/bin/sh -c SCRIPT`, through `sudo -n -u USER` where the training user is not the SSH user (the
    Ray cluster of --engine verl starts the same way)."""
    shell = f"/bin/sh -c {_q(script)}"
    if training_user and training_user != login_user:
        return f"sudo -n -H -u {_q(training_user)} -- {shell}"
    return shell


def _as_user(host: HostPlan, script: str) -> str:
    login = (host.facts.login_user if host.facts else None) or host.target.user
    return as_user(script, host.training_user, login)


def remote_command(host: HostPlan, plan: JobPlan) -> str:
    """The exact command line the controller's SSH session runs on the node."""
    return _as_user(host, remote_script(host, plan))


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


def _ordered(hosts: Mapping[str, LaunchSpecHost], master_addr: str) -> list[str]:
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
) -> JobPlan:
    """Every host's command and environment. `hosts` are the spec's hosts to start (spec.usable())."""
    facts = facts or {}
    master = opts.master_addr or spec.master_addr
    if not master:  # a spec without one: rank 0 is its first host
        first = next(iter(hosts.values()))
        master = first.ip or first.address
    port = opts.master_port or spec.master_port or cfg.launch.master_port
    nproc = opts.nproc_per_node or cfg.launch.nproc_per_node
    if opts.nnodes is not None and opts.nnodes != len(hosts):
        raise ConfigError(f"--nnodes {opts.nnodes}, but {len(hosts)} host(s) are to be started: "
                          + ", ".join(hosts), hint="drop --nnodes: the spec or inventory decides it")
    run_id = run_id or f"{algo}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    plan = JobPlan(algo, run_id, output_dir, master, port, nproc, [],
                   {n: f"{h.verdict}: {', '.join(h.failed_checks) or 'see the report'}"
                    for n, h in spec.hosts.items() if n not in hosts}, spec.checked, opts.node_output_dir)
    launch = cfg.launch
    for rank, name in enumerate(_ordered(hosts, master)):
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
            env=_host_env(cfg, h.nic, h.ip, h.devices, bindings, opts.profile_steps, plan.node_output,
                          run_id),
            torchrun=torchrun, bindings=bindings, facts=f,
        ))
    return plan


def render_dry_run(plan: JobPlan) -> str:
    """Per host: the exact command line its SSH session runs and the environment the job gets."""
    out = [f"{len(plan.hosts)} node(s) x {plan.nproc_per_node} process(es); master "
           f"{plan.master_addr}:{plan.master_port}; run dir {plan.node_output} on every node; "
           f"job {plan.run_id}"]
    out += [f"not started: {name} ({why})" for name, why in plan.not_started.items()]
    for h in plan.hosts:
        t = h.target
        out.append(f"== {h.name}: node rank {h.node_rank}, ssh {t.user + '@' if t.user else ''}"
                   f"{t.address}{':' + str(t.port) if t.port else ''}"
                   f"{' via ' + t.proxy_jump if t.proxy_jump else ''}")
        out.append("environment:")
        if h.venv:
            out += [f"  VIRTUAL_ENV={_q(h.venv)}", f"  PATH={_q(h.venv + '/bin')}:$PATH"]
        out += [f"  {k}={_q(v)}" for k, v in h.env.items()]
        out.append(f"  (sourced first, if present: {h.set_env})")
        out += [f"numa: {b.describe()}" for b in h.bindings]
        out.append("command:")
        out.append(remote_command(h, plan).rstrip("\n"))
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------- node probe


def _required_paths(cfg: TrainConfig, python: str, set_env: str, config_path: str | None,
                    ) -> dict[str, tuple[str, str]]:
    """label -> (test flag, path): what must exist on every node before anything starts."""
    paths = {"python": ("-x", python)}
    if config_path:
        paths["config"] = ("-r", config_path)
    if cfg.data.source != "arithmetic" and cfg.data.path:
        paths["data.path"] = ("-r", cfg.data.path)
    if cfg.model.tiny is None and cfg.model.path:
        paths["model.path"] = ("-d", cfg.model.path)
    if cfg.model.reward_model_path:
        paths["model.reward_model_path"] = ("-d", cfg.model.reward_model_path)
    if cfg.launch.device == "npu":
        paths["CANN set_env.sh"] = ("-r", set_env)
    return paths


def probe_script(master: str, paths: Mapping[str, tuple[str, str]], marker: str | None) -> str:
    """A read-only shell script: the master's address as the node resolves it, the route to it, the
    addresses that hold it, the required paths, the controller's marker file, NPU topology, NUMA nodes."""
    lines = [
        f'b() {{ echo "{_PROBE} begin $1"; }}',
        f'e() {{ echo "{_PROBE} end $1 $2"; }}',
        f"m={_q(master)}",
        # a name: resolved by the node itself (its resolver, its /etc/hosts), as torchrun will
        "case \"$m\" in *[!0-9.:]*) m=$(getent ahostsv4 \"$m\" 2>/dev/null | awk 'NR==1 {print $1}');; esac",
        'b master; echo "$m"; e master 0',
        'b user; id -un 2>&1; e user $?',
        'b route; ip -o route get "$m" 2>&1; e route $?',
        'b addr; ip -o addr show to "$m" 2>&1; e addr $?',
    ]
    for label, (flag, path) in paths.items():
        lines.append(f"b {_q('path:' + label)}; test {flag} {_q(path)}; e {_q('path:' + label)} $?")
    if marker:
        lines.append(f"b shared; cat {_q(marker)} 2>/dev/null; rc=$?; echo; e shared $rc")
    lines += [
        "b topo; if command -v npu-smi >/dev/null 2>&1; then npu-smi info -t topo 2>&1; "
        "else echo 'npu-smi: not installed'; false; fi; e topo $?",
        f"b nodes; grep -H . {numa.NODE_CPULISTS} 2>&1; e nodes $?",
    ]
    return "\n".join(lines) + "\n"


def read_probe(text: str, paths: Mapping[str, tuple[str, str]], nonce: str | None) -> NodeFacts:
    """NodeFacts from the probe's output (sections between `@@probe begin X` and `@@probe end X RC`)."""
    blocks: dict[str, tuple[int, str]] = {}
    name, body = None, []
    for line in text.splitlines():
        if line.startswith(f"{_PROBE} begin "):
            name, body = line.split(" ", 2)[2], []
        elif line.startswith(f"{_PROBE} end ") and name is not None:
            rc = line.rsplit(" ", 1)[-1]
            blocks[name] = (int(rc) if rc.lstrip("-").isdigit() else -1, "\n".join(body))
            name = None
        elif name is not None:
            body.append(line)

    def ok(key: str) -> str | None:
        rc, out = blocks.get(key, (-1, ""))
        return out if rc == 0 and out.strip() else None

    facts = NodeFacts(
        login_user=(ok("user") or "").strip() or None,
        master_ip=(ok("master") or "").strip() or None,
        route=ok("route"), addr=ok("addr"), topo=ok("topo"), numa_nodes=ok("nodes"),
        sees_output=nonce is not None and (ok("shared") or "").strip() == nonce,
    )
    for label, (_flag, path) in paths.items():
        if blocks.get(f"path:{label}", (1, ""))[0] != 0:
            facts.missing[label] = path
    return facts


# ----------------------------------------------------------------------------------- files


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


# ----------------------------------------------------------------------------------- the command


def _inventory_targets(opts: LaunchOptions) -> list[Target]:
    """The hosts -i or --hosts name, with their SSH details."""
    from ascend_ready.checks.inventory import load_inventory, parse_hosts

    if opts.inventory:
        return load_inventory(opts.inventory)
    return parse_hosts(",".join(opts.hosts)) if opts.hosts else []


def _targets_and_spec(cfg: TrainConfig, opts: LaunchOptions) -> tuple[LaunchSpec, dict[str, Target], bool]:
    """(spec, host -> SSH target, True where the spec is still to be made from the inventory's hosts).

    A launch spec is read and judged first, before anything else (stale: refused before any SSH); with
    -i/--hosts the preflight runs first, as the single-node gate does, and reads the inventory itself."""
    if opts.launch_spec:
        spec = load_launch_spec(opts.launch_spec)
        spec.usable()  # stale or hopeless: refused before any SSH session opens
        by_name = {t.name: t for t in _inventory_targets(opts)}
        return spec, {n: by_name.get(n) or h.target(n) for n, h in spec.hosts.items()}, False
    if not (opts.inventory or opts.hosts):
        raise ConfigError("no hosts to launch on", hint="pass --launch-spec FILE, -i INVENTORY or --hosts")
    return LaunchSpec(hosts={}), {}, True


def _preflight_report(cfg: TrainConfig, opts: LaunchOptions):
    """The preflight of the hosts (ascend-check, as the single-node gate runs it); refuses unless it passed.
    None with --skip-preflight, after the banner."""
    from ascend_ready.training import preflight

    if opts.skip_preflight:
        opts.log(preflight.SKIP_BANNER)
        return None
    where = f"inventory {opts.inventory}" if opts.inventory else ", ".join(opts.hosts)
    opts.log(f"preflight: ascend-check on {where}")
    result = preflight.run_preflight(opts.preflight_command, list(opts.hosts), opts.inventory,
                                     opts.preflight_timeout_s)
    report = preflight.require_pass(result)
    opts.log("preflight: passed")
    return report


def _master_of(targets: Mapping[str, Target], opts: LaunchOptions) -> str:
    """--master-addr, else the first host's address (inventory ansible_host, or its name: each node
    then resolves it itself)."""
    return opts.master_addr or next(iter(targets.values())).address or next(iter(targets))


def _probe_all(sessions: Mapping[str, Session], master: str, paths_of: Callable[[str], dict],
               marker: str | None, nonce: str | None, users: Mapping[str, str]) -> dict[str, NodeFacts]:
    from concurrent.futures import ThreadPoolExecutor

    def one(name: str) -> tuple[str, NodeFacts]:
        paths = paths_of(name)
        script = probe_script(master, paths, marker)
        user = users.get(name)
        cmd = f"/bin/sh -c {_q(script)}"
        if user:
            cmd = f"sudo -n -H -u {_q(user)} -- {cmd}"
        rc, out = sessions[name].capture(cmd, PROBE_TIMEOUT_S)
        if rc != 0 and _PROBE not in out:
            raise TrainingError(f"{name}: the pre-start probe failed (exit {rc}): {out.strip()[-300:]}",
                                hint="check the node's shell and, for another training user, sudo -n")
        return name, read_probe(out, paths, nonce)

    with ThreadPoolExecutor(max_workers=min(32, len(sessions))) as pool:
        return dict(pool.map(one, list(sessions)))


def _spec_with_routes(report, targets: Mapping[str, Target], facts: Mapping[str, NodeFacts], master: str,
                      port: int) -> LaunchSpec:
    from ascend_ready.checks.cluster.launchspec import spec_from_report

    names = list(targets)
    resolved = facts[names[0]].master_ip or master
    try:
        ipaddress.ip_address(resolved)
    except ValueError:
        raise ConfigError(f"{names[0]} cannot resolve the master {master!r}",
                          hint="give the first host an IP (ansible_host) or pass --master-addr") from None
    routes, addrs = {}, {}
    for name in names:
        f = facts[name]
        if f.route is None:
            raise ConfigError(f"{name}: no route to the master {resolved} (`ip -o route get {resolved}`)",
                              hint="check the node's network, or name the NIC: launch.hccl.socket_ifname")
        routes[name] = f.route
        if f.addr:
            addrs[name] = f.addr
    training = _training_envs(targets)
    return spec_from_report(report, [targets[n] for n in names], master_addr=resolved, routes=routes,
                            addrs=addrs, master_port=port, training=training)


def _training_envs(targets: Mapping[str, Target]) -> dict[str, tuple[str | None, str | None]]:
    """(training user, interpreter) each inventory host names (None where it names none), as ascend-check
    reads them (checks.preflight.training_env)."""
    from ascend_ready.checks.preflight import training_env
    from ascend_ready.checks.profile import DEFAULT_PROFILE, load_profile

    profile = load_profile(DEFAULT_PROFILE)
    out = {}
    for name, t in targets.items():
        if not t.vars:
            continue
        user, python = training_env(t.vars, profile)
        named_user = user if user != profile.training_user else None
        # a glob or ~user path is for the node's shell to expand: not an exact path to start
        exact = python != profile.python and "*" not in python and "~" not in python
        named_python = python if exact else None
        if named_user or named_python:
            out[name] = (named_user, named_python)
    return out


def _refuse_missing(facts: Mapping[str, NodeFacts]) -> None:
    missing = [f"{name}: {label} {path} is not there" for name, f in facts.items()
               for label, path in f.missing.items()]
    if missing:
        raise ConfigError("not every node has what the job needs; nothing was started:\n  "
                          + "\n  ".join(missing),
                          hint="put the files at the same path on every node (or on a shared filesystem)")


def fetch_plogs(targets: Sequence[Target], log_dir: Path, opts: LaunchOptions) -> None:
    """The tails of each node's newest CANN plogs (the `collect --plogs` probe, bounded on the node) into
    LOG_DIR/<host>-plogs.log, so the diagnosis of a failed job reads the runtime's own logs too."""
    from ascend_ready.checks.diagnose.probes import PLOGS
    from ascend_ready.checks.profile import DEFAULT_PROFILE, load_profile
    from ascend_ready.checks.transport import collect

    if not targets:
        return
    probe = PLOGS(load_profile(DEFAULT_PROFILE))
    try:
        snaps = collect(list(targets), lambda t: ([probe], t.user or "root"), opts.fanout)
    except AscendReadyError as exc:
        opts.log(f"note: the nodes' plogs were not read: {exc.message}")
        return
    for snap in snaps:
        res = snap.probes.get(probe.id)
        if res is not None and res.stdout.strip():
            (log_dir / f"{snap.name}-plogs.log").write_text(res.stdout)


def _refuse_changed_versions(spec: LaunchSpec, hosts: Mapping[str, LaunchSpecHost],
                             targets: Mapping[str, Target], opts: LaunchOptions) -> None:
    """Read every host's stack again (one batch each) and refuse, before anything is written, a spec whose
    recorded versions no longer match the nodes (LaunchSpec.check_versions)."""
    if not any(h.fingerprint for h in hosts.values()):
        return  # a spec made without fingerprints (--skip-preflight) has nothing to compare
    from ascend_ready.checks.cluster.launchspec import current_fingerprints
    from ascend_ready.checks.profile import DEFAULT_PROFILE, load_profile

    base = load_profile(DEFAULT_PROFILE)
    profiles = {}
    for name, host in hosts.items():
        # read where the preflight read it (the spec says whose environment), else where the job runs
        user = host.fingerprint_user or host.training_user
        python = host.fingerprint_python or host.python
        update = {k: v for k, v in (("training_user", user), ("python", python)) if v}
        profiles[name] = base.model_copy(update=update)
    spec.check_versions(current_fingerprints(list(targets.values()), opts.fanout, profiles))


@dataclass
class Fleet:
    """The nodes of a job before any session opens: from the launch spec (judged), or the inventory's
    hosts after a passing preflight (`hosts` None until the probe gives their routes, _spec_with_routes)."""

    spec: LaunchSpec
    targets: dict[str, Target]
    from_inventory: bool
    report: object | None
    hosts: dict[str, LaunchSpecHost] | None
    names: list[str]  # the hosts to start, in order
    master: str
    port: int
    python: dict[str, str]  # host -> interpreter on it
    users: dict[str, str | None]  # host -> the training user the spec or inventory names


def resolve_fleet(cfg: TrainConfig, opts: LaunchOptions) -> Fleet:
    """Spec or preflight, the hosts to start, the master, each host's interpreter and training user (the
    trl launcher here and verl's Ray cluster, training/verl_glue.py, start from the same)."""
    spec, targets, from_inventory = _targets_and_spec(cfg, opts)
    report = None
    if from_inventory:
        report = _preflight_report(cfg, opts)
        targets = {t.name: t for t in _inventory_targets(opts)}
    if not from_inventory and opts.skip_preflight:
        opts.log("note: --skip-preflight with --launch-spec: the spec is used as the preflight left it")
    hosts_spec = None if from_inventory else spec.usable()
    start = list(targets) if from_inventory else list(hosts_spec)
    if from_inventory:
        master = _master_of(targets, opts)
    else:
        first = hosts_spec[start[0]]
        master = opts.master_addr or spec.master_addr or first.ip or first.address
    port = opts.master_port or (cfg.launch.master_port if from_inventory else spec.master_port)
    named = _training_envs(targets) if from_inventory else {}
    python_of = {n: opts.python or (named.get(n, (None, None))[1] if from_inventory else hosts_spec[n].python)
                 or sys.executable for n in start}
    users = {n: named.get(n, (None, None))[0] if from_inventory else hosts_spec[n].training_user
             for n in start}
    return Fleet(spec, targets, from_inventory, report, hosts_spec, start, master, port, python_of, users)


def launch(algo: str, cfg: TrainConfig, output_dir: Path, *, resume: bool, opts: LaunchOptions) -> dict:
    """The whole multi-node run from the controller; returns the summary, raises on a failed job."""
    import dataclasses

    output_dir = output_dir.absolute()
    fleet = resolve_fleet(cfg, opts)
    spec, targets, from_inventory, report = fleet.spec, fleet.targets, fleet.from_inventory, fleet.report
    hosts_spec, start, master, port = fleet.hosts, fleet.names, fleet.master, fleet.port
    python_of, users = fleet.python, fleet.users
    # A dry run connects only where it must: to read the NICs the spec does not give.
    need_probe = not opts.dry_run or from_inventory or any(not hosts_spec[n].nic for n in start)
    if not from_inventory and not opts.dry_run:
        _refuse_changed_versions(spec, hosts_spec, {n: targets[n] for n in start}, opts)
    facts: dict[str, NodeFacts] = {}
    nonce = marker = None
    node_output = opts.node_output_dir or str(output_dir)
    config_path = f"{node_output}/{RESOLVED_CONFIG}"
    with contextlib.ExitStack() as stack:
        sessions = (stack.enter_context(open_sessions([targets[n] for n in start], opts.fanout))
                    if need_probe else {})
        if not opts.dry_run:
            output_dir.mkdir(parents=True, exist_ok=True)
            (output_dir / RESOLVED_CONFIG).write_text(dump_config(cfg))
            nonce = secrets.token_hex(8)
            marker = output_dir / f".ascend-train-shared-{nonce}"
            marker.write_text(nonce)
            stack.callback(marker.unlink, missing_ok=True)
        if sessions:
            probe_as = {n: u for n, u in users.items() if u and u != targets[n].user}
            facts = _probe_all(
                sessions, master,
                lambda n: _required_paths(cfg, python_of[n], opts.set_env,
                                          None if opts.dry_run else config_path),
                f"{node_output}/{marker.name}" if marker else None, nonce, probe_as)
        if from_inventory:
            spec = _spec_with_routes(report, {n: targets[n] for n in start}, facts, master, port)
            hosts_spec = spec.usable()
            # the spec now holds the master as the master node resolved it, and each node's interpreter
            opts = dataclasses.replace(opts, master_addr=None)
            hosts_spec = {n: h.model_copy(update={"python": python_of[n]}) for n, h in hosts_spec.items()}
        if not opts.dry_run:
            for n in start:  # a node that does not see the controller's run dir gets the config copied
                if not facts[n].sees_output:
                    facts[n].missing.pop("config", None)
            _refuse_missing(facts)
        plan = plan_job(algo, cfg, spec, hosts_spec, targets, output_dir, opts, resume=resume, facts=facts)
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
        for h in plan.hosts:
            opts.log(f"{h.name}: node rank {h.node_rank}, NIC {h.nic or '-'} {h.ip or ''}".rstrip())
            for b in h.bindings:
                opts.log(f"{h.name}: numa: {b.describe()}")
        for h in plan.hosts:
            if not h.facts.sees_output:
                sessions[h.name].put_file(output_dir / RESOLVED_CONFIG, config_path)
        if resume:
            push_resume_state(plan, sessions, opts.log)
        started = time.monotonic()
        result = run_job({h.name: remote_command(h, plan) for h in plan.hosts}, sessions, plan.log_dir,
                         echo=opts.log)
        if not shared:  # not from a node that was lost: its connection would only hang
            lost = {o.name for o in result.nodes if o.lost}
            fetch_results(plan, {n: ses for n, ses in sessions.items() if n not in lost}, opts.log)
    elapsed = time.monotonic() - started
    if result.interrupted:
        opts.log(_summary(result))
        raise KeyboardInterrupt
    if not result.ok:
        lost = {o.name for o in result.nodes if o.lost}
        fetch_plogs([targets[h.name] for h in plan.hosts if h.name not in lost], plan.log_dir, opts)
        opts.log(launch_mod.explain_failure([plan.log_dir]).rstrip("\n"))  # known signatures in the logs
        cause = root_cause(result.nodes)
        others = [o.name for o in result.nodes if o is not cause]
        raise TrainingError(
            f"the job failed on {cause.name}: {cause.lost or cause.error or f'exit code {cause.rc}'}"
            + (f"; stopped on {', '.join(others)}" if others else "") + "\n" + _summary(result),
            hint=f"logs: {plan.log_dir}/<host>.log; fix the cause, then run the same command with --resume "
            "to continue from the last checkpoint on every node",
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
