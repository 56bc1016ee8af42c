"""The launcher's failure hook: torchrun keeps per-rank logs, and a failed job's findings come from them."""

from __future__ import annotations

from pathlib import Path

from sample_support import read_sample

from ascend_ready.checks.diagnose import explain_failure
from ascend_ready.training import launch
from ascend_ready.training.config import LaunchConfig


def test_torchrun_keeps_per_rank_logs_when_given_a_log_dir(tmp_path):
    cmd = launch.torchrun_command(LaunchConfig(nproc_per_node=8), ["grpo"], tmp_path / "logs")
    assert f"--log-dir={tmp_path / 'logs'}" in cmd and "--tee=3" in cmd
    assert cmd.index("--tee=3") < cmd.index("ascend_ready.training.cli")
    assert not any(
        a.startswith(("--log-dir", "--tee")) for a in launch.torchrun_command(LaunchConfig(), ["grpo"])
    )


def test_explain_failure_reads_the_rank_logs(tmp_path):
    rank_dir = tmp_path / "logs" / "none_x" / "attempt_0" / "1"
    rank_dir.mkdir(parents=True)
    lines = read_sample("error_hccl_EI0006-getting-socket-timeout_vllm-ascend-486.txt").splitlines()
    (rank_dir / "stderr.log").write_text("\n".join(line.split("]: ", 1)[1] for line in lines) + "\n")
    (rank_dir / "stdout.log").write_text("")
    text = explain_failure([tmp_path / "logs"])
    assert text.startswith(f"diagnose ({tmp_path / 'logs'}): 1 known error signature (2 files, 4 lines read)")
    assert "1. [cause] EI0006 on rank 1:" in text and "stderr.log:4: EI0006:" in text


def test_explain_failure_says_when_there_is_nothing_to_read(tmp_path):
    assert explain_failure([Path(tmp_path / "never-started")]) == (
        f"diagnose: {tmp_path / 'never-started'}: no such file or directory\n"
    )
