"""Rank attribution: in an 8-rank job where rank 3 fails first and the others then time out with EI0006,
rank 3's error is the cause and the timeouts are its consequences.

The logs are composed from the real lines of the shared error samples, with the `[rankN]:` prefixes torch
prints for each rank (and torchrun's per-rank files for the multi-file case); only the rank, device and
pid numbers in the copied lines are changed to those of the rank that prints them.
"""

from __future__ import annotations

import re
from pathlib import Path

from sample_support import read_sample

from ascend_ready.checks.diagnose import diagnose_paths, explain_failure

DATA = Path(__file__).with_name("data")
TIMEOUT_RANKS = (0, 1, 2, 4, 5, 6, 7)


def _ei0006_lines(rank: int) -> list[str]:
    """rank's HcclAllreduce failure and EI0006, from vllm-ascend#486 (printed there by rank 1)."""
    lines = read_sample("error_hccl_EI0006-getting-socket-timeout_vllm-ascend-486.txt").splitlines()
    out = []
    for line in lines[1:]:
        line = line.replace("[rank1]:", f"[rank{rank}]:").replace(
            "Device:1, RankID:1", f"Device:{rank}, RankID:{rank}"
        )
        out.append(
            line.replace("PID:1292363", f"PID:{1292360 + rank}").replace(
                "PID: 1292363", f"PID: {1292360 + rank}"
            )
        )
    return out


def _rank3_device_start_failure() -> list[str]:
    """The torch_npu 507033 error of vllm-ascend#4284, whose JSON-escaped detail carries the real lines."""
    line = read_sample("error_torch-npu_507033-E30006-OPP-verify-failed_vllm-ascend-4284.txt").splitlines()[0]
    detail = line.split('{"detail":"', 1)[1].split("\\n")
    pta = detail[1].replace("Device:0, RankID:-1", "Device:3, RankID:3")
    return [f"[rank3]: RuntimeError: {detail[0]}", f"[rank3]: {pta}", f"[rank3]: {detail[2]}"]


def _noise() -> list[str]:
    return (DATA / "clean_ascend-train-ppo-torchrun-2proc.log").read_text().splitlines()


def test_first_failing_rank_is_the_cause_and_the_timeouts_its_consequences(tmp_path):
    lines = _noise() + _rank3_device_start_failure()
    for rank in TIMEOUT_RANKS:
        lines += _ei0006_lines(rank)
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")

    report = diagnose_paths([log])

    first, *rest = report.findings
    assert (first.code, first.rank, first.role, first.caused_by) == ("507033", 3, "cause", None)
    assert first.evidence[0].line == len(_noise()) + 1
    assert first.evidence[0].text.startswith("[rank3]: RuntimeError: Initialize:")
    assert [(f.code, f.rank, f.role, f.caused_by) for f in rest] == [
        ("EI0006", rank, "consequence", "507033 on rank 3") for rank in TIMEOUT_RANKS
    ]
    # each rank's own lines (its HcclAllreduce RuntimeError, torch_npu's line, its EI0006), no other rank's
    for f in rest:
        assert [e.text.split(":", 1)[0] for e in f.evidence] == [f"[rank{f.rank}]"] * 3
        assert f.evidence[-1].text.startswith(f"[rank{f.rank}]: EI0006:") and f.matches == 3
    # the HcclAllreduce wrapper and the Python exceptions are not separate findings
    assert {f.id for f in report.findings} == {"rt-507033", "hccl-ei0006"}


def test_a_python_traceback_on_rank_3_is_the_cause(tmp_path):
    # the exception verl's FAQ gives for a MindSpeed that is too old (REFERENCE.md, RL failure reports)
    lines = [
        "[rank3]: Traceback (most recent call last):",
        "[rank3]: KeyError: 'decoder.layers.0.self_attention.q_layernorm.weight'",
    ]
    for rank in TIMEOUT_RANKS:
        lines += _ei0006_lines(rank)
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")

    first, *rest = diagnose_paths([log]).findings
    assert (first.code, first.rank, first.role) == ("KeyError", 3, "cause")
    assert {(f.code, f.role, f.caused_by) for f in rest} == {("EI0006", "consequence", "KeyError on rank 3")}
    assert sorted(f.rank for f in rest) == list(TIMEOUT_RANKS)


def _shift(line: str, minute: int) -> str:
    """Move the sample's 2025-04-08-18:07 / 2025-11-19-11:14 timestamps to 2025-04-08-18:<minute>."""
    return re.sub(r"2025-(?:04-08-18:07|11-19-11:14)", f"2025-04-08-18:{minute:02d}", line)


