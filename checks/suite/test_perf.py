"""Performance against the SKU (full tier): Ascend DMI's FLOPS, device-memory, host-device and device-device
bandwidth per device (with torch where ascend-dmi is not installed), each judged against the
expected figure of the chip `npu-smi info` names (checks/profiles/sku_perf.yml) and against the fleet.

A device below its absolute floor fails, naming it; one above the floor but more than 10 % below the fleet
median (every device of the hosts judged together, of the same product) warns; the message says which of
the two binds. Each result's evidence line gives measured, expected, % of it, the floor and its source.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from ascend_ready.checks.perf_sku import UNITS, Expected, judge
from ascend_ready.checks.registry import check, evidence, not_judged, warn
from ascend_ready.checks.resources import DeviceCopies, DeviceFlops, NodeSku, NpuSmi
from ascend_ready.checks.resources.perf_torch import Copies

Values = Callable[[object], dict[str, float]]
Measured = Callable[[object], Copies]


def _expected(host, metric: str) -> Expected | None:
    """The SKU's expected figure for `metric`, with an evidence line saying which SKU and why."""
    node = host.resource(NodeSku)
    if node.sku is None:
        evidence(f"chip {node.chip_name!r} (npu-smi info) is not in sku_perf.yml: no absolute floor, "
                 "judged against the fleet only")
        return None
    exp = node.expected(metric, link_width=host.profile.pcie_width)
    if exp is not None:
        evidence(f"SKU {exp.sku} (npu-smi names the chips {node.chip_name}): expected {exp.expected:g} "
                 f"{UNITS[metric]} ({exp.source}); healthy >= {exp.fraction:g} x it ({exp.fraction_source})")
    return exp


def _fleet(host, check_id: str, values: Values) -> dict[str, dict[str, float]]:
    """host -> its values, for every host of this product judged together (memoised per check)."""
    product = host.profile.product
    return host.fleet.per_host(f"{check_id}:{product}:perf", values, product=product)


def _judge(host, check_id: str, metric: str, values: Values, *, scale: Callable[[str], float] | None = None):
    mine = values(host)  # this host's own failure to measure is its error, raised here
    expected = _expected(host, metric)
    fleet = _fleet(host, check_id, values)
    pool = [v for vals in fleet.values() for v in vals.values()]
    if expected is None and len(pool) < 2:
        pytest.skip("no expected figure for this chip and nothing in the fleet to compare with")
    verdicts = []
    for subject, v in mine.items():
        exp = expected
        if exp is not None and scale is not None and scale(subject) != 1:
            f = scale(subject)
            exp = dataclasses.replace(exp, expected=exp.expected * f, floor=round(exp.floor * f, 1))
        verdicts += judge({subject: v}, unit=UNITS[metric], expected=exp, fleet=pool)
    evidence(v.line() for v in verdicts)
    failed = [v.problem() for v in verdicts if v.status == "fail"]
    assert not failed, "; ".join(failed) + " (the absolute floor binds)"
    slow = [v.problem() for v in verdicts if v.status == "warn"]
    if slow:
        warn("; ".join(slow) + " (the fleet median binds: every device is above its floor)")


def _dies(subject: str) -> float:
    """How many chips (dies) a FLOPS row covers: ascend-dmi -f on an A3 reports both dies (`device 0/1`)."""
    return float(len(subject.removeprefix("device ").split("/")))


def _flops(host) -> Copies:
    return host.resource(DeviceFlops).figures()


@check(
    "npu.flops",
    title="every device reaches its SKU's FP16 cube TFLOPS (ascend-dmi -f, else torch) and the fleet's",
    severity="major",
    tier="full",
    reads=[DeviceFlops, NodeSku, NpuSmi],
    fix="Look at the named device: npu-smi info -t common / -t temp (clock throttling, temperature above "
    "90 C, power cap), other processes on it; run ascend-dmi -f -d N again once it is idle and cool; "
    "replace a device that stays slow",
)
def test_flops(host):
    _judge_measured(host, "npu.flops", "matmul", _flops)


def _copies(metric: str) -> Measured:
    return lambda host: host.resource(DeviceCopies).figures(metric)


