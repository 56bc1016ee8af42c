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

from ascend_ready.checks.diagnose import diagnose_paths

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
