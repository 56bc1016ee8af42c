"""What an exception's message means (issue 31, round 10 C): the rules that read an exception's class and the
fixed part of its message as the library prints it, on the real logs they were written from
(tests/diagnose/data/corpus/dev, cited in its manifest), on the same messages as the producers print them here
(CPython, json, PyYAML), and where they must yield: a specific entry on the same line, an object's own
attribute, a warning that quotes the message, a healthy run."""

from __future__ import annotations

import io
import json
import logging
import traceback
import warnings
from pathlib import Path

import pytest
import yaml

from ascend_ready.checks.diagnose import diagnose_paths

CORPUS = Path(__file__).with_name("data") / "corpus"
DEV = CORPUS / "dev"

#: the rules of this theme, by id
RULES = {
    "module-attribute-missing", "call-signature-mismatch", "package-requirement-unmet",
    "package-required-missing", "import-circular", "tensor-shape-mismatch", "tensor-dtype-mismatch",
    "op-dtype-not-implemented",
    "json-malformed", "yaml-malformed", "text-decode-failed", "data-file-malformed", "feature-unsupported",
    "graph-capture-unsupported", "host-memory-exhausted", "recursion-limit-exceeded",
}

# dev log -> (finding id, code) of cause 1
LOGS = {
    "module-attr-removed-numpy_enigma-27.log": ("module-attribute-missing", "numpy"),
    "module-attr-transformers_ai-hub-apps-113.log": ("module-attribute-missing", "transformers"),
    "signature-missing-positional_vllm-ascend-361.log":
        ("call-signature-mismatch", "Qwen2ForCausalLM.forward()"),
    "signature-unexpected-kwarg_aws-neuron-sdk-133.log": ("call-signature-mismatch", "forward()"),
    "dependency-version-check_archlinuxcn-repo-4836.log": ("package-requirement-unmet", "tokenizers"),
    "transformers-requires-protobuf_comfyui-wanvideowrapper-45.log": ("package-required-missing", "protobuf"),
    "circular-import-own-file_diagrams-175.log": ("import-circular", "diagrams"),
    "circular-import-from_simplegmail-14.log": ("import-circular", "simplegmail"),
    "shape-mat1-mat2_pytorch-chatbot-12.log": ("tensor-shape-mismatch", "shape mismatch"),
    "shape-view-invalid_vllm-8054.log": ("tensor-shape-mismatch", "shape mismatch"),
    "dtype-half-float_chatglm-lora-multi-gpu-18.log": ("tensor-dtype-mismatch", "dtype mismatch"),
    "op-half-on-cpu_mergekit-175.log": ("op-dtype-not-implemented", "addmm_impl_cpu_ Half"),
    "json-lfs-pointer_micasense-imageprocessing-58.log": ("json-malformed", "invalid JSON"),
    "json-lfs-quota_traveluav-3.log": ("json-malformed", "invalid JSON"),
    "yaml-mapping-values_swar-chia-plot-manager-250.log": ("yaml-malformed", "invalid YAML"),
    "utf8-bin-as-model-path_simpletransformers-884.log": ("text-decode-failed", "utf-8"),
    "arrow-csv-read-as-json_datasets-6315.log": ("data-file-malformed", "data file"),
    "unsupported-architecture-old-vllm_vllm-10990.log": ("feature-unsupported", "not supported"),
    "dynamo-unsupported-builtin_pytorch-155436.log": ("graph-capture-unsupported", "dynamo"),
    "numpy-unable-to-allocate_single-cell-tutorial-85.log": ("host-memory-exhausted", "host memory"),
    "memoryerror-bare-pickle-load_paddleformers-1490.log": ("host-memory-exhausted", "host memory"),
    "recursion-self-call_torch4keras-1.log": ("recursion-limit-exceeded", "recursion depth"),
    "shape-conv-channels-flag_lggan-8.log": ("tensor-shape-mismatch", "shape mismatch"),
    "cpu-allocator-not-enough_diffusers-787.log": ("host-memory-exhausted", "host memory"),
    "remote-code-needs-flash-attn_deepseek-moe-24.log": ("package-required-missing", "flash_attn"),
}


def _ids(report) -> list[str]:
    return [f.id for f in report.findings]


