"""A Ray cluster on the validated nodes of a launch spec, for verl: `ray start --head` on the master,
`ray start --address` on the others, NPUs advertised as a resource, a bounded join wait, a clean teardown.

Commands are built here and run through a `run(node, command) -> (rc, stdout, stderr)` callable (SSH in
production, a fake in tests), so what each node runs can be shown (`--dry-run`) and checked.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ascend_ready.errors import ConfigError, TrainingError

Runner = Callable[[str, str], tuple[int, str, str]]
RAY_PORT = 6379
#: Ray's own accelerator manager counts Ascend NPUs under this resource name; verl asks for it
NPU_RESOURCE = "NPU"


@dataclass(frozen=True)
class RayNode:
    """One node of the cluster: its name, the IP on the NIC the launch spec chose, its healthy devices."""

    name: str
    ip: str
    nic: str | None
    devices: tuple[int, ...]
    python: str = "python3"


@dataclass
class RayCluster:
    """The head (first node) and the workers; `commands()` is what each node runs."""

    nodes: list[RayNode]
    port: int = RAY_PORT
    env: dict[str, str] = field(default_factory=dict)

    @property
    def head(self) -> RayNode:
        return self.nodes[0]

    @property
    def address(self) -> str:
        return f"{self.head.ip}:{self.port}"

    def node_env(self, node: RayNode) -> dict[str, str]:
        """Environment of `ray start` on a node: its devices, its NIC for every socket Ray/HCCL/Gloo opens."""
        env = {"ASCEND_RT_VISIBLE_DEVICES": ",".join(str(d) for d in node.devices),
               # verl sets the visible devices per worker itself (verl FAQ)
               "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1",
               "RAY_USAGE_STATS_ENABLED": "0"}
        if node.nic:
            env.update(HCCL_SOCKET_IFNAME=node.nic, GLOO_SOCKET_IFNAME=node.nic, TP_SOCKET_IFNAME=node.nic)
        return {**env, **self.env}

    def start_command(self, node: RayNode) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.node_env(node).items())
        resources = shlex.quote(json.dumps({NPU_RESOURCE: len(node.devices)}))
        common = f"--node-ip-address={shlex.quote(node.ip)} --resources={resources} --num-gpus=0"
        ray = f"{shlex.quote(node.python)} -m ray.scripts.scripts"
        if node is self.head:
            return f"env {env} {ray} start --head --port={self.port} {common} --disable-usage-stats"
        return f"env {env} {ray} start --address={shlex.quote(self.address)} {common}"

    def status_command(self) -> str:
        code = ("import json, ray; ray.init(address='auto', logging_level='ERROR'); "
                "print(json.dumps([n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']]))")
        return f"{shlex.quote(self.head.python)} -c {shlex.quote(code)}"

    def stop_command(self, node: RayNode) -> str:
        return f"{shlex.quote(node.python)} -m ray.scripts.scripts stop --force"

    #: what a node runs to show no Ray process is left (the raylet and the GCS server)
    LEFTOVER_COMMAND = "pgrep -a -f 'raylet|gcs_server' || true"


def cluster_from_spec(hosts: Mapping[str, object]) -> RayCluster:
    """A RayCluster from a launch spec's usable hosts (name -> LaunchSpecHost), the first as head."""
    nodes = []
    for name, host in hosts.items():
        ip = getattr(host, "ip", None)
        if not ip:
            raise ConfigError(f"{name}: the launch spec has no IP for the NIC that reaches the master",
                              hint="rerun ascend-check with --launch-spec so it records each node's route")
        nodes.append(RayNode(name=name, ip=ip, nic=getattr(host, "nic", None),
                             devices=tuple(getattr(host, "devices", ()) or ()),
                             python=getattr(host, "python", None) or "python3"))
    if not nodes:
        raise ConfigError("no usable node in the launch spec", hint="rerun the preflight")
    return RayCluster(nodes=nodes)


def start(cluster: RayCluster, run: Runner, *, join_timeout_s: float = 120.0, poll_s: float = 2.0,
          log: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """Start the head, then every worker, then wait (bounded) until all have joined.

    Raises TrainingError naming the node whose `ray start` failed or that did not join in time, after
    tearing the partial cluster down.
    """
    started: list[RayNode] = []
    try:
        for node in cluster.nodes:
            cmd = cluster.start_command(node)
            log(f"ray: {node.name}: {cmd}")
            rc, out, err = run(node.name, cmd)
            if rc != 0:
                why = (err or out).strip()[-400:]
                raise TrainingError(f"ray start failed on {node.name} (exit {rc}): {why}",
                                    hint=f"check Ray on {node.name} and that {cluster.address} is reachable "
                                         f"over {node.nic or 'its NIC'}")
            started.append(node)
        want = {n.ip: n.name for n in cluster.nodes}
        deadline = clock() + join_timeout_s
        alive: set[str] = set()
        while True:
            rc, out, _err = run(cluster.head.name, cluster.status_command())
            if rc == 0:
                try:
                    alive = set(json.loads(out.strip().splitlines()[-1]))
                except (ValueError, IndexError):
                    alive = set()
            if set(want) <= alive:
                log(f"ray: {len(want)} node(s) joined {cluster.address}")
                return [want[ip] for ip in want]
            if clock() >= deadline:
                missing = sorted(want[ip] for ip in set(want) - alive)
                raise TrainingError(f"ray: {', '.join(missing)} did not join {cluster.address} within "
                                    f"{join_timeout_s:g} s", hint="check the node's ray start log "
                                    "(/tmp/ray/session_latest/logs) and the firewall on the Ray ports")
            sleep(poll_s)
    except BaseException:
        stop(RayCluster(nodes=started or cluster.nodes[:1], port=cluster.port, env=cluster.env), run, log=log)
        raise


def stop(cluster: RayCluster, run: Runner, *, log: Callable[[str], None] = print) -> dict[str, list[str]]:
    """`ray stop --force` on every node, workers first; returns node -> Ray processes still running."""
    leftovers: dict[str, list[str]] = {}
    for node in reversed(cluster.nodes):
        run(node.name, cluster.stop_command(node))
        _rc, out, _err = run(node.name, RayCluster.LEFTOVER_COMMAND)
        lines = [line for line in out.splitlines() if line.strip()]
        if lines:
            leftovers[node.name] = lines
    if leftovers:
        log("ray: processes left after teardown: " + "; ".join(f"{n}: {', '.join(p)}"
                                                            for n, p in leftovers.items()))
    return leftovers

