"""Issue 31, round 10 G: the CUDA stack's host and device faults users bring from the GPU runs they migrate -
the NVIDIA kernel module apart from its libraries, an uncorrectable ECC error, docker without a GPU runtime,
a kernel's illegal memory access, DDP under reentrant checkpointing, two NCCL ranks on one GPU. Each rule
diagnoses the real lines it was written from (tests/diagnose/data/corpus/dev, cited in its manifest), and each
is shown where it must give way or stay silent: a consequence after it, a warning, a healthy run, a line no
prefilter pattern passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_ready.checks.diagnose import diagnose_paths
from ascend_ready.checks.diagnose.model import load_knowledge_base

CORPUS = Path(__file__).with_name("data") / "corpus"


def _report(name: str):
    return diagnose_paths([CORPUS / name])


def _cause(name: str):
    report = _report(name)
    return next(f for f in report.findings if f.role == "cause"), report


# log -> (finding id, code) of cause 1: each rule on the thread it was written from
CASES = {
    "dev/nvml-driver-library-mismatch_translations-1167.log":
        ("nvml-driver-library-mismatch", "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
    "dev/nvml-mismatch-container-hook_k8s-device-plugin-1431.log":
        ("nvml-driver-library-mismatch", "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
    "dev/gpu-ecc-uncorrectable-accelerate_accelerate-1192.log":
        ("gpu-ecc-uncorrectable", "cudaErrorECCUncorrectable"),
    "dev/docker-gpus-no-toolkit_llamafactory-5268.log": ("docker-gpu-runtime-missing", "--gpus"),
    "dev/cuda-illegal-memory-access_tegnas-19.log": ("cuda-illegal-memory-access", "cudaErrorIllegalAddress"),
    "dev/ddp-reentrant-checkpoint-focalnet_focalnet-4.log":
        ("ddp-reentrant-checkpointing", "mark a variable ready only once"),
}

OURS = {"nvml-driver-library-mismatch", "gpu-ecc-uncorrectable", "docker-gpu-runtime-missing",
        "nccl-duplicate-gpu", "cuda-illegal-memory-access", "ddp-reentrant-checkpointing"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_rule_names_the_cause_of_the_log_it_was_written_from(name):
    cause = _cause(name)[0]
    assert (cause.id, cause.code) == CASES[name]
    assert cause.fix and cause.causes and cause.sources


def test_the_requested_capability_fills_the_title():
    assert "[[gpu]]" in _cause("dev/docker-gpus-no-toolkit_llamafactory-5268.log")[0].title


def test_the_ecc_fault_comes_first_and_the_stop_signals_follow_it():
    report = _report("dev/gpu-ecc-uncorrectable-accelerate_accelerate-1192.log")
    roles = {f.id: f.role for f in report.findings}
    assert roles["gpu-ecc-uncorrectable"] == "cause"
    assert roles["stopped-by-signal"] == "consequence"


def test_the_driver_mismatch_is_named_before_the_container_hook_that_reports_it():
    report = _report("dev/nvml-mismatch-container-hook_k8s-device-plugin-1431.log")
    assert report.findings[0].id == "nvml-driver-library-mismatch"


def test_the_parameter_line_under_the_ddp_error_is_not_a_second_finding():
    report = _report("dev/ddp-reentrant-checkpoint-focalnet_focalnet-4.log")
    assert [f.id for f in report.findings] == ["ddp-reentrant-checkpointing"]
    assert report.findings[0].matches == 1


@pytest.mark.parametrize("name", ["healthy/checkpoint-use-reentrant-warning_ms-swift-2590.log",
                                  "healthy/nvidia-smi-after-reboot_nvidia-container-toolkit-394.log"])
def test_healthy_runs_give_none_of_these(name):
    # torch's use_reentrant UserWarning and nvidia-smi's "Volatile Uncorr. ECC" column are not the faults
    assert not _report(name).findings


def _kb_examples(entry_id: str) -> list[str]:
    return next(e for e in load_knowledge_base().entries if e.id == entry_id).examples


def test_two_ranks_on_one_gpu_are_named_where_the_line_passes_the_prefilter(tmp_path):
    log = tmp_path / "nccl.log"
    log.write_text("\n".join(_kb_examples("nccl-duplicate-gpu")) + "\n")
    cause = diagnose_paths([log]).findings[0]
    assert cause.id == "nccl-duplicate-gpu"
    assert "0 and 1" in cause.title and "1000" in cause.title


def test_nccls_own_warn_line_passes_no_prefilter_pattern(tmp_path):
    # NCCL prints `init.cc:N NCCL WARN Duplicate GPU detected ...` and torch puts the same text on the line
    # under `Last error:`: neither says error, so neither is read (see the note at the top of the entries)
    line = next(x for x in _kb_examples("nccl-duplicate-gpu")).replace("Last error: ", "")
    log = tmp_path / "nccl.log"
    log.write_text(f"smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN {line}\n")
    assert not {f.id for f in diagnose_paths([log]).findings} & OURS


def test_every_example_of_these_rules_is_named_by_its_own_rule(tmp_path):
    for entry_id in sorted(OURS):
        for i, line in enumerate(_kb_examples(entry_id)):
            log = tmp_path / f"{entry_id}-{i}.log"
            log.write_text(line + "\n")
            assert entry_id in {f.id for f in diagnose_paths([log]).findings}, line
