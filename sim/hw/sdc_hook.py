"""The simulator's device emulation for a device that computes wrong: copied into a node as its
`sitecustomize.py` by `ascend-sim fault NODE sdc` (apply_root_faults), on the PYTHONPATH of login shells.

A simulated node computes on the CPU torch; rank N of a job (LOCAL_RANK, as torchrun and the SDC worker set
it) stands for device N. Once torch is imported, torch.matmul on the faulty device flips one bit of one
element of every result, every time: the shape of the mercurial cores Meta and Google found in their fleets
(a wrong result for one computation, repeatable, with no error raised: Dixit et al., "Silent Data
Corruptions at Scale", arXiv:2102.11245; Hochschild et al., "Cores that don't count", HotOS 2021).
Stdlib only, and nothing is imported until torch is.
"""

import json
import os
import sys

#: ASCEND_SIM_FSROOT, set only by tests that run it in a scratch root, is prefixed (as the torch_npu
#: stand-in does)
FAULT_FILE = os.environ.get("ASCEND_SIM_FSROOT", "") + "/var/lib/ascend-sim/runtime/sdc.json"


def _patch(torch):
    with open(FAULT_FILE) as f:
        fault = json.load(f)
    original = torch.matmul
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

    def flip(out):
        if int(os.environ.get("LOCAL_RANK", "0")) != fault["device"] or not out.is_floating_point():
            return out
        flat = out.contiguous().view(-1)
        if fault["index"] >= flat.numel():
            return out
        bits = flat.view(ints[out.element_size()])
        bits[fault["index"]] ^= 1 << fault["bit"]
        return flat.view(out.shape)

    def matmul(a, b, *args, **kwargs):
        return flip(original(a, b, *args, **kwargs))

    # for the emulated NPU's fp16 matmul (sim/packages/wheels.py EMULATED_NPU), which computes in fp32
    # below this hook and flips the bit of its fp16 result, as a faulty device returns it
    matmul.__wrapped__ = original
    matmul.ascend_sim_fault = flip
    torch.matmul = matmul


class _TorchHook:
    """A meta path finder that runs _patch once torch has been imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


if os.path.isfile(FAULT_FILE):
    sys.meta_path.insert(0, _TorchHook())
