"""Burn-in (tier burn-in, `--duration D`): sustained load on every device for D (matmul, copies, an all-reduce
across the devices) with the chips and device NICs sampled in the same window (checks/resources/burn_in.py).
A node fails on a thermal limit, throttling, ECC growth, a link flap or NIC error counters that grow, a drop
in performance from the window's first part to its last (the all-reduce's bus bandwidth included), a device
missing from the all-reduce, or a device below its SKU's floor or the fleet's; each result carries the
curves it judged (the report's `series`, plotted on the HTML page). Judging: checks/burn_in.py.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median

import pytest

from ascend_ready.checks.burn_in import (
    DROP_FRACTION,
    FLEET_FLOOR,
    THROTTLE_TEMP_C,
    counter_growth,
    drop_over_time,
    throttled_at,
)
from ascend_ready.checks.registry import check, evidence, not_judged, series, warn
from ascend_ready.checks.resources import BurnIn, NodeSku

_AGAIN = "ascend-check --tier burn-in --duration 10m"
_ECC = ("hbm_single_bit_errors", "hbm_double_bit_errors", "hbm_single_bit_isolated_pages",
        "hbm_double_bit_isolated_pages", "ddr_single_bit_errors", "ddr_double_bit_errors")


def _chips(host) -> dict[str, list[tuple[float, object]]]:
    """`npu N chip C` -> (seconds into the window, that chip's `npu-smi info -t common` values), in order."""
    out: dict[str, list[tuple[float, object]]] = defaultdict(list)
    for frame, view in host.resource(BurnIn).parsed("npu-smi-common"):
        for chip in view.chips:
            out[f"npu {frame.subject} chip {chip.chip_id}"].append((frame.t, chip))
    if not out:
        not_judged("the burn-in took no `npu-smi info -t common` sample", hint=f"run {_AGAIN} again")
    return dict(out)


def _curve(metric: str, unit: str, subject: str, samples, attr: str) -> list[float]:
    points = [(t, getattr(m, attr)) for t, m in samples]
    series(metric, unit, subject, points)
    return [v for _, v in points if v is not None]


def _figures(run) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """metric (matmul, allreduce, hbm, h2d, d2h) -> device -> (seconds into the window, figure) per round."""
    out: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in run.rounds:
        for dev, v in r.matmul.items():
            out["matmul"][dev].append((r.t, v))
        for dev, v in r.allreduce.items():
            out["allreduce"][dev].append((r.t, v))
        for metric in ("hbm", "h2d", "d2h"):
            for dev, v in r.copies.figures(metric).items():
                out[metric][dev].append((r.t, v))
    return out


_UNIT = {"matmul": "TFLOPS", "allreduce": "GB/s", "hbm": "GB/s", "h2d": "GB/s", "d2h": "GB/s"}


def _fleet_matmul(host) -> list[float]:
    """Every NPU device's median matmul TFLOPS of every host judged together (memoised per run)."""
    def medians(peer) -> list[float]:
        run = peer.resource(BurnIn).run
        if not (run.rounds and run.rounds[0].copies.device == "npu"):
            return []
        return [median(v for _, v in pts) for pts in _figures(run)["matmul"].values()]

    return [v for values in host.fleet.per_host("burn_in.load", medians).values() for v in values]


@check(
    "burn_in.load",
    title="the sustained load ran on every device for the whole window, without a drop from its first part "
    "to its last, and no device is below its SKU's floor or the fleet's",
    severity="major",
    tier="burn-in",
    reads=[BurnIn, NodeSku],
    fix="Look at the named device: npu-smi info -t common (its clock and temperature while loaded), its "
    f"cooling and power supply, other processes on it; run {_AGAIN} again; replace a device that keeps "
    "slowing down",
)
def test_load(host):
    run = host.resource(BurnIn).run
    if run.load_rc != 0:
        tail = run.load_stderr.strip().splitlines()[-3:]
        evidence(tail)
        raise AssertionError(f"the load exited {run.load_rc} after {len(run.rounds)} round(s): "
                             + (tail[-1] if tail else "no message"))
    if not run.rounds:
        raise AssertionError(f"the load made no round in {run.duration_s:g} s")
    kind = run.rounds[0].copies.device
    figures = _figures(run)
    start, end = run.rounds[0].t, run.rounds[-1].t
    evidence(f"{len(run.rounds)} round(s) on {kind} from {start:g} s to {end:g} s of a {run.duration_s:g} s "
             f"burn-in; its first and last fifth compared (a drop over {DROP_FRACTION:.0%} fails)")
    for metric, devices in figures.items():
        for dev, points in sorted(devices.items()):
            name = f"{metric}_{_UNIT[metric].replace('/', 'p').lower()}"
            series(name, _UNIT[metric], f"device {dev}", points)
    if kind != "npu":
        warn(f"not judged: torch on {host.name} sees no NPU, only {kind}; the load ran there for "
             f"{end - start:.0f} s, but a {kind}'s figures say nothing of the devices (make torch_npu see "
             "them)")
    _judge_drop(figures, start, end)
    if kind != "cpu":
        _judge_allreduce(run.rounds[0].copies.count, figures["allreduce"])
    _judge_npu_load(host, figures, on_npu=kind == "npu")


def _judge_allreduce(count: int, devices: dict[str, list[tuple[float, float]]]) -> None:
    """Every device took part in the rounds' all-reduce (one rank per device), when there is more than one."""
    if count < 2:
        evidence("one device: no all-reduce across devices in the load")
        return
    missing = [str(d) for d in range(count) if not devices.get(str(d))]
    assert not missing, (f"the load's all-reduce across the {count} devices has no figure for device(s) "
                         f"{', '.join(missing)}: the links between them were not loaded")
    evidence("all-reduce bus bandwidth, median per device: " + ", ".join(
        f"{dev} {median(v for _, v in pts):.4g} GB/s" for dev, pts in sorted(devices.items())))


def _judge_drop(figures, start: float, end: float) -> None:
    dropped = []
    for metric, devices in figures.items():
        for dev, points in sorted(devices.items()):
            drop = drop_over_time(points, start, end)
            if drop is None:
                continue
            evidence(f"device {dev} {metric}: {drop.first:.4g} -> {drop.last:.4g} {_UNIT[metric]} "
                     f"({-drop.fraction:+.1%})")
            if drop.fraction > DROP_FRACTION:
                dropped.append(f"device {dev} {metric} dropped {drop.fraction:.0%} ({drop.first:.4g} -> "
                               f"{drop.last:.4g} {_UNIT[metric]})")
    assert not dropped, "; ".join(dropped) + " from the window's first part to its last"


def _judge_npu_load(host, figures, *, on_npu: bool) -> None:
    chips = _chips(host)
    unread = [s for s, samples in chips.items() if all(m.aicore_usage_pct is None for _, m in samples)]
    if unread:
        not_judged(f"npu-smi printed no AI Core use for {', '.join(unread)} in the window: whether the load "
                   "reached them is unknown",
                   hint=f"npu-smi info -t common -i N on that node; run {_AGAIN} again")
    idle = [s for s, samples in chips.items() if not any(m.aicore_usage_pct for _, m in samples)]
    assert not idle, (f"npu-smi shows no AI Core use on {', '.join(idle)} while the load ran: the load "
                      "did not reach those chips")
    mine = {dev: median(v for _, v in pts) for dev, pts in sorted(figures["matmul"].items())}
    if on_npu:
        _judge_sku_floor(host, mine)
    pool = _fleet_matmul(host)
    if len(pool) < 2:
        evidence("one device in the fleet's pool: no floor relative to the fleet")
        return
    floor = FLEET_FLOOR * median(pool)
    evidence(f"fleet floor {floor:.4g} TFLOPS ({FLEET_FLOOR:g} x the median {median(pool):.4g} of "
             f"{len(pool)} devices)")
    slow = [f"device {dev} {v:.4g} TFLOPS" for dev, v in mine.items() if v < floor]
    assert not slow, f"below the fleet's floor {floor:.4g} TFLOPS: " + ", ".join(slow)


def _judge_sku_floor(host, mine: dict[str, float]) -> None:
    """Each device's median FP16 TFLOPS over the window against its SKU's floor (sku_perf.yml, the floor
    npu.flops judges the same torch.mm shape by); a chip the file lacks is judged against the fleet only."""
    node = host.resource(NodeSku)
    exp = node.expected("matmul")
    if exp is None:
        evidence(f"chip {node.chip_name!r} (npu-smi info) has no FP16 figure in sku_perf.yml: no absolute "
                 "floor, judged against the fleet only")
        return
    evidence(f"SKU {exp.sku} floor {exp.floor:g} TFLOPS ({exp.fraction:g} x {exp.expected:g}, {exp.source})")
    slow = [f"device {dev} {v:.4g} TFLOPS" for dev, v in mine.items() if v < exp.floor]
    assert not slow, (f"below the {exp.sku} floor {exp.floor:g} TFLOPS over the window: " + ", ".join(slow)
                      + " (the absolute floor binds)")


@check(
    "burn_in.thermal",
    title=f"no chip reaches {THROTTLE_TEMP_C} C under the sustained load (npu-smi info -t common)",
    severity="major",
    tier="burn-in",
    reads=[BurnIn],
    fix="Check the node's cooling (fans: ipmitool sdr, blocked air inlets, the room's temperature) and the "
    f"chip's power cap; run {_AGAIN} again once fixed",
)
def test_thermal(host):
    hot, gaps = [], []
    for subject, samples in _chips(host).items():
        temps = _curve("temperature_c", "C", subject, samples, "temperature_c")
        _curve("power_w", "W", subject, samples, "power_w")
        if not temps:
            not_judged(f"{subject}: npu-smi printed no temperature in {len(samples)} sample(s)")
        evidence(f"{subject}: {min(temps)}..{max(temps)} C over {len(samples)} sample(s)")
        over = [(t, m.temperature_c) for t, m in samples if (m.temperature_c or 0) >= THROTTLE_TEMP_C]
        if over:
            hot.append(f"{subject} reached {max(v for _, v in over)} C at {over[0][0]:g} s")
        unread = [f"{t:g} s" for t, m in samples if m.temperature_c is None]
        if unread:  # a sample without a temperature (NA) could have been the hot one
            gaps.append(f"{subject}: no temperature at {', '.join(unread)}")
    assert not hot, "; ".join(hot) + f" (the chip throttles above {THROTTLE_TEMP_C} C)"
    if gaps:
        not_judged("npu-smi printed no temperature in some samples: " + "; ".join(gaps),
                   hint=f"npu-smi info -t common -i N on that node; run {_AGAIN} again")


@check(
    "burn_in.throttle",
    title="no chip runs loaded below its rated AI Core clock (npu-smi info -t common: curFreq under Freq)",
    severity="major",
    tier="burn-in",
    reads=[BurnIn],
    fix="A loaded chip below its clock is capped by heat or power: npu-smi info -t temp / -t power -i N, the "
    f"cooling and the power supply; run {_AGAIN} again; replace a card that keeps throttling",
)
def test_throttle(host):
    throttled, gaps = [], []
    for subject, samples in _chips(host).items():
        _curve("aicore_usage_pct", "%", subject, samples, "aicore_usage_pct")
        _curve("aicore_cur_freq_mhz", "MHz", subject, samples, "aicore_cur_freq_mhz")
        rows = [(t, m.aicore_usage_pct, m.aicore_cur_freq_mhz, m.aicore_freq_mhz) for t, m in samples]
        if all(r[2] is None or r[3] is None for r in rows):
            not_judged(f"{subject}: npu-smi printed no AI Core clock (Aicore Freq / curFreq)")
        at = throttled_at(rows)
        if at is not None:
            _, busy, cur, rated = next(r for r in rows if r[0] == at)
            throttled.append(f"{subject} at {busy} % AI Core ran at {cur} of {rated} MHz from {at:g} s")
        unread = [f"{t:g} s" for t, busy, cur, rated in rows if None in (busy, cur, rated)]
        if unread:  # a sample without its use or clock (NA) could have been the throttled one
            gaps.append(f"{subject}: no AI Core use or clock at {', '.join(unread)}")
    assert not throttled, "throttled: " + "; ".join(throttled)
    if gaps:
        not_judged("npu-smi printed no AI Core use or clock in some samples: " + "; ".join(gaps),
                   hint=f"npu-smi info -t common -i N on that node; run {_AGAIN} again")


def _readings(host, kind: str, values) -> tuple[dict, dict]:
    """(first, last) reading of `kind` per subject: subject -> counter -> value."""
    first: dict[str, dict[str, int]] = {}
    last: dict[str, dict[str, int]] = {}
    times: dict[str, list[float]] = {}
    for frame, parsed in host.resource(BurnIn).parsed(kind):
        for subject, counters in values(frame, parsed).items():
            (last if frame.end else first)[subject] = counters
            times.setdefault(subject, []).append(frame.t)
    if not first or not last:
        not_judged(f"the burn-in lacks its first or last {kind} reading", hint=f"run {_AGAIN} again")
    for subject, counters in last.items():
        for name in counters:
            if subject in first and name in first[subject]:
                series(name, "count", subject,
                       zip(times[subject], (first[subject][name], counters[name]), strict=True))
    return first, last


def _ecc(frame, view) -> dict[str, dict[str, int]]:
    return {f"npu {frame.subject} chip {c.chip_id}": {k: getattr(c, k) for k in _ECC
                                                      if getattr(c, k) is not None} for c in view.chips}


@check(
    "burn_in.ecc",
    title="no chip's ECC error count grows under the sustained load (npu-smi info -t ecc)",
    severity="critical",
    tier="burn-in",
    reads=[BurnIn],
    fix="Growing HBM ECC errors under load point at failing memory: run ascend-dmi --dg -i hbm on the chip "
    "and have the card replaced if they keep growing (npu-smi clear -t ecc-info -i N resets the counts)",
)
def test_ecc(host):
    first, last = _readings(host, "npu-smi-ecc", _ecc)
    grew = counter_growth(first, last, _ECC)
    evidence(f"{len(last)} chip(s) read at the window's start and end")
    assert not grew, "ECC errors grew: " + "; ".join(g.line() for g in grew)


def _link(frame, stat) -> dict[str, dict[str, int]]:
    counters = {"link_up_count": stat.link_up_count, "link_records": len(stat.records)}
    if stat.link_down_count is not None:
        counters["link_down_count"] = stat.link_down_count
    return {f"device {frame.subject}": counters}


def _errors(frame, stat) -> dict[str, dict[str, int]]:
    return {f"device {frame.subject}": {k: v for k, v in stat.counters.items() if "err" in k or "drop" in k}}


@check(
    "burn_in.links",
    title="no device NIC flaps or counts errors under the sustained load (hccn_tool -link_stat / -stat)",
    severity="major",
    tier="burn-in",
    reads=[BurnIn],
    fix="A link that flaps under load: the optical module, the cable and the switch port (hccn_tool -i N "
    "-optical -g, -link_stat -g); growing error counters: the same, and the switch's counters of that port",
)
def test_links(host):
    if not host.profile.hccn:
        pytest.skip(f"{host.profile.product} has no RoCE device NICs")
    first, last = _readings(host, "hccn-link-stat", _link)
    flaps = counter_growth(first, last)
    efirst, elast = _readings(host, "hccn-stat", _errors)
    errors = counter_growth(efirst, elast)
    evidence(f"{len(last)} device NIC(s) read at the window's start and end")
    problems = [f"link flapped: {g.line()}" for g in flaps] + [f"errors grew: {g.line()}" for g in errors]
    assert not problems, "; ".join(problems)
