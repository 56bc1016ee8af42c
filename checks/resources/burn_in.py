"""Burn-in (tier burn-in): sustained load on every device for the run's --duration, with the chips and the
device NICs sampled beside it in the same window, so the load is shown to have run (BAAI FlagPerf's Ascend
runner keeps its monitor beside the measurement the same way).

The load is the full tier's torch probe (perf_torch.py: device-memory, host-to-device and device-to-host
copies, device pairs) plus a matmul per device and an all-reduce across the node's devices (one process
per device, hccl on an NPU), in rounds, by the training interpreter, until the duration is spent: the
cube, HBM, PCIe and the HCCS links loaded at once, as a job loads them. Beside it the probe samples
`npu-smi info -t common` per NPU (temperature, power, AI Core use and clock), and at the window's start
and end `npu-smi info -t ecc` and `hccn_tool -link_stat` / `-stat` per device (cumulative counters: their
growth is what counts). Each sample is kept as the tool printed it
and read by that tool's parser. Layout of the output:

    ascend-check burn-in v1 duration 60 interval 1
    @@burn-in at 8312.45                 (/proc/uptime of the samples that follow)
    @@burn-in npu-smi-common 0           (then the tool's output)
    @@burn-in load rc 0                  (the load's exit status, then its stdout:)
    round 8313.02                        (a round's start, /proc/uptime)
    ascend-check torch-bandwidth v1 ...  (perf_torch's lines for that round)
    matmul 0 281.3012                    (TFLOPS of the round's matmul on device 0)
    allreduce 0 121.0034                 (GB/s bus bandwidth of device 0's all-reduce in the round)
    @@burn-in load stderr                (then the load's stderr)
"""

from __future__ import annotations

import dataclasses
import inspect
import shlex
from dataclasses import dataclass
from functools import cached_property

from ascend_ready.checks.burn_in import MARGIN_S
from ascend_ready.checks.cluster import sdc_worker
from ascend_ready.checks.parsers.base import fail
from ascend_ready.checks.parsers.hccn import parse_hccn_link_stat, parse_hccn_stat
from ascend_ready.checks.parsers.npu_smi_kv import parse_npu_smi_common, parse_npu_smi_ecc
from ascend_ready.checks.parsers.torch_bandwidth import TorchBandwidth, parse_torch_bandwidth
from ascend_ready.checks.probes import FOREACH, Probe
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.resources.base import Resource, profile_probe
from ascend_ready.checks.resources.perf_torch import TORCH_BW_CODE
from ascend_ready.checks.resources.versions import _python

__all__ = ["BURN_IN", "BURN_IN_CODE", "MARGIN_S", "BurnIn", "BurnInRun", "for_duration", "parse_burn_in"]

HEADER = "ascend-check burn-in v1"
_MARK = "@@burn-in "
_DEFAULT_S = 60.0

