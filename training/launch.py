"""Multi-process launch: the HCCL environment defaults, device visibility, and the torchrun command line.

The launcher runs the preflight once, exports the environment, then replaces itself with torchrun.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ascend_ready.errors import AscendReadyError, ConfigError
from ascend_ready.training.config import LaunchConfig

# Set by the launcher for its workers: the gate already ran (or was skipped loudly) for this job.
WORKER_ENV = "ASCEND_TRAIN_WORKER"


def detect_host_nic() -> str | None:
    """The NIC HCCL would pick by itself: the first non-loopback, non-docker NIC that is up, by name."""
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
    plain = [n for n in candidates if not n.startswith(("docker", "veth", "br-", "virbr"))]
    return (plain or candidates or [None])[0]


def hccl_env(launch: LaunchConfig, environ: dict[str, str] | None = None) -> dict[str, str]:
    """HCCL variables to export; values already in the environment win over config defaults."""
    environ = os.environ if environ is None else environ
    h = launch.hccl
    want = {
        "HCCL_CONNECT_TIMEOUT": str(h.connect_timeout),
        "HCCL_EXEC_TIMEOUT": str(h.exec_timeout),
        # torch_npu aborts a collective at HCCL_EVENT_TIMEOUT, which must exceed the exec timeout.
        "HCCL_EVENT_TIMEOUT": str(h.exec_timeout + 32) if h.exec_timeout else "0",
        "HCCL_WHITELIST_DISABLE": "1",
        **h.extra_env,
    }
    if h.if_ip:
        want["HCCL_IF_IP"] = h.if_ip
    nic = h.socket_ifname or detect_host_nic()
    if nic:
        want["HCCL_SOCKET_IFNAME"] = nic
        want["GLOO_SOCKET_IFNAME"] = nic.lstrip("=^").split(",")[0]
    return {k: environ.get(k, v) for k, v in want.items()}


def torchrun_command(
    launch: LaunchConfig,
    argv: list[str],
    log_dir: Path | None = None,
    *,
    python: str | None = None,
    module: str = "ascend_ready.training.cli",
) -> list[str]:
    """torchrun for this node, re-running the same ascend-train command line in every worker.

    With `log_dir`, every worker's stdout and stderr is also written to
    <log_dir>/<run id>/attempt_<n>/<local rank>/{stdout,stderr}.log (`--tee`), for `explain_failure`.
    `python` is the interpreter on the node (default: this one); `module` the workers' entry point
    (the multi-node launcher puts the NUMA-binding wrapper, ascend_ready.training.numa, in front).
    """
    logs = [f"--log-dir={log_dir}", "--tee=3"] if log_dir is not None else []
    return [
        python or sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={launch.nnodes}",
        f"--nproc-per-node={launch.nproc_per_node}",
        f"--node-rank={launch.node_rank}",
        f"--master-addr={launch.master_addr}",
        f"--master-port={launch.master_port}",
        *logs,
        "-m",
        module,
        *argv,
    ]


def explain_failure(paths: list[Path]) -> str:
    """Why a job failed: the known error signatures in its logs (ascend-check diagnose), as text.

    Read locally; nothing is sent anywhere. A diagnosis that cannot run says so instead of raising.
    """
    from ascend_ready.checks.diagnose import diagnose_paths, render_text

    try:
        report = diagnose_paths(paths)
    except AscendReadyError as exc:
        return f"diagnose: {exc.message}\n"
    where = " ".join(str(p) for p in paths)
    return f"diagnose ({where}): " + render_text(report)


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
