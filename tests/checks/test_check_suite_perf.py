"""The performance checks against the SKU on synthetic snapshots (the simulator's performance faults) and
the collectives' records (matmul, all-reduce)."""

from __future__ import annotations

import pytest
from checks_fakenode import (
    fake_host,
    judge,
    only,
)

from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import ProbeResult, Snapshot

# ---------------------------------------------------------------- collective (tests/cluster/test_collective*)


def _collective(check_id: str, rec) -> dict[str, str]:
    from collective_support import snapshots

    hosts = snapshots(rec)
    report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, load_profile("atlas-800t-a2")),
                        select_checks("full", [check_id]))
    return {r.host: r.status for r in report.results}


def test_npu_matmul():
    from collective_support import captured, even, scaled

    assert set(_collective("npu.matmul", even(captured())).values()) == {"pass"}
    slow = _collective("npu.matmul", scaled(even(captured()), 0.3, host="node02", kind="matmul"))
    assert slow == {"node01": "pass", "node02": "fail", "node03": "pass"}


def test_hccl_allreduce():
    from collective_support import captured, even, scaled

    assert set(_collective("hccl.allreduce", even(captured())).values()) == {"pass"}
    slow = _collective("hccl.allreduce", scaled(even(captured()), 0.2, host="node01", group="pair:"))
    assert slow == {"node01": "fail", "node02": "pass", "node03": "pass"}


# ---------------------------------------------------------------- performance against the SKU (issue 29)

PERF = ("npu.flops", "npu.hbm_bandwidth", "npu.h2d_bandwidth", "npu.d2h_bandwidth", "npu.p2p_bandwidth")
#: each performance fault of the simulator, and the one check it must fail
PERF_FAULTS = {
    "npu.flops": ("npu-throttle", {"npu": 1, "factor": 0.6}, "device 1"),
    "npu.hbm_bandwidth": ("hbm-degraded", {"npu": 2, "factor": 0.5}, "device 2"),
    "npu.h2d_bandwidth": ("pcie-width", {"npu": 3, "width": 8}, "device 3"),
    "npu.d2h_bandwidth": ("pcie-width", {"npu": 3, "width": 8}, "device 3"),
    "npu.p2p_bandwidth": ("hccs-link-down", {"device": 0, "other": 5}, "device 0 -> 5"),
}


def _perf(host, profile="atlas-800t-a2"):
    return {cid: r for cid, r in judge(host, profile=profile, select=list(PERF)).items() if cid in PERF}


@pytest.mark.parametrize("hardware", ["atlas-800t-a2", "atlas-800t-a3", "atlas-300i-duo"])
def test_perf_checks_pass_a_healthy_node_with_measured_expected_floor_and_source(hardware):
    results = _perf(fake_host(hardware=hardware), profile=hardware)
    want = {c: "pass" for c in PERF}
    if hardware == "atlas-300i-duo":
        want["npu.p2p_bandwidth"] = "skip"  # no HCCS between inference cards
    assert {c: r.status for c, r in results.items()} == want, {c: r.message for c, r in results.items()}
    lines = "\n".join(results["npu.h2d_bandwidth"].evidence)
    assert "measured" in lines and "expected" in lines and "floor" in lines and "source:" in lines


def _one_fault(check_id):
    kind, params, subject = PERF_FAULTS[check_id]
    results = _perf(fake_host(faults=[(kind, params)]))
    bad = {c: r.status for c, r in results.items() if r.status != "pass"}
    # pcie-width slows both copy directions: it fails exactly h2d and d2h
    both = {"npu.h2d_bandwidth", "npu.d2h_bandwidth"}
    assert bad == ({c: "fail" for c in both} if check_id in both else {check_id: "fail"})
    r = results[check_id]
    assert subject in r.message and "floor" in r.message and "the absolute floor binds" in r.message
    return r


def test_npu_flops():
    r = _one_fault("npu.flops")
    assert "below its floor 266.1 TFLOPS (0.85 x 313 expected for 910B3)" in r.message


def test_npu_hbm_bandwidth():
    _one_fault("npu.hbm_bandwidth")


def test_npu_h2d_bandwidth():
    r = _one_fault("npu.h2d_bandwidth")
    assert "below its floor 22 GB/s" in r.message  # a x8 link halves the copy: ~12.4 of ~24.9 GB/s


def test_npu_d2h_bandwidth():
    _one_fault("npu.d2h_bandwidth")


def test_npu_p2p_bandwidth():
    r = _one_fault("npu.p2p_bandwidth")
    assert "device 5 -> 0" in r.message  # both directions of the downed link