#: the load: perf_torch's measure() in rounds, and a matmul per device, until the duration is spent
BURN_IN_CODE = TORCH_BW_CODE.split('\nif __name__ == "__main__":')[0] + (
    "\nimport glob, os\nfrom importlib.util import find_spec\n\n\n"  # the SDC worker's device count, below
    + inspect.getsource(sdc_worker._devices)) + r'''

def _uptime():
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def _matmul(torch, kind, mod, d):
    """TFLOPS of a torch.mm on device d: FP16 4096 x 4096 on an NPU, npu.flops' torch shape, so that the
    SKU's floor holds here too (a 1024 x 1024 one is launch-bound, far below any cube's peak); FP32
    1024 x 1024 on a CPU, long enough per round to be steady."""
    if mod is None:
        return _tflops(torch, torch.device("cpu"), torch.float32, 1024, 5, lambda: None)
    return _tflops(torch, _dev(torch, kind, d), torch.float16, 4096, 5, mod.synchronize)


#: the all-reduce of every round: 64 MiB of fp32 per rank, hccl.allreduce's largest default message
ALLREDUCE_BYTES = 64 << 20


def _copies(mod, d):
    """A round's copies (perf_torch's measure()) as lines; device d current again afterwards."""
    import io
    buf = io.StringIO()
    measure(size=64 << 20, pair_size=16 << 20, iters=3, out=buf)
    if mod is not None:
        mod.set_device(d)  # measure() walked every device
    return [buf.getvalue().rstrip("\n")]


def burn(duration, ranks=None):
    """The load for `duration` s: one process per device with an all-reduce across them every round when
    the node has more than one (`ranks`: that many CPU processes over gloo instead, to try it on a CPU);
    else one process."""
    kind, count = _devices("auto")
    world = ranks or count
    if world > 1:
        return _burn_ranks(duration, kind if not ranks else "cpu", world)
    import torch
    kind, mod, _ = _accelerator()
    count = 1 if mod is None else mod.device_count()
    end = _uptime() + duration
    while _uptime() < end:
        lines = ["round %.2f" % _uptime()] + _copies(mod, 0)
        for d in range(count):
            if mod is not None:
                mod.set_device(d)
            lines.append("matmul %s %.4f" % ("cpu" if mod is None else d, _matmul(torch, kind, mod, d)))
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()


def _burn_ranks(duration, kind, world):
    """`world` processes, forked before any device is touched (each brings its runtime up, as the SDC
    worker's ranks do). Every round each runs its matmul, then an all-reduce of ALLREDUCE_BYTES timed for
    its bus bandwidth, then a small all-reduce that brings every rank's figures and rank 0's stop flag
    to all: rank 0 prints the round (with its copies), and all stop after the same round."""
    import multiprocessing
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    end = _uptime() + duration
    procs = [multiprocessing.get_context("fork").Process(target=_burn_rank, args=(kind, r, world, port, end))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = ["rank %d exited %s" % (r, p.exitcode) for r, p in enumerate(procs) if p.exitcode]
    if failed:
        sys.exit("burn-in load: " + ", ".join(failed))


def _burn_rank(kind, rank, world, port, end):
    import os
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist
    if kind == "npu":
        import torch_npu  # noqa: F401  (registers torch.npu)
    mod = getattr(torch, kind, None) if kind != "cpu" else None
    if mod is not None:
        mod.set_device(rank)
        dev, sync = _dev(torch, kind, rank), mod.synchronize
    else:
        torch.set_num_threads(1)
        dev, sync = torch.device("cpu"), lambda: None
    dist.init_process_group({"npu": "hccl", "cuda": "nccl"}.get(kind, "gloo"), rank=rank, world_size=world)
    big = torch.ones(ALLREDUCE_BYTES // 4, device=dev)
    try:
        while True:
            t = _uptime()
            lines = ["round %.2f" % t] + (_copies(mod, rank) if rank == 0 else [])
            tflops = _matmul(torch, kind, mod, rank)
            dist.all_reduce(big)  # warm: the first one after a matmul pays the stream switch
            sync()
            started = time.perf_counter()
            dist.all_reduce(big)
            sync()
            busbw = 2.0 * (world - 1) / world * ALLREDUCE_BYTES / (time.perf_counter() - started) / 1e9
            figures = torch.zeros(2 * world + 1, device=dev)
            figures[rank], figures[world + rank] = tflops, busbw
            if rank == 0 and _uptime() >= end:
                figures[-1] = 1.0
            dist.all_reduce(figures)
            got = figures.cpu().tolist()
            if rank == 0:
                lines += ["matmul %d %.4f" % (r, got[r]) for r in range(world)]
                lines += ["allreduce %d %.4f" % (r, got[world + r]) for r in range(world)]
                sys.stdout.write("\n".join(lines) + "\n")
                sys.stdout.flush()
            if got[-1] > 0:
                break
    finally:
        dist.destroy_process_group()
'''


