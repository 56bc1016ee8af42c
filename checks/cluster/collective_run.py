"""The collective worker run for real from the controller: torchrun on every host with the multi-node
launcher's pieces (each node's NIC with the route to the master, the node guard, streamed output, a stop
everywhere on a failure), and the per-rank JSON lines read back into a CollectiveRecord.

A host whose interpreter has no torch, whose worker failed, printed nothing or printed what cannot be read
has an error in the record naming it, never a pass; the others run without a host that could not start.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ascend_ready.checks.cluster.collective import (
    RECORD_PROBE,
    CollectiveRecord,
    Measurement,
    parse_lines,
    parse_size,
)
from ascend_ready.checks.cluster.launchspec import spec_from_report
from ascend_ready.checks.collect import collect
from ascend_ready.checks.probes import Probe
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.resources import Host
from ascend_ready.checks.resources.launch import LoginUser, MasterRoute
from ascend_ready.checks.snapshot import HostSnapshot, ProbeResult
from ascend_ready.errors import AscendReadyError, ParseError
from ascend_ready.fleet.job import root_cause, run_job, same_failure
from ascend_ready.fleet.plan import HostPlan, JobPlan, NodeFacts, hccl_env, remote_command, torchrun_command
from ascend_ready.fleet.sessions import open_sessions
from ascend_ready.fleet.transport import FanoutOptions, Target
from ascend_ready.runtime import BACKENDS

__all__ = ["DEVICE_PROBE", "Sweep", "record", "run_collective", "sweep_for"]

WORKER_MODULE = "ascend_ready.checks.cluster.collective_worker"
#: where each node's worker runs (its working directory; nothing is written there)
NODE_DIR = "/tmp/ascend-check-collective"
#: what the training interpreter would run the worker on, without importing torch (seconds on a loaded
#: node): `device TYPE COUNT` (torch_npu and /dev/davinciN: npu; /dev/nvidiaN: cuda; else one cpu rank)
#: and `python PATH`. The worker is then told the device: one that does not come up fails loudly.
DEVICE_CODE = (
    "import glob, importlib.util as u, os, sys\n"
    "if not u.find_spec('torch'): sys.exit('torch is not installed for ' + sys.executable)\n"
    "t, n = 'cpu', 1\n"
    "npu, gpu = glob.glob('/dev/davinci[0-9]*'), glob.glob('/dev/nvidia[0-9]*')\n"
    "if u.find_spec('torch_npu') and npu:\n"
    "    seen = os.environ.get('ASCEND_RT_VISIBLE_DEVICES')\n"
    "    t, n = 'npu', len(seen.split(',')) if seen else len(npu)\n"
    "elif gpu:\n"
    "    t, n = 'cuda', len(gpu)\n"
    "print('device', t, n)\n"
    "print('python', sys.executable)\n"
)
DEVICE_PROBE = "collective-device"


@dataclass(frozen=True)
class Sweep:
    """What the worker measures: message sizes, iterations, the matmul's size and time window."""

    sizes: str
    iters: int
    warmup: int
    matmul_n: int
    matmul_seconds: float

    def argv(self) -> list[str]:
        return ["--sizes", self.sizes, "--iters", str(self.iters), "--warmup", str(self.warmup),
                "--matmul-n", str(self.matmul_n), "--matmul-seconds", f"{self.matmul_seconds:g}"]


#: NPU/GPU: an nccl-tests-like sweep up to 256 MB, bf16 matmuls big enough to load a 910B
ACCELERATOR_SWEEP = Sweep("1K,64K,1M,16M,64M,256M", iters=20, warmup=5, matmul_n=4096, matmul_seconds=0.5)
#: CPU (gloo; the simulator): small messages, a small matmul over a window long enough for a CPU quota
CPU_SWEEP = Sweep("1K,64K,1M", iters=30, warmup=2, matmul_n=256, matmul_seconds=1.0)


#: the exit status of coreutils' timeout(1) when the command ran past its limit
TIMED_OUT = 124


def sweep_for(device: str) -> Sweep:
    return CPU_SWEEP if device == "cpu" else ACCELERATOR_SWEEP


