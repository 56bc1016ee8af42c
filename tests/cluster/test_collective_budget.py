"""The collective worker's time budget: a size that would not finish in it is left out (a `skipped`
record), so a node whose port is far too slow is still named by the pair rounds instead of the whole run
timing out and naming no one. The arithmetic by hand; the worker for real on this host (three local
"nodes" of one gloo rank each)."""

from __future__ import annotations

import sys

import pytest

from ascend_ready.checks.cluster.collective import (
    Measurement,
    judge_allreduce,
    projected_seconds,
    skipped,
    sweep,
)
from ascend_ready.checks.cluster.collective_worker import _pair_size


def test_a_size_is_projected_from_the_last_one_as_bandwidth_bound():
    # 64 KiB took 0.02 s per all-reduce: 1 MiB is 16 x the bytes, so 0.32 s, x (30 iterations + 2 warm-up)
    assert projected_seconds(0.02, 65536, 2**20, 32) == pytest.approx(10.24)
    # never less per run than what was measured (a smaller size is latency-bound)
    assert projected_seconds(0.02, 65536, 1024, 32) == pytest.approx(0.64)


def _m(size: int, seconds: float) -> Measurement:
    return Measurement("allreduce", 0, "node01", "cpu", 1.0, size, seconds, 1.0, 3, group="all")


def test_the_pair_rounds_take_the_largest_size_that_fits_what_is_left():
    done = [_m(1024, 0.001), _m(65536, 0.02), _m(2**20, 0.3)]
    # 3 rounds x 32 runs: 1 MiB needs 28.8 s, 64 KiB 1.92 s, 1 KiB 0.096 s
    assert _pair_size(done, 3, 32, float("inf")) == 2**20
    assert _pair_size(done, 3, 32, 28.8) == 2**20
    assert _pair_size(done, 3, 32, 28.7) == 65536
    assert _pair_size(done, 3, 32, 1.0) == 1024
    assert _pair_size(done, 3, 32, 0.05) is None


@pytest.fixture(scope="module")
def no_time_left():
    """The worker on three local "nodes" with a budget of 0 s: only the first size of each sweep runs."""
    pytest.importorskip("torch")
    from ascend_ready.checks.cluster.collective_run import Sweep, run_collective
    from ascend_ready.checks.profile import load_profile
    from ascend_ready.fleet.transport import FanoutOptions, Target

    prof = load_profile("atlas-800t-a2").model_copy(update={"python": sys.executable})
    targets = [Target(f"node0{i}", address="local") for i in (1, 2, 3)]
    return run_collective(targets, FanoutOptions(), dict.fromkeys([t.name for t in targets], prof),
                          sweep=Sweep("1K,64K,256K", 5, 1, 64, 0.1), nproc_per_node=1, budget_s=0.0)


def test_with_no_time_left_the_larger_sizes_and_the_pairs_are_left_out_and_said(no_time_left):
    rec = no_time_left
    assert rec.errors == {}
    assert [m.size_bytes for m in sweep(rec.measurements, "all")] == [1024]
    assert [m.size_bytes for m in skipped(rec.measurements, "all")] == [65536, 262144]
    # the 64 KiB projection: 64 x the 1 KiB time per all-reduce, x 6 runs
    first = sweep(rec.measurements, "all")[0]
    assert skipped(rec.measurements, "all")[0].value == pytest.approx(first.seconds * 64 * 6, rel=0.01)
    pairs = {m.group for m in rec.measurements if m.kind == "skipped" and m.group.startswith("pair:")}
    assert pairs == {"pair:node01,node02", "pair:node01,node03", "pair:node02,node03"}
    assert not any(m.kind == "allreduce" and m.group.startswith("pair:") for m in rec.measurements)
    problems, evidence = judge_allreduce(rec, "node01", ratio=0.5)
    assert problems == []
    assert any(line.startswith("left out of the all-node all-reduce, to finish in the worker's time budget: "
                               "65536 B (projected ") for line in evidence), evidence
    assert any(line.startswith("left out of the pair rounds") for line in evidence), evidence


def test_a_floor_judged_at_the_largest_size_that_ran_says_which_were_left_out(no_time_left):
    import dataclasses

    rec = dataclasses.replace(no_time_left, device="npu")
    problems, _ = judge_allreduce(rec, "node01", ratio=0.8, floor=100.0)
    assert len(problems) == 1, problems
    assert problems[0].startswith("the all-reduce across all 3 hosts reaches "), problems
    assert problems[0].endswith("; the larger sizes (65536 B, 262144 B) would not have finished in the time "
                                "budget"), problems


def test_a_worker_stopped_by_its_deadline_says_so_on_every_node_and_blames_none():
    # The worker's matmul window (10 s) cannot end inside a 4 s deadline. Before, the first node's torchrun
    # traceback for the SIGTERM timeout sent ("SignalException: ... got signal: 15") was its cause, and the
    # other node was "stopped: the worker failed on node01".
    pytest.importorskip("torch")
    from ascend_ready.checks.cluster.collective_run import Sweep, run_collective
    from ascend_ready.checks.profile import load_profile
    from ascend_ready.fleet.transport import FanoutOptions, Target

    prof = load_profile("atlas-800t-a2").model_copy(update={"python": sys.executable})
    targets = [Target(f"node0{i}", address="local") for i in (1, 2)]
    rec = run_collective(targets, FanoutOptions(), dict.fromkeys([t.name for t in targets], prof),
                         sweep=Sweep("1K", 5, 1, 64, 10.0), nproc_per_node=1, deadline_s=4)
    assert set(rec.errors) == {"node01", "node02"}
    # a node whose peer's timeout fired first is stopped by that loss before its own: the deadline still
    for why in rec.errors.values():
        assert (why.startswith("the worker did not finish within the 4 s deadline (stopped by timeout)")
                or why.startswith("stopped: the 4 s deadline stopped the worker on node0")), why
    assert any(why.startswith("the worker did not finish") for why in rec.errors.values()), rec.errors