def test_perf_a_uniformly_slow_fleet_fails_on_the_floor_and_one_slow_device_warns():
    from ascend_ready.checks.registry import select_checks as sel

    slow = [fake_host(f"node0{i}", index=i, faults=[("npu-throttle", {"npu": "all", "factor": 0.6})])
            for i in range(1, 3)]
    prof = load_profile("atlas-800t-a2")
    report = run_checks(Snapshot(hosts={h.name: h for h in slow}), {h.name: prof for h in slow},
                        sel("full", select=["npu.flops"]))
    assert {r.host: r.status for r in report.results} == {"node01": "fail", "node02": "fail"}
    # above the floor but more than 10 % under the fleet median: a warning naming the fleet as what binds
    # (on an A3: its measured FLOPS sit 14 % above the floor, room for a band between floor and fleet)
    a3 = load_profile("atlas-800t-a3")
    hosts = [fake_host("node01", "atlas-800t-a3", index=1),
             fake_host("node02", "atlas-800t-a3", index=2,
                       faults=[("npu-throttle", {"npu": 2, "factor": 0.87})])]
    report = run_checks(Snapshot(hosts={h.name: h for h in hosts}), {h.name: a3 for h in hosts},
                        sel("full", select=["npu.flops"]))
    by_host = {r.host: r for r in report.results}
    assert by_host["node01"].status == "pass"
    assert by_host["node02"].status == "warn" and "device 4/5" in by_host["node02"].message
    assert "the fleet median binds" in by_host["node02"].message


def test_perf_checks_say_ascend_dmi_is_missing():
    host = fake_host(outputs={"ascend-dmi-d2d.0": ProbeResult(
        command="ascend-dmi --bw -t d2d -d 0 -q", rc=127, stderr="sh: ascend-dmi: not found\n")})
    r = _perf(host)["npu.hbm_bandwidth"]
    assert r.status == "error" and "ascend-dmi is not installed" in r.message


def test_perf_verdicts_carry_measured_expected_floor_and_source_into_json_and_html():
    from ascend_ready.checks.html_report import render_html

    host = fake_host(faults=[("pcie-width", {"npu": 3, "width": 8})])
    report = run_checks(Snapshot(hosts={host.name: host}), {host.name: load_profile("atlas-800t-a2")},
                        select_checks("full", select=["npu.h2d_bandwidth"]))
    text = report.model_dump_json()
    html = render_html(report)
    for shown in (text, html):
        assert "device 3: measured 12.41 GB/s, expected 31.5 GB/s (39 % of it)" in shown
        assert "floor 22 GB/s (0.7 x 31.5 expected for 910B3; source: Atlas 800T A2" in shown
        assert "fail (both the absolute floor and the fleet median bind)" in shown


def test_npu_matmul__a_uniformly_slow_npu_fleet_fails_on_the_skus_floor():
    """No profile floor (the bundled A2 profile leaves it to sku_perf.yml): 0.85 x 313 TFLOPS on a 910B3."""
    import dataclasses

    from collective_support import captured, even, snapshots

    rec = even(captured())
    healthy = dataclasses.replace(rec, device="npu", measurements=[
        dataclasses.replace(m, value=300.0) if m.kind == "matmul" else m for m in rec.measurements])
    slow = dataclasses.replace(healthy, measurements=[  # 40 % slow, every device alike: no straggler
        dataclasses.replace(m, value=180.0) if m.kind == "matmul" else m for m in healthy.measurements])
    prof = load_profile("atlas-800t-a2")
    assert prof.matmul_min_tflops is None
    for record, want in ((healthy, "pass"), (slow, "fail")):
        hosts = snapshots(record)
        for name, snap in hosts.items():  # each host's npu-smi table names its chips (910B3)
            snap.probes["npu-smi-info"] = fake_host(name).probes["npu-smi-info"]
        report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, prof),
                            select_checks("full", ["npu.matmul"]))
        assert {r.status for r in report.results} == {want}, [r.message for r in report.results]
    assert "below the profile's 266.1" in report.results[0].message


# ---------------------------------------------------------------- silent data corruption (test_sdc.py)


def test_npu_sdc():
    from checks_fakenode import SDC_DATA

    ok = only("npu.sdc", fake_host())  # a clean CPU run on an A2 host: right bits, its NPUs not exercised
    assert ok.status == "warn" and ok.message.startswith("it ran on cpu, not on the 8 NPU(s) npu-smi lists")
    flipped = (SDC_DATA / "cpu-2ranks-device1-bit3.txt").read_text()
    bad = only("npu.sdc", fake_host(outputs={"npu-sdc": flipped}))
    assert bad.status == "fail" and bad.message.startswith("cpu:1 (cpu) matmul-exact fp32")