def _script(profile: HardwareProfile, duration_s: float) -> str:
    run = _python(profile.python, BURN_IN_CODE + f"\nburn({duration_s:g})\n")
    load = run["shell"] if "shell" in run else "exec " + " ".join(shlex.quote(a) for a in run["argv"])
    if profile.training_user != "root":  # the training user's login environment, as perf_torch's probe has
        load = f'if [ "$(id -u)" = 0 ]; then exec su - {shlex.quote(profile.training_user)} -c ' \
               f'{shlex.quote(load)}; fi; {load}'
    interval = max(1, round(duration_s / 120))
    return f"""D={duration_s:g}; I={interval}
echo "{HEADER} duration $D interval $I"
_up() {{ read -r _u _x </proc/uptime; echo "{_MARK}at $_u"; }}
_ids=$(npu-smi info -l 2>/dev/null | awk -F: '/NPU ID/{{gsub(/[ \\t]/,"",$2); print $2}}')
_devs=$({FOREACH["davinci"]})
_ends() {{ echo "{_MARK}readings $1"; _up
  for _n in $_ids; do echo "{_MARK}npu-smi-ecc $_n"; npu-smi info -t ecc -i "$_n" 2>&1; done
  for _d in $_devs; do echo "{_MARK}hccn-link-stat $_d"; hccn_tool -i "$_d" -link_stat -g 2>&1
    echo "{_MARK}hccn-stat $_d"; hccn_tool -i "$_d" -stat -g 2>&1; done; }}
_L=$(mktemp) || exit 1
_ends first
( {load} ) >"$_L" 2>"$_L.e" </dev/null &
_p=$!
while kill -0 "$_p" 2>/dev/null; do
  _up; for _n in $_ids; do echo "{_MARK}npu-smi-common $_n"; npu-smi info -t common -i "$_n" 2>&1; done
  sleep "$I"
done
wait "$_p"; _rc=$?
_ends last
echo "{_MARK}load rc $_rc"; cat "$_L"; echo "{_MARK}load stderr"; cat "$_L.e"; rm -f "$_L" "$_L.e"
"""


def _fields(profile: HardwareProfile, duration_s: float) -> dict:
    return {"shell": _script(profile, duration_s), "timeout_s": duration_s + MARGIN_S, "tool": "",
            "description": "sustained load (torch copies, matmul and an all-reduce across the devices) on "
            "every device for the burn-in's duration, npu-smi and hccn_tool sampled beside it"}


@profile_probe("burn-in")
def BURN_IN(profile: HardwareProfile) -> dict:
    return _fields(profile, _DEFAULT_S)


def for_duration(probe: Probe, profile: HardwareProfile, duration_s: float) -> Probe:
    """The burn-in probe of a run of `duration_s` (any other probe unchanged)."""
    if probe.id != BURN_IN.id:
        return probe
    return dataclasses.replace(probe, **_fields(profile, duration_s))


@dataclass(frozen=True)
class Frame:
    """One sample as the tool printed it: when (seconds into the window), which tool, of what."""

    t: float
    kind: str  # npu-smi-common, npu-smi-ecc, hccn-link-stat, hccn-stat
    subject: int  # NPU id (npu-smi) or device logic id (hccn_tool)
    text: str
    end: bool = False  # taken at the window's end (the counters' second reading)


@dataclass(frozen=True)
class Round:
    t: float
    copies: TorchBandwidth
    matmul: dict[str, float]  # device ("0", or "cpu") -> TFLOPS
    #: device -> the bus bandwidth (GB/s) of its all-reduce across the node's devices (none: one device)
    allreduce: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclass
class BurnInRun:
    """The burn-in probe's output, split: the samples (parsed by their own parsers on use) and the load."""

    duration_s: float
    interval_s: float
    frames: list[Frame]
    load_rc: int | None
    rounds: list[Round]
    load_stderr: str
    window_s: float  # from the first to the last sample

    def of(self, kind: str) -> list[Frame]:
        return [f for f in self.frames if f.kind == kind]


_KINDS = ("npu-smi-common", "npu-smi-ecc", "hccn-link-stat", "hccn-stat")


