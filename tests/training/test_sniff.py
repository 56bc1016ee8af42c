"""`--sniff-every`: the straggler rule by hand and on a real run's figures (three simulated nodes, node03
under the simulator's cpu-throttle fault: tests/training/test_sniff_sim.py wrote them), what the run writes
of it (sniff.jsonl, the closing JSON line), and three gloo ranks of which one runs under a CPU quota (the CFS
bandwidth control the cpu-throttle fault puts a node under) named with its host."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ascend_ready.errors import ConfigError
from ascend_ready.training.sniff import (
    SNIFF_FILE,
    Sample,
    named,
    outliers,
    read_sniffs,
    record,
    report_lines,
    summarize,
    summary_lines,
)

#: sniff.jsonl of `ascend-train grpo -c tiny --sniff-every 1` on node01-node03 of the provisioned simulated
#: fleet, node03 at 10 % of a CPU (cpu-throttle) from the first step on (tests/training/test_sniff_sim.py)
CAPTURE = Path(__file__).parent / "multinode_captures" / "sniff-node03-cpu-throttle.jsonl"


def test_the_rule_by_hand():
    # mean 11.275; population sd = sqrt((1.275² + 1.075² + 1.375² + 3.725²) / 4) = 2.153
    found = outliers({0: 10.0, 1: 10.2, 2: 9.9, 3: 15.0})
    assert [(r, v) for r, v, _m, _s in found] == [(3, 15.0)]
    (_r, _v, mean, sd) = found[0]
    assert mean == pytest.approx(11.275) and sd == pytest.approx(2.1533, rel=1e-4)
    # mean 10, sd = sqrt((2 x 1.2² + 2 x 3²) / 6) = 1.865: ranks 2 and 3 are 12 % off but within one sigma
    found = outliers({0: 10.0, 1: 10.0, 2: 11.2, 3: 8.8, 4: 13.0, 5: 7.0})
    assert [r for r, *_ in found] == [4, 5] and found[0][3] == pytest.approx(1.8655, rel=1e-4)
    assert outliers({0: 1.0, 1: 9.0}) == []


def test_report_names_rank_and_host():
    samples = [Sample(0, "node01", 10.0, 5.0), Sample(1, "node01", 10.4, 5.1), Sample(2, "node02", 31.0, 5.0)]
    lines = report_lines(7, samples)
    assert lines[0] == "sniff step 7: matmul 10-31 ms over 3 ranks (mean 17.1 ms)"
    assert lines[1].startswith("sniff step 7: rank 2 on node02 is a matmul outlier: 31 ms, 81 % slower "
                               "than the mean 17.1 ms (1.4 sigma)")
    assert not any("all-reduce outlier" in line for line in lines)


def test_a_real_runs_figures_name_the_throttled_rank_and_its_host():
    entries = read_sniffs(CAPTURE)
    for entry in entries:  # the rule, applied again to each sniff's per-rank figures, names what the run did
        assert named([Sample(**r) for r in entry["ranks"]]) == entry["outliers"]
    summary = summarize(CAPTURE)
    slow = {(o["rank"], o["host"]): o for o in summary["outliers"] if o["side"] == "slower"}
    assert set(slow) == {(2, "node03")} and slow[(2, "node03")]["what"] == "matmul"
    assert set(slow[(2, "node03")]["steps"]) >= {3, 4}
    line = next(ln for ln in summary_lines(summary) if "rank 2 on node03" in ln)
    assert line.startswith("sniff: rank 2 on node03 was a matmul outlier in ")
    assert "% slower than the mean" in line


def test_the_runs_closing_json_line_carries_the_sniffs(tmp_path, capsys):
    from ascend_ready.training.cli import _report

    (tmp_path / SNIFF_FILE).write_text(CAPTURE.read_text())
    _report(tmp_path, {"step": 4})
    shown = capsys.readouterr()
    got = json.loads(shown.out.strip().splitlines()[-1])
    assert got["step"] == 4 and got["sniff"] == summarize(tmp_path / SNIFF_FILE)
    assert "sniff: rank 2 on node03 was a matmul outlier in " in shown.err
    (tmp_path / SNIFF_FILE).unlink()  # a run that did not sniff says nothing of it
    _report(tmp_path, {"step": 4})
    shown = capsys.readouterr()
    assert "sniff" not in json.loads(shown.out) and "sniff" not in shown.err


def test_record_and_summary_by_hand(tmp_path):
    path = tmp_path / SNIFF_FILE
    # mean 17.133, population sd 9.810: rank 2 is 13.867 ms (80.9 %, 1.41 sigma) slower
    slow = [Sample(0, "node01", 10.0, 5.0), Sample(1, "node02", 10.4, 5.1), Sample(2, "node03", 31.0, 5.0)]
    even = [Sample(0, "node01", 10.0, 5.0), Sample(1, "node02", 10.1, 5.0), Sample(2, "node03", 10.2, 5.1)]
    record(path, 2, slow)
    record(path, 4, even)
    record(path, 6, slow)
    first = read_sniffs(path)[0]
    assert first["ranks"][2] == {"rank": 2, "host": "node03", "matmul_ms": 31.0, "allreduce_ms": 5.0}
    assert first["outliers"] == [{"rank": 2, "host": "node03", "what": "matmul", "ms": 31.0,
                                  "mean_ms": 17.133, "pct": 80.9, "sigma": 1.41, "side": "slower"}]
    summary = summarize(path)
    assert summary == {"file": str(path), "sniffs": 3, "steps": [2, 4, 6], "outliers": [
        {"rank": 2, "host": "node03", "what": "matmul", "side": "slower", "steps": [2, 6],
         "worst_pct": 80.9}]}
    assert summary_lines(summary) == ["sniff: rank 2 on node03 was a matmul outlier in 2 of 3 sniff(s) "
                                      "(steps 2, 6), up to 81 % slower than the mean"]
    assert summary_lines(summarize(path.parent / "none.jsonl") or {"sniffs": 1, "outliers": []}) == [
        "sniff: 1 sniff(s), no rank more than 10 % and 1 sigma off the mean"]


@pytest.mark.parametrize(("line", "words"), [
    ("{not json", "not a JSON record"),
    ('{"step": "3", "ranks": [], "outliers": []}', "not a sniff record"),
    ('{"step": 3, "ranks": []}', "not a sniff record"),
    ("[1, 2]", "not a sniff record"),
])
def test_a_sniff_file_that_is_not_one_is_refused_naming_the_line(tmp_path, line, words):
    path = tmp_path / SNIFF_FILE
    path.write_text('{"step": 1, "ranks": [], "outliers": []}\n' + line + "\n")
    with pytest.raises(ConfigError) as exc:
        read_sniffs(path)
    assert f"{path}:2: {words}" in exc.value.message


def _rank(rank: int, world: int, port: int, group: str | None, queue) -> None:
    import torch
    import torch.distributed as dist

    from ascend_ready.training.sniff import sniff

    torch.set_num_threads(1)
    if group is not None:  # this rank's CPU quota: 2 % of one CPU
        Path(group, "cgroup.procs").write_text(str(os.getpid()))
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    # ~60 ms of CPU a rank: longer than the quota's 2 ms a period, as a training step's matmuls are
    samples = sniff(3, torch.device("cpu"), torch.float32, rank=rank, host=f"node0{rank + 1}", iters=64)
    if rank == 0:
        from ascend_ready.training.sniff import report_lines as lines

        queue.put(lines(3, samples))
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.slow  # ~80 s on 2 busy cores: three spawned torch processes, one at 2 % of a CPU
@pytest.mark.skipif(os.geteuid() != 0, reason="a CPU quota (cgroup) needs root")
def test_a_cpu_throttled_rank_is_named_with_its_host(tmp_path):
    torch = pytest.importorskip("torch")
    from ascend_ready.sim import cgroup

    kind, mount = cgroup._hierarchy()
    group = mount / f"ascend-ready-sniff-{os.getpid()}"
    group.mkdir()
    try:
        if kind == "v2":
            (group / "cpu.max").write_text(f"2000 {cgroup.PERIOD_US}")
        else:
            (group / "cpu.cfs_period_us").write_text(str(cgroup.PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text("2000")
        ctx = torch.multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        port = 29000 + os.getpid() % 2000
        procs = [ctx.Process(target=_rank, args=(r, 3, port, str(group) if r == 2 else None, queue))
                 for r in range(3)]
        for p in procs:
            p.start()
        lines = queue.get(timeout=240)
        for p in procs:
            p.join(timeout=60)
        assert [p.exitcode for p in procs] == [0, 0, 0]
    finally:
        group.rmdir()
    named = [line for line in lines if "matmul outlier" in line]
    assert len(named) == 1 and "rank 2 on node03 is a matmul outlier" in named[0], lines
    assert "slower" in named[0], lines


def test_sniff_every_is_a_flag_and_an_override():
    from click.testing import CliRunner

    from ascend_ready.training.cli import main
    from ascend_ready.training.config import load_config

    assert load_config("tiny", ("sniff_every=3",)).sniff_every == 3
    assert load_config("tiny", ()).sniff_every == 0
    shown = CliRunner().invoke(main, ["grpo", "--help"]).output
    assert "--sniff-every N" in shown and "sniff_every=N" in shown
