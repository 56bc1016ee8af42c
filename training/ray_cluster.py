"""A Ray cluster on the validated nodes of a launch spec, for verl: `ray start --head` on the master,
`ray start --address` on the others, NPUs advertised as a resource, a bounded join wait, a clean teardown.

Commands are built here and run through a `run(node, command, timeout_s) -> CommandResult` callable (a
session's short command in production, `runner(sessions)`; a fake in tests), so what each node runs can
be shown (`--dry-run`) and checked.
"""

from __future__ import annotations

import json
import shlex
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.fleet.become import as_user
from ascend_ready.fleet.command import CommandResult

Runner = Callable[[str, str, float], CommandResult]
T = TypeVar("T")
RAY_PORT = 6379
#: Ray's own accelerator manager counts Ascend NPUs under this resource name; verl asks for it
NPU_RESOURCE = "NPU"
#: `ray start` and `ray stop` on one node; a worker's start is bounded by what is left of the join wait
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
CHECK_TIMEOUT_S = 90.0
#: a Ray process on a node, as `pgrep -a -f` sees it: the GCS, the raylet, the Python daemons Ray starts
#: (dashboard, autoscaler monitor, log monitor, client server) and its workers (`ray::...`). Each first
#: letter is bracketed so the pattern never matches the shell that runs pgrep with it.
RAY_PROCESS_PATTERN = (r"[g]cs_server|[r]aylet|[r]ay::|[r]ay/dashboard/|[r]ay/autoscaler/|"
                       r"[r]ay/_private/(log_monitor|runtime_env)|[r]ay\.util\.client\.server|"
                       r"[r]ay\.scripts\.scripts start|[a]scend-ready-ray-probe")
#: the `ray start` command line (bracketed as above)
START_PATTERN = r"[r]ay\.scripts\.scripts start"
#: the last argument of the join wait's and the check's drivers on the head: a controller interrupted
#: while one runs leaves it behind (no terminal, no SIGHUP), and the teardown ends it by this name
PROBE_MARK = "ascend-ready-ray-probe"


@dataclass(frozen=True)
class RayNode:
    """One node of the cluster: its name, the IP on the NIC the launch spec chose, its healthy devices,
    and the training environment `ray start` runs in (interpreter, CANN set_env.sh, user)."""

    name: str
    ip: str
    nic: str | None
    devices: tuple[int, ...]
    python: str = "python3"
    set_env: str | None = None
    #: the user Ray runs as where it is not the SSH login user (through `sudo -n -u`), else None
    run_as: str | None = None
    login_user: str | None = None

    @property
    def venv(self) -> str | None:
        parts = self.python.rsplit("/", 2)
        return parts[0] if len(parts) == 3 and parts[1] == "bin" and parts[2].startswith("python") else None


