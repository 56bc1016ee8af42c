"""Multi-process launch: the HCCL environment defaults, device visibility, and the torchrun command line.

The launcher runs the preflight once, exports the environment, then replaces itself with torchrun.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from ascend_ready.errors import ConfigError
from ascend_ready.fleet import plan
from ascend_ready.training.config import LaunchConfig

# Set by the launcher for its workers: the gate already ran (or was skipped loudly) for this job.
WORKER_ENV = "ASCEND_TRAIN_WORKER"


#: name prefixes of container-network NICs and bridges, never the fallback's choice
_VIRTUAL_NICS = ("docker", "veth", "br-", "virbr", "cni", "flannel", "cali", "cilium", "vxlan", "tunl",
                 "kube", "weave", "lxc")


def _ip(*args: str) -> str | None:
    """`ip -o ARGS` on this node; None when ip is missing or fails (e.g. no route)."""
    try:
        proc = subprocess.run(["ip", "-o", *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def route_nic(master_addr: str, ip: Callable[..., str | None] | None = None) -> str | None:
    """The NIC of this node's route to the master (`ip -o route get`; on the master itself, the NIC that
    holds its address), as the multi-node launcher picks it on every node. None for a loopback master
    (one node: no traffic leaves it) or when ip cannot say; garbled output is a ParseError. `ip` runs
    `ip -o ARGS` (default: here)."""
    import ipaddress
    import socket

    ip = ip or _ip
    try:
        address = socket.gethostbyname(master_addr)  # as torchrun resolves it
    except OSError:
        return None
    if ipaddress.ip_address(address).is_loopback:
        return None
    return _nic_toward(address, ip)


def default_route_nic(ip: Callable[..., str | None] | None = None) -> str | None:
    """The NIC of the default route: the route to its gateway, as the multi-node path picks a NIC toward
    the master (nic_toward), or the NIC a gateway-less default route names; None without one or ip."""
    ip = ip or _ip
    for line in (ip("route", "show", "default") or "").splitlines():
        words = line.split()
        if "via" in words[:-1]:
            return _nic_toward(words[words.index("via") + 1], ip)
        if "dev" in words[:-1]:
            return words[words.index("dev") + 1]
    return None


def _nic_toward(address: str, ip: Callable[..., str | None]) -> str | None:
    from ascend_ready.checks.parsers.ip_route import nic_toward, parse_ip_addr, parse_ip_route_get

    route_text = ip("route", "get", address)
    if route_text is None:
        return None
    route = parse_ip_route_get(route_text)
    addr_text = ip("addr", "show", "to", address) if route.is_local else None
    toward = nic_toward(address, route, parse_ip_addr(addr_text) if addr_text else None)
    return toward[0] if toward else None


def detect_host_nic(master_addr: str | None = None,
                    ip: Callable[..., str | None] | None = None) -> str | None:
    """The NIC with the route to `master_addr` (route_nic); for a loopback master (one node), the NIC with
    the default route; else the first up non-loopback NIC by name that is no container network or bridge
    (`cni0`, `docker0`, `br-...`)."""
    nic = route_nic(master_addr, ip) if master_addr else None
    nic = nic or default_route_nic(ip)
    if nic:
        return nic
    try:
        import psutil
    except ImportError:
        return None
    stats = psutil.net_if_stats()
    addrs = psutil.net_if_addrs()
    candidates = sorted(
        n
        for n, s in stats.items()
        if s.isup
        and n != "lo"
        and not n.startswith("lo")
        and any(a.family.name == "AF_INET" for a in addrs.get(n, []))
    )
    plain = [n for n in candidates if not n.startswith(_VIRTUAL_NICS)]
    return (plain or candidates or [None])[0]


def hccl_env(launch: LaunchConfig, environ: dict[str, str] | None = None) -> dict[str, str]:
    """HCCL variables to export (fleet.plan.hccl_env) for this node; values already in the environment win
    over config defaults. The NIC: the config's, else this node's toward the master (detect_host_nic)."""
    h = launch.hccl
    return plan.hccl_env(connect_timeout=h.connect_timeout, exec_timeout=h.exec_timeout, if_ip=h.if_ip,
                         socket_ifname=h.socket_ifname or detect_host_nic(launch.master_addr),
                         extra_env=h.extra_env, environ=os.environ if environ is None else environ)


def torchrun_command(
    launch: LaunchConfig,
    argv: list[str],
    log_dir: Path | None = None,
    *,
    python: str | None = None,
    module: str = "ascend_ready.training.cli",
) -> list[str]:
    """torchrun for this node (fleet.plan.torchrun_command), re-running the same ascend-train command line in
    every worker.

    With `log_dir`, every worker's stdout and stderr is also written to
    <log_dir>/<run id>/attempt_<n>/<local rank>/{stdout,stderr}.log (`--tee`), for `explain_failure`
    (checks/diagnose/render.py).
    `python` is the interpreter on the node (default: this one); `module` the workers' entry point
    (the multi-node launcher puts the NUMA-binding wrapper, ascend_ready.training.numa, in front).
    """
    return plan.torchrun_command(argv, nnodes=launch.nnodes, nproc_per_node=launch.nproc_per_node,
                                 node_rank=launch.node_rank, master_addr=launch.master_addr,
                                 master_port=launch.master_port, python=python, module=module,
                                 log_dir=log_dir,  # hook (ops-launch): the rendezvous' deadline
                                 rdzv_timeout_s=launch.rendezvous_timeout_s if launch.nnodes > 1 else None)


def check_visible_devices(nproc_per_node: int, device: str) -> str | None:
    """ASCEND_RT_VISIBLE_DEVICES is honoured by torch_npu itself; refuse a job it leaves short of devices."""
    visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if visible is None:
        return None
    count = len([d for d in visible.split(",") if d.strip()])
    if count < nproc_per_node and device == "npu":
        raise ConfigError(
            f"ASCEND_RT_VISIBLE_DEVICES={visible} shows {count} NPUs for {nproc_per_node} processes",
            hint="list one device per process or lower --nproc-per-node",
        )
    return f"ASCEND_RT_VISIBLE_DEVICES={visible}: local rank i uses the i-th listed NPU"
