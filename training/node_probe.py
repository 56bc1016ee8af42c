"""Before a multi-node job starts: which nodes it runs on (resolve_fleet: a launch spec, or the inventory's
hosts after a passing preflight) and what each has (probe_all: one read-only batch of the preflight's own
probes per node, through its fan-out).

The trl launcher (training/multinode.py) and verl's Ray cluster (training/verl_glue.py) both start here.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from shlex import quote

from ascend_ready.checks.cluster import port_plan
from ascend_ready.checks.cluster.launchspec import LaunchSpec, LaunchSpecHost, load_launch_spec
from ascend_ready.checks.collect import collect
from ascend_ready.checks.probes import Probe
from ascend_ready.checks.profile import DEFAULT_PROFILE, load_profile
from ascend_ready.checks.resources.npu import NPU_SMI_TOPO
from ascend_ready.checks.snapshot import HostSnapshot
from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.fleet.plan import NodeFacts
from ascend_ready.fleet.transport import FanoutOptions, Target
from ascend_ready.training import numa
from ascend_ready.training.config import TrainConfig

__all__ = [
    "DEFAULT_SET_ENV",
    "JobNodes",
    "LaunchOptions",
    "fact_probes",
    "probe_all",
    "read_facts",
    "refuse_changed_versions",
    "refuse_missing",
    "required_paths",
    "resolve_fleet",
    "spec_with_routes",
]


DEFAULT_SET_ENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"


@dataclass
class LaunchOptions:
    """How the controller reaches the nodes and what it starts there (the CLI's multi-node flags)."""

    launch_spec: str | None = None
    inventory: str | None = None
    hosts: Sequence[str] = ()
    skip_preflight: bool = False
    #: checks training may start without judged (--waive), on top of those the spec waives
    waive: Sequence[str] = ()
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



# ----------------------------------------------------------------------------------- which nodes


@dataclass
class JobNodes:
    """The nodes of a job before any session opens: from the launch spec (judged), or the inventory's
    hosts after a passing preflight (`hosts` None until the probe gives their routes, spec_with_routes)."""

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


def resolve_fleet(cfg: TrainConfig, opts: LaunchOptions) -> JobNodes:
    """Spec or preflight, the hosts to start, the master, each host's interpreter and training user (the
    trl launcher, training/multinode.py, and verl's Ray cluster, training/verl_glue.py, start from the
    same)."""
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
    return JobNodes(spec, targets, from_inventory, report, hosts_spec, start, master, port, python_of, users)


def _inventory_targets(opts: LaunchOptions) -> list[Target]:
    """The hosts -i or --hosts name, with their SSH details."""
    from ascend_ready.fleet.inventory import load_inventory, parse_hosts

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
        if not opts.skip_preflight:  # --skip-preflight is the whole bypass; else a narrowed spec is refused
            for check_id in spec.require_covered(opts.waive):
                by = "--waive" if check_id in opts.waive else "waived by the preflight's --waive"
                opts.log(f"launch spec: WAIVED {check_id} ({by}): training starts without it judged")
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
    preflight.require_covered(report, opts.waive, opts.log)
    opts.log("preflight: passed")
    return report


def _master_of(targets: Mapping[str, Target], opts: LaunchOptions) -> str:
    """--master-addr, else the first host's address (inventory ansible_host, or its name: each node
    then resolves it itself)."""
    return opts.master_addr or next(iter(targets.values())).address or next(iter(targets))


def _training_envs(targets: Mapping[str, Target]) -> dict[str, tuple[str | None, str | None]]:
    """(training user, interpreter) each inventory host names (None where it names none), as ascend-check
    reads them (checks.preflight.training_env)."""
    from ascend_ready.checks.preflight import training_env

    profile = load_profile(DEFAULT_PROFILE)
    out = {}
    for name, t in targets.items():
        if not t.vars:
            continue
        user, python = training_env(t.vars, profile)
        named_user = user if user != profile.training_user else None
        # a glob or ~user path (the venv python_env built) is expanded by the node's shell in the
        # pre-start probe (NodeFacts.python), and the job starts that exact path
        named_python = python if python != profile.python else None
        if named_user or named_python:
            out[name] = (named_user, named_python)
    return out


def refuse_changed_versions(spec: LaunchSpec, hosts: Mapping[str, LaunchSpecHost],
                            targets: Mapping[str, Target], opts: LaunchOptions) -> None:
    """Read every host's stack again (one batch each) and refuse, before anything is written, a spec whose
    recorded versions no longer match the nodes (LaunchSpec.check_versions)."""
    if not any(h.fingerprint for h in hosts.values()):
        return  # a spec made without fingerprints (--skip-preflight) has nothing to compare
    from ascend_ready.checks.cluster.launchspec import current_fingerprints

    base = load_profile(DEFAULT_PROFILE)
    profiles = {}
    for name, host in hosts.items():
        # read where the preflight read it (the spec says whose environment), else where the job runs
        user = host.fingerprint_user or host.training_user
        python = host.fingerprint_python or host.python
        update = {k: v for k, v in (("training_user", user), ("python", python)) if v}
        profiles[name] = base.model_copy(update=update)
    spec.check_versions(current_fingerprints(list(targets.values()), opts.fanout, profiles))


# ----------------------------------------------------------------------------------- what each node has


def required_paths(cfg: TrainConfig, python: str, set_env: str, config_path: str | None,
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


def fact_probes(master: str, paths: Mapping[str, tuple[str, str]], marker: str | None,
                ) -> tuple[list[Probe], dict[str, str]]:
    """The read-only probes of one node before the start, in the preflight's probe batch (checks/probes.py):
    the master's address as the node resolves it, the login user, the route and the addresses toward it,
    NPU topology (the preflight's `npu-smi-topo`), NUMA nodes, and as the training user the required paths
    and the controller's marker file. Returns (probes, probe id -> path label)."""
    # a name: resolved by the node itself (its resolver, its /etc/hosts), as torchrun will
    resolve = (f"m={quote(master)}; case \"$m\" in *[!0-9.:]*) "
               "m=$(getent ahostsv4 \"$m\" 2>/dev/null | awk 'NR==1 {print $1}');; esac; ")
    probes = [
        Probe("master", shell=resolve + 'echo "$m"',
              description="the master's address as the node resolves it"),
        # the SSH login user, also where the batch runs through sudo (become)
        Probe("login", shell='echo "${SUDO_USER:-$(id -un)}"'),
        Probe("route", shell=resolve + 'ip -o route get "$m"'),
        Probe("addr", shell=resolve + 'ip -o addr show to "$m"'),
        NPU_SMI_TOPO(load_profile(DEFAULT_PROFILE)),
        Probe("numa-nodes", shell=f"grep -H . {numa.NODE_CPULISTS}", description="NUMA nodes' CPU lists"),
        # the ports the job's plan must find free (checks/cluster/port_plan.py judges them)
        Probe(port_plan.LISTEN_PROBE_ID, shell=port_plan.LISTEN_PROBE_SHELL,
              description="listening TCP sockets and their processes"),
    ]
    labels = {}
    for n, (label, (flag, path)) in enumerate(paths.items()):
        if label == "python":
            continue
        labels[f"path-{n}"] = label
        probes.append(Probe(f"path-{n}", argv=("test", flag, path), as_user=True, description=label))
    if "python" in paths:
        # The interpreter as the node's shell expands it (a ~user or glob path, which
        # checks.preflight.training_env admits only of shell-inert characters, names exactly one), then
        # whether it holds the controller's ascend-ready (refuse_missing).
        flag, path = paths["python"]
        word = path if path.startswith("~") or any(c in path for c in "*?[") else quote(path)
        code = "import ascend_ready; print(ascend_ready.__version__)"
        probes += [
            Probe("interp", shell=f'set -- {word}; [ $# -eq 1 ] && test {flag} "$1" && echo "$1"',
                  as_user=True, description="the job's interpreter"),
            Probe("ascend-ready", shell=f'set -- {word}; "$1" -c {quote(code)} 2>&1', as_user=True,
                  description="the ascend-ready the job's interpreter imports"),
        ]
    if marker:
        probes.append(Probe("shared", argv=("cat", marker), as_user=True,
                            description="the controller's marker file (a shared run dir)"))
    return probes, labels


def read_facts(snap: HostSnapshot, labels: Mapping[str, str], paths: Mapping[str, tuple[str, str]],
               nonce: str | None) -> NodeFacts:
    """NodeFacts from a node's fact_probes results: a probe that failed or printed nothing is unknown (None),
    a required path whose test did not pass is missing."""

    def ok(probe_id: str) -> str | None:
        res = snap.probes.get(probe_id)
        return res.stdout if res is not None and res.rc == 0 and res.stdout.strip() else None

    facts = NodeFacts(
        login_user=(ok("login") or "").strip() or None,
        master_ip=(ok("master") or "").strip() or None,
        route=ok("route"), addr=ok("addr"), topo=ok(NPU_SMI_TOPO.id), numa_nodes=ok("numa-nodes"),
        sees_output=nonce is not None and (ok("shared") or "").strip() == nonce,
    )
    listen = snap.probes.get(port_plan.LISTEN_PROBE_ID)
    facts.listening = None if listen is None else (listen.rc, listen.stdout)
    for probe_id, label in labels.items():
        res = snap.probes.get(probe_id)
        if res is None or res.rc != 0:
            facts.missing[label] = paths[label][1]
    if "python" in paths:
        facts.python = (ok("interp") or "").strip() or None
        if facts.python is None:
            facts.missing["python"] = paths["python"][1]
        res = snap.probes.get("ascend-ready")
        facts.ascend_ready = None if res is None else (res.rc, res.stdout.rstrip("\n"))
    return facts


def probe_all(targets: Mapping[str, Target], fanout: FanoutOptions, master: str,
              paths_of: Callable[[str], dict], marker: str | None, nonce: str | None,
              users: Mapping[str, str]) -> dict[str, NodeFacts]:
    """Every node's facts, one probe batch each through the preflight's fan-out. `users`: host -> the
    training user the paths are tested as, where it is not the SSH user (the batch then runs through
    sudo -n, as the job will)."""
    plans = {name: fact_probes(master, paths_of(name), marker) for name in targets}
    run_on = [dataclasses.replace(t, become=True) if users.get(name) and not t.become else t
              for name, t in targets.items()]

    def plan(t: Target) -> tuple[list[Probe], str]:
        return plans[t.name][0], users.get(t.name) or t.user or "root"

    facts = {}
    for snap in collect(run_on, plan, fanout):
        if not snap.reachable:
            raise TrainingError(f"{snap.name}: the pre-start probe failed: {snap.error}",
                                hint="check the node's SSH access and, for another training user, sudo -n")
        facts[snap.name] = read_facts(snap, plans[snap.name][1], paths_of(snap.name), nonce)
    return facts


def spec_with_routes(report, targets: Mapping[str, Target], facts: Mapping[str, NodeFacts], master: str,
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


def _ascend_ready_problem(f: NodeFacts, python: str) -> str | None:
    """Why the job's interpreter cannot run this controller's ascend-ready (None: it can, or not probed)."""
    from ascend_ready import __version__

    if f.ascend_ready is None or "python" in f.missing:
        return None
    rc, out = f.ascend_ready
    last = out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"
    if rc != 0:
        return f"{python} cannot import ascend_ready ({last})"
    if last != __version__:
        return f"{python} has ascend-ready {last}, this controller {__version__}"
    return None


def refuse_missing(facts: Mapping[str, NodeFacts], python: Mapping[str, str] | None = None) -> None:
    """Refuse, naming every node and what it lacks, a start where a node misses a required path or its
    interpreter (`python`: host -> path) cannot import ascend-ready of this controller's version."""
    missing = [f"{name}: {label} {path} is not there" for name, f in facts.items()
               for label, path in f.missing.items()]
    wrong = [f"{name}: {why}" for name, f in facts.items()
             if (why := _ascend_ready_problem(f, (python or {}).get(name, "the interpreter")))]
    if wrong:
        raise ConfigError(
            "the job's interpreter does not hold this controller's ascend-ready; nothing was started:\n  "
            + "\n  ".join(missing + wrong),
            hint="provision the nodes (python_env installs ascend-ready[train] of this version into the "
                 "training venv), or pass --python with the venv's bin/python")
    if missing:
        raise ConfigError("not every node has what the job needs; nothing was started:\n  "
                          + "\n  ".join(missing),
                          hint="put the files at the same path on every node (or on a shared filesystem)")
