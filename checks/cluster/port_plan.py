"""The port and role plan of one job: every port it will listen on, on every node, decided before anything
starts, probed free there, written into the job's launch spec and its environment.

What collides when two jobs (or two roles of one RL job) share nodes and NPUs, and why each port is planned
(sources: /work/shared/REFERENCE.md §3.7 and port_plan.yml beside this module):

* HCCL's host listen ports: `HCCL_IF_BASE_PORT` (default 60000) up to 32 ports (16 before CANN 8.x), one per
  device: base + device id, which must stay <= 65535 (vllm-ascend PR #12318: non-zero-based physical device
  ids pushed base + id past 65535). Two processes on one NPU need two ports (`HCCL_HOST_SOCKET_PORT_RANGE`,
  which wins over the base: ROLL PR #421's actor_train/actor_infer/reference on the same NPUs).
* HCCL's device-side socket port (`HCCL_NPU_SOCKET_PORT_RANGE`, 16666 by default; vllm-ascend #4725).
* The rendezvous port (MASTER_PORT, torchrun's static c10d store on node rank 0).
* Ray's ports: the GCS, the dashboard, each raylet's node manager and object manager, the client server,
  the dashboard agent, the metrics exporter, the runtime-env agent and the range its workers take.

How two jobs on the same nodes get disjoint plans: a plan is a function of a *slot* (0, 1, ...; slot 0 is
each tool's default port where one exists) and the job claims its slot twice, both before anything starts:
in the controller's state directory under a lock (`PortClaims`: jobs of this controller), and on every node
of the job (checks/cluster/port_claims.py: an atomic mkdir there, so two controllers launching at the same
moment on the same nodes take different slots). Then every port of the slot must be free on every node as
the probe (`ss -tlnp`, fail closed) reads it: a port held by anything else refuses the launch, naming it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ascend_ready.checks.cluster.port_claims import NodeClaims, pid_alive
from ascend_ready.checks.parsers.sockets import parse_listeners
from ascend_ready.checks.probes import Probe
from ascend_ready.errors import ConfigError, ParseError, TrainingError

__all__ = [
    "HCCL_SPAN",
    "LISTEN_PROBE",
    "LISTEN_PROBE_ID",
    "LISTEN_PROBE_SHELL",
    "MAX_PORT",
    "PortClaims",
    "PortPlan",
    "RayPorts",
    "RolePorts",
    "held_ports",
    "make_plan",
    "refuse_held",
]

MAX_PORT = 65535
#: CANN's upper bound of HCCL_IF_BASE_PORT (envref_07_0074: an integer in [1024, 65520])
HCCL_BASE_MAX = 65520
HCCL_BASE_MIN = 1024
HCCL_DEFAULT_BASE = 60000
#: ports HCCL takes from the base: 32 in recent CANN (60000-60031), 16 before (REFERENCE §3.7)
HCCL_SPAN = 32
#: roles one slot leaves room for (HCCL blocks of HCCL_SPAN ports each): actor/rollout/ref, critic,
#: reward model, a spare
ROLES_PER_SLOT = 4
HCCL_SLOT_STRIDE = HCCL_SPAN * ROLES_PER_SLOT
NPU_SOCKET_DEFAULT = 16666
NPU_SOCKET_STRIDE = 16
RENDEZVOUS_DEFAULT = 29500
RAY_GCS_DEFAULT = 6379
#: Ray's other ports per slot: a block of RAY_BLOCK from RAY_BASE (below Linux's ephemeral range 32768+)
RAY_BASE = 20000
RAY_BLOCK = 500
RAY_WORKER_FIRST, RAY_WORKER_LAST = 100, RAY_BLOCK - 1
MAX_SLOTS = 16

#: the one probe of the pre-start batch: listening TCP sockets, with their processes where ss exists
LISTEN_PROBE_ID = "listen"
LISTEN_PROBE_SHELL = ("if command -v ss >/dev/null 2>&1; then ss -tlnp; "
                      "else echo /proc/net/tcp; cat /proc/net/tcp; cat /proc/net/tcp6 2>/dev/null; fi")
#: that probe, as every pre-start batch runs it (the SSH launchers' node facts, Slurm's pre-start step)
LISTEN_PROBE = Probe(LISTEN_PROBE_ID, shell=LISTEN_PROBE_SHELL,
                     description="listening TCP sockets and their processes")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RolePorts(_Model):
    """One role's HCCL host ports: its base and the block of HCCL_SPAN ports from it."""

    role: str = Field(description="actor_rollout_ref, critic, reward, or train (one trl process per device)")
    hccl_if_base_port: int = Field(ge=HCCL_BASE_MIN, le=HCCL_BASE_MAX, description="HCCL_IF_BASE_PORT")
    last_port: int = Field(le=MAX_PORT, description="the block's last port: base + HCCL_SPAN - 1")


