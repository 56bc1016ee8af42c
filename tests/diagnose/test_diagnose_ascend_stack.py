"""Issue 31, round 10 D: the Ascend stack's families the knowledge base had no rule for - MindIE's start-up,
the precision mode and the data types a SoC's operators take, CANN older than torch_npu, Megatron/MindSpeed's
pipeline split, HCCL's environment variables. Each rule diagnoses the real lines it was written from
(tests/diagnose/data/corpus/dev, cited in its manifest), and each is shown where it must give way or stay
silent: a more specific cause on the same log, a warning that falls back, a healthy run."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_ready.checks.diagnose import diagnose_paths

CORPUS = Path(__file__).with_name("data") / "corpus"


def _report(name: str):
    return diagnose_paths([CORPUS / name])


def _cause(name: str):
    report = _report(name)
    return next(f for f in report.findings if f.role == "cause"), report


# log -> (finding id, code) of cause 1: each structural rule on the thread it was written from
CASES = {
    "dev/mindie-engine-init-failed_gpustack-2221.log": ("mindie-server-start-failed", "MindIE start"),
    "dev/mindie-model-type-unsupported_gpustack-5317.log": ("mindie-model-type-unsupported", "qwen3_vl_moe"),
    "dev/mindie-model-type-unsupported_gpustack-1765.log": ("mindie-model-type-unsupported", "falcon_mamba"),
    "dev/ez1001-keep-type-fp32-matmul_llamafactory-4388.log": ("cube-keep-dtype-unsupported", "EZ1001"),
    "dev/ez1001-bf16-not-implemented-310p_llamafactory-7522.log": ("aclnn-dtype-unsupported", "EZ1001"),
    "dev/cann-function-missing-aclgraph_vllm-ascend-1261.log": ("cann-api-missing", "aclmdlRICaptureBegin"),
    "dev/cann-aclnn-not-in-opapi_vllm-8054.log": ("cann-api-missing", "aclnnPromptFlashAttentionV3"),
    "dev/pipeline-layers-not-divisible_bionemo-recipes-784.log":
        ("pipeline-layers-not-divisible", "pipeline layers"),
    "dev/hccl-socket-ifname-not-found_hccl-ei0001-doc.log":
        ("hccl-socket-ifname-not-found", "HCCL_SOCKET_IFNAME"),
    "dev/hccl-env-invalid_hccl-ei0001-doc.log": ("hccl-env-invalid", "EI0001"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_rule_names_the_cause_of_the_log_it_was_written_from(name):
    cause = _cause(name)[0]
    assert (cause.id, cause.code) == CASES[name]
    assert cause.fix and cause.causes and cause.sources


def test_the_variable_parts_fill_the_title():
    assert "DT_BFLOAT16" in _cause("dev/ez1001-bf16-not-implemented-310p_llamafactory-7522.log")[0].title
    assert "DT_FLOAT" in _cause("dev/ez1001-keep-type-fp32-matmul_llamafactory-4388.log")[0].title
    assert "(abc)" in _cause("dev/hccl-socket-ifname-not-found_hccl-ei0001-doc.log")[0].title
    assert "HCCL_RDMA_SL" in _cause("dev/hccl-env-invalid_hccl-ei0001-doc.log")[0].title


def test_the_code_the_rule_names_is_not_reported_again_by_the_code_lists():
    # EZ1001 and EI0001 are the codes on those lines: the entry is their finding, the code book's is not added
    for name in ("dev/ez1001-bf16-not-implemented-310p_llamafactory-7522.log",
                 "dev/ez1001-keep-type-fp32-matmul_llamafactory-4388.log",
                 "dev/hccl-env-invalid_hccl-ei0001-doc.log"):
        assert not [f.id for f in _report(name).findings if f.id.startswith("code-")], name


def test_the_interfaces_hccl_lists_are_evidence_of_the_one_finding():
    report = _report("dev/hccl-socket-ifname-not-found_hccl-ei0001-doc.log")
    assert [f.id for f in report.findings] == ["hccl-socket-ifname-not-found"]
    assert report.findings[0].matches == 4


def test_the_model_type_is_the_cause_not_the_python_exception_on_its_line():
    report = _report("dev/mindie-model-type-unsupported_gpustack-5317.log")
    assert [f.id for f in report.findings] == ["mindie-model-type-unsupported"]


def test_mindie_start_failure_follows_the_listen_failure_that_stopped_it():
    report = _report("dev/mindie-listen-failed_gpustack-3894.log")
    roles = [(f.id, f.role) for f in report.findings]
    assert roles == [("mindie-listen-failed", "cause"), ("mindie-server-start-failed", "consequence")]


def test_the_precision_mode_failure_follows_cann_s_own_record_when_it_is_printed():
    report = _report("dev/acl-500001-precision-mode-ge-init_vllm-ascend-692.log")
    roles = {f.id: f.role for f in report.findings}
    assert roles["eh9999-acl-inner"] == "cause"
    assert roles["acl-precision-mode-set-failed"] == "consequence"
    mode = next(f for f in report.findings if f.id == "acl-precision-mode-set-failed")
    assert mode.code == "500001" and mode.fix


def test_torch_npu_s_fallback_warning_of_the_same_words_names_nothing():
    # torch_npu warns "Failed to find function aclrtCreateEventExWithFlag" in a run that worked
    lines = (CORPUS / "healthy/hccl-init-success_llamafactory-6309.log").read_text(encoding="utf-8")
    assert "Failed to find function aclrtCreateEventExWithFlag" in lines
    assert _report("healthy/hccl-init-success_llamafactory-6309.log").findings == []


def test_a_healthy_mindie_server_names_nothing():
    assert _report("healthy/mindie-serving-200_gpustack-2898.log").findings == []


def test_the_tensor_parallel_head_check_stays_with_its_own_entry():
    # vLLM's "Total number of attention heads must be divisible by tensor parallel size": no layer split
    ids = [f.id for f in _report("dev/vllm-tp-heads-divisible_fsdrive-21.log").findings]
    assert "parallel-size-not-divisor" in ids and "pipeline-layers-not-divisible" not in ids
