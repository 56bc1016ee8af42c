"""Every check on synthetic snapshots: passes on a healthy node, and each check has its test in a
test_check_suite*.py module (its fault fails or warns it, real captured samples included); fleet
comparisons, and probe timeouts and parse errors are errors, never passes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from checks_fakenode import (
    DF_HEADER,
    fake_host,
    judge,
    only,
)

from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import all_checks, select_checks
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import ProbeResult, Snapshot


@pytest.mark.parametrize("hardware", ["atlas-800t-a2", "atlas-800t-a3", "atlas-300i-duo"])
def test_healthy_node_passes_every_quick_check(hardware):
    results = judge(fake_host(hardware=hardware), profile=hardware, tier="quick")
    assert set(results) == {s.id for s in select_checks("quick")}
    bad = {cid: (r.status, r.message) for cid, r in results.items() if r.status not in ("pass", "skip")}
    assert bad == {}
    skipped = {cid for cid, r in results.items() if r.status == "skip"}
    fleet = {"fleet.hardware", "fleet.hccn", "fleet.os", "fleet.stack"}  # one host: nothing to compare
    assert fleet <= skipped
    skipped -= fleet
    if hardware == "atlas-300i-duo":  # no RoCE ports, no HBM
        assert skipped == {
            "hccl.conf",
            "hccl.ip",
            "hccl.link_up",
            "hccl.net_health",
            "hccl.tls",
            "npu.hbm_idle",
            "npu.hbm_usage",
            "npu.numa_affinity",
            "npu.topology",
        }
    elif hardware == "atlas-800t-a3":  # npu-smi prints no CPU affinity column on an A3
        assert skipped == {"npu.numa_affinity"}
    else:
        assert skipped == set()


#: this module and the ones beside it that test the checks by family
SUITE_MODULES = sorted(Path(__file__).parent.glob("test_check_suite*.py"))


def test_every_check_has_metadata_and_a_test_here():
    checks = all_checks()
    assert len(checks) >= 30
    for spec in checks.values():
        assert spec.probes and spec.title and spec.severity in ("critical", "major", "minor")
        assert spec.remediation is not None and spec.remediation.text
    tested = {
        node.name.split("__")[0]
        for module in SUITE_MODULES
        for node in ast.parse(module.read_text()).body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }
    for cid in checks:
        assert f"test_{cid.replace('.', '_')}" in tested, f"no test for {cid}"


# ---------------------------------------------------------------- fleet (more in test_check_fleet.py)


def _odd_one_out(check_id: str, **outputs: str):
    """Three simulated A2 hosts, node03 with `outputs`: the check's results by host."""
    hosts = {f"node0{i}": fake_host(f"node0{i}", index=i, outputs=outputs if i == 3 else None)
             for i in (1, 2, 3)}
    report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, load_profile("atlas-800t-a2")),
                        select_checks("quick", [check_id]))
    return {r.host: r for r in report.results}


def test_fleet_stack():
    r = _odd_one_out("fleet.stack", **{"driver-version": "Version=24.1.rc2\n"})
    assert [r[h].status for h in sorted(r)] == ["pass", "pass", "fail"]
    assert r["node03"].message.startswith("node03: driver is 24.1.rc2, the majority (2 of 3 nodes) has ")


def test_fleet_os():
    r = _odd_one_out("fleet.os", **{"kernel-headers": "kernel 4.19.90-24.4.v2101.ky10.aarch64\n"})
    assert r["node03"].status == "fail" and "kernel is 4.19.90-24.4.v2101.ky10.aarch64" in r["node03"].message


def test_fleet_hardware():
    r = _odd_one_out("fleet.hardware", **{"npu-smi-info": fake_host(hardware="atlas-800t-a3").probes[
        "npu-smi-info"].stdout})
    assert r["node03"].status == "fail"
    assert r["node03"].message.startswith("node03: npu_model is Ascend910, the majority (2 of 3 nodes) has")


def test_fleet_hccn():
    conf = fake_host().probes["hccn-conf"].stdout.replace("netmask_0=255.255.0.0", "netmask_0=255.255.255.0")
    r = _odd_one_out("fleet.hccn", **{"hccn-conf": conf})
    assert r["node03"].status == "fail"
    assert "hccn_netmask is 255.255.0.0/255.255.255.0, the majority" in r["node03"].message


# ---------------------------------------------------------------- could not judge


def test_hung_npu_smi_is_an_error_naming_the_command():
    hung = ProbeResult(command="npu-smi info", rc=124, timed_out=True, timeout_s=10, duration_s=10)
    results = judge(fake_host(outputs={"npu-smi-info": hung}), select=["npu.*"])
    for cid in ("npu.count", "npu.health", "npu.temperature", "npu.processes"):
        assert results[cid].status == "error"
        assert results[cid].message.startswith("`npu-smi info` timed out after 10 s")


def test_garbled_output_is_an_error_never_a_pass():
    r = only("npu.count", fake_host(outputs={"npu-smi-info": "+----+\n| hello |\n"}))
    assert r.status == "error" and r.message.startswith("cannot parse npu-smi-info")


def test_missing_probe_is_an_error():
    r = only("os.thp", fake_host(drop=("thp-enabled",)))
    assert r.status == "error" and "no output of probe 'thp-enabled'" in r.message


def test_group_override_changes_a_threshold():
    prof = load_profile().model_copy(update={"overrides": {"small": {"min_disk_free_gb": 1}}})
    df = DF_HEADER + "/dev/sda1 104857600 94371840 10485760 90% /\n"
    host = fake_host(outputs={"disk-free": df})
    assert only("os.disk_free", host, profile=prof).status == "fail"
    assert only("os.disk_free", host, profile=prof.for_groups(["small"])).status == "pass"