class RayPorts(_Model):
    gcs: int
    dashboard: int
    node_manager: int
    object_manager: int
    client_server: int
    dashboard_agent_grpc: int
    dashboard_agent_listen: int
    metrics_export: int
    runtime_env_agent: int
    min_worker_port: int
    max_worker_port: int

    def start_flags(self, head: bool) -> list[str]:
        """`ray start` flags (Ray 2.x names) that pin every port it would otherwise pick."""
        flags = [f"--node-manager-port={self.node_manager}", f"--object-manager-port={self.object_manager}",
                 f"--dashboard-agent-grpc-port={self.dashboard_agent_grpc}",
                 f"--dashboard-agent-listen-port={self.dashboard_agent_listen}",
                 f"--metrics-export-port={self.metrics_export}",
                 f"--runtime-env-agent-port={self.runtime_env_agent}",
                 f"--min-worker-port={self.min_worker_port}", f"--max-worker-port={self.max_worker_port}"]
        if head:
            flags += [f"--dashboard-port={self.dashboard}", f"--ray-client-server-port={self.client_server}"]
        return flags


class PortPlan(_Model):
    """Every port one job listens on, per role and node (the launch spec's `ports`)."""

    slot: int = Field(ge=0, description="the job's slot: its ports are a function of it")
    job_id: str = Field(description="the run id the plan was claimed for")
    rendezvous_port: int = Field(ge=1, le=MAX_PORT, description="MASTER_PORT on node rank 0")
    roles: list[RolePorts] = Field(description="HCCL host port blocks, one per role sharing the NPUs")
    npu_socket_port_range: str = Field(description="HCCL_NPU_SOCKET_PORT_RANGE (device side, per process)")
    ray: RayPorts | None = Field(None, description="Ray's ports (verl); None for a torchrun job")
    devices: dict[str, dict[str, dict[str, int]]] = Field(
        default_factory=dict, description="node -> role -> device id -> its HCCL host port (base + id)")

    def host_ports(self) -> dict[int, str]:
        """Every host TCP port of the plan -> what it is (the probe judges each)."""
        out = {self.rendezvous_port: "the rendezvous port (MASTER_PORT)"}
        for r in self.roles:
            for p in range(r.hccl_if_base_port, r.last_port + 1):
                out[p] = (f"{r.role}'s HCCL host port (HCCL_IF_BASE_PORT {r.hccl_if_base_port} + "
                          f"{p - r.hccl_if_base_port})")
        if self.ray:
            for name, value in self.ray.model_dump().items():
                if name not in ("min_worker_port", "max_worker_port"):
                    out[value] = f"Ray's {name.replace('_', ' ')} port"
            for p in range(self.ray.min_worker_port, self.ray.max_worker_port + 1):
                out[p] = "a Ray worker port"
        return out

    def env(self, role: str | None = None) -> dict[str, str]:
        """The job's HCCL port environment. One role: its base. Several roles in one environment (verl's
        workers share Ray's runtime_env): the first role's base, and HCCL_HOST_SOCKET_PORT_RANGE over every
        role's block, so each process on an NPU finds a port of the job's own (CANN envref_07_0143:
        plan at least as many ports as HCCL processes on one NPU; it wins over HCCL_IF_BASE_PORT)."""
        roles = [r for r in self.roles if role is None or r.role == role] or self.roles
        env = {"HCCL_IF_BASE_PORT": str(roles[0].hccl_if_base_port),
               "HCCL_NPU_SOCKET_PORT_RANGE": self.npu_socket_port_range}
        if len(roles) > 1:
            env["HCCL_HOST_SOCKET_PORT_RANGE"] = ",".join(f"{r.hccl_if_base_port}-{r.last_port}"
                                                          for r in roles)
        return env

    def describe(self) -> str:
        roles = ", ".join(f"{r.role} HCCL {r.hccl_if_base_port}-{r.last_port}" for r in self.roles)
        ray = (f"; Ray GCS {self.ray.gcs}, dashboard {self.ray.dashboard}, workers "
               f"{self.ray.min_worker_port}-{self.ray.max_worker_port}" if self.ray else "")
        return (f"ports: slot {self.slot}: rendezvous {self.rendezvous_port}; {roles}; NPU sockets "
                f"{self.npu_socket_port_range}{ray}")