def _write(tmp_path: Path, lines: list[str], name: str = "job.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _line(name: str, needle: str) -> str:
    """The one line of a corpus log that holds `needle`."""
    [line] = [x for x in (CORPUS / name).read_text(encoding="utf-8").splitlines() if needle in x]
    return line


def test_every_rule_has_a_dev_log():
    assert {rule for rule, _code in LOGS.values()} == RULES


@pytest.mark.parametrize("name", sorted(LOGS))
def test_the_real_log_names_its_cause_with_a_fix(name):
    report = diagnose_paths([DEV / name])
    cause = next(f for f in report.findings if f.role == "cause")
    assert (cause.id, cause.code) == LOGS[name], [(f.id, f.code) for f in report.findings]
    assert cause.kind == "fault" and cause.fix and cause.causes and cause.sources
    # the bare Python exception around it is its evidence, not a finding of its own
    assert "python-exception" not in _ids(report)


def _printed(exc: BaseException) -> str:
    """The exception's last traceback line, as Python prints it."""
    return traceback.format_exception_only(type(exc), exc)[-1].rstrip("\n")


def _raised(fn) -> str:
    try:
        fn()
    except BaseException as exc:  # any exception is the test's subject
        return _printed(exc)
    raise AssertionError("did not raise")


def _takes_one(a):
    return a


def _recurse():
    return _recurse()


@pytest.mark.parametrize(
    ("make", "rule"),
    [
        (lambda: json.nosuch, "module-attribute-missing"),
        (lambda: _takes_one(1, b=2), "call-signature-mismatch"),
        (lambda: _takes_one(), "call-signature-mismatch"),
        (lambda: _takes_one(1, 2), "call-signature-mismatch"),
        (lambda: json.loads(""), "json-malformed"),
        (lambda: json.loads('{"a": 1,}'), "json-malformed"),
        (lambda: yaml.safe_load("a: b: c"), "yaml-malformed"),
        (lambda: b"\x80abc".decode("utf-8"), "text-decode-failed"),
        (_recurse, "recursion-limit-exceeded"),
    ],
)
def test_the_message_as_the_producer_prints_it(tmp_path, make, rule):
    line = _raised(make)
    report = diagnose_paths([_write(tmp_path, ["step 1 loss 0.5", line])])
    assert [(f.id, f.role) for f in report.findings] == [(rule, "cause")], line


@pytest.mark.parametrize(
    ("name", "needle", "specific"),
    [
        # torch_npu's own entry names the torch_npu / framework pair (pytorch#23)
        ("heldout/torch-npu-attr-missing_pytorch-23.log", "has no attribute", "torch-npu-version-mismatch"),
        # vLLM's quantization message (vllm#1941) is the quantization entry's, not "not supported" in general
        ("dev/vllm-quantization-dtype_vllm-1941.log", "is not supported", "vllm-quantization-unsupported"),
        # a shadowing folder's missing __version__ (vllm-ascend#718)
        ("dev/vllm-no-version-attr-shadow_vllm-ascend-718.log", "AttributeError: module",
         "package-shadowed-by-directory"),
    ],
)
def test_a_specific_entry_on_the_same_line_wins(tmp_path, name, needle, specific):
    report = diagnose_paths([_write(tmp_path, [_line(name, needle)])])
    assert _ids(report) == [specific]


def test_an_objects_own_attribute_is_no_version_mismatch(tmp_path):
    # "'dict' object has no attribute 'error'" (vllm-omni#890) is as often the caller's bug: only the wrapper
    line = _line("heldout/e40021-compile-cast-500002_vllm-omni-890.log", "object has no attribute")
    assert not RULES & set(_ids(diagnose_paths([_write(tmp_path, [line])])))


def test_a_circular_import_is_not_read_as_a_missing_attribute():
    report = diagnose_paths([DEV / "circular-import-own-file_diagrams-175.log"])
    assert _ids(report) == ["import-circular"]


def _logged_warning(message: str) -> str:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    logger = logging.getLogger("ascend-ready-test-exception-messages")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.warning("falling back: %s", message)
    finally:
        logger.removeHandler(handler)
    return out.getvalue().rstrip("\n")


@pytest.mark.parametrize("name", sorted(LOGS))
def test_a_warning_that_quotes_the_message_names_nothing(tmp_path, name):
    report = diagnose_paths([DEV / name])
    line = next(f for f in report.findings if f.role == "cause").evidence[0].text
    quoted = [
        _logged_warning(line),
        warnings.formatwarning(line, UserWarning, "/opt/venv/site-packages/x/load.py", 42).rstrip(),
    ]
    assert not RULES & set(_ids(diagnose_paths([_write(tmp_path, [*quoted, "step 10 loss 1.23"])])))


def test_healthy_runs_give_none_of_these():
    for path in sorted((CORPUS / "healthy").glob("*.log")) + sorted(CORPUS.parent.glob("clean_*.log")):
        assert not RULES & set(_ids(diagnose_paths([path]))), path.name
