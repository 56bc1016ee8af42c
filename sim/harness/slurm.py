"""Real Slurm on a simulated cluster: Debian's slurmctld on the first node, slurmd and munged on every node,
one munge key per cluster, and ascend-check as HealthCheckProgram and Prolog (the slurm_health role's own
wrapper scripts, rendered for this checkout's .venv, which the nodes see through the shared mount).

The daemons come from the node base image (sim/base.py); nothing here is a stand-in. node_exporter runs
beside them, serving its textfile collector's directory.

Usage (on ASCEND_SIM_RUN_DIR's cluster):
    python -m ascend_ready.sim.harness.slurm up [--health-interval S] | down
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

from ascend_ready.errors import SimError

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "playbooks" / "roles" / "slurm_health"
HEALTH_PROGRAM = "/usr/local/sbin/ascend-check-slurm-health"
PROLOG_PROGRAM = "/usr/local/sbin/ascend-check-slurm-prolog"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
NODE_EXPORTER_PORT = 9100
PARTITION = "main"
#: seconds the daemons get to register with slurmctld
READY_TIMEOUT_S = 60.0


def _role_defaults() -> dict:
    import yaml

    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def render_wrapper(name: str, **values) -> str:
    """One of the slurm_health role's wrapper scripts (health.sh, prolog.sh), as the role renders it."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["quote"] = shlex.quote
    text = (ROLE / "templates" / f"{name}.j2").read_text()
    return env.from_string(text).render(**{**_role_defaults(), **values})