def _hccl_base(extra_env: Mapping[str, str]) -> int:
    raw = extra_env.get("HCCL_IF_BASE_PORT")
    if raw is None:
        return HCCL_DEFAULT_BASE
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"launch.hccl.extra_env.HCCL_IF_BASE_PORT {raw!r} is not a port number",
                          hint=f"an integer in [{HCCL_BASE_MIN}, {HCCL_BASE_MAX}]") from None


def make_plan(slot: int, job_id: str, roles: Sequence[str], devices: Mapping[str, Sequence[int]], *,
              extra_env: Mapping[str, str] | None = None, rendezvous_port: int | None = None,
              pinned_rendezvous: bool = False, ray: bool = False) -> PortPlan:
    """The plan of `slot`. `devices`: node -> the device ids the job uses there (their HCCL port is base +
    id). A base (launch.hccl.extra_env.HCCL_IF_BASE_PORT, else 60000) whose blocks or devices pass 65535
    is refused with the arithmetic (ConfigError, before anything is written)."""
    base0 = _hccl_base(extra_env or {})
    base = base0 + slot * HCCL_SLOT_STRIDE
    span_end = base + len(roles) * HCCL_SPAN - 1
    top_device = max((d for ds in devices.values() for d in ds), default=0)
    where = f"HCCL_IF_BASE_PORT {base0}" + (f" + slot {slot} x {HCCL_SLOT_STRIDE}" if slot else "")
    if base < HCCL_BASE_MIN or base > HCCL_BASE_MAX:
        raise ConfigError(f"{where} = {base}: CANN takes HCCL_IF_BASE_PORT in "
                          f"[{HCCL_BASE_MIN}, {HCCL_BASE_MAX}]",
                          hint="set launch.hccl.extra_env.HCCL_IF_BASE_PORT lower, e.g. 55000 (vllm-ascend "
                               "PR #12318 keeps its listen ports in range so)")
    if span_end > MAX_PORT or base + top_device > MAX_PORT:
        raise ConfigError(
            f"{where} = {base}: {len(roles)} role(s) x {HCCL_SPAN} HCCL ports end at {base} + "
            f"{len(roles)} x {HCCL_SPAN} - 1 = {span_end}, and device {top_device}'s port is {base} + "
            f"{top_device} = {base + top_device}; a port is at most {MAX_PORT}",
            hint=f"set launch.hccl.extra_env.HCCL_IF_BASE_PORT to at most "
                 f"{MAX_PORT - max(len(roles) * HCCL_SPAN - 1, top_device) - slot * HCCL_SLOT_STRIDE}")
    role_ports = [RolePorts(role=r, hccl_if_base_port=base + i * HCCL_SPAN,
                            last_port=base + (i + 1) * HCCL_SPAN - 1) for i, r in enumerate(roles)]
    npu = NPU_SOCKET_DEFAULT + slot * NPU_SOCKET_STRIDE
    rdzv = rendezvous_port or RENDEZVOUS_DEFAULT
    rdzv = rdzv if pinned_rendezvous else rdzv + slot
    if rdzv > MAX_PORT:
        raise ConfigError(f"the rendezvous port {rdzv - slot} + slot {slot} = {rdzv} passes {MAX_PORT}",
                          hint="set launch.master_port lower")
    ray_ports = None
    if ray:
        b = RAY_BASE + slot * RAY_BLOCK
        ray_ports = RayPorts(gcs=RAY_GCS_DEFAULT + slot, dashboard=b, node_manager=b + 1,
                             object_manager=b + 2, client_server=b + 3, dashboard_agent_grpc=b + 4,
                             dashboard_agent_listen=b + 5, metrics_export=b + 6, runtime_env_agent=b + 7,
                             min_worker_port=b + RAY_WORKER_FIRST, max_worker_port=b + RAY_WORKER_LAST)
    per_node = {n: {r.role: {str(d): r.hccl_if_base_port + d for d in ds} for r in role_ports}
                for n, ds in devices.items()}
    return PortPlan(slot=slot, job_id=job_id, rendezvous_port=rdzv, roles=role_ports,
                    npu_socket_port_range=f"{npu}-{npu + NPU_SOCKET_STRIDE - 1}", ray=ray_ports,
                    devices=per_node)


def held_ports(plan: PortPlan, listeners: Mapping[str, object]) -> list[str]:
    """`node: port P (what) is held by PROCESS` for each port of the plan some node listens on.
    `listeners`: node -> its parsed `listen` probe (checks.parsers.sockets.Listeners)."""
    wanted = plan.host_ports()
    out = []
    for node, found in sorted(listeners.items()):
        for sock in found.sockets:
            if sock.port in wanted:
                out.append(f"{node}: port {sock.port} ({wanted[sock.port]}) is held by {sock.holder()} "
                           f"on {sock.address}")
    return sorted(set(out))


