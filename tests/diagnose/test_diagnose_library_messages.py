"""Round 10 H of issue 31: fixed library messages (transformers' tokenizer classes, tokenizers' JSON,
protobuf's generated code, NCCL's shared memory, HCCL's MoE buffer), a size check by its structure, and a
documented code's meaning said again by an entry in its error report.

The logs are real (tests/diagnose/data/corpus/dev/, each cited in corpus/manifest.yml); the lines built here
are the producers' own format strings (TRL's GRPOTrainer check, the MoE operators' OP_LOGE) with numbers
filled in."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_ready.checks.diagnose import diagnose_paths

DEV = Path(__file__).with_name("data") / "corpus" / "dev"


def _causes(report):
    return [f for f in report.findings if f.role == "cause"]


def _lines(tmp_path: Path, lines: list[str]):
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n")
    return diagnose_paths([path])


@pytest.mark.parametrize(("log", "entry", "code"), [
    ("tokenizer-class-unknown_llamafactory-2591.log", "tokenizer-class-unknown", "GemmaTokenizer"),
    ("tokenizer-json-unreadable_transformers-30382.log", "tokenizer-json-unreadable", "tokenizers"),
    ("protobuf-descriptors_payload-dumper-38.log", "protobuf-generated-code-mismatch", "protobuf"),
    ("nccl-shm-segment_nccl-tests-166.log", "nccl-shm-exhausted", "/dev/shm"),
    ("nccl-shm-fallocate_nccl-290.log", "nccl-shm-exhausted", "/dev/shm"),
])
def test_a_fixed_library_message_is_the_cause_with_its_fix(log, entry, code):
    causes = _causes(diagnose_paths([DEV / log]))
    assert [(f.id, f.code) for f in causes[:1]] == [(entry, code)]
    assert causes[0].fix and causes[0].causes


def test_nccls_no_space_on_dev_shm_is_not_a_full_disk():
    report = diagnose_paths([DEV / "nccl-shm-fallocate_nccl-290.log"])
    roles = {f.id: f.role for f in report.findings}
    assert roles["nccl-shm-exhausted"] == "cause"
    assert roles.get("disk-full", "consequence") == "consequence"  # its ENOSPC is the same /dev/shm


def test_a_size_that_does_not_divide_is_named_with_both_numbers(tmp_path):
    # TRL's GRPOTrainer: f"The global train batch size ({num_processes} x {per_device_train_batch_size})
    # must be evenly divisible by the number of generations per prompt ({num_generations})."
    report = _lines(tmp_path, [
        "[rank1]:     raise ValueError(",
        "[rank1]: ValueError: The global train batch size (3 x 4) must be evenly divisible by the number of "
        "generations per prompt (8). Given the current train batch size, the valid values are "
        "[2, 3, 4, 6, 12].",
    ])
    (cause,) = _causes(report)
    assert (cause.id, cause.code) == ("config-not-divisible", "divisibility")
    assert "(3 x 4)" in cause.title and "generations per prompt (8)" in cause.title


def test_a_specific_divisibility_entry_wins_over_the_structural_rule(tmp_path):
    # vLLM's check has an entry of its own (parallel-size-not-divisor): the general rule yields on its line
    report = _lines(tmp_path, ["ValueError: Total number of attention heads (28) must be divisible by tensor "
                               "parallel size (8)."])
    assert [f.id for f in report.findings] == ["parallel-size-not-divisor"]


def test_the_divisibility_rule_says_nothing_on_a_warning(tmp_path):
    report = _lines(tmp_path, ["WARNING 12-04 10:00:01 config.py:100] hidden_size (4096) is not divisible "
                               "by num_heads (48): falling back"])
    assert report.findings == []


def test_hccls_moe_buffer_check_is_the_cause_and_the_tiling_code_its_consequence(tmp_path):
    # the operator's OP_LOGE (vllm-project/vllm-ascend#6130) in the TraceBack under CANN's EZ1008 report
    report = _lines(tmp_path, [
        "[PID: 1035] 2026-09-16-11:00:43.191.752 Execution_Error(EZ1008): Failed to execute operator "
        "MoeDistributeDispatchV2_4507. Reason: Failed to execute tiling function.",
        "TraceBack (most recent call last):",
        "        HCCL_BUFFSIZE is too SMALL, m = 512, k = 7168, topK = 8 NEEDED_HCCL_BUFFSIZE is "
        "((m * k * topK * "
        "sizeof(int8_t)) * 3 + 3MB)= 87MB, HCCL_BUFFSIZE=64MB.",
    ])
    (cause,) = _causes(report)
    assert (cause.id, cause.code) == ("hccl-buffsize-too-small", "HCCL_BUFFSIZE")
    assert "NEEDED_HCCL_BUFFSIZE" in cause.fix
    (ez,) = [f for f in report.findings if f.code == "EZ1008"]
    assert ez.role == "consequence"


def test_a_documented_code_alone_stays_the_cause(tmp_path):
    report = _lines(tmp_path, [
        "[PID: 1035] 2026-09-16-11:00:43.191.752 Execution_Error(EZ1008): Failed to execute operator "
        "MoeDistributeDispatchV2_4507. Reason: Failed to execute tiling function.",
    ])
    assert [(f.code, f.role) for f in report.findings] == [("EZ1008", "cause")]


def test_an_entry_in_a_codes_report_says_what_the_code_meant():
    # EJ0003 (HCCP could not bind) and the port HCCL names on the same report: one cause, the port's
    report = diagnose_paths([DEV / "ej0003-bind-port_vllm-ascend-405.log"])
    assert [(f.id, f.role) for f in report.findings] == [("hccl-port-in-use", "cause"),
                                                         ("code-cann-hccp", "consequence")]


def test_a_shells_core_dumped_line_names_the_signal(tmp_path):
    # zylon-ai/private-gpt#326: the shell's report of a child SIGILL killed, the only line the log holds
    report = _lines(tmp_path, ["Using embedded DuckDB with persistence: data will be stored in: db",
                               "Illegal instruction (core dumped)"])
    assert [(f.id, f.code, f.role) for f in report.findings] == [
        ("process-illegal-instruction", "SIGILL", "cause")]
