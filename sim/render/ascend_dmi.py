"""`ascend-dmi` (MindCluster ToolBox) performance tests: FLOPS (`-f`) and bandwidth
(`--bw -t h2d|d2h|d2d|p2p`), in the `normal` layouts of the real captures (tests/parsers/real/ascend-dmi-*),
with figures from the node's hardware state.

A healthy device measures what the captures and published runs measured (HEALTHY, each with its source)
less a small deterministic spread per device; faults change it as the real fault would:
* `pcie-width` / `pcie-speed`: host-device copies scale with the trained link (a x8 link halves them);
* `npu-throttle`: the chip's FLOPS times the fault's factor (clocks capped by heat or power);
* `hbm-degraded`: the chip's device-memory bandwidth times the factor;
* `hccs-link-down`: the pair copies over PCIe through the host instead (the lower of both ends' host links).
"""

from __future__ import annotations

from dataclasses import dataclass

from ascend_ready.sim.hw.state import all_chips, find_chip_by_logic, present_functions, trained_link
from ascend_ready.sim.render.npu_smi import ToolError

__all__ = ["HEALTHY", "Healthy", "run"]


@dataclass(frozen=True)
class Healthy:
    """What one healthy chip (die) of a SKU measures with ascend-dmi, and where each figure comes from."""

    tflops_fp16: float  # per chip (die)
    execute_times: int  # ascend-dmi -f default for the product
    flops_per_execute: float  # the captures' value x duration / execute times
    power_w: float
    h2d_gbps: float
    d2h_gbps: float
    d2d_gbps: float
    d2d_size: int
    p2p_gbps: float | None
    source: str


HEALTHY: dict[str, Healthy] = {
    # Atlas 800T A2, 910B3 (the simulator's A2 chip)
    "910B3": Healthy(
        tflops_fp16=300.5, execute_times=360_000_000, flops_per_execute=313.548e12 * 1.702 / 360e6,
        power_w=239.3, h2d_gbps=24.926, d2h_gbps=24.9, d2d_gbps=1539.6, d2d_size=1073741824,
        p2p_gbps=54.68,
        source="FLOPS: 0.96 x the 313 TFLOPS peak, row shape of a 910B example "
        "(`0  360,000,000  1702  313.548 239.300003`, a public ascend-dmi client's parser comment); "
        "h2d 24.926 GB/s and P2P 54.68 GB/s: "
        "FlagOpen/FlagPerf interconnect-h2d / interconnect-P2P_intraserver ascend READMEs (Atlas 800T A2); "
        "d2d: 1539.6 GB/s, an A3 die's D2D of the same HBM2e (FlagRT/FlagPerf test_evidence_runner.py)"),
    # Atlas 800T A3: two dies per NPU; ascend-dmi -f -d N reports both dies of N's NPU (`0/1`)
    "Ascend910": Healthy(
        tflops_fp16=752.465 / 2, execute_times=432_000_000, flops_per_execute=752.465e12 * 1.703 / 432e6,
        power_w=338.5, h2d_gbps=58.125, d2h_gbps=57.875, d2d_gbps=1539.6, d2d_size=1073741824,
        p2p_gbps=391.2,
        source="FlagRT/FlagPerf base/toolkits/_common/ascend/A3 fixtures (compute_fp16_26.1, "
        "bandwidth_table_26.1, p2p_card_26.1) and test_evidence_runner.py (D2D 1539.6 GB/s)"),
    # Atlas 300I Duo, 310P3
    "310P3": Healthy(
        tflops_fp16=88.475, execute_times=600_000_000, flops_per_execute=88.475e12 * 14.222 / 600e6,
        power_w=85.1999969, h2d_gbps=24.9, d2h_gbps=24.9, d2d_gbps=190.0, d2d_size=268435456, p2p_gbps=None,
        source="FLOPS: the 310P capture (tests/parsers/real/ascend-dmi-f-int8-fp16_310p...); host links as "
        "the A2's Gen4 x16; d2d 0.93 x the LPDDR4X 204.8 GB/s"),
}

_RULE = "-" * 89
_INVALID_DEVICE = "Error code [0xa] is displayed. The device ID does not exist or is invalid.\n"
USAGE = ("Usage: ascend-dmi [-h] [-v] [-i] [-c] [-f] [--bw] [-l] [-p] [--sq] [--dg] [-r]\n"
         "ascend-dmi: error: unsupported option combination (the simulator implements -f and --bw)\n")


def _spread(logic: int) -> float:
    """A deterministic per-device spread below the healthy figure (0 to 1.6 %): no two devices read alike."""
    return 1.0 - 0.004 * ((logic * 7) % 5)


def _healthy(state: dict) -> Healthy:
    name = state["product"]["chip_name"]
    if name not in HEALTHY:
        raise ToolError(f"ascend-dmi: {name} is not supported by this toolbox\n", rc=1)
    return HEALTHY[name]


def _host_link_factor(state: dict, npu_id: int) -> float:
    """Trained link over the healthy link (min of both ends' capabilities): width x speed."""
    for fn in present_functions(state):
        if fn["npu_id"] == npu_id:
            t = trained_link(fn)
            cap, rp = fn["link_cap"], fn["root_port"]
            full_w, full_s = min(cap["width"], rp["width"]), min(cap["speed"], rp["speed"])
            return (t["width"] / full_w) * (t["speed"] / full_s)
    return 1.0