@dataclass
class RayCluster:
    """The head (first node) and the workers; `start_command(node)` is what each node runs."""

    nodes: list[RayNode]
    port: int = RAY_PORT
    env: dict[str, str] = field(default_factory=dict)
    #: CPUs each node advertises (None: Ray counts them); the simulated nodes share two cores
    num_cpus: int | None = None
    #: the object store's size per node (None: Ray's 30 % of memory)
    object_store_bytes: int | None = None
    #: the dashboard is off: the trainer runs as a driver on the head, nothing submits jobs to it
    include_dashboard: bool = False
    #: every other port Ray would pick itself (checks.cluster.port_plan.RayPorts): None leaves Ray's own
    ports: object | None = None

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
               "RAY_USAGE_STATS_ENABLED": "0",
               # vLLM's workers on this node advertise this node's own address, never one broadcast to all
               # (checks/rl_rules.yml host-ip-per-node)
               "VLLM_HOST_IP": node.ip}
        if node.nic:
            env.update(HCCL_SOCKET_IFNAME=node.nic, GLOO_SOCKET_IFNAME=node.nic, TP_SOCKET_IFNAME=node.nic)
        return {**env, **self.env}

    def ray_argv(self, node: RayNode) -> list[str]:
        """`python -m ray.scripts.scripts start ...` of one node (the `ray` entry point, by interpreter)."""
        argv = [node.python, "-m", "ray.scripts.scripts", "start"]
        if node is self.head:
            dashboard = str(self.include_dashboard).lower()
            argv += ["--head", f"--port={self.port}", f"--include-dashboard={dashboard}",
                     "--disable-usage-stats"]
        else:
            argv.append(f"--address={self.address}")
        npus = json.dumps({NPU_RESOURCE: len(node.devices)})
        argv += [f"--node-ip-address={node.ip}", f"--resources={npus}", "--num-gpus=0"]
        if self.ports is not None:  # PORT PLAN HOOK (verl/Ray): the job's slot's ports
            argv += self.ports.start_flags(node is self.head)
        if self.num_cpus is not None:
            argv.append(f"--num-cpus={self.num_cpus}")
        if self.object_store_bytes is not None:
            argv.append(f"--object-store-memory={self.object_store_bytes}")
        return argv

    def _script(self, node: RayNode, body: list[str]) -> str:
        q = shlex.quote
        lines = []
        if node.set_env:  # written for an interactive shell: sourced without -e or -u, as multinode does
            lines.append(f"if [ -r {q(node.set_env)} ]; then . {q(node.set_env)}; fi")
        if node.venv:
            lines.append(f"VIRTUAL_ENV={q(node.venv)}; export VIRTUAL_ENV")
            lines.append(f'PATH={q(node.venv + "/bin")}:"$PATH"; export PATH')
        return as_user("\n".join(lines + body) + "\n", node.run_as, node.login_user)

    def start_command(self, node: RayNode, timeout_s: float = START_TIMEOUT_S) -> str:
        """The node's `ray start`, bounded on the node itself (`timeout`): a worker that cannot reach the
        head's GCS retries for minutes, and a start the controller gave up on must not join later."""
        exports = [f"{k}={shlex.quote(v)}; export {k}" for k, v in self.node_env(node).items()]
        ray = " ".join(shlex.quote(a) for a in self.ray_argv(node))
        return self._script(node, [*exports, f"exec timeout -k 5 {max(1, int(timeout_s))} {ray}"])

    def _driver(self, code: str, timeout_s: float) -> str:
        """`python -c CODE` on the head, bounded there too, carrying PROBE_MARK."""
        python = shlex.quote(self.head.python)
        return self._script(self.head, [f"exec timeout -k 5 {max(1, int(timeout_s))} "
                                        f"{python} -c {shlex.quote(code)} {PROBE_MARK}"])

    def status_command(self, wait_s: float = 0) -> str:
        """On the head: the IPs of the nodes alive in the cluster, one JSON list, once every node of the
        cluster is alive or after `wait_s` (one driver polls Ray's node table, not one per poll)."""
        want = sorted(n.ip for n in self.nodes)
        code = STATUS_CODE % (self.address, want, wait_s)
        return self._driver(code, wait_s + 60)

    def check_command(self) -> str:
        """On the head: a Ray task pinned to every node, holding that node's NPUs, reports the node's
        hostname and the NPU ids Ray gave it; one JSON line of {ip, hostname, npu_resource, npu_ids}."""
        return self._driver(CHECK_CODE % (self.address, CHECK_TIMEOUT_S - 30), CHECK_TIMEOUT_S - 5)

    def stop_command(self, node: RayNode) -> str:
        """`ray stop --force`, then the Ray processes still there (LEFTOVER_COMMAND's output and exit)."""
        body = [f"timeout -k 5 {int(STOP_TIMEOUT_S) - 10} {shlex.quote(node.python)} -m ray.scripts.scripts "
                "stop --force >/dev/null 2>&1", RayCluster.LEFTOVER_COMMAND]
        # A `ray start` still running (the controller interrupted while it waited) would start its raylet
        # after the stop: it goes first. KILL: Ray's driver handles TERM with a shutdown that waits on
        # the GCS, and the join wait's and the check's drivers on the head are ours to end.
        body.insert(0, f"pkill -KILL -f {shlex.quote(START_PATTERN)}")
        if node is self.head:
            body.insert(0, f"pkill -KILL -f {shlex.quote('[' + PROBE_MARK[0] + ']' + PROBE_MARK[1:])}")
        return self._script(node, body)

    #: what a node runs to show which Ray processes are left; exit 0 when it could tell (pgrep: 0 found,
    #: 1 none), else the failure: a node that could not be checked is never counted clean
    LEFTOVER_COMMAND = f"pgrep -a -f {shlex.quote(RAY_PROCESS_PATTERN)}; [ $? -le 1 ]"


STATUS_CODE = """
import json, time, ray
ray.init(address=%r, logging_level="ERROR", log_to_driver=False)
want, deadline = set(%r), time.monotonic() + %g
while True:
    alive = sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])
    if want <= set(alive) or time.monotonic() >= deadline:
        break
    time.sleep(0.5)
print(json.dumps(alive))
"""