def gres_count(line: str) -> int:
    """How many devices a gres.conf line's File= names (`/dev/davinci[0-3,5-7]` is 7)."""
    files = line.split("File=", 1)[1].split()[0]
    if "[" not in files:
        return 1
    count = 0
    for part in files[files.index("[") + 1 : files.index("]")].split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def slurm_conf(
    cluster, *, health_interval: int | None, prolog: bool, gres: dict[str, int] | None = None
) -> str:
    """slurm.conf for the cluster: no accounting, no cgroups (the nodes share one kernel's), one partition;
    `gres`: node -> its NPUs (GresTypes=npu, Gres=npu:N)."""
    head = cluster.nodes[0]
    lines = [
        "# ascend-sim: Slurm for a simulated cluster (sim/harness/slurm.py)",
        "ClusterName=ascendsim",
        f"SlurmctldHost={head.name}({head.ip})",
        "SlurmUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "StateSaveLocation=/var/lib/slurm/slurmctld",
        "SlurmdSpoolDir=/var/lib/slurm/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdTimeout=60",
        "MinJobAge=30",
        "KillWait=5",
    ]
    if health_interval is not None:  # the slurm_health role's settings (roles/slurm_health/tasks/main.yml)
        lines += [
            f"HealthCheckProgram={HEALTH_PROGRAM}",
            f"HealthCheckInterval={health_interval}",
            "HealthCheckNodeState=ANY",
        ]
    if health_interval is not None and prolog:
        lines += [f"Prolog={PROLOG_PROGRAM}", "PrologFlags=Alloc"]
    if gres:
        lines.append("GresTypes=npu")
    cpus = os.cpu_count() or 1  # every node sees the host's CPUs: slurmd reports them so
    lines += [
        f"NodeName={n.name} NodeAddr={n.ip} CPUs={cpus} CoresPerSocket={cpus}"
        + (f" Gres=npu:{gres[n.name]}" if gres else "")
        + " State=UNKNOWN"
        for n in cluster.nodes
    ]
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _sh(cluster, node: str, script: str, *, stdin: bytes | None = None, timeout: float = 60) -> str:
    from ascend_ready.sim import cluster as sim

    proc = sim.node_exec(
        cluster.node(node), ["/bin/sh", "-ec", script], input=stdin, capture_output=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise SimError(
            f"{node}: {script.splitlines()[0]}... failed (exit {proc.returncode}): "
            f"{(proc.stderr or b'').decode(errors='replace').strip()[-800:]}"
        )
    return proc.stdout.decode(errors="replace")


def _put(cluster, node: str, path: str, data: bytes, mode: str = "0644", owner: str = "root:root") -> None:
    q = shlex.quote(path)
    _sh(cluster, node, f"mkdir -p $(dirname {q}); cat > {q}; chown {owner} {q}; chmod {mode} {q}", stdin=data)


#: where the harness puts the hardware profile the checks judge with (its `profile` argument)
PROFILE_PATH = "/etc/ascend-ready/profile.yml"


def up(
    cluster,
    *,
    health_interval: int | None = 300,
    probe_timeout: int = 10,
    prolog: bool = True,
    profile: str | None = None,
    skip: tuple[str, ...] = (),
    gres: bool = False,
    venv: str | None = None,
) -> None:
    """Configure and start munge, slurmd on every node, slurmctld on the first; wait until every node has
    registered (idle, or drained by its first health check). `profile`: a hardware profile's YAML text the
    checks judge with (written to PROFILE_PATH on each node); `skip`: check id globs left out; `gres`:
    each node's healthy NPUs as GRES, gres.conf written from `ascend-check node --gres-line` as the
    slurm_health role does (the nodes need their driver: npu-smi). `health_interval` None: no health check
    and no prolog (apply the slurm_health role to the nodes for them). `venv`: the venv on the nodes whose
    ascend-check runs (default: this checkout's .venv, lent to the nodes; a provisioned cluster: the training
    venv python_env built, which judges by the profile provisioning recorded)."""
    knobs = {
        "slurm_health_venv": venv or str(REPO / ".venv"),
        "slurm_health_probe_timeout": probe_timeout,
        "slurm_health_node_name": "$(hostname -s)",
        "slurm_health_skip": list(skip),
        "slurm_health_profile": PROFILE_PATH if profile else "",
    }
    counts = {}
    for node in cluster.nodes:
        if profile:
            _put(cluster, node.name, PROFILE_PATH, profile.encode())
        if gres:
            line = _sh(
                cluster,
                node.name,
                f"{knobs['slurm_health_venv']}/bin/ascend-check node --gres-line "
                f"--select 'npu.*' --no-report --node-name {node.name}"
                + (f" --profile {PROFILE_PATH}" if profile else ""),
                timeout=120,
            ).strip()
            _put(
                cluster,
                node.name,
                "/etc/slurm/gres.conf",
                f"# ascend-check node --gres-line\n{line}\n".encode(),
            )
            counts[node.name] = gres_count(line)
    conf = slurm_conf(cluster, health_interval=health_interval, prolog=prolog, gres=counts).encode()
    key = os.urandom(1024)  # munge's own mungekey writes 1024 bytes too
    health = render_wrapper("health.sh", **knobs).encode()
    prolog_sh = render_wrapper("prolog.sh", **knobs).encode()
    for node in cluster.nodes:
        _put(cluster, node.name, "/etc/munge/munge.key", key, "0400", "munge:munge")
        _put(cluster, node.name, "/etc/slurm/slurm.conf", conf)
        if health_interval is not None:
            _put(cluster, node.name, HEALTH_PROGRAM, health, "0755")
            _put(cluster, node.name, PROLOG_PROGRAM, prolog_sh, "0755")
        # slurmd 22.05 initialises its cgroup plugin even with proctrack/linuxproc and task/none, and its
        # autodetection wants a cgroup file system at /sys/fs/cgroup: a tmpfs with a named v1 hierarchy
        # that has no controller satisfies it, and hands the node nothing of the host's cgroups
        _sh(
            cluster,
            node.name,
            f"""
mountpoint -q /sys/fs/cgroup || mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/systemd
mountpoint -q /sys/fs/cgroup/systemd || mount -t cgroup -o none,name=ascend-sim cgroup /sys/fs/cgroup/systemd
mkdir -p /run/munge /var/log/munge /var/lib/munge /var/log/slurm /var/lib/slurm/slurmd {TEXTFILE_DIR}
chown munge:munge /run/munge /var/log/munge /var/lib/munge
runuser -u munge -- /usr/sbin/munged
/usr/sbin/slurmd
setsid /usr/bin/prometheus-node-exporter --web.listen-address=:{NODE_EXPORTER_PORT} \\
  --collector.textfile.directory={TEXTFILE_DIR} >/var/log/node-exporter.log 2>&1 < /dev/null &
echo $! > /run/node-exporter.pid
""",
        )
    head = cluster.nodes[0].name
    _sh(cluster, head, "mkdir -p /var/lib/slurm/slurmctld; /usr/sbin/slurmctld")
    deadline = time.monotonic() + READY_TIMEOUT_S
    want = {n.name for n in cluster.nodes}
    last = ""
    while time.monotonic() < deadline:
        try:
            last = sinfo(cluster)
        except SimError as exc:
            last = str(exc)
        else:
            registered = {
                line.split()[0]
                for line in last.splitlines()
                if len(line.split()) == 2 and not line.split()[1].startswith(("unknown", "down"))
            }
            if registered >= want:
                return
        time.sleep(0.5)
    raise SimError(
        f"Slurm's nodes did not register within {READY_TIMEOUT_S:g} s; sinfo: {last.strip()}",
        hint="see /var/log/slurm/slurmctld.log on node01 and slurmd.log on each node",
    )


def sinfo(cluster, fmt: str = "%N %T", node: str | None = None) -> str:
    """`sinfo -h -N -o FMT` as the first node's client prints it."""
    return _sh(cluster, node or cluster.nodes[0].name, f"sinfo -h -N -o {shlex.quote(fmt)}", timeout=30)


def scontrol(cluster, *args: str) -> str:
    return _sh(cluster, cluster.nodes[0].name, "scontrol " + " ".join(map(shlex.quote, args)), timeout=30)


def down(cluster) -> None:
    """Stop the daemons (they also go with the nodes' PID namespaces at `ascend-sim down`)."""
    for node in cluster.nodes:
        try:
            _sh(
                cluster,
                node.name,
                "for f in /run/slurmctld.pid /run/slurmd.pid /run/munge/munged.pid "
                "/run/node-exporter.pid; do [ -f $f ] && kill $(cat $f) 2>/dev/null; rm -f $f; done; true",
                timeout=30,
            )
        except SimError:
            continue


def main(argv: list[str] | None = None) -> int:
    from ascend_ready.sim import cluster as sim

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["up", "down"])
    ap.add_argument("--health-interval", type=int, default=300)
    ap.add_argument("--probe-timeout", type=int, default=10)
    ap.add_argument("--no-prolog", action="store_true")
    args = ap.parse_args(argv)
    cluster = sim.load_running()
    try:
        if args.action == "up":
            up(
                cluster,
                health_interval=args.health_interval,
                probe_timeout=args.probe_timeout,
                prolog=not args.no_prolog,
            )
            print(sinfo(cluster), end="")
        else:
            down(cluster)
    except SimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