def _opts(args: list[str]) -> dict[str, str | bool]:
    """The options of one call, in any order (the toolbox guide: their order does not matter)."""
    out: dict[str, str | bool] = {}
    flags = {"-f": "f", "--flops": "f", "--bw": "bw", "-bw": "bw", "--bandwidth": "bw", "-q": "q",
             "--quiet": "q"}
    values = {"-t": "t", "--type": "t", "-d": "d", "--device": "d", "-s": "s", "--size": "s", "-et": "et",
              "--et": "et", "--execute-times": "et", "-fmt": "fmt", "--fmt": "fmt", "--format": "fmt",
              "-m": "m", "--mode": "m", "-ds": "ds", "--ds": "ds", "-dd": "dd", "--dd": "dd"}
    i = 0
    while i < len(args):
        a = args[i]
        if a in flags:
            out[flags[a]] = True
            i += 1
        elif a in values and i + 1 < len(args):
            out[values[a]] = args[i + 1]
            i += 2
        else:
            raise ToolError(USAGE, rc=1)
    return out


def _device(state: dict, value: str | bool | None) -> tuple[dict, dict]:
    hit = find_chip_by_logic(state, int(value)) if isinstance(value, str) and value.isdigit() else None
    if value is None:
        hit = all_chips(state)[0] if all_chips(state) else None
    if hit is None:
        raise ToolError(_INVALID_DEVICE, rc=1)
    return hit


def _flops(state: dict, o: dict) -> str:
    kind = str(o.get("t", "fp16")).lower()
    if kind != "fp16":
        raise ToolError(f"ascend-dmi: the simulator measures fp16 only, not {kind}\n", rc=1)
    h = _healthy(state)
    npu, _chip = _device(state, o.get("d"))
    # An A3 NPU's two dies are measured together (`0/1`): the value is their sum.
    chips = npu["chips"] if len(npu["chips"]) > 1 and state["product"]["family"] != "310p" else [_chip]
    value = sum(h.tflops_fp16 * _spread(c["logic_id"]) * c.get("perf", {}).get("flops", 1.0) for c in chips)
    label = "/".join(str(c["logic_id"]) for c in chips)
    times = h.execute_times
    duration = round(times * h.flops_per_execute / (value * 1e12) * 1000)
    row = f"    {label:<14}{times:<21,}{duration:<20}{value:<19.3f}{h.power_w:g}"
    header = f"    {'Device':<14}{'Execute Times':<21}{'Duration(ms)':<20}{'TFLOPS@FP16':<19}Power(W)"
    return "\n".join([_RULE, header, _RULE, row, _RULE]) + "\n"


def _bandwidth(state: dict, o: dict) -> str:
    kind = str(o.get("t", "")).lower()
    if kind == "p2p":
        return _p2p(state)
    if kind not in ("h2d", "d2h", "d2d"):
        raise ToolError("ascend-dmi: the simulator measures -t h2d, d2h, d2d or p2p\n", rc=1)
    h = _healthy(state)
    npu, chip = _device(state, o.get("d"))
    spread = _spread(chip["logic_id"])
    if kind == "d2d":
        size, times = h.d2d_size, 1
        bw = h.d2d_gbps * spread * chip.get("perf", {}).get("hbm", 1.0)
    else:
        size = int(o["s"]) if isinstance(o.get("s"), str) and str(o["s"]).isdigit() else 536870912
        times = int(o["et"]) if isinstance(o.get("et"), str) and str(o["et"]).isdigit() else 40
        base = h.h2d_gbps if kind == "h2d" else h.d2h_gbps
        bw = base * spread * _host_link_factor(state, npu["id"])
    elapsed = round(size * times / (bw * 1e9) * 1e6)
    header = f"{'ID':<4}{'Size(Bytes)':<13}{'Execute Times':<15}{'Bandwidth(GB/s)':<17}Elapsed Time(us)"
    row = f"{chip['logic_id']:<4}{size:<13}{times:<15}{bw:<17.3f}{elapsed}"
    return "\n".join(["Bandwidth Test", header, row]) + "\n"


def _p2p(state: dict) -> str:
    h = _healthy(state)
    if h.p2p_gbps is None:
        raise ToolError("ascend-dmi: p2p is not supported on this product\n", rc=1)
    chips = [c for _npu, c in all_chips(state)]
    ids = [c["logic_id"] for c in chips]
    npu_of = {c["logic_id"]: n["id"] for n, c in all_chips(state)}
    down = {tuple(sorted(p)) for p in state.get("hccs_down", [])}
    lines = []
    for title, both in (("Unidirectional Peer to Peer Test", 1), ("Bidirectional Peer to Peer Test", 2)):
        lines += [title, (" " * 7 + "".join(f"{d:<8}" for d in ids)).rstrip()]
        for s in ids:
            cells = []
            for d in ids:
                if d == s:
                    cells.append("0")
                    continue
                if tuple(sorted((s, d))) in down:  # through the host: the slower end's PCIe link
                    v = min(h.h2d_gbps * _host_link_factor(state, npu_of[x]) for x in (s, d)) * 0.9
                else:
                    v = h.p2p_gbps * min(_spread(s), _spread(d))
                cells.append(f"{v * both:.1f}")
            lines.append((f"{s:<7}" + "".join(f"{c:<8}" for c in cells)).rstrip())
        lines.append("")
    return "\n".join(lines[:-1]) + "\n"


def run(state: dict, args: list[str]) -> str:
    """One `ascend-dmi` call; ToolError for what the real tool rejects."""
    o = _opts(args)
    if not o.get("q"):
        # Without -q the tool asks to confirm first; probes always pass -q (stdin is /dev/null there).
        raise ToolError("This test will affect the business on this server. To ensure the correctness and "
                        "accuracy of the test, perform the operation separately.Do you want to "
                        "continue?(Y/N)\n", rc=1)
    if o.get("f"):
        return _flops(state, o)
    if o.get("bw"):
        return _bandwidth(state, o)
    raise ToolError(USAGE, rc=1)
