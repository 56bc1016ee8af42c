"""The collective worker under a real torchrun (gloo on CPU), its bandwidth arithmetic and straggler judge."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ascend_ready.checks.cluster.collective import bus_bandwidth, parse_lines, parse_size, rows, stragglers
from ascend_ready.errors import ParseError


def test_bus_bandwidth_follows_nccl_tests():
    # nccl-tests doc/PERFORMANCE.md: busbw = algbw * 2(n-1)/n for AllReduce.
    algbw, busbw = bus_bandwidth(8 * 10**9, 1.0, 8)
    assert algbw == pytest.approx(8.0) and busbw == pytest.approx(14.0)
    assert bus_bandwidth(10**9, 1.0, 1) == (1.0, 1.0)


@pytest.mark.parametrize(("text", "size"), [("1K", 1024), ("64M", 64 * 2**20), ("1G", 2**30), ("512", 512)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "0", "1X", "-1K", "K"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_stragglers_against_the_fleet_median():
    tflops = {"node01:0": 100.0, "node01:1": 101.0, "node02:0": 99.0, "node03:0": 40.0}
    assert stragglers(tflops) == [("node03:0", 40.0, 99.5)]
    assert stragglers({"a": 10.0, "b": 9.5}) == []
    assert stragglers({"a": 10.0, "b": 5.0}) == [("b", 5.0, 10.0)]
    assert stragglers({"a": 1.0}) == []


def test_a_garbled_measurement_is_an_error_naming_the_line():
    with pytest.raises(ParseError, match="line 2"):
        parse_lines('noise\n{"kind": "matmul", "rank": 0\n')


def test_the_worker_runs_under_torchrun_and_reports_bus_bandwidth_per_size():
    # --standalone: torchrun picks its own free rendezvous port (no port chosen here that another test
    # could take first)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "ascend_ready.checks.cluster.collective_worker",
           "--sizes", "1K,256K", "--iters", "2", "--matmul-n", "128", "--device", "cpu"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = parse_lines(proc.stdout)
    assert sorted((m.kind, m.rank) for m in found if m.kind == "matmul") == [("matmul", 0), ("matmul", 1)]
    reduce = [m for m in found if m.kind == "allreduce"]
    assert sorted({m.size_bytes for m in reduce}) == [1024, 256 * 1024]
    assert all(m.ranks == 2 and m.value > 0 and m.value == pytest.approx(m.algbw) for m in reduce)
    table = rows(found)
    assert len(table) == 3 and "busbw(GB/s)" in table[0]
    json.dumps([m.__dict__ for m in found])
