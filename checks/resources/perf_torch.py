"""Bandwidth and matmul TFLOPS measured with torch where Ascend's toolbox is not installed (full tier): device
memory, host-device and device-device copies and an FP16 matmul per device, on npu (torch_npu), cuda or cpu,
by the training interpreter.

Where `ascend-dmi` is there (its set_env.sh, or on the training user's PATH) the probe measures nothing and
says so: ascend-dmi's own tests are the reference (checks/resources/perf.py). The copies follow NVIDIA's
cuda-samples `bandwidthTest` (Samples/1_Utilities/bandwidthTest/bandwidthTest.cu): a device-to-device copy
counts each byte twice (read and written: `2.0f * memSize * MEMCOPY_ITERATIONS`), as ascend-dmi's d2d
figure does (1539.6 GB/s on an A3 die of 1.6 TB/s nominal could not be one-way), host copies use pinned
memory (`pageable` where pinning fails, and the figure says so), each timed after one warm-up copy. A
device pair copies `src -> dst` with `dst.copy_(src)` (HCCS or NVLink where the pair has it). The matmul is
ascend-dmi -f's figure (FP16 cube TFLOPS): `torch.mm` of two 4096 x 4096 FP16 matrices, 2·n³ FLOPs each,
timed after one warm-up (a CPU-only node multiplies 256 x 256 FP32, to show it ran, never to compare).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from functools import cached_property

from ascend_ready.checks.parsers.torch_bandwidth import HEADER, TorchBandwidth, parse_torch_bandwidth
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.resources.base import ProbeFailed, Resource, profile_probe
from ascend_ready.checks.resources.perf import TOOLBOX_ENV, AscendDmi
from ascend_ready.checks.resources.versions import _python

__all__ = ["TORCH_BW", "TORCH_BW_CODE", "Copies", "DeviceCopies", "DeviceFlops", "TorchCopies"]

_DMI_TYPE = {"hbm": "d2d"}

#: The node side (Python 3.8+, torch only; torch_npu where it imports). `measure()` prints the layout
#: checks/parsers/torch_bandwidth.py reads. 256 MiB per device copy, 64 MiB per pair, 10 timed copies.
TORCH_BW_CODE = r'''
import sys, time


def _accelerator():
    import torch
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)
        if torch.npu.is_available() and torch.npu.device_count() > 0:
            return "npu", torch.npu, {"torch_npu": torch_npu.__version__}
    except ImportError:
        pass
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return "cuda", torch.cuda, {}
    return "cpu", None, {}


def _gbps(copy, sync, nbytes, iters):
    copy()
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        copy()
    sync()
    return nbytes * iters / (time.perf_counter() - start) / 1e9


def _dev(torch, kind, d):
    return torch.device(kind, d)


def _host(torch, nbytes):
    buf = torch.empty(nbytes, dtype=torch.uint8)
    try:
        return buf.pin_memory(), "pinned"
    except (RuntimeError, AssertionError):
        return buf, "pageable"


def _tflops(torch, dev, dtype, n, iters, sync):
    a = torch.randn(n, n, device=dev).to(dtype)
    b = torch.randn(n, n, device=dev).to(dtype)
    c = torch.mm(a, b)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        torch.mm(a, b, out=c)
    sync()
    return 2.0 * n ** 3 * iters / (time.perf_counter() - start) / 1e12


def measure(size=256 << 20, pair_size=64 << 20, iters=10, flops_n=4096, out=sys.stdout):
    import torch
    kind, mod, extra = _accelerator()
    count = 1 if mod is None else mod.device_count()
    say = lambda *words: out.write(" ".join(str(w) for w in words) + "\n")
    say("ascend-check torch-bandwidth v1")
    say("device", kind, count, "torch", torch.__version__, *[w for kv in extra.items() for w in kv])
    if mod is None:
        src = torch.empty(size, dtype=torch.uint8)
        dst = torch.empty_like(src)
        say("hbm cpu %.3f" % _gbps(lambda: dst.copy_(src), lambda: None, 2 * size, iters))
        n = min(flops_n, 256)
        cpu = torch.device("cpu")
        say("flops cpu %.6g fp32" % _tflops(torch, cpu, torch.float32, n, iters, lambda: None))
        return
    for d in range(count):
        mod.set_device(d)
        dev = _dev(torch, kind, d)
        sync = mod.synchronize
        src = torch.empty(size, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        host, memory = _host(torch, size)
        say("hbm %d %.3f" % (d, _gbps(lambda: dst.copy_(src), sync, 2 * size, iters)))
        h2d = _gbps(lambda: src.copy_(host, non_blocking=True), sync, size, iters)
        say("h2d %d %.3f %s" % (d, h2d, memory))
        d2h = _gbps(lambda: host.copy_(src, non_blocking=True), sync, size, iters)
        say("d2h %d %.3f %s" % (d, d2h, memory))
        del src, dst, host
        say("flops %d %.6g fp16" % (d, _tflops(torch, dev, torch.float16, flops_n, iters, sync)))
    bufs = [torch.empty(pair_size, dtype=torch.uint8, device=_dev(torch, kind, d)) for d in range(count)]
    for s in range(count):
        for d in range(count):
            if s != d:
                sync = lambda: (mod.synchronize(s), mod.synchronize(d))
                copy = lambda: bufs[d].copy_(bufs[s], non_blocking=True)
                say("p2p %d %d %.3f" % (s, d, _gbps(copy, sync, pair_size, iters)))


if __name__ == "__main__":
    measure()
'''


@profile_probe("torch-bandwidth")
def TORCH_BW(profile: HardwareProfile) -> dict:
    run = _python(profile.python, TORCH_BW_CODE)
    if "argv" in run:
        run = {"shell": "exec " + " ".join(shlex.quote(a) for a in run["argv"])}
    skip = (f'if [ -f {TOOLBOX_ENV} ] || command -v ascend-dmi >/dev/null 2>&1; then '
            f'echo {shlex.quote(HEADER)}; '
            'echo "skipped: ascend-dmi is installed (its tests measure instead)"; exit 0; fi; ')
    # not in the background: the copies hold the devices, as ascend-dmi's tests do (one at a time)
    return {"shell": skip + run["shell"], "as_user": True, "timeout_s": 300, "tool": "",
            "description": "device memory, host-device and device-device GB/s and FP16 matmul TFLOPS with "
            "torch, where ascend-dmi is not installed (npu, cuda or cpu)"}


class TorchCopies(Resource):
    """The torch bandwidth probe's figures (None where ascend-dmi is installed and measured instead)."""

    probes = (TORCH_BW,)

    @cached_property
    def measured(self) -> TorchBandwidth:
        return parse_torch_bandwidth(self.host.stdout("torch-bandwidth"))

    def torch_measured(self) -> TorchBandwidth:
        """`measured` where ascend-dmi did not run: a torch probe that skipped for it is an error."""
        t = self.measured
        if t.skipped is not None:
            raise ProbeFailed(f"ascend-dmi did not run for root on {self.host.name} (exit 127) while the "
                              f"training user's shell finds it ({t.skipped}): neither measured",
                              hint=f"make {TOOLBOX_ENV} readable and ascend-dmi executable for root, or "
                              "reinstall the MindCluster ToolBox (toolbox_install: true)")
        return t


