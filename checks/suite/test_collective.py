"""Collective bandwidth and stragglers (full tier): matmul TFLOPS per device and the all-reduce across the
hosts, run under torchrun by the controller, each judged against the fleet and the profile's floors."""

from __future__ import annotations

import pytest

from ascend_ready.checks.cluster.collective import judge_allreduce, judge_matmul, straggler_ratio, sweep
from ascend_ready.checks.perf_sku import expected_for
from ascend_ready.checks.registry import check, evidence, not_judged
from ascend_ready.checks.resources import CollectiveResult, NodeSku, NpuSmi
from ascend_ready.errors import AscendReadyError


def _sku_floor(host, metric: str) -> float | None:
    """The profile's floor where it sets one, else the SKU's (sku_perf.yml, from the chip npu-smi names)."""
    try:
        found = host.resource(NodeSku).sku
    except AscendReadyError:  # npu-smi's own checks say why it is unreadable: no SKU floor then
        return None
    if found is None:
        return None
    exp = expected_for(*found, metric, dtype="bf16")
    if exp is not None:
        evidence(f"SKU {found[0]} floor {exp.floor:g} ({exp.how}; source: {exp.source})")
    return None if exp is None else exp.floor


def _record(host, what: str):
    """This host's run, or a skip (one host: nothing to compare or all-reduce with) or an error naming it."""
    if len(host.fleet) < 2:
        pytest.skip(f"the {what} is judged across hosts: judge two or more together "
                    "(ascend-check -i INVENTORY --tier full)")
    rec = host.collective.record
    if host.name in rec.errors:
        not_judged(f"{host.name}: {rec.errors[host.name]}",
                   hint="fix what the message names, then run ascend-check --tier full on the hosts again")
    if not any(m.host == host.name for m in rec.measurements):  # neither a result nor a reason: never a pass
        not_judged(f"{host.name}: the collective run recorded nothing for this host",
                   hint="run ascend-check --tier full on the hosts again (with this host in the inventory)")
    return rec


@check(
    "npu.matmul",
    title="every device's matmul TFLOPS is in line with the fleet and the profile (no straggler)",
    severity="major",
    tier="full",
    reads=[CollectiveResult, NodeSku, NpuSmi],
    fix="Look at the named device or node: npu-smi info (clock throttling, temperature, power), other "
    "processes on it, its CPU and NUMA binding; replace a device that stays slow",
)
def test_matmul(host):
    rec = _record(host, "matmul")
    problems, lines = judge_matmul(rec, host.name, ratio=straggler_ratio(rec, host.profile.straggler_ratio),
                                   floor=host.profile.matmul_min_tflops or _sku_floor(host, "matmul"))
    evidence(lines)
    assert not problems, "; ".join(problems)


@check(
    "hccl.allreduce",
    title="the all-reduce across the hosts reaches the profile's bus bandwidth; no straggler node or pair",
    severity="major",
    tier="full",
    reads=[CollectiveResult, NodeSku, NpuSmi],
    fix="For a straggler node: its device NICs (hccn_tool -i N -link -g, -stat -g), its CPU load and "
    "binding; for a slow pair: the switch ports and cables between the two; then run the check again",
)
def test_allreduce(host):
    rec = _record(host, "all-reduce")
    problems, lines = judge_allreduce(rec, host.name,
                                      ratio=straggler_ratio(rec, host.profile.straggler_ratio),
                                      floor=host.profile.allreduce_min_busbw_gbps)
    node_floor = _sku_floor(host, "allreduce_node") if rec.device == "npu" else None
    own = sweep(rec.measurements, f"node:{host.name}")
    if node_floor is not None and own and own[-1].value < node_floor:
        problems.append(f"{host.name}'s {own[-1].ranks} devices all-reduce among themselves at "
                        f"{own[-1].value:.3g} GB/s busbw, below the SKU's in-node floor {node_floor:g} GB/s")
    evidence(lines)
    assert not problems, "; ".join(problems)
