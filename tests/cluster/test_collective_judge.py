"""npu.matmul and hccl.allreduce judged through ascend-check's runner on what the controller really recorded
from the worker (tests/collective_support.py: a gloo run of 3 nodes x 2 ranks), its values edited as each
test says; and the controller refusing a host whose interpreter cannot run the worker."""

from __future__ import annotations

import dataclasses
import sys

import pytest
from collective_support import captured, even, scaled, snapshots

from ascend_ready.checks.cluster.collective import RECORD_PROBE, CollectiveRecord, Measurement, odd_ones_out
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import Snapshot
from ascend_ready.fleet.transport import FanoutOptions, Target

CHECKS = ("npu.matmul", "hccl.allreduce")


def judged(rec: CollectiveRecord | str, profile=None, hosts=None) -> dict[tuple[str, str], tuple[str, str]]:
    """(check, host) -> (status, message)."""
    snaps = snapshots(rec)
    if hosts is not None:
        snaps = {n: s for n, s in snaps.items() if n in hosts}
    prof = profile or load_profile("atlas-800t-a2")
    report = run_checks(Snapshot(hosts=snaps), dict.fromkeys(snaps, prof), select_checks("full", CHECKS))
    return {(r.check_id, r.host): (r.status, r.message) for r in report.results}, report


def test_an_even_fleet_passes_with_the_sweep_as_nccl_tests_prints_it():
    results, report = judged(even(captured()))
    assert {k: v[0] for k, v in results.items()} == {(c, f"node0{i}"): "pass" for c in CHECKS
                                                     for i in (1, 2, 3)}
    ev = next(r.evidence for r in report.results if r.check_id == "hccl.allreduce" and r.host == "node02")
    at = ev.index("all-reduce across 3 host(s), 6 rank(s) (gloo, float32):")
    assert ev[at + 1].split() == ["size(B)", "time(us)", "algbw(GB/s)", "busbw(GB/s)"]
    assert [int(line.split()[0]) for line in ev[at + 2:at + 5]] == [1024, 65536, 262144]
    assert "all-reduce among node02's 2 device(s):" in ev
    assert any(line.startswith("pairs at 262144 B: node01-node02 ") for line in ev)


def test_a_slow_node_is_named_by_the_matmul():
    results, _ = judged(scaled(even(captured()), 0.3, host="node02", kind="matmul"))
    status, message = results[("npu.matmul", "node02")]
    assert status == "fail"
    assert "node02 rank 2 (cpu): " in message and "node02: " in message and "the straggler" in message
    assert results[("npu.matmul", "node01")][0] == results[("npu.matmul", "node03")][0] == "pass"


def test_the_odd_one_out_of_the_pairs_is_the_straggler_and_only_it_fails():
    results, report = judged(scaled(even(captured()), 0.2, host="node03", group="pair:"))
    status, message = results[("hccl.allreduce", "node03")]
    assert status == "fail" and message.startswith("node03 is the straggler: its best pair all-reduce")
    assert results[("hccl.allreduce", "node01")][0] == "pass"
    ev = next(r.evidence for r in report.results if r.check_id == "hccl.allreduce" and r.host == "node01")
    assert "the all-node all-reduce is held back by node03" in ev


def test_a_slow_pair_of_fast_nodes_is_the_path_between_them():
    rec = scaled(even(captured()), 0.2, group="pair:node01,node02")
    results, _ = judged(rec)
    for host in ("node01", "node02"):
        status, message = results[("hccl.allreduce", host)]
        assert status == "fail" and "the pair node01-node02 all-reduces at" in message
    assert results[("hccl.allreduce", "node03")][0] == "pass"


def test_the_narrowing_on_its_own():
    pairs = {("a", "b"): 10.0, ("a", "c"): 10.0, ("b", "c"): 10.0, ("a", "d"): 2.0, ("b", "d"): 2.5,
             ("c", "d"): 2.0}
    nodes, links = odd_ones_out(pairs, ratio=0.8)
    assert [n for n, _, _ in nodes] == ["d"] and links == []
    nodes, links = odd_ones_out({("a", "b"): 1.0}, ratio=0.8)  # two nodes: nothing to narrow down
    assert nodes == [] and links == []