def test_per_rank_files_are_ordered_by_their_timestamps(tmp_path):
    """torchrun --log-dir writes one file per local rank; the cause is found by time, whatever the file
    order, and the rank comes from the file's path."""
    attempt = tmp_path / "logs" / "launch-x" / "none_abc" / "attempt_0"
    for rank in TIMEOUT_RANKS:
        (attempt / str(rank)).mkdir(parents=True)
        text = [_shift(line, 7).split("]: ", 1)[1] for line in _ei0006_lines(rank)]
        (attempt / str(rank) / "stderr.log").write_text("\n".join(text) + "\n")
    (attempt / "3").mkdir()
    text = [_shift(line, 5).split("]: ", 1)[1] for line in _rank3_device_start_failure()]
    (attempt / "3" / "stderr.log").write_text("\n".join(text) + "\n")

    report = diagnose_paths([tmp_path / "logs"])

    assert len(report.files) == 8
    first, *rest = report.findings
    assert (first.code, first.rank, first.role, first.first_seen) == (
        "507033",
        3,
        "cause",
        "2025-04-08-18:05:58",
    )
    assert first.evidence[0].file.endswith("attempt_0/3/stderr.log") and first.evidence[0].line == 1
    assert [(f.code, f.rank, f.role) for f in rest] == [("EI0006", r, "consequence") for r in TIMEOUT_RANKS]


def test_plog_pids_are_mapped_to_ranks(tmp_path):
    """A plog line names only its process (`RUNTIME(pid,...)`); torch_npu's `(PID:p, Device:d, RankID:r)`
    line in the job's log says which rank that process is."""
    stdout = tmp_path / "train.log"
    stdout.write_text("\n".join(_ei0006_lines(5)) + "\n")
    runtime = read_sample("error_runtime_107001-invalid-device-id-EE8888_gpustack-3352.txt").splitlines()[1]
    plog = tmp_path / "plog" / "plog-1292365_20250408180719000.log"
    plog.parent.mkdir()
    plog.write_text(
        runtime.replace("RUNTIME(42,", "RUNTIME(1292365,").replace("2025-11-18-09:33", "2025-04-08-18:07")
        + "\n"
    )

    report = diagnose_paths([stdout, plog.parent])

    assert [(f.code, f.actor, f.role, f.caused_by) for f in report.findings] == [
        ("107001", "rank 5", "cause", None),
        ("EI0006", "rank 5", "consequence", "107001 on rank 5"),
    ]
    assert report.findings[0].evidence[0].file == str(plog)


# --------------------------------------------------------------- the first failure across ranks and layers
REAL = DATA / "real"
CAPTURES = Path(__file__).parents[1] / "training" / "multinode_captures"


def _real(name: str) -> list[str]:
    return (REAL / name).read_text().splitlines()


def test_a_notify_wait_is_the_first_failure_and_the_task_timeout_its_consequence(tmp_path):
    """vllm-ascend#14214's 107020 RuntimeError as torch_npu prints it first, then the EI0002 record CANN
    prints under it (vllm-ascend#1443), in one rank's output: the notify wait is the cause whatever the
    line order, the generic task timeout says it follows it."""
    rt_line = _real("107020_vllm-ascend-14214.log")[2].split("[multiproc_executor.py:945] ", 1)[1]
    pta, ei0002 = (
        line.removeprefix("(train pid=8464) ") for line in _real("ei0002_507048_vllm-ascend-1443.log")[5:9:3]
    )
    log = tmp_path / "rank8.log"
    log.write_text("\n".join([rt_line, pta, ei0002]) + "\n")
    first, second = diagnose_paths([log]).findings
    assert (first.code, first.role, first.rank) == ("EI0002", "cause", 8)
    assert (second.code, second.role, second.caused_by) == ("107020", "consequence", "EI0002 on rank 8")


