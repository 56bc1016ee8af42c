"""Device choice (npu > cuda > cpu) and process-group setup from the torchrun environment, in one place:
the runtime code every worker on a node runs (training's entrypoints, the collectives' worker), so it sits
below every layer (`ascend_ready.runtime`), not in the node-access layer (fleet.devices re-exports it).

Every entrypoint (and the collectives' worker) calls `setup_runtime()` once; only the rank it marks
`is_main` logs and checkpoints. `BACKENDS` is the one device -> process-group backend map.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType

from ascend_ready.errors import ConfigError, MissingExtraError

__all__ = ["BACKENDS", "OOM_HINT", "TRAIN_EXTRA_HINT", "Runtime", "barrier", "bf16_supported",
           "detect_device", "is_oom", "npu_available", "require", "setup_runtime", "shutdown"]

TRAIN_EXTRA_HINT = "pip install 'ascend-ready[train]'"
BACKENDS = {"npu": "hccl", "cuda": "nccl", "cpu": "gloo"}
OOM_HINT = (
    "out of device memory. Remedies, cheapest first: lower batch_size and raise "
    "gradient_accumulation_steps; set model.gradient_checkpointing: true; shorten "
    "generation.max_completion_length; train LoRA adapters (model.lora); shard with "
    "distributed.zero_stage: 3 and distributed.offload: true"
)


def require(module: str, hint: str = TRAIN_EXTRA_HINT) -> ModuleType:
    """Import a package of the `train` extra (or another optional one), or fail with the pip line to run."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"ascend-train needs '{module.split('.')[0]}', which is not installed", hint=hint
        ) from exc


def npu_available() -> bool:
    """torch_npu imported and at least one NPU visible (a CPU box with torch_npu installed says False)."""
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)
    except Exception:
        return False
    import torch

    return bool(getattr(torch, "npu", None) and torch.npu.is_available())


def detect_device(requested: str = "auto") -> str:
    """`auto` -> npu, cuda or cpu, whichever is found first; a forced kind must exist."""
    torch = require("torch")
    found = {"npu": npu_available, "cuda": torch.cuda.is_available, "cpu": lambda: True}
    if requested == "auto":
        return next(kind for kind, probe in found.items() if probe())
    if requested not in found:
        raise ConfigError(f"unknown device '{requested}'", hint="use auto, npu, cuda or cpu")
    if not found[requested]():
        hint = (
            "install torch_npu matching torch and CANN, source set_env.sh, check ASCEND_RT_VISIBLE_DEVICES"
            if requested == "npu"
            else "check the driver and CUDA_VISIBLE_DEVICES"
        )
        raise ConfigError(f"device '{requested}' was requested but none is visible", hint=hint)
    return requested


@dataclass(frozen=True)
class Runtime:
    """Where this process runs and who it is in the job."""

    device_type: str
    backend: str
    rank: int
    local_rank: int
    world_size: int
    bf16: bool

    @property
    def device(self):
        import torch

        return (
            torch.device("cpu")
            if self.device_type == "cpu"
            else torch.device(self.device_type, self.local_rank)
        )

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def bf16_supported(device_type: str) -> bool:
    import torch

    if device_type == "npu":
        return True  # 910B/910C compute in bf16 natively; 310P does not train
    if device_type == "cuda":
        return torch.cuda.is_bf16_supported()
    return False  # CPU bf16 is emulated on most hosts and slower than fp32 for small models


def setup_runtime(device: str = "auto", precision: str = "auto") -> Runtime:
    """Pick the device, bind this rank to its device, join the process group if torchrun started us."""
    torch = require("torch")
    kind = detect_device(device)
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if kind == "npu":
        torch.npu.set_device(local_rank)
    elif kind == "cuda":
        torch.cuda.set_device(local_rank)
    dist = torch.distributed
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend=BACKENDS[kind], rank=rank, world_size=world)
    use_bf16 = precision == "bf16" or (precision == "auto" and bf16_supported(kind))
    if precision == "bf16" and not bf16_supported(kind) and kind != "cpu":
        raise ConfigError(f"bf16 is not supported on this {kind} device", hint="set precision: fp32")
    return Runtime(kind, BACKENDS[kind], rank, local_rank, world, use_bf16)


def barrier(rt: Runtime) -> None:
    if rt.distributed:
        import torch

        torch.distributed.barrier()


def shutdown(rt: Runtime) -> None:
    import torch

    if rt.distributed and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def is_oom(exc: BaseException) -> bool:
    """torch.OutOfMemoryError on CUDA; torch_npu raises a RuntimeError whose text says so."""
    import torch

    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()