CHECK_CODE = """
import json, socket, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
ray.init(address=%r, logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=0)
def where():
    ids = ray.get_runtime_context().get_accelerator_ids().get("NPU", [])
    return socket.gethostname(), [int(i) for i in ids]

nodes = [n for n in ray.nodes() if n["Alive"]]
refs = [where.options(resources={"NPU": n["Resources"]["NPU"]} if n["Resources"].get("NPU") else {},
                      scheduling_strategy=On(n["NodeID"], soft=False)).remote() for n in nodes]
got = ray.get(refs, timeout=%g)
print(json.dumps([{"ip": n["NodeManagerAddress"], "hostname": h, "npu_resource": n["Resources"].get("NPU", 0),
                   "npu_ids": ids} for n, (h, ids) in zip(nodes, got)]))
"""


def cluster_from_spec(hosts: Mapping[str, object], *, python: Mapping[str, str] | None = None,
                      set_env: str | None = None, run_as: Mapping[str, str | None] | None = None,
                      login_users: Mapping[str, str | None] | None = None, **options) -> RayCluster:
    """A RayCluster from a launch spec's usable hosts (name -> LaunchSpecHost), the first as head.

    `python` (node -> interpreter) wins over the spec's; `options` are RayCluster's (port, num_cpus, ...)."""
    nodes = []
    for name, host in hosts.items():
        ip = getattr(host, "ip", None)
        if not ip:
            raise ConfigError(f"{name}: the launch spec has no IP for the NIC that reaches the master",
                              hint="rerun ascend-check with --launch-spec so it records each node's route")
        nodes.append(RayNode(name=name, ip=ip, nic=getattr(host, "nic", None),
                             devices=tuple(getattr(host, "devices", ()) or ()),
                             python=(python or {}).get(name) or getattr(host, "python", None) or "python3",
                             set_env=set_env, run_as=(run_as or {}).get(name),
                             login_user=(login_users or {}).get(name)))
    if not nodes:
        raise ConfigError("no usable node in the launch spec", hint="rerun the preflight")
    return RayCluster(nodes=nodes, **options)


def runner(sessions: Mapping[str, object]) -> Runner:
    """`run(node, command, timeout_s)` over the multi-node launcher's sessions (fleet/sessions.py)."""
    return lambda node, command, timeout_s: sessions[node].run(command, timeout_s)


def _tail(text: str, chars: int = 400) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not ln.startswith((" ", "Traceback"))]
    return " | ".join(lines[-3:])[-chars:] or "(no output)"


def _on_each(nodes: list[RayNode], one: Callable[[RayNode], T]) -> list[T]:
    """`one(node)` on every node at once (each call is bounded); Ctrl-C meanwhile waits for the calls in
    flight, so that what they started is known before the teardown, and is raised afterwards."""
    if len(nodes) <= 1:
        return [one(n) for n in nodes]
    from concurrent.futures import ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(max_workers=min(32, len(nodes)))
    futures = [pool.submit(one, n) for n in nodes]
    try:
        wait(futures)
    except KeyboardInterrupt:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            wait(futures)
        finally:
            signal.signal(signal.SIGINT, previous)
            pool.shutdown()
        raise
    pool.shutdown()
    return [f.result() for f in futures]


