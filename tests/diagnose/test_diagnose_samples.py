"""Every real error sample gives the finding its file name names, on the right lines; real outputs without
an error (the other shared samples, clean `ascend-train` logs) give none."""

from __future__ import annotations

from pathlib import Path

import pytest
from sample_support import REPO, SAMPLES_DIR, read_sample

from ascend_ready.checks.diagnose import diagnose_paths

DATA = Path(__file__).with_name("data")

# sample -> {code: [(line, text fragment)]}, lines counted in the output after the `# ---` header
EXPECTED = {
    "error_hccl_EI0006-getting-socket-timeout_vllm-ascend-486.txt": {
        "EI0006": [
            (2, "[rank1]: RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS"),
            (3, "ERR01100 OPS call acl api failed."),
            (4, "[rank1]: EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out."),
        ],
    },
    "error_npu-smi_dcmi-8020-device-used_cann-container-image-46.txt": {
        "-8020": [(3, "dcmi model initialized failed, because the device is used. ret is -8020")],
    },
    "error_runtime_107001-invalid-device-id-EE8888_gpustack-3352.txt": {
        "107001": [
            (1, "SetDevice:Set visible device failed, invalid device=0, input visible devices:4"),
            (2, "rtSetDevice:ErrCode=107001, desc=[device id error], InnerCode=0x7010003"),
            (4, "FuncErrorReason:rtSetDevice execute failed, reason=[device id error]"),
            (5, "aclrtSetDeviceImpl: open device 0 failed, runtime result = 107001."),
        ],
        "EE8888": [
            (3, "FuncErrorReason:report error module_type=3, module_name=EE8888"),
            (6, "GetDevErrMsg:report error module_type=3, module_name=EE8888"),
            (8, "GetDevMsg:Failed to GetDeviceErrMsg, retCode=0x7070001."),  # the plog line under it
        ],
    },
    "error_torch-npu_507033-E30006-OPP-verify-failed_vllm-ascend-4284.txt": {
        "507033": [(1, "NPU function error: c10_npu::SetDevice(device_id_), error code is 507033")],
        "E30006": [(1, "E30006: 2025-11-19-11:14:58.516.606 Failed to verify the OPP")],
    },
    "error_torch-npu_libhccl-not-found_docker-build_MinerU-2537.txt": {
        "libhccl.so": [
            (8, "90.61 ImportError: libhccl.so: cannot open shared object file: No such file or directory")
        ],
    },
}


def _diagnose_text(tmp_path: Path, text: str, name: str = "job.log"):
    path = tmp_path / name
    path.write_text(text)
    return diagnose_paths([path])


def test_every_error_sample_has_an_expectation():
    assert sorted(p.name for p in SAMPLES_DIR.glob("error_*")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_error_sample_gives_its_finding_on_its_lines(tmp_path, name):
    body = read_sample(name)
    report = _diagnose_text(tmp_path, body)
    lines = body.splitlines()
    found = {f.code: f for f in report.findings}
    assert set(found) == set(EXPECTED[name]), [(f.code, f.id) for f in report.findings]
    for code, want in EXPECTED[name].items():
        finding = found[code]
        got = [(e.line, e.text) for e in finding.evidence]
        assert [line for line, _ in got] == [line for line, _ in want]
        for (line, text), (_, fragment) in zip(got, want, strict=True):
            assert fragment in text and text == lines[line - 1]
        assert finding.role == "cause" and finding.causes and finding.fix and finding.sources
        assert all(e.file == str(tmp_path / "job.log") for e in finding.evidence)


def test_samples_are_ordered_by_first_occurrence(tmp_path):
    report = _diagnose_text(
        tmp_path, read_sample("error_runtime_107001-invalid-device-id-EE8888_gpustack-3352.txt")
    )
    assert [f.code for f in report.findings] == ["107001", "EE8888"]
    assert report.findings[0].actor == "pid 42"  # the plog's RUNTIME(42,...) process
    assert report.findings[0].first_seen == "2025-11-18-09:33:13.673.818"


def test_dcmi_8005_sample_names_its_code(tmp_path):
    text = (
        REPO / "tests/parsers/real/error_npu-smi_dcmi-8005-module-initialize_vllm-ascend-2698.txt"
    ).read_text()
    report = _diagnose_text(tmp_path, text)
    assert [(f.code, f.evidence[0].line) for f in report.findings] == [("-8005", 2)]


NON_ERROR = sorted(
    p.name for p in SAMPLES_DIR.iterdir() if p.suffix == ".txt" and not p.name.startswith("error_")
)


@pytest.mark.parametrize("name", NON_ERROR)
def test_non_error_samples_give_no_finding(tmp_path, name):
    report = _diagnose_text(tmp_path, read_sample(name))
    assert report.findings == [], [(f.code, f.evidence[0].text) for f in report.findings]


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("clean_*.log")))
def test_clean_training_logs_give_no_finding(name):
    report = diagnose_paths([DATA / name])
    assert report.findings == [] and report.lines > 5