def test_on_npus_the_profiles_floors_apply():
    rec = dataclasses.replace(even(captured()), device="npu", backend="hccl")
    # a profile floor where one is set (the bundled A2 profile leaves the matmul floor to sku_perf.yml,
    # judged in tests/checks/test_check_suite_perf.py); the capture's CPU values are far below 150 TFLOPS,
    # 12 GB/s
    floored = load_profile("atlas-800t-a2").model_copy(update={"matmul_min_tflops": 150})
    results, _ = judged(rec, profile=floored)
    status, message = results[("npu.matmul", "node01")]
    assert status == "fail" and "below the profile's 150" in message
    status, message = results[("hccl.allreduce", "node01")]
    assert status == "fail" and "below the profile's 12 GB/s, and no one node is to blame" in message
    # the same on CPU: the floors are NPU figures
    results, _ = judged(even(captured()))
    assert results[("npu.matmul", "node01")][0] == results[("hccl.allreduce", "node01")][0] == "pass"


def test_a_host_the_run_has_no_results_for_is_an_error_naming_it():
    rec = captured()
    rec = dataclasses.replace(even(rec), errors={"node02": "the worker failed on node02: exit code 1"},
                              measurements=[m for m in even(rec).measurements if m.host != "node02"])
    results, _ = judged(rec)
    for check in CHECKS:
        status, message = results[(check, "node02")]
        assert status == "error" and message.startswith("node02: the worker failed on node02: exit code 1")
        assert results[(check, "node01")][0] == "pass"


def test_a_host_with_neither_results_nor_a_reason_is_an_error_not_a_pass():
    rec = even(captured())
    rec = dataclasses.replace(rec, errors={},
                              measurements=[m for m in rec.measurements if m.host != "node02"])
    results, _ = judged(rec)
    for check in CHECKS:
        status, message = results[(check, "node02")]
        assert status == "error"
        assert message.startswith("node02: the collective run recorded nothing for this host")


@pytest.mark.parametrize(("text", "says"), [
    ("", "the collective did not run for this host"),
    ("ascend-check collective v1\n{\"hosts\": [\"node01\"], \"measurements\": [{\"kind\": 1}]}\n",
     "not a collective record"),
])
def test_a_missing_or_garbled_record_is_an_error(text, says):
    results, _ = judged(text)
    for check in CHECKS:
        status, message = results[(check, "node01")]
        assert status == "error" and says in message


def test_one_host_skips_saying_why():
    results, _ = judged(even(captured()), hosts={"node01"})
    for check in CHECKS:
        status, message = results[(check, "node01")]
        assert status == "skip" and "judge two or more together" in message


def test_a_host_whose_interpreter_has_no_torch_is_an_error_naming_it_and_nothing_starts():
    from ascend_ready.checks.cluster.collective_run import run_collective

    base = load_profile("atlas-800t-a2")
    profiles = {"node01": base.model_copy(update={"python": sys.executable}),
                "node02": base.model_copy(update={"python": "/usr/bin/python3"})}
    targets = [Target(n, address="local") for n in profiles]
    rec = run_collective(targets, FanoutOptions(), profiles, deadline_s=30)
    if "torch is not installed" not in rec.errors.get("node02", ""):
        pytest.skip(f"/usr/bin/python3 here has torch ({rec.errors})")
    assert rec.errors["node02"].startswith("`/usr/bin/python3` as root cannot run the worker (exit 1): "
                                           "torch is not installed for /usr/bin/python3")
    assert rec.errors["node01"].startswith("not run: it needs two or more hosts that can start it")
    assert rec.measurements == []


def test_the_capture_is_what_the_worker_prints():
    fields = {f.name for f in dataclasses.fields(Measurement)}
    text = captured().to_text()
    assert text.startswith("ascend-check collective v1\n")
    import json

    raw = json.loads(text.split("\n", 1)[1])
    assert all(set(m) == fields for m in raw["measurements"])
    assert RECORD_PROBE == "hccl-collective"
