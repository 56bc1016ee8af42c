"""The one seam every way of starting a training job meets at: a typed `LaunchRequest`, built once by the
CLI (training/cli.py `launch_request`), and `Launcher.launch(request) -> LaunchResult`, which the
torchrun-over-SSH (training/multinode.py), Slurm (training/slurm_launch.py) and verl/Ray
(training/verl_glue.py) launchers implement. As ROCm cvs's orchestrator factory and testinfra's resource
map do, a launcher is registered once by name here (`LAUNCHERS`) and imported on first use: a new one
(Kubernetes/Volcano, a MindCluster DRA claim) is one module and one line.

    LAUNCHERS["volcano"] = "ascend_ready.training.volcano:VolcanoLauncher"

The request carries what the job is (TrainJob), what the gate said before any node was touched
(GateVerdict: the memory plan; the preflight policy each launcher's own gate applies: the launch spec's
judgement, the inventory's preflight, or `ascend-check node` on a Slurm allocation's nodes) and typed
options (the multi-node options of training/node_probe.py, Slurm's sbatch options, the Ray join wait).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from ascend_ready.errors import ConfigError
from ascend_ready.training.config import TrainConfig
from ascend_ready.training.node_probe import LaunchOptions

__all__ = [
    "LAUNCHERS",
    "GateVerdict",
    "LaunchRequest",
    "LaunchResult",
    "Launcher",
    "SlurmOptions",
    "TrainJob",
    "get_launcher",
    "launch",
]


@dataclass(frozen=True)
class TrainJob:
    """What is trained: the algorithm, the resolved config, and how the command line named them."""

    algo: str
    cfg: TrainConfig
    #: the --config argument as given (a bundled name or a path): a launcher that re-runs ascend-train on
    #: the nodes (Slurm) passes it on
    config: str
    output_dir: Path
    resume: bool = False
    overrides: tuple[str, ...] = ()
    engine: str = "trl"


@dataclass(frozen=True)
class GateVerdict:
    """What was decided before any node is touched: the memory plan that fits (None where the config has
    none to make), and the preflight policy the launcher's gate applies (--skip-preflight, --waive)."""

    memory_plan: Any = None
    skip_preflight: bool = False
    waive: tuple[str, ...] = ()


@dataclass(frozen=True)
class SlurmOptions:
    """--launcher slurm's own options: write the sbatch script instead of training, and its lines."""

    print_sbatch: str | None = None
    time: str | None = None
    gres: str | None = None
    partition: str | None = None
    #: --device and --preflight-command as given (None: not given), passed on to each node's ascend-train
    device: str | None = None
    preflight_command: str | None = None


@dataclass(frozen=True)
class LaunchRequest:
    """One job to start, everything a launcher reads: no flat dict of command-line options."""

    launcher: str
    job: TrainJob
    gate: GateVerdict
    #: the nodes and how they are reached (launch spec, inventory/--hosts, SSH, interpreter, master...)
    options: LaunchOptions = field(default_factory=LaunchOptions)
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    #: --engine verl across nodes: seconds for every node to join the Ray cluster
    join_timeout_s: float = 120.0

    @property
    def log(self) -> Callable[[str], None]:
        return self.options.log


@dataclass(frozen=True)
class LaunchResult:
    """How the launch ended: the run's summary (the CLI's JSON line; None: nothing to report) and the
    exit status the CLI ends with."""

    summary: dict | None = None
    exit_code: int = 0

    @property
    def dry_run(self) -> bool:
        return bool(self.summary and self.summary.get("dry_run"))


class Launcher(Protocol):
    """Starts a LaunchRequest's job on its nodes; raises the project's errors (common/errors.py) on a
    refusal or a failed job, as the CLI guard reports them."""

    name: ClassVar[str]

    def launch(self, request: LaunchRequest) -> LaunchResult: ...


#: name -> "module:Class": each launcher is imported on first use (torch, ray and paramiko stay unloaded
#: for the others)
LAUNCHERS: dict[str, str] = {
    "ssh": "ascend_ready.training.multinode:SshLauncher",
    "slurm": "ascend_ready.training.slurm_launch:SlurmLauncher",
    "verl-ray": "ascend_ready.training.verl_glue:RayLauncher",
}


def get_launcher(name: str, registry: Mapping[str, str] | None = None) -> Launcher:
    """The launcher registered as `name`; ConfigError naming the registered ones otherwise."""
    registry = LAUNCHERS if registry is None else registry
    if name not in registry:
        raise ConfigError(f"no launcher named {name!r}", hint="one of: " + ", ".join(sorted(registry)))
    module, _, cls = registry[name].partition(":")
    return getattr(importlib.import_module(module), cls)()


def launch(request: LaunchRequest) -> LaunchResult:
    """Start `request` with the launcher it names."""
    return get_launcher(request.launcher).launch(request)
