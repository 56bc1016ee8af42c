"""Tokens/s per device, MFU and "x of expected" against figures computed by hand (PaLM's 6N + 12·L·d·T)."""

from __future__ import annotations

import pytest

from ascend_ready.training.throughput import (
    ModelShape,
    Run,
    expected_row,
    mfu,
    report_lines,
    slowest_phase,
    train_flops_per_token,
)

QWEN25_7B = ModelShape(n_params=7_615_616_512, n_layers=28, hidden=3584)
QWEN25_32B = ModelShape(n_params=32_763_876_352, n_layers=64, hidden=5120)


def test_flops_per_token_by_hand():
    # 6 x 7,615,616,512 = 45,693,699,072; 12 x 28 x 3584 x 2048 = 2,466,250,752
    assert train_flops_per_token(QWEN25_7B, 2048) == 48_159_949_824
    # 6 x 32,763,876,352 = 196,583,258,112; 12 x 64 x 5120 x 2048 = 8,053,063,680
    assert train_flops_per_token(QWEN25_32B, 2048) == 204_636_321_792
    # 220 tokens/s x 48,159,949,824 / 376.2e12 (an A3 die) = 0.028164
    assert mfu(220, 48_159_949_824, 376.2) == pytest.approx(0.0281637, rel=1e-5)


def test_an_a3_run_at_the_published_rate_is_1x_of_expected():
    run = Run("grpo", 16, "npu", "Ascend910", QWEN25_7B, 1024, 1024, tokens_per_s=3520.0)
    row, _ = expected_row(run)
    assert row["model"] == "Qwen2.5-7B" and row["tokens_per_s_per_device"] == 220
    lines = report_lines(run, {"timing_s/gen": 40.0, "timing_s/ref": 5.0, "timing_s/old_log_prob": 6.0,
                               "timing_s/update_actor": 20.0})
    assert lines[0].startswith("throughput: 220 tokens/s per device (3520 on 16 npu device(s)); model FLOPs "
                               "4.816e+10 per token")
    assert lines[1].startswith("MFU: 2.82 % of 910_93's 376.2 TFLOPS dense peak")
    assert lines[2].startswith("1.00 x of expected: 220 tokens/s per device for Qwen2.5-7B grpo 1024+1024 "
                               "on A3")
    assert "MindSpeed-RL" in lines[2]
    assert lines[3] == "slowest phase: generation (40 s)"


def test_a_slow_a2_run_reads_half_of_expected():
    # MindSpeed-RL: 100 tokens/s per device for Qwen2.5-32B GRPO on A2; this run does 800 / 16 = 50
    run = Run("grpo", 16, "npu", "910B2", QWEN25_32B, 1000, 1100, tokens_per_s=800.0)
    lines = report_lines(run, {"perf/generation_s": 3.0, "perf/update_s": 9.5})
    # 50 x 204,636,321,792 / 353.9e12 = 0.028912 (T = 2100 here: 6N + 12 x 64 x 5120 x 2100)
    assert lines[1].startswith(f"MFU: {100 * mfu(50, train_flops_per_token(QWEN25_32B, 2100), 353.9):.3g} %")
    assert lines[2].startswith("0.50 x of expected: 100 tokens/s per device for Qwen2.5-32B")
    assert lines[3] == "slowest phase: update (9.5 s)"


def test_a_cpu_run_has_no_row_and_says_so():
    run = Run("grpo", 1, "cpu", None, ModelShape(1_000_000, 2, 64), 32, 16, tokens_per_s=120.0)
    lines = report_lines(run)
    assert lines[1] == "MFU: not computed (no peak for this device: a CPU run)"
    assert lines[2] == "no expected figure for a CPU run: the table holds NPU runs only"
    assert lines[3].startswith("slowest phase: not known")


def test_no_row_for_another_shape_names_what_was_looked_for():
    run = Run("ppo", 8, "npu", "910B3", QWEN25_7B, 512, 256, tokens_per_s=1000.0)
    row, why = expected_row(run)
    assert row is None and "7.62B ppo on A2 with 512+256 tokens" in why


def test_slowest_phase_sums_a_phases_timers():
    assert slowest_phase({"timing_s/ref": 4, "timing_s/old_log_prob": 4, "timing_s/gen": 7}) == ("scoring", 8)
    assert slowest_phase({"loss": 1.0}) is None


@pytest.mark.slow  # ~60 s: a real tiny GRPO run on CPU
def test_a_tiny_cpu_run_prints_tokens_per_device_mfu_and_that_the_table_has_no_row(tmp_path, passing_check):
    pytest.importorskip("trl")
    from click.testing import CliRunner

    from ascend_ready.training.cli import main
    from ascend_ready.training.metrics import read_metrics

    out = tmp_path / "grpo"
    result = CliRunner().invoke(main, ["grpo", "-c", "tiny", "-o", str(out), "--preflight-command",
                                       str(passing_check), "max_steps=2", "eval_every=0", "save_every=2"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    printed = result.stderr
    assert "tokens/s per device (" in printed and "on 1 cpu device(s)); model FLOPs" in printed
    assert "MFU: not computed (no peak for this device: a CPU run)" in printed
    assert "no expected figure for a CPU run: the table holds NPU runs only" in printed
    rows = [r for r in read_metrics(out / "metrics.jsonl") if "perf/tokens_per_s_per_device" in r]
    assert rows and all(r["perf/tokens_per_s_per_device"] > 0 for r in rows)
