"""A job on many nodes as data: each host's place in it, its environment and its exact command line (the
torchrun command, wrapped by the node guard, as the training user), and the HCCL variables it exports.

Built by the multi-node launcher (training/multinode.py) and the collectives
(checks/cluster/collective_run.py); run by fleet/job.py.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from ascend_ready.errors import ConfigError
from ascend_ready.fleet.become import as_user
from ascend_ready.fleet.job import GRACE_S
from ascend_ready.fleet.transport import Target

__all__ = [
    "GUARD_MODULE",
    "LOGS_DIR",
    "HostPlan",
    "JobPlan",
    "NodeFacts",
    "as_user",
    "hccl_env",
    "job_marker",
    "remote_command",
    "remote_script",
    "render_dry_run",
    "torchrun_command",
]

GUARD_MODULE = "ascend_ready.fleet.node_guard"
#: a node's guard stops its job after this long without the controller's heartbeat (job.HEARTBEAT_S)
GUARD_SILENCE_S = 30.0
#: the run dir's folder of the nodes' logs (a subfolder per run), written on the controller
LOGS_DIR = "logs"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


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
    #: (exit status, output) of the job's interpreter importing ascend_ready and printing its version
    ascend_ready: tuple[int, str] | None = None
    python: str | None = None  # the job's interpreter as the node's shell expanded its path
    #: (exit status, output) of the listening-sockets probe (`ss -tlnp`; checks.cluster.port_plan)
    listening: tuple[int, str] | None = None


class Binding(Protocol):
    """A local rank's CPU binding (training.numa.RankBinding), as the dry run shows it."""

    def describe(self) -> str: ...


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
    bindings: Sequence[Binding]
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


def torchrun_command(argv: Sequence[str], *, nnodes: int, nproc_per_node: int, node_rank: int,
                     master_addr: str, master_port: int, python: str | None = None,
                     module: str, log_dir: Path | None = None,
                     rdzv_timeout_s: int | None = None) -> list[str]:
    """torchrun on one node of the job, running `python -m MODULE ARGV` in every worker. With `log_dir`,
    every worker's stdout and stderr is also written under it (`--tee`). `rdzv_timeout_s`: the deadline of
    the static rendezvous (its TCPStore: a node that cannot reach the master fails with "The client socket
    has timed out after ...ms", the master with "Timed out after N seconds waiting for clients"), instead
    of torch's 600 s."""
    logs = [f"--log-dir={log_dir}", "--tee=3"] if log_dir is not None else []
    # hook (ops-launch): the rendezvous has a deadline
    logs += [f"--rdzv-conf=timeout={rdzv_timeout_s}"] if rdzv_timeout_s else []
    return [
        python or sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nnodes}",
        f"--nproc-per-node={nproc_per_node}",
        f"--node-rank={node_rank}",
        f"--master-addr={master_addr}",
        f"--master-port={master_port}",
        *logs,
        "-m",
        module,
        *argv,
    ]


def hccl_env(*, connect_timeout: int, exec_timeout: int, if_ip: str | None = None,
             socket_ifname: str | None = None, extra_env: Mapping[str, str] | None = None,
             environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The HCCL (and gloo) variables a job exports; values already in `environ` win over these."""
    environ = {} if environ is None else environ
    want = {
        "HCCL_CONNECT_TIMEOUT": str(connect_timeout),
        "HCCL_EXEC_TIMEOUT": str(exec_timeout),
        # torch_npu aborts a collective at HCCL_EVENT_TIMEOUT, which must exceed the exec timeout.
        "HCCL_EVENT_TIMEOUT": str(exec_timeout + 32) if exec_timeout else "0",
        "HCCL_WHITELIST_DISABLE": "1",
        **(extra_env or {}),
    }
    if if_ip:
        want["HCCL_IF_IP"] = if_ip
    if socket_ifname:
        want["HCCL_SOCKET_IFNAME"] = socket_ifname
        want["GLOO_SOCKET_IFNAME"] = socket_ifname.lstrip("=^").split(",")[0]
    return {k: environ.get(k, v) for k, v in want.items()}


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


def remote_command(host: HostPlan, plan: JobPlan) -> str:
    """The exact command line the controller's SSH session runs on the node."""
    login = (host.facts.login_user if host.facts else None) or host.target.user
    return as_user(remote_script(host, plan), host.training_user, login)


def host_port(host: str, port: int | str | None) -> str:
    """`host:port` as a URL writes it: an IPv6 address in brackets ([fd77::11]:29500), so the port is
    never read as the address's last group; the host alone without a port."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{shown}:{port}" if port else host


def render_dry_run(plan: JobPlan) -> str:
    """Per host: the exact command line its SSH session runs and the environment the job gets."""
    out = [f"{len(plan.hosts)} node(s) x {plan.nproc_per_node} process(es); master "
           f"{host_port(plan.master_addr, plan.master_port)}; run dir {plan.node_output} on every node; "
           f"job {plan.run_id}"]
    out += [f"not started: {name} ({why})" for name, why in plan.not_started.items()]
    for h in plan.hosts:
        t = h.target
        out.append(f"== {h.name}: node rank {h.node_rank}, ssh {t.user + '@' if t.user else ''}"
                   f"{host_port(t.address, t.port)}"
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