@dataclass(frozen=True)
class Copies:
    """One metric's figures on a node and what measured them."""

    values: dict[str, float]  # "device 0" (or "device 0 -> 1") -> GB/s (TFLOPS for a matmul)
    device: str  # npu, cuda or cpu: what the figures are of
    source: str  # the tool and how, for the evidence


class DeviceCopies(Resource):
    """HBM, host-device and device-device GB/s: ascend-dmi's where it is installed, else torch's."""

    requires = (AscendDmi, TorchCopies)

    def figures(self, metric: str) -> Copies:
        dmi = self.host.resource(AscendDmi)
        if dmi.installed:
            if metric == "p2p":
                pairs = dmi.p2p.pairs()
                return Copies({f"device {s} -> {d}": v for (s, d), v in sorted(pairs.items())}, "npu",
                              "ascend-dmi --bw -t p2p")
            out = {}
            for dev, bw in dmi.bandwidth(metric).items():
                row = bw.largest(dev) or max(bw.rows, key=lambda r: r.size_bytes)
                out[f"device {dev}"] = row.bandwidth_gbps
            return Copies(out, "npu", f"ascend-dmi --bw -t {_DMI_TYPE.get(metric, metric)} per device")
        t = self.host.resource(TorchCopies).torch_measured()
        versions = " ".join(f"{k} {v}" for k, v in t.versions.items())
        how = {"hbm": "a device-to-device copy_, bytes read + written" if t.device != "cpu"
               else "a host-memory copy_, bytes read + written",
               "h2d": f"host-to-device copy_ from {t.host_memory} memory",
               "d2h": f"device-to-host copy_ to {t.host_memory} memory",
               "p2p": "dst.copy_(src) between two devices"}[metric]
        values = t.figures(metric)
        named = {(k if k == "cpu" else f"device {k}"): v for k, v in values.items()}
        return Copies(named, t.device or "cpu",
                      f"torch ({versions}) on {t.device} x {t.count}: {how}; ascend-dmi is not installed")


class DeviceFlops(Resource):
    """FP16 matmul TFLOPS per device: ascend-dmi -f's where it is installed, else torch's `torch.mm`."""

    requires = (AscendDmi, TorchCopies)

    def figures(self) -> Copies:
        dmi = self.host.resource(AscendDmi)
        if dmi.installed:
            rows = {f"device {r.device}": r.value for per in dmi.flops.values() for r in per.rows}
            return Copies(rows, "npu", "ascend-dmi -f -t fp16 per device")
        t = self.host.resource(TorchCopies).torch_measured()
        versions = " ".join(f"{k} {v}" for k, v in t.versions.items())
        named = {(k if k == "cpu" else f"device {k}"): v for k, v in t.flops.items()}
        size = "256 x 256" if t.device == "cpu" else "4096 x 4096"
        return Copies(named, t.device or "cpu",
                      f"torch ({versions}) on {t.device} x {t.count}: torch.mm of two {size} "
                      f"{t.flops_dtype or 'fp16'} matrices; ascend-dmi is not installed")