def refuse_held(plan: PortPlan, listeners: Mapping[str, object]) -> None:
    held = held_ports(plan, listeners)
    if held:
        raise TrainingError("a port of the job's plan is in use; nothing was started:\n  "
                            + "\n  ".join(held),
                            hint="stop that process, or let the job take another slot (a port held is never "
                                 "taken over)")


def read_listeners(snapshots: Mapping[str, object]) -> dict[str, object]:
    """node -> Listeners from each node's `listen` probe result (rc, stdout); a probe that did not run or
    printed something else refuses the launch (a port not read is not a free port)."""

    out = {}
    for node, res in snapshots.items():
        if res is None or not res[1].strip():
            raise TrainingError(f"{node}: the listening ports could not be read (`ss -tlnp`: "
                                f"{'not run' if res is None else f'exit {res[0]}, no output'})",
                                hint="install iproute2 (ss) on the node, or check /proc/net/tcp is readable")
        try:
            out[node] = parse_listeners(res[1])
        except ParseError as exc:
            raise TrainingError(f"{node}: the listening ports could not be read: {exc}",
                                hint="report the output of `ss -tlnp` on that node") from None
    return out


# ----------------------------------------------------------------------------------- claims


def claims_dir() -> Path:
    """The controller's claims: $ASCEND_READY_STATE_DIR, else $XDG_STATE_HOME/ascend-ready, else
    ~/.local/state/ascend-ready; `port-claims/` in it."""
    root = os.environ.get("ASCEND_READY_STATE_DIR") or (
        Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "ascend-ready")
    return Path(root) / "port-claims"


class PortClaims:
    """The controller's claimed slots: one JSON file per live job (job id, pid, nodes, ports) in
    claims_dir(), chosen and written under an exclusive flock. A claim of a process that is gone is
    stale and ignored (and removed)."""

    def __init__(self, directory: Path | None = None):
        self.dir = directory or claims_dir()

    @contextlib.contextmanager
    def _locked(self):

        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def live(self) -> list[dict]:
        out = []
        for path in sorted(self.dir.glob("*.json")):
            try:
                claim = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if claim.get("controller") == socket.gethostname() and not pid_alive(int(claim.get("pid", 0))):
                path.unlink(missing_ok=True)
                continue
            out.append(claim)
        return out

    def claim(self, job_id: str, nodes: Iterable[str], make, listeners: Mapping[str, object] | None,
              pinned_slot: int | None = None, on_nodes: NodeClaims | None = None) -> PortPlan:
        """The lowest slot (or `pinned_slot`) whose plan (`make(slot)`) shares no port with a live claim of
        another job on a common node, claimed before the lock is released: here, and with `on_nodes` on the
        nodes themselves (checks/cluster/port_claims.py: atomic there, so a job of another controller
        launching at the same moment takes another slot). A port of that plan the probe (`listeners`)
        finds held by any process refuses the launch, naming the port and the process: a port in use is
        never planned around silently (the other job may be one this controller does not know)."""
        nodes = sorted(set(nodes))
        with self._locked():
            live = [c for c in self.live()
                    if set(c.get("nodes", ())) & set(nodes) and c.get("job_id") != job_id]
            taken = {int(p): c["job_id"] for c in live for p in c.get("ports", ())}
            slots = [pinned_slot] if pinned_slot is not None else range(MAX_SLOTS)
            clashes = []
            for slot in slots:
                plan = make(slot)
                clash = sorted(set(plan.host_ports()) & set(taken))
                if clash:
                    clashes.append(f"slot {slot}: port {clash[0]} is claimed by job {taken[clash[0]]}")
                    continue
                why = on_nodes.claim(slot, nodes) if on_nodes is not None else None
                if why:
                    clashes.append(f"slot {slot}: {why} (if that job is gone: {on_nodes.removal_hint(slot)} "
                                   "on that node)")
                    continue
                try:
                    refuse_held(plan, listeners or {})
                    record = {"job_id": job_id, "pid": os.getpid(), "controller": socket.gethostname(),
                              "nodes": nodes, "slot": slot, "created": time.time(),
                              "ports": sorted(plan.host_ports())}
                    (self.dir / f"{job_id}.json").write_text(json.dumps(record))
                    return plan
                except BaseException:  # a held port, a Ctrl-C: nothing claimed is left behind
                    self.release(job_id)
                    if on_nodes is not None:
                        on_nodes.release()
                    raise
            raise TrainingError(f"no free port slot on {', '.join(nodes)}:\n  " + "\n  ".join(clashes[:4]),
                                hint="wait for a job on these nodes to end")

    def release(self, job_id: str) -> None:
        (self.dir / f"{job_id}.json").unlink(missing_ok=True)