def _rounds(lines: list[str], start: float) -> list[Round]:
    out, block, t = [], [], None

    def close() -> None:
        if t is None:
            return
        figures: dict[str, dict[str, float]] = {"matmul": {}, "allreduce": {}}
        rest = []
        for line in block:
            words = line.split()
            if words[:1] in (["matmul"], ["allreduce"]) and len(words) == 3:
                try:
                    figures[words[0]][words[1]] = float(words[2])
                except ValueError:
                    raise fail("burn-in", f"{words[0]} figure is not a number", line) from None
            else:
                rest.append(line)
        out.append(Round(round(t - start, 2), parse_torch_bandwidth("\n".join(rest) + "\n"),
                         figures["matmul"], figures["allreduce"]))

    for line in lines:
        if line.startswith("round "):
            close()
            block = []
            try:
                t = float(line.split()[1])
            except (IndexError, ValueError):
                raise fail("burn-in", "expected 'round <uptime>'", line) from None
        elif t is None and line.strip():
            raise fail("burn-in", "load output before its first round", line)
        else:
            block.append(line)
    close()
    return out


def parse_burn_in(text: str) -> BurnInRun:
    """Split the burn-in probe's output (module docstring); a line it does not expect is a ParseError."""
    lines = text.splitlines()
    head = lines[0].split() if lines else []
    if not lines or " ".join(head[:3]) != HEADER or len(head) != 7:
        raise fail("burn-in", f"expected '{HEADER} duration D interval I'", lines[0] if lines else None)
    duration, interval = float(head[4]), float(head[6])
    frames: list[Frame] = []
    at: float | None = None
    start: float | None = None
    cur: list | None = None  # [kind, subject, lines, t]
    load_at = len(lines)
    reading = ""
    for i, line in enumerate(lines[1:], start=1):
        if not line.startswith(_MARK):
            if cur is None:
                raise fail("burn-in", "output outside any sample", line)
            cur[2].append(line)
            continue
        if cur is not None:
            frames.append(Frame(cur[3], cur[0], cur[1], "\n".join(cur[2]) + "\n", end=reading == "last"))
            cur = None
        words = line[len(_MARK):].split()
        if words[:1] == ["at"] and len(words) == 2:
            at = float(words[1])
            start = at if start is None else start
        elif words[:1] == ["readings"] and len(words) == 2 and words[1] in ("first", "last"):
            reading = words[1]
        elif len(words) == 2 and words[0] in _KINDS and words[1].isdigit() and at is not None:
            cur = [words[0], int(words[1]), [], round(at - (start or at), 2)]
        elif words[:2] == ["load", "rc"]:
            load_at = i
            break
        else:
            raise fail("burn-in", "unexpected marker line", line)
    if load_at == len(lines):
        raise fail("burn-in", "the load's exit status is missing (output cut off?)", lines[-1])
    rc = int(lines[load_at].split()[-1])
    rest = lines[load_at + 1:]
    split = rest.index(_MARK + "load stderr") if _MARK + "load stderr" in rest else len(rest)
    return BurnInRun(duration, interval, frames, rc, _rounds(rest[:split], start or 0.0),
                     "\n".join(rest[split + 1:]), round((at or 0) - (start or 0), 2))


class BurnIn(Resource):
    """The burn-in probe's run on this node: its samples and its load's rounds."""

    probes = (BURN_IN,)

    @cached_property
    def run(self) -> BurnInRun:
        return parse_burn_in(self.host.stdout(BURN_IN.id))

    def parsed(self, kind: str) -> list[tuple[Frame, object]]:
        """(frame, parsed output) of every sample of `kind`, each read by that tool's parser."""
        parse = {"npu-smi-common": parse_npu_smi_common, "npu-smi-ecc": parse_npu_smi_ecc,
                 "hccn-link-stat": parse_hccn_link_stat, "hccn-stat": parse_hccn_stat}[kind]
        return [(f, parse(f.text)) for f in self.run.of(kind)]