@dataclass
class _Host:
    target: Target
    profile: HardwareProfile
    device: str = ""
    count: int = 0
    python: str = ""  # the interpreter's own path (the profile's may be a glob the node's shell expands)
    login: str | None = None
    route: str | None = None
    addr: str | None = None
    problems: list[str] = field(default_factory=list)


def _python_fields(python: str, code: str) -> dict:
    # the training interpreter as every probe runs it (a glob or ~user path expanded by the node's shell)
    from ascend_ready.checks.resources.versions import _python

    return _python(python, code)


def _read_hosts(targets: Sequence[Target], profiles: Mapping[str, HardwareProfile], master: str,
                fanout: FanoutOptions) -> dict[str, _Host]:
    """One batch per host: the route to the master (its NIC), the login user, and what the training
    interpreter can run on (the accelerator and how many)."""
    out = {t.name: _Host(t, profiles[t.name]) for t in targets}
    # the route, addresses and login user as the launcher reads them (checks/cluster/node_facts.py)
    facts = [p for p in MasterRoute.probes_for(master) if p.id != "master"] + [LoginUser.PROBE]

    def plan(t: Target) -> tuple[list[Probe], str]:
        prof = profiles[t.name]
        return [*facts,
                Probe(DEVICE_PROBE, **_python_fields(prof.python, DEVICE_CODE), as_user=True, timeout_s=60,
                      description="the training interpreter's accelerator (torch)")], prof.training_user

    for snap in collect(list(targets), plan, fanout):
        h = out[snap.name]
        if not snap.reachable:
            h.problems.append(f"unreachable: {snap.error}")
            continue
        host = Host(snap, h.profile)
        h.route, h.addr, h.login = host.master_route.route, host.master_route.addr, host.login_user.user
        res = snap.probes.get(DEVICE_PROBE)
        said = _device_lines(res.stdout) if res is not None and res.rc == 0 else {}
        count = said.get("device", "").split()
        if len(count) == 2 and count[1].isdigit() and int(count[1]) > 0 and said.get("python"):
            h.device, h.count, h.python = count[0], int(count[1]), said["python"]
        else:
            h.problems.append(_no_torch(h, res))
        if h.route is None and not h.problems:
            h.problems.append(f"no route to the master {master} (`ip -o route get {master}`)")
    return out


def _device_lines(text: str) -> dict[str, str]:
    pairs = (ln.partition(" ") for ln in text.splitlines())
    return {k: v.strip() for k, _, v in pairs if k in ("device", "python")}


def _no_torch(h: _Host, res: ProbeResult | None) -> str:
    """Why the training interpreter cannot run the worker, with its last line."""
    if res is None:
        how = "not run"
    elif res.not_run:
        how = f"not run: {res.not_run}"
    else:
        how = f"timed out after {res.timeout_s:g} s" if res.timed_out else f"exit {res.rc}"
    last = (res.stdout + res.stderr).strip().splitlines()[-1:] if res is not None else []
    return (f"`{h.profile.python}` as {h.profile.training_user} cannot run the worker ({how}): "
            f"{last[0] if last else 'no output'}; name the training interpreter (--python or the inventory's "
            "ascend_python)")


