"""Every log family on real lines (tests/diagnose/data/real/, cited in data/README.md), at least two
wordings where two exist: what each gives, its role, and what it follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_ready.checks.diagnose import diagnose_paths

REAL = Path(__file__).with_name("data") / "real"


def _diagnose(tmp_path: Path, lines: list[str], name: str = "job.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return diagnose_paths([path])


def _summary(report) -> list[tuple]:
    return [(f.code, f.role, f.caused_by) for f in report.findings]


# file -> [(code, role, caused_by)], in the order the report lists them
EXPECTED = {
    # HCCP: the last training process still holds the device; the ERR02200 line, the RuntimeError and the
    # TraceBack under EJ0001 are its evidence, not findings of their own
    "ej0001_llamafactory-3839.log": [("EJ0001", "cause", None)],
    "ej0001_verl-332.log": [("EJ0001", "cause", None)],
    # the device's exception record is the first failure; the runtime code and the EZ9999 envelope repeat it
    "507035_ez9999_vllm-ascend-6359.log": [
        ("aivec exception", "cause", None),
        ("507035", "consequence", "aivec exception on device 0"),
        ("EZ9999", "consequence", "aivec exception on device 0"),
    ],
    "507034_vllm-ascend-14802.log": [
        ("507034", "cause", None),
        ("EE9999", "consequence", "507034 on pid 15252"),
    ],
    "mte_out_of_range_vllm-ascend-7676.log": [
        ("MTE out of range", "cause", None),
        ("aivector exception", "consequence", "MTE out of range on pid 16884"),
    ],
    # the HCCL notify wait is the first failure, the runtime's generic task timeout its consequence
    "ei0002_507048_vllm-ascend-1443.log": [
        ("EI0002", "cause", None),
        ("507048", "consequence", "EI0002 on rank 8"),
    ],
    "107020_vllm-ascend-14214.log": [
        ("107020", "cause", None),
        ("EE9999", "consequence", "107020 on device 5"),
    ],
    "tbe_common_pytorch-29.log": [("tbe", "cause", None)],
    "atb_setup_vllm-ascend-393.log": [("ATB setup", "cause", None)],
    "atb_setup_vllm-ascend-6842.log": [("ATB setup", "cause", None)],
    "oom_sglang-29838.log": [("NPU out of memory", "cause", None)],
    "oom_fla-npu-149.log": [("NPU out of memory", "cause", None)],
    "dmesg_oom_tranx-41.log": [("OOM killer", "cause", None)],
    "libatb_paddle-69146.log": [("libatb.so", "cause", None)],
}


def test_every_real_log_has_an_expectation():
    assert sorted(p.name for p in REAL.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_log_gives_its_cause(name):
    report = diagnose_paths([REAL / name])
    assert _summary(report) == EXPECTED[name], [(f.code, f.actor) for f in report.findings]


def test_one_error_is_one_finding_with_all_its_lines():
    # vllm-ascend#6359: `EZ9999: Inner Error!` (no pid) and `EZ9999[PID: 1878198] ...` are one error
    report = diagnose_paths([REAL / "507035_ez9999_vllm-ascend-6359.log"])
    ez = next(f for f in report.findings if f.code == "EZ9999")
    assert [e.line for e in ez.evidence] == [7, 8] and ez.matches == 2
    assert ez.evidence[0].text.endswith("EZ9999: Inner Error!")
    # the RuntimeError and torch_npu's ERR00100 line are the runtime code's evidence, not a finding
    runtime = next(f for f in report.findings if f.code == "507035")
    assert [e.line for e in runtime.evidence] == [3, 4]
    assert not any(f.code in ("RuntimeError", "ERR00100") for f in report.findings)


def test_the_cann_stack_under_an_error_is_its_evidence():
    report = diagnose_paths([REAL / "ej0001_llamafactory-3839.log"])
    [finding] = report.findings
    # RuntimeError, ERR02200, EJ0001, then the TraceBack's [FUNC:...] lines
    assert [e.line for e in finding.evidence] == [3, 4, 5, 8, 9, 10, 11, 12] and finding.matches == 8
    assert "Fail to get sq reg virtual addr" in finding.evidence[4].text
    assert finding.check_ids == ["npu.processes"] and "10 s" in finding.fix


@pytest.mark.parametrize(
    ("line", "code"),
    [
        # NPU out of memory in its wordings: torch_npu's RuntimeError (vllm-ascend#19), torch 2.5's
        # OutOfMemoryError (sglang#29838), the bare allocator message (flash-linear-attention-npu#149)
        ("RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 0; 60.97 GiB total capacity; "
         "10.24 GiB already allocated; 10.24 GiB current active; 19.52 MiB free; 10.65 GiB reserved in total "
         "by PyTorch)", "NPU out of memory"),
        ("torch.OutOfMemoryError: NPU out of memory. Tried to allocate 72.00 MiB (NPU 0; 61.27 GiB total "
         "capacity; 56.05 GiB already allocated)", "NPU out of memory"),
        ("NPU out of memory. Tried to allocate more than 1EB memory", "NPU out of memory"),
        # any CANN / driver / NNAL library the loader cannot find, named: npu-smi without the driver's
        # libraries (the shape of issue 21's report), libatb for Paddle (Paddle#69146), libhccl (MinerU#2537)
        ("npu-smi: error while loading shared libraries: libc_sec.so: cannot open shared object file: "
         "No such file or directory", "libc_sec.so"),
        ("ValueError: (InvalidArgument) Fail to open library: /x/libpaddle-custom-npu.so with error: "
         "libatb.so: cannot open shared object file: No such file or directory", "libatb.so"),
        ("90.61 ImportError: libhccl.so: cannot open shared object file: No such file or directory",
         "libhccl.so"),
        ("OSError: libascend_hal.so: cannot open shared object file: No such file or directory",
         "libascend_hal.so"),
        ("ImportError: /usr/local/Ascend/ascend-toolkit/latest/lib64/libopapi.so: cannot open shared object "
         "file: No such file or directory", "libopapi.so"),
        # the device's exception record in its wordings (the vendor's AI Core Error page; vllm-ascend#6359;
        # #5509) and the runtime's reason line (Ascend/pytorch#66)
        ("EZ9999: The error from device(chipId:4, dieId:0), serial number is 2, there is an aivec error "
         "exception, core id is 11, error code = 0x10", "aivec exception"),
        ("        The error from device(chipId:0, dieId:0), serial number is 10, there is an exception of "
         "fftsplus aivector error, core id is 8, error code = 0", "aivector exception"),
        ("        rtDeviceSynchronizeWithTimeout execute failed, reason=[vector core exception]"
         "[FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]", "vector core exception"),
        # the HCCL plog's root-info detection (HCCL's rank_info_detect.cc messages)
        ("[ERROR] HCCL(7988,all_reduce_test):2025-03-19-04:16:13.978.979 [rank_info_detect.cc:143] "
         "[RankInfoDetect::SetupAgent] get hostIp fail.", "RankInfoDetect"),
        # the kernel's OOM killer: dmesg's two clocks (pcyin/tranX#41, equinor/ert#7797)
        ("[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244kB", "OOM killer"),
        ("2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (perl) total-vm:87033376kB",
         "OOM killer"),
        ("bash: npu-smi: command not found", "npu-smi"),
        # a Ray worker's death as the raylet (vllm-ascend#1778) and the driver (verl#4921) report it
        ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
         "troubleshoot the problem, check the logs for the dead worker.", "Ray worker died"),
        ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
         "Ray worker died"),
        # the master port taken by another job: torch's two wordings (ms-swift#3988, Tune-A-Video#90)
        ("RuntimeError: The server socket has failed to listen on any local network address. port: 29500, "
         "useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use", "MASTER_PORT"),
        ("RuntimeError: The server socket has failed to listen on any local network address. The server "
         "socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).", "MASTER_PORT"),
        # vLLM's engine with nothing more specific above it (vllm#38529)
        ("(EngineCore pid=1879) ERROR 03-29 12:59:53 [core.py:1099] EngineCore failed to start.",
         "vLLM engine"),
    ],
)
def test_family_wordings(tmp_path, line, code):
    report = _diagnose(tmp_path, ["step 1 loss 0.5", line])
    first, *rest = report.findings
    assert (first.code, first.role, first.evidence[0].line) == (code, "cause", 2)
    # the same line read as an envelope (EZ9999 around a device record) follows it
    assert all(f.role == "consequence" and f.caused_by == code for f in rest)


def test_a_documented_code_no_entry_names_gets_its_family_meaning(tmp_path):
    # EI0013 (Execution_Error_ROCE_CQE) and 507056 have no signature entry of their own here; the vendor
    # lists name them
    report = _diagnose(tmp_path, [
        "[rank2]: EI0013: [PID: 7] 2025-06-01-10:00:00.000.001 An error CQE occurred during operator "
        "execution.",
        "[rank3]: RuntimeError: NPU function error: aclrtSynchronizeStream, error code is 507016",
    ])
    ei, rt = report.findings
    assert (ei.code, ei.id, ei.rank) == ("EI0013", "code-cann-hccl", 2)
    assert ei.title == "HCCL (collective communication) error EI0013: Execution Error ROCE CQE"
    assert "hccl.net_health" in ei.check_ids and ei.sources[0].startswith("https://github.com/hicann/runtime/")
    assert (rt.code, rt.id, rt.layer) == ("507016", "code-acl-internal", "runtime")
    assert rt.title.startswith("ACL_ERROR_RT_AICORE_TRAP_EXCEPTION: aicore trap exception")


def test_an_undocumented_code_is_still_reported(tmp_path):
    report = _diagnose(tmp_path, [
        "EX1234: [PID: 9] 2026-01-01-00:00:00.000.000 Something new went wrong.",
        "EI0999: [PID: 9] 2026-01-01-00:00:01.000.000 A newer HCCL code.",
        "RuntimeError: NPU function error: aclrtFoo, error code is 507999",
    ])
    by_code = {f.code: f for f in report.findings}
    assert [(c, by_code[c].title) for c in ("EX1234", "EI0999", "507999")] == [
        ("EX1234", "unknown CANN code EX1234"),
        ("EI0999", "unknown CANN code EI0999 (HCCL (collective communication))"),
        ("507999", "unknown ACL return code 507999 (ACL/runtime return code (internal or device failure))"),
    ]
    # the bare return code is what the call returned; the CANN codes of the same report say why
    assert by_code["507999"].role == "consequence" and by_code["EX1234"].role == "cause"


@pytest.mark.parametrize(
    "line",
    [
        "commit E10001a3 of the model repo",  # inside a word
        "0xE10001 is no code",  # a hex number
        "E1201 10:51:32.852000 14023 torch/distributed/elastic/multiprocessing/api.py:1002] a glog line",
        "loading /models/E10002.bin",  # a path
        "error code is 6",  # HCCL's own code, no ACL return code
        "sha: 3fE30006bd",
    ],
)
def test_code_lookalikes_are_no_findings(tmp_path, line):
    assert _diagnose(tmp_path, [line]).findings == []


def test_a_python_exception_is_evidence_of_the_code_it_carries(tmp_path):
    # Ascend/pytorch#54: the RuntimeError carries no code; EI9999 under it says what failed
    report = _diagnose(tmp_path, [
        "RuntimeError: ACL stream synchronize failed.",
        "EI9999: Inner Error!",
        "EI9999: 2024-10-21-10:42:00.358.410  The error from device(chipId:3, dieId:0), serial number is 9, "
        "hccl fftsplus task timeout occurred during task execution, stream_id:5, sq_id:5, task_id:38827",
    ])
    [finding] = report.findings
    assert finding.code == "EI9999" and [e.line for e in finding.evidence] == [1, 2, 3]


def test_a_python_exception_alone_is_the_finding(tmp_path):
    lines = ["Traceback (most recent call last):", "KeyError: 'decoder.layers.0.weight'"]
    report = _diagnose(tmp_path, lines)
    assert [(f.code, f.role) for f in report.findings] == [("KeyError", "cause")]


def test_another_packages_missing_symbol_is_no_finding(tmp_path):
    # Ascend/pytorch#10: bitsandbytes' CPU build on an NPU host, the training ran
    line = ("OSError: /envs/NPU/lib/python3.9/site-packages/bitsandbytes/libbitsandbytes_cpu.so: undefined "
            "symbol: cadam32bit_grad_fp32")
    assert [f.code for f in _diagnose(tmp_path, [line]).findings] == ["OSError"]  # only the catch-all
    torch_npu = ("ImportError: /usr/local/python3.10.14/lib/python3.10/site-packages/torch_npu/lib/"
                 "libtorch_npu.so: undefined symbol: _ZN3atb15CreateOperation")
    assert [f.code for f in _diagnose(tmp_path, [torch_npu]).findings] == ["undefined symbol"]


def test_the_oom_killer_explains_a_dead_ray_worker(tmp_path):
    lines = [(REAL / "dmesg_oom_tranx-41.log").read_text().splitlines()[1],
             "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."]
    assert _summary(_diagnose(tmp_path, lines)) == [
        ("OOM killer", "cause", None), ("Ray worker died", "consequence", "OOM killer")
    ]


def test_a_crash_with_nothing_before_it_is_the_finding_and_after_an_error_its_evidence(tmp_path):
    # torchrun's line for a worker that aborted (NVIDIA/nccl#1437)
    crash = ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 1 "
             "(pid: 886322) of binary: /idas/users/yaofengqin/.conda/envs/allspark/bin/python")
    assert _summary(_diagnose(tmp_path, [crash])) == [("crash", "cause", None)]
    # after HCCP's EJ0001 (LlamaFactory#3839) the abort is that error's evidence
    ej = (REAL / "ej0001_llamafactory-3839.log").read_text().splitlines()[4]
    report = _diagnose(tmp_path, [ej, crash])
    assert _summary(report) == [("EJ0001", "cause", None)] and report.findings[0].matches == 2


@pytest.mark.parametrize(("line", "specific"), [
    ("ModuleNotFoundError: No module named 'torch_npu'", "torch-npu-not-installed"),
    ("ModuleNotFoundError: No module named 'tbe.common'", "tbe-python-missing"),
])
def test_a_general_rule_yields_to_the_specific_entry_on_its_line(tmp_path, line, specific):
    report = _diagnose(tmp_path, [line])
    assert [f.id for f in report.findings] == [specific]


@pytest.mark.parametrize(("line", "general"), [
    ("ModuleNotFoundError: No module named 'peft'", "module-not-found peft"),
    ("ModuleNotFoundError: No module named 'vllm_ascend.ops'", "submodule-not-found vllm_ascend.ops"),
    ("PermissionError: [Errno 13] Permission denied: '/dev/davinci3'", "permission-denied EACCES"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'npu-smi'", "command-not-found ENOENT"),
    ("OSError: [Errno 113] No route to host", "no-route-to-host EHOSTUNREACH"),  # xingyizhou/GTR#39
    ("NotImplementedError: <class 'vllm_ascend.attention.attention_v1.AscendAttentionBackend'> is not yet "
     "supported", "feature-not-implemented not implemented"),  # vllm-ascend#11622
])
def test_a_general_rule_names_what_its_line_names(tmp_path, line, general):
    report = _diagnose(tmp_path, [line])
    assert [f"{f.id} {f.code}" for f in report.findings] == [general]
    assert report.findings[0].fix


CORPUS = Path(__file__).with_name("data") / "corpus"


def test_an_errno_line_that_says_no_error_word_still_reaches_the_patterns(tmp_path):
    # MIC-DKFZ/nnUNet#227: a data-loading worker prints ' [Errno 13] Permission denied: ...' and nothing else
    line = (CORPUS / "heldout/errno13-no-error-word_nnunet-227.log").read_text().splitlines()[4]
    assert "rror" not in line and "ail" not in line
    assert [f"{f.id} {f.code}" for f in _diagnose(tmp_path, [line]).findings] == ["permission-denied EACCES"]


def test_an_op_without_a_kernel_names_the_op_and_its_backend_and_the_fallback_warning_is_no_finding(tmp_path):
    # torch_npu's CPU fallback warning alone is harmless (opendatalab/MinerU#1695); the dispatcher's error
    # names the op and the backend it had no kernel for (vllm-project/vllm#12441)
    warning = (CORPUS / "healthy/npu-cpu-fallback-warnings_mineru-1695.log").read_text().splitlines()[0]
    assert _diagnose(tmp_path, [warning]).findings == []
    error = (CORPUS / "dev/dispatcher-no-cuda-kernel_vllm-12441.log").read_text().splitlines()[0]
    report = _diagnose(tmp_path, [warning, error])
    assert [f"{f.id} {f.code}" for f in report.findings] == ["op-no-kernel-for-backend _C::rms_norm on CUDA"]