def start(cluster: RayCluster, run: Runner, *, join_timeout_s: float = 120.0,
          log: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Start the head, then every worker at once, then wait until all have joined, all within
    `join_timeout_s` of the workers' start (each worker's `ray start` is bounded by it on the node).

    Raises TrainingError naming the nodes whose `ray start` failed or that did not join in time, after
    tearing down what was started (also on Ctrl-C).
    """
    tried: list[RayNode] = []
    try:
        tried.append(cluster.head)
        res = run(cluster.head.name, cluster.start_command(cluster.head), START_TIMEOUT_S + 10)
        if res.rc != 0:
            raise TrainingError(f"ray start --head failed on {cluster.head.name} (exit {res.rc}): "
                                f"{_tail(res.output)}",
                                hint=f"check Ray on {cluster.head.name} (`ray status` there: a Ray already "
                                     f"running holds port {cluster.port}) and /tmp/ray/session_latest/logs")
        log(f"ray: head {cluster.head.name} up at {cluster.address}")
        deadline = clock() + join_timeout_s
        workers = cluster.nodes[1:]
        tried += workers
        results = _on_each(workers, lambda n: run(n.name, cluster.start_command(n, join_timeout_s),
                                                  join_timeout_s + 10))
        hung = [(n, r.output) for n, r in zip(workers, results, strict=True) if r.rc == 124]
        if hung:
            raise TrainingError(
                "ray: " + "; ".join(f"{n.name} did not join {cluster.address} within {join_timeout_s:g} s: "
                                    f"its `ray start` did not finish ({_tail(out)})" for n, out in hung),
                hint=f"check that {', '.join(n.name for n, _ in hung)} reach {cluster.address} over "
                     f"{hung[0][0].nic or 'the NIC'} (a firewall: Ray's port {cluster.port} and the raylets' "
                     "ports), then rerun")
        failed = [(n, r.rc, r.output) for n, r in zip(workers, results, strict=True) if r.rc != 0]
        if failed:
            raise TrainingError("; ".join(f"ray start failed on {n.name} (exit {rc}): {_tail(out)}"
                                          for n, rc, out in failed),
                                hint=f"check Ray there (the same version as on {cluster.head.name}) and that "
                                     f"{cluster.address} is reachable over {failed[0][0].nic or 'the NIC'}")
        if workers:
            log(f"ray: {', '.join(n.name for n in workers)} started, joining {cluster.address}")
        want = {n.ip: n.name for n in cluster.nodes}
        left = max(1.0, deadline - clock())
        res = run(cluster.head.name, cluster.status_command(left), left + 70)
        rc, out = res.rc, res.output
        alive: set[str] = set()
        if rc == 0:
            try:
                alive = set(json.loads(res.stdout.strip().splitlines()[-1]))
            except (ValueError, IndexError, TypeError):
                alive = set()
        if not set(want) <= alive:
            missing = sorted(want[ip] for ip in set(want) - alive)
            raise TrainingError(f"ray: {', '.join(missing)} did not join {cluster.address} within "
                                f"{join_timeout_s:g} s" + ("" if rc == 0 else f" (the head: {_tail(out)})"),
                                hint="check the node's ray start log (/tmp/ray/session_latest/logs) and the "
                                     "firewall on the Ray ports")
        log(f"ray: {len(want)} node(s) joined {cluster.address}")
        return [want[ip] for ip in want]
    except BaseException:
        stop(RayCluster(nodes=tried, port=cluster.port, env=cluster.env), run, log=log)
        raise


def check(cluster: RayCluster, run: Runner) -> list[dict]:
    """A Ray task on every node (see RayCluster.check_command): [{ip, node, hostname, npu_resource, npu_ids}]
    in the cluster's node order; TrainingError naming a node that did not answer or has not its NPUs."""
    res = run(cluster.head.name, cluster.check_command(), CHECK_TIMEOUT_S)
    rc, out = res.rc, res.output
    rows = None
    if rc == 0:
        try:
            rows = json.loads(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            rows = None
    if not isinstance(rows, list):
        raise TrainingError(f"ray: the task on every node did not answer (exit {rc}): {_tail(out)}",
                            hint=f"check the Ray cluster on {cluster.head.name} (`ray status`)")
    by_ip = {r.get("ip"): r for r in rows if isinstance(r, dict)}
    found, problems = [], []
    for node in cluster.nodes:
        row = by_ip.get(node.ip)
        if row is None:
            problems.append(f"{node.name} ({node.ip}): no answer")
            continue
        if row.get("npu_resource") != len(node.devices) or len(row.get("npu_ids", [])) != len(node.devices):
            problems.append(f"{node.name}: Ray has {row.get('npu_resource')} NPU(s) {row.get('npu_ids')}, "
                            f"the launch spec {len(node.devices)}")
        found.append({"node": node.name, **row})
    if problems:
        raise TrainingError("ray: " + "; ".join(problems), hint="check `ray status` on the head")
    return found


def stop(cluster: RayCluster, run: Runner, *, log: Callable[[str], None] = print) -> dict[str, list[str]]:
    """`ray stop --force` on every worker at once, then on the head, not interruptible by Ctrl-C (it is
    bounded); returns node -> Ray processes still running (or why that could not be checked)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to shield
        previous = None
    leftovers: dict[str, list[str]] = {}

    def one(node: RayNode) -> None:
        res = run(node.name, cluster.stop_command(node), STOP_TIMEOUT_S + 10)
        rc, out = res.rc, res.output
        lines = [line for line in res.stdout.splitlines() if line.strip()]
        if rc != 0:
            leftovers[node.name] = [f"could not check (exit {rc}): {_tail(out)}"]
        elif lines:
            leftovers[node.name] = lines

    try:
        _on_each(cluster.nodes[1:], one)
        if cluster.nodes:
            one(cluster.head)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if leftovers:
        log("ray: processes left after teardown: " + "; ".join(f"{n}: {', '.join(p)}"
                                                            for n, p in leftovers.items()))
    else:
        log(f"ray: stopped on {', '.join(n.name for n in cluster.nodes)}; no Ray process left")
    return leftovers