def run_collective(
    targets: Sequence[Target],
    fanout: FanoutOptions,
    profiles: Mapping[str, HardwareProfile],
    *,
    sweep: Sweep | None = None,
    master_port: int | None = None,
    nproc_per_node: int | None = None,
    deadline_s: float = 300.0,
    budget_s: float | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> CollectiveRecord:
    """Run the worker under torchrun on every target (2 or more) and read back what each rank printed.

    `profiles`: each host's resolved profile (its training user and interpreter, the floors); `sweep`
    default: by the accelerator the hosts have; `nproc_per_node` default: the fewest devices a host has
    (one rank on CPU). Each node's worker is stopped after `deadline_s`; its measurements get `budget_s`
    (default 0.6 x the deadline: the rest is for starting torchrun, the interpreter and the rendezvous),
    and leave out what would not fit in it (`skipped` records) rather than run into the deadline."""
    started = time.monotonic()
    names = [t.name for t in targets]
    master = "127.0.0.1" if targets[0].is_local else (targets[0].address or targets[0].name)
    hosts = _read_hosts(targets, profiles, master, fanout)
    rec = CollectiveRecord(hosts=names)
    rec.errors = {n: "; ".join(h.problems) for n, h in hosts.items() if h.problems}
    kinds = sorted({h.device for h in hosts.values() if not h.problems})
    if len(kinds) > 1:
        by_kind = ", ".join(f"{n}: {h.device}" for n, h in hosts.items() if not h.problems)
        for n, h in hosts.items():
            if not h.problems:
                rec.errors[n] = (f"the hosts run on different accelerators ({by_kind}): one collective "
                                 "cannot span them")
        return rec
    ready = [t for t in targets if t.name not in rec.errors]
    if len(ready) < 2:
        for t in ready:
            rec.errors[t.name] = ("not run: it needs two or more hosts that can start it; "
                                  + "; ".join(f"{n}: {why}" for n, why in rec.errors.items()))
        return rec
    rec.device = kinds[0]
    rec.backend = BACKENDS.get(rec.device, "gloo")
    rec.nproc_per_node = nproc_per_node or min(hosts[t.name].count for t in ready)
    sweep = sweep or sweep_for(rec.device)
    rec.sizes = sorted({parse_size(s) for s in sweep.sizes.split(",")})
    if ready[0] is not targets[0]:  # the routes were read to a master that cannot take part: read again
        master = "127.0.0.1" if ready[0].is_local else (ready[0].address or ready[0].name)
        again = _read_hosts(ready, profiles, master, fanout)
        hosts.update(again)
        for n, h in again.items():
            if h.problems:
                rec.errors[n] = "; ".join(h.problems)
        ready = [t for t in ready if t.name not in rec.errors]
        if len(ready) < 2:
            for t in ready:
                rec.errors[t.name] = "not run: it needs two or more hosts that can start it"
            return rec
    spec = spec_from_report(None, ready, master_addr=master,
                            routes={t.name: hosts[t.name].route or "" for t in ready},
                            addrs={t.name: hosts[t.name].addr for t in ready if hosts[t.name].addr})
    port = master_port or random.randint(20000, 29999)
    floors = {profiles[t.name].allreduce_min_busbw_gbps for t in ready} - {None}
    pairs = ["--min-busbw", f"{min(floors):g}"] if floors and rec.device == "npu" else []
    plan = JobPlan("collective", f"collective-{time.strftime('%Y%m%d-%H%M%S')}-{random.randrange(16**4):04x}",
                   Path(NODE_DIR), master, port, rec.nproc_per_node, [], {}, True, NODE_DIR)
    for rank, t in enumerate(ready):
        h, s = hosts[t.name], spec.hosts[t.name]
        env = hccl_env(connect_timeout=120, exec_timeout=int(deadline_s), socket_ifname=s.nic, if_ip=s.ip)
        env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
        argv = [*sweep.argv(), "--host", t.name, "--device", rec.device, *pairs,
                "--budget-s", f"{deadline_s * 0.6 if budget_s is None else budget_s:g}"]
        torchrun = ["timeout", "-k", "5", f"{deadline_s:g}",
                    *torchrun_command(argv, nnodes=len(ready), nproc_per_node=rec.nproc_per_node,
                                      node_rank=rank, master_addr=master, master_port=port, python=h.python,
                                      module=WORKER_MODULE)]
        plan.hosts.append(HostPlan(
            name=t.name, target=t, node_rank=rank, nic=s.nic, ip=s.ip, devices=[], python=h.python,
            training_user=h.profile.training_user, env=env, torchrun=torchrun, bindings=[],
            set_env=f"{h.profile.ascend_root.rstrip('/')}/ascend-toolkit/set_env.sh",
            facts=NodeFacts(login_user=h.login)))
    with tempfile.TemporaryDirectory(prefix="ascend-check-collective-") as tmp, \
            open_sessions(ready, fanout) as sessions:
        result = run_job({h.name: remote_command(h, plan) for h in plan.hosts}, sessions, Path(tmp), echo=log)
        logs = {t.name: (Path(tmp) / f"{t.name}.log").read_text(errors="replace")
                if (Path(tmp) / f"{t.name}.log").is_file() else "" for t in ready}
    cause = None if result.ok else root_cause(result.nodes)
    same = None if result.ok else same_failure(result.nodes)
    timed_out = sorted(o.name for o in result.nodes if o.rc == TIMED_OUT)
    for outcome in result.nodes:
        text = logs[outcome.name]
        if outcome.rc == TIMED_OUT:  # its `timeout` fired: torchrun's SIGTERM traceback is not the cause
            rec.errors[outcome.name] = (f"the worker did not finish within the {deadline_s:g} s deadline "
                                        "(stopped by timeout)" + _tail(text))
            continue
        # its peers' deadline came first: their loss stopped it
        if timed_out and (outcome.rc not in (0, None) or outcome.lost):
            rec.errors[outcome.name] = (f"stopped: the {deadline_s:g} s deadline stopped the worker on "
                                        + ", ".join(timed_out))
            continue
        if same is not None:  # every node failed alike: none of them is the cause
            rec.errors[outcome.name] = f"the worker failed the same way on every node: {same}" + _tail(text)
            continue
        if cause is not None:
            why = cause.lost or cause.error or f"exit code {cause.rc}"
            own = f"the worker failed on {cause.name}: {why}" + _tail(logs[cause.name])
            stopped = f"stopped: the worker failed on {cause.name}"
            rec.errors[outcome.name] = own if outcome is cause else stopped
            continue
        try:
            found = parse_lines(text, source=f"{outcome.name}: the collective worker's output")
        except ParseError as exc:
            rec.errors[outcome.name] = f"unreadable worker output: {exc.message}"
            continue
        missing = _missing(found, outcome.name, rec)
        if missing:
            rec.errors[outcome.name] = f"the worker exited 0 but did not print {missing}" + _tail(text)
            continue
        rec.measurements += found
    rec.wall_s = round(time.monotonic() - started, 3)
    return rec


def _missing(found: list[Measurement], host: str, rec: CollectiveRecord) -> str:
    """What a host's ranks should have printed and did not (every rank a matmul, rank results per size)."""
    mine = [m for m in found if m.host == host]
    want = []
    matmuls = sum(m.kind == "matmul" for m in mine)
    if matmuls != rec.nproc_per_node:
        want.append(f"{rec.nproc_per_node} matmul result(s) (it printed {matmuls})")
    sizes = {m.size_bytes for m in mine if m.kind in ("allreduce", "skipped") and m.group == "all"}
    if sizes != set(rec.sizes):
        want.append("the all-reduce of " + ", ".join(f"{s} B" for s in sorted(set(rec.sizes) - sizes)))
    return " and ".join(want)


def _tail(text: str, lines: int = 5) -> str:
    last = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("guard:")][-lines:]
    return ("; its last lines: " + " | ".join(ln.strip()[-200:] for ln in last)) if last else ""


def record(rec: CollectiveRecord, snapshots: Sequence[HostSnapshot]) -> None:
    """The run as the `hccl-collective` probe of every snapshot (what npu.matmul and hccl.allreduce judge):
    the whole record in each, since both are judged against the fleet."""
    text = rec.to_text()
    for snap in snapshots:
        snap.probes[RECORD_PROBE] = ProbeResult(command="(controller) torchrun of the collective worker on "
                                                "every host", rc=0, stdout=text, duration_s=rec.wall_s)


def attach(targets: Sequence[Target], hosts: Sequence[HostSnapshot], fanout: FanoutOptions,
           profiles: Mapping[str, HardwareProfile]) -> None:
    """Run the collective across the reachable hosts and record it (ascend-check, full tier). With fewer
    than two there is nothing to all-reduce between: the checks skip then."""
    up = [h for h in hosts if h.reachable]
    if len(up) < 2:
        return
    names = {h.name for h in up}
    try:
        rec = run_collective([t for t in targets if t.name in names], fanout, profiles)
    except AscendReadyError as exc:  # the run itself could not start (SSH lost since the batch, ...)
        rec = CollectiveRecord(hosts=sorted(names), errors={n: f"not run: {exc.message}" for n in names})
    record(rec, up)