def _on_npu(measured: Measured) -> Values:
    """The node's figures from ascend-dmi, else torch; none of a node torch ran on without an NPU (a CPU's
    memory copy is no HBM figure, its matmul no cube's: they stay out of the fleet median)."""

    def read(host) -> dict[str, float]:
        got = measured(host)
        return got.values if got.device == "npu" else {}

    return read


def _judge_copies(host, check_id: str, metric: str) -> None:
    _judge_measured(host, check_id, metric, _copies(metric))


def _judge_measured(host, check_id: str, metric: str, measured: Measured) -> None:
    got = measured(host)
    evidence(f"measured with {got.source}")
    if got.device != "npu":
        shown = ", ".join(f"{k}: {v:.4g} {UNITS[metric]}" for k, v in got.values.items()) or "nothing"
        exp = _expected(host, metric)
        against = f"the {exp.sku} floor {exp.floor:g} {UNITS[metric]}" if exp else "an NPU floor"
        warn(f"not judged: torch on {host.name} sees no NPU, only {got.device} (measured {shown}), which "
             f"cannot be compared to {against}; make torch_npu see the devices (versions.torch_import) or "
             "install the MindCluster ToolBox (ascend-dmi)")
    if not got.values:
        if metric == "p2p":
            pytest.skip(f"{host.name} has one device: no pair to copy between")
        not_judged(f"{got.source}: no figure for any device", hint="run ascend-check --tier full again")
    _judge(host, check_id, metric, _on_npu(measured), scale=_dies if metric == "matmul" else None)


@check(
    "npu.hbm_bandwidth",
    title="every device's memory bandwidth (ascend-dmi d2d, else torch) reaches its SKU's HBM figure and the "
    "fleet's",
    severity="major",
    tier="full",
    reads=[DeviceCopies, NodeSku, NpuSmi],
    fix="Run ascend-dmi --dg -i hbm on the named device (the HBM diagnosis) and npu-smi info -t ecc; "
    "replace a device whose HBM stays slow or reports ECC errors",
)
def test_hbm_bandwidth(host):
    _judge_copies(host, "npu.hbm_bandwidth", "hbm")


@check(
    "npu.h2d_bandwidth",
    title="every device's host-to-device copy reaches its link's figure (ascend-dmi h2d, else torch) and the "
    "fleet's",
    severity="major",
    tier="full",
    reads=[DeviceCopies, NodeSku, NpuSmi],
    fix="Check the named device's PCIe link (pcie.link_width, pcie.link_speed: a x8 link halves the copy), "
    "its NUMA binding and the host's memory; reseat the card or fix the riser if the link trained narrow",
)
def test_h2d_bandwidth(host):
    _judge_copies(host, "npu.h2d_bandwidth", "h2d")


@check(
    "npu.d2h_bandwidth",
    title="every device's device-to-host copy reaches its link's figure (ascend-dmi d2h, else torch) and the "
    "fleet's",
    severity="major",
    tier="full",
    reads=[DeviceCopies, NodeSku, NpuSmi],
    fix="Check the named device's PCIe link (pcie.link_width, pcie.link_speed), its NUMA binding and the "
    "host's memory; reseat the card or fix the riser if the link trained narrow",
)
def test_d2h_bandwidth(host):
    _judge_copies(host, "npu.d2h_bandwidth", "d2h")


@check(
    "npu.p2p_bandwidth",
    title="every two devices of a node copy at their HCCS link's figure (ascend-dmi p2p, else torch) and the "
    "fleet's",
    severity="major",
    tier="full",
    reads=[DeviceCopies, NodeSku, NpuSmi],
    fix="Run ascend-dmi --sq -t hccs (HCCS signal quality) and npu-smi info -t hccs -i N for the named "
    "pair; a pair slow in one direction only points at one end's link: reseat or replace that card",
)
def test_p2p_bandwidth(host):
    found = host.resource(NodeSku).sku
    if found is not None and found[1].hccs is None:
        pytest.skip(f"{found[0]} cards have no HCCS between them ({found[1].hccs_source})")
    _judge_copies(host, "npu.p2p_bandwidth", "p2p")