def test_a_timeout_on_another_rank_follows_the_first_failure_by_time(tmp_path):
    """Two ranks' files: rank 3's notify wait at 10:45:23, rank 5's task timeout at 10:46:01, read in the
    other order: the timestamps decide, and the timeout names what it follows."""
    ei0002 = _real("ei0002_507048_vllm-ascend-1443.log")[8].removeprefix("(train pid=8464) ")
    rt = _real("107020_vllm-ascend-14214.log")[2:4]
    (tmp_path / "a_rank5.log").write_text(
        "\n".join(
            line.split("[multiproc_executor.py:945] ", 1)[1].replace("15:31:21", "10:46:01")
            .replace("2026-08-13", "2025-06-25").replace("RankID:-1", "RankID:5")
            for line in rt
        ) + "\n"
    )
    pta = "[ERROR] 2025-06-25-10:45:23 (PID:13073, Device:3, RankID:3) ERR00100 PTA call acl api failed"
    (tmp_path / "b_rank3.log").write_text(ei0002.replace("PID: 13075", "PID: 13073") + "\n" + pta + "\n")
    report = diagnose_paths([tmp_path])
    assert [(f.code, f.rank, f.role, f.caused_by) for f in report.findings] == [
        ("EI0002", 3, "cause", None),
        ("107020", 5, "consequence", "EI0002 on rank 3"),
    ]


def test_without_timestamps_the_lower_layer_comes_first_across_files(tmp_path):
    (tmp_path / "a_host.log").write_text("RuntimeError: ACL stream synchronize failed, error code:507015\n")
    (tmp_path / "b_device.log").write_text(
        "        The error from device(chipId:0, dieId:0), serial number is 10, there is an exception of "
        "fftsplus aivector error, core id is 8\n"
    )
    report = diagnose_paths([tmp_path])
    assert [(f.code, f.layer, f.role) for f in report.findings] == [
        ("aivector exception", "device", "cause"),
        ("507015", "runtime", "consequence"),
    ]


def test_a_killed_worker_on_another_node_is_the_cause_of_the_lost_peer(tmp_path):
    """Three nodes, the launcher's log directory (<host>.log per node, launch.txt): node03's worker was
    SIGKILLed (torchrun's real output), node01's and node02's rank saw the peer go (gloo's real error).
    The kill on node03 is the cause; the gloo errors of rank 0 and rank 1 follow it."""
    killed = (CAPTURES / "torchrun-worker-sigkilled.txt").read_text()
    lost = (CAPTURES / "torchrun-gloo-peer-lost.txt").read_text()
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "launch.txt").write_text("torchrun --nnodes=3 --node-rank=0 ... HCCL_CONNECT_TIMEOUT=1800\n")
    (logs / "node01.log").write_text(lost)
    (logs / "node02.log").write_text(lost.replace("[rank0]", "[rank1]"))
    (logs / "node03.log").write_text(killed)
    text = explain_failure([logs], hosts=["node01", "node02", "node03"])
    assert "1. [cause] SIGKILL on node03: A worker process was killed (SIGKILL, exit code -9 / 137)\n" \
        "   first seen: 12-01 10:51:32.852000" in text  # torchrun's glog time (no year)
    assert "2. [consequence of SIGKILL on node03] gloo::IoException on rank 0 on node01:" in text
    assert "3. [consequence of SIGKILL on node03] gloo::IoException on rank 1 on node02:" in text
    assert "node03.log:1: E1201 10:51:32.852000 14023 torch/distributed/elastic/multiprocessing/api.py:" \
        "1002] failed (exitcode: -9) local_rank: 0 (pid: 14026)" in text
    assert text.count("RuntimeError") == 2  # as the gloo findings' evidence, never a finding


def test_the_launchers_final_error_line_names_the_killed_node(tmp_path):
    log = tmp_path / "console.txt"
    log.write_text(
        "[node01] [rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "pair.cc:553] Connection closed by peer [127.0.0.1]:21692.\n"
        "error: the job failed on node03: Signal 9 (SIGKILL) received by PID 14026\n"
    )
    gloo, kill = diagnose_paths([log]).findings
    assert (kill.code, kill.actor, kill.node, kill.role) == ("SIGKILL", "node03", "node03", "cause")
    assert (gloo.code, gloo.role, gloo.caused_by) == ("gloo::IoException", "consequence", "SIGKILL on node03")


def test_the_oom_killer_explains_the_killed_worker(tmp_path):
    (tmp_path / "node03.log").write_text((CAPTURES / "torchrun-worker-sigkilled.txt").read_text())
    (tmp_path / "dmesg.txt").write_text("\n".join(_real("dmesg_oom_tranx-41.log")) + "\n")
    report = diagnose_paths([tmp_path])
    assert [(f.code, f.role, f.caused_by) for f in report.findings] == [
        ("OOM killer", "cause", None),
        ("SIGKILL", "consequence", "OOM killer"),
    ]
