"""Each launcher's one hook into the port and role plan (checks/cluster/port_plan.py): which roles share
the NPUs, the plan claimed for this job after the nodes' probe, the environment it adds, and the job's own
copy of its launch spec (with `ports`) in its log dir.

Hook points (one per launcher, marked `# PORT PLAN HOOK`):
* torchrun over SSH: training/multinode.py `launch` (claim, after the probe) and `plan_job` (env, port);
* verl/Ray: training/verl_glue.py `launch_across_nodes` (claim; Ray's flags through RayCluster.ports);
* Slurm: training/slurm_launch.py `launch` (training/slurm_prestart.py: the nodes read and the slot claimed
  through srun steps; the env on every node through `node_command`).

Each claim is made twice: in this controller's state directory, and on the nodes themselves
(checks/cluster/port_claims.py), where two controllers launching at once meet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ascend_ready.checks.cluster.launchspec import LAUNCH_SPEC_SCHEMA_VERSION, AsdSetting, LaunchSpec
from ascend_ready.checks.cluster.port_claims import NodeClaims, RunOn
from ascend_ready.checks.cluster.port_plan import (
    MAX_SLOTS,
    PortClaims,
    PortPlan,
    make_plan,
    read_listeners,
    refuse_held,
)
from ascend_ready.checks.report import write_atomic
from ascend_ready.fleet.command import UNREACHABLE_RC

__all__ = ["SPEC_COPY", "claim", "roles_for", "session_runner", "slurm_slot", "write_job_spec"]

SPEC_COPY = "launch-spec.json"


def roles_for(engine: str, algorithm: str, cfg: Any) -> list[str]:
    """The roles that hold HCCL communicators on the same NPUs, each its own block of host ports.

    trl: one process per device (`train`). verl: the actor, its rollout (vLLM) and the reference live in
    one hybrid worker per device (`actor_rollout_ref`); PPO's critic is another worker process on the same
    devices (verl's colocated resource pool), a reward model a third."""
    if engine != "verl":
        return ["train"]
    roles = ["actor_rollout_ref"]
    if algorithm == "ppo":
        roles.append("critic")
    if getattr(cfg.model, "reward_model_path", None):
        roles.append("reward")
    return roles


def claim(job_id: str, hosts: Mapping[str, Any], facts: Mapping[str, Any], cfg: Any, roles: list[str], *,
          rendezvous_port: int, pinned_rendezvous: bool, ray: bool = False, dry_run: bool = False,
          log: Callable[[str], None] = print, sessions: Mapping[str, Any] | None = None,
          listeners: Mapping[str, Any] | None = None, on_nodes: NodeClaims | None = None,
          ) -> tuple[PortPlan, Callable[[], None]]:
    """The job's plan: the lowest slot no live job holds on these nodes (this controller's claims, and the
    nodes' own: through `sessions`, or `on_nodes` where a launcher reaches its nodes otherwise), every port
    of it free on every node as the probe read it (`facts[node].listening`, or `listeners` already parsed;
    refused otherwise, naming the port and its process). Returns (plan, release); a dry run claims
    nothing. Nodes not probed (a dry run that needed no session) are not judged, and the log says so."""
    devices = {n: list(getattr(h, "devices", ()) or ()) for n, h in hosts.items()}
    probed = {n: facts[n].listening for n in hosts if n in facts}
    listeners = dict(listeners) if listeners is not None else (read_listeners(probed) if probed else {})
    if not listeners:
        log("ports: not probed (dry run without a session to the nodes)")

    def make(slot: int) -> PortPlan:
        return make_plan(slot, job_id, roles, devices, extra_env=cfg.launch.hccl.extra_env,
                         rendezvous_port=rendezvous_port, pinned_rendezvous=pinned_rendezvous, ray=ray)

    claims = PortClaims()
    if dry_run:
        live = claims.live() if claims.dir.is_dir() else []
        taken = {int(p) for c in live if set(c.get("nodes", ())) & set(hosts) for p in c.get("ports", ())}
        slot = next(s for s in range(64) if not set(make(s).host_ports()) & taken)
        plan = make(slot)

        refuse_held(plan, listeners)
        return plan, lambda: None
    if on_nodes is None and sessions:
        on_nodes = NodeClaims(session_runner(sessions), job_id)
    plan = claims.claim(job_id, hosts, make, listeners, on_nodes=on_nodes)

    def release() -> None:
        claims.release(job_id)
        if on_nodes is not None:
            on_nodes.release()

    try:
        log(plan.describe())
    except BaseException:  # interrupted before the caller holds `release`: the claims go now
        release()
        raise
    return plan, release


def session_runner(sessions: Mapping[str, Any], timeout_s: float = 30.0) -> RunOn:
    """NodeClaims' `run` through the fleet's sessions (fleet/sessions.py), on the nodes at once."""

    def one(node, script):
        # a node cut off mid-job answers rc 255 with its reason (Session.run): no claim parser accepts
        # that, so a claim fails closed and a release leaves a stale claim the next launch reaps
        r = sessions[node].run(script, timeout_s)
        return r.rc, (r.stderr if r.rc == UNREACHABLE_RC else r.stdout)

    def run(nodes, script):
        with ThreadPoolExecutor(max_workers=min(32, max(1, len(nodes)))) as pool:
            return dict(zip(nodes, pool.map(lambda n: one(n, script), nodes), strict=True))

    return run


def write_job_spec(spec: LaunchSpec, hosts: Mapping[str, Any], plan: PortPlan, log_dir: Path,
                   asd: AsdSetting | None = None) -> Path:
    """The job's own launch spec (its hosts, its master, its ports, its NPU_ASD_CONFIG) beside its logs."""

    copy = spec.model_copy(update={"ports": plan, "master_port": plan.rendezvous_port, "asd": asd,
                                   "schema_version": LAUNCH_SPEC_SCHEMA_VERSION,
                                   "hosts": {**spec.hosts, **dict(hosts)}})

    path = log_dir / SPEC_COPY
    log_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(path, copy.model_dump_json(indent=1) + "\n")
    return path


def slurm_slot(job_id: str) -> int:
    """A Slurm job's slot: Slurm itself keeps two jobs off one node unless they share it (OverSubscribe),
    and then their job ids differ; the slot is the id modulo the slots, so jobs started one after another
    on a shared node take different ports (the probe is srun's own: a bind error names the port)."""

    digits = "".join(c for c in str(job_id) if c.isdigit())
    return int(digits or 0) % MAX_SLOTS
