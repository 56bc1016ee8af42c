"""Parser of the torch bandwidth probe (checks/resources/perf_torch.py): what the training interpreter
measured on a node without Ascend's toolbox, device memory, host-device and device-device copies in GB/s,
and a matmul in TFLOPS.

Layout (the probe prints it; tests/checks/test_perf_torch.py runs the probe and parses what it printed):

    ascend-check torch-bandwidth v1
    device npu 8 torch 2.1.0 torch_npu 2.1.0.post8
    hbm 0 1421.552
    h2d 0 23.914 pinned
    d2h 0 24.107 pinned
    flops 0 287.31 fp16
    p2p 0 1 51.220
    ...

or, where ascend-dmi is there to measure instead, the header and `skipped: <why>`. On a CPU-only node the
device line says `cpu 1`, one `hbm cpu` line gives the host-memory copy and one `flops cpu ... fp32` line
a small FP32 matmul. Anything else, a device that is
neither npu, cuda nor cpu, or a figure that is not a positive finite number is a ParseError naming the line.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ascend_ready.checks.parsers._common import text_lines, to_float, to_int
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail

__all__ = ["HEADER", "KIND", "TorchBandwidth", "parse_torch_bandwidth"]

KIND = "torch-bandwidth"
HEADER = "ascend-check torch-bandwidth v1"
_METRICS = ("hbm", "h2d", "d2h")


class TorchBandwidth(ParsedModel):
    """GB/s per device (`hbm`, `h2d`, `d2h`: logical device id -> figure) and per ordered pair (`p2p`)."""

    skipped: str | None = Field(None, description="why the probe measured nothing (ascend-dmi does)")
    device: Literal["npu", "cuda", "cpu"] | None = None
    count: int = 0
    versions: dict[str, str] = Field(default_factory=dict, description="torch (and torch_npu) versions")
    hbm: dict[str, float] = Field(default_factory=dict)
    h2d: dict[str, float] = Field(default_factory=dict)
    d2h: dict[str, float] = Field(default_factory=dict)
    #: how the host side of h2d/d2h was allocated: "pinned" or "pageable" (pin_memory failed)
    host_memory: str = ""
    p2p: dict[tuple[int, int], float] = Field(default_factory=dict)
    flops: dict[str, float] = Field(default_factory=dict, description="matmul TFLOPS per device")
    flops_dtype: str = Field("", description="what the matmul multiplied: fp16 (a device) or fp32 (a CPU)")

    def figures(self, metric: str) -> dict[str, float]:
        return self.p2p_named() if metric == "p2p" else getattr(self, metric)

    def p2p_named(self) -> dict[str, float]:
        return {f"{s} -> {d}": v for (s, d), v in sorted(self.p2p.items())}


def _gbps(line: Line, value: str, unit: str = "GB/s") -> float:
    v = to_float(KIND, value, line, what=unit)
    if v <= 0:
        raise fail(KIND, f"{unit} must be positive, got {value!r}", line)
    return v


def _device_word(line: Line, word: str, device: str) -> None:
    if (word != "cpu") if device == "cpu" else not word.isdigit():
        raise fail(KIND, f"device {word!r} on a {device} node", line)


def _device_line(line: Line, words: list[str]) -> dict:
    if len(words) < 5 or words[1] not in ("npu", "cuda", "cpu") or len(words) % 2 == 0:
        raise fail(KIND, "expected `device npu|cuda|cpu COUNT torch VERSION [torch_npu VERSION]`", line)
    count = to_int(KIND, words[2], line, what="device count")
    if count < 1:
        raise fail(KIND, f"device count must be 1 or more, got {words[2]!r}", line)
    return {"device": words[1], "count": count, "versions": dict(zip(words[3::2], words[4::2], strict=True))}


def parse_torch_bandwidth(text: str) -> TorchBandwidth:
    lines = [ln for ln in text_lines(KIND, text) if ln.strip()]
    if lines[0].strip() != HEADER:
        raise fail(KIND, f"not the torch bandwidth probe's output (expected {HEADER!r} first)", lines[0])
    if len(lines) >= 2 and lines[1].startswith("skipped: "):
        if len(lines) > 2:
            raise fail(KIND, "nothing may follow `skipped:`", lines[2])
        return TorchBandwidth(skipped=lines[1].removeprefix("skipped: ").strip())
    if len(lines) < 2 or not lines[1].startswith("device "):
        raise fail(KIND, "expected the `device ...` line after the header",
                   lines[1] if len(lines) > 1 else None, line_no=None if len(lines) > 1 else 2)
    fields: dict = {**_device_line(lines[1], lines[1].split()), **{m: {} for m in _METRICS}, "p2p": {},
                    "flops": {}}
    memory, dtypes = set(), set()
    for line in lines[2:]:
        words = line.split()
        if words[0] in _METRICS and len(words) in (3, 4):
            _device_word(line, words[1], fields["device"])
            if words[0] != "hbm":
                if len(words) != 4 or words[3] not in ("pinned", "pageable"):
                    raise fail(KIND, "a host copy names its host memory: pinned or pageable", line)
                memory.add(words[3])
            fields[words[0]][words[1]] = _gbps(line, words[2])
        elif words[0] == "p2p" and len(words) == 4 and words[1].isdigit() and words[2].isdigit():
            fields["p2p"][(int(words[1]), int(words[2]))] = _gbps(line, words[3])
        elif words[0] == "flops" and len(words) == 4:
            _device_word(line, words[1], fields["device"])
            if words[3] not in ("fp16", "fp32"):
                raise fail(KIND, f"a matmul names its dtype: fp16 or fp32, not {words[3]!r}", line)
            dtypes.add(words[3])
            fields["flops"][words[1]] = _gbps(line, words[2], "TFLOPS")
        else:
            raise fail(KIND, "expected `hbm|h2d|d2h DEVICE GB/S [pinned|pageable]`, `flops DEVICE TFLOPS "
                       "fp16|fp32` or `p2p SRC DST GB/S`", line)
    if not fields["hbm"]:
        raise fail(KIND, "no `hbm` line: the probe stopped before measuring", line_no=len(text.splitlines()))
    fields["host_memory"] = "/".join(sorted(memory))
    fields["flops_dtype"] = "/".join(sorted(dtypes))
    return TorchBandwidth(**fields)
