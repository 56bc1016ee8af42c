"""The bandwidth and FLOPS checks where ascend-dmi is not installed: torch measures HBM, host-device and
device-device copies and an FP16 matmul (checks/resources/perf_torch.py), judged against the same SKU floors;
on a node torch sees no NPU on, the figures are shown and not compared (a warning, never a pass).

The probe's output is what its code really prints: run here on this machine's CPU torch, and on an "npu"
whose devices are this CPU (the same code, `_accelerator` and `_dev` swapped), then given chosen figures.
"""

from __future__ import annotations

import io
import re
import subprocess
import types

import pytest
from checks_fakenode import TORCH_BW_SKIPPED, fake_host

from ascend_ready.checks.parsers.torch_bandwidth import parse_torch_bandwidth
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.resources.perf_torch import TORCH_BW, TORCH_BW_CODE
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import ProbeResult, Snapshot
from ascend_ready.errors import ParseError

COPIES = ("npu.hbm_bandwidth", "npu.h2d_bandwidth", "npu.d2h_bandwidth", "npu.p2p_bandwidth")
PERF = (*COPIES, "npu.flops")
#: a healthy 910B3 of an Atlas 800T A2 (floors 1440, 22, 22, 50.4 GB/s, 266.1 TFLOPS): ascend-dmi's figures
#: (FlagPerf), and a matmul at 0.92 x the 313 TFLOPS FP16 peak
HEALTHY = {"hbm": 1500.0, "h2d": 24.9, "d2h": 24.9, "p2p": 54.68, "flops": 288.0}


def _run_probe(kind: str = "cpu", count: int = 1) -> str:
    """What the probe's code prints, run in-process with tiny copies (`kind` npu: this CPU as its devices)."""
    import torch

    ns: dict = {"__name__": "probe"}
    exec(compile(TORCH_BW_CODE, "torch-bandwidth", "exec"), ns)
    if kind != "cpu":
        shim = types.SimpleNamespace(device_count=lambda: count, set_device=lambda d: None,
                                     synchronize=lambda d=None: None)
        ns["_accelerator"] = lambda: (kind, shim, {"torch_npu": "2.1.0.post8"})
        ns["_dev"] = lambda torch_, k, d: torch.device("cpu")
    out = io.StringIO()
    ns["measure"](size=1 << 16, pair_size=1 << 12, iters=2, flops_n=64, out=out)
    return out.getvalue()


@pytest.fixture(scope="module")
def npu_output() -> str:
    return _run_probe("npu", 8)


def _with(text: str, figures: dict[str, float], slow: dict[str, float] | None = None) -> str:
    """The probe's lines with chosen GB/s: `figures` per metric, `slow` per line prefix (`h2d 2`)."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] in figures:
            n = 3 if words[0] == "p2p" else 2
            value = next((v for k, v in (slow or {}).items() if line.startswith(k + " ")), figures[words[0]])
            words[n] = f"{value:.3f}"
        out.append(" ".join(words))
    return "\n".join(out) + "\n"


def _no_dmi_host(torch_text: str, **kw):
    """An A2 node (910B3) without the toolbox: every ascend-dmi call exits 127, torch measured instead."""
    host = fake_host(**kw)
    for pid, res in list(host.probes.items()):
        if pid.startswith("ascend-dmi-"):
            host.probes[pid] = ProbeResult(command=res.command, rc=127,
                                           stderr="sh: 1: exec: ascend-dmi: not found\n")
    host.probes["torch-bandwidth"] = ProbeResult(command=host.probes["torch-bandwidth"].command, rc=0,
                                                 stdout=torch_text)
    return host


def _judge(*hosts):
    prof = load_profile("atlas-800t-a2")
    report = run_checks(Snapshot(hosts={h.name: h for h in hosts}), {h.name: prof for h in hosts},
                        select_checks("full", select=list(PERF)))
    return {(r.host, r.check_id): r for r in report.results}


def test_the_probe_code_runs_on_cpu_and_its_output_parses():
    parsed = parse_torch_bandwidth(_run_probe())
    assert (parsed.device, parsed.count, list(parsed.hbm)) == ("cpu", 1, ["cpu"]) and parsed.hbm["cpu"] > 0
    assert not parsed.h2d and not parsed.p2p and "torch" in parsed.versions
    assert list(parsed.flops) == ["cpu"] and parsed.flops["cpu"] > 0 and parsed.flops_dtype == "fp32"


def test_the_probe_code_on_an_accelerator_prints_every_device_and_pair(npu_output):
    parsed = parse_torch_bandwidth(npu_output)
    assert (parsed.device, parsed.count, parsed.versions["torch_npu"]) == ("npu", 8, "2.1.0.post8")
    assert sorted(parsed.hbm) == sorted(parsed.h2d) == sorted(parsed.d2h) == [str(d) for d in range(8)]
    assert sorted(parsed.flops) == [str(d) for d in range(8)] and parsed.flops_dtype == "fp16"
    assert len(parsed.p2p) == 56 and (0, 0) not in parsed.p2p
    assert parsed.host_memory == "pinned" or parsed.host_memory == "pageable"


def test_the_probe_shell_measures_nothing_where_ascend_dmi_is_on_the_path(tmp_path):
    (tmp_path / "ascend-dmi").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "ascend-dmi").chmod(0o755)
    probe = TORCH_BW(load_profile("atlas-800t-a2"))
    res = subprocess.run(["sh", "-c", probe.shell], capture_output=True, text=True, timeout=30,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert (res.returncode, res.stdout) == (0, TORCH_BW_SKIPPED)
    assert parse_torch_bandwidth(res.stdout).skipped.startswith("ascend-dmi is installed")


def test_without_ascend_dmi_torch_measures_and_a_healthy_node_passes(npu_output):
    got = _judge(_no_dmi_host(_with(npu_output, HEALTHY)))
    assert {c: r.status for (_, c), r in got.items()} == dict.fromkeys(PERF, "pass"), got
    lines = "\n".join(got[("node01", "npu.h2d_bandwidth")].evidence)
    assert "measured with torch (torch " in lines and "torch_npu 2.1.0.post8) on npu x 8" in lines
    assert "ascend-dmi is not installed" in lines
    assert "device 0: measured 24.9 GB/s, expected 31.5 GB/s (79 % of it), floor 22 GB/s" in lines
    assert "source: Atlas 800T A2" in lines
    flops = "\n".join(got[("node01", "npu.flops")].evidence)
    assert "on npu x 8: torch.mm of two 4096 x 4096 fp16 matrices; ascend-dmi is not installed" in flops
    assert "device 7: measured 288 TFLOPS, expected 313 TFLOPS (92 % of it), floor 266.1 TFLOPS" in flops


@pytest.mark.parametrize(("check_id", "slow", "subject"), [
    ("npu.hbm_bandwidth", {"hbm 6": 720.0}, "device 6: 720 GB/s, below its floor 1440 GB/s"),
    ("npu.h2d_bandwidth", {"h2d 2": 12.4}, "device 2: 12.4 GB/s, below its floor 22 GB/s"),
    ("npu.d2h_bandwidth", {"d2h 3": 12.4}, "device 3: 12.4 GB/s, below its floor 22 GB/s"),
    ("npu.p2p_bandwidth", {"p2p 1 4": 22.0}, "device 1 -> 4: 22 GB/s, below its floor 50.4 GB/s"),
    ("npu.flops", {"flops 5": 150.0}, "device 5: 150 TFLOPS, below its floor 266.1 TFLOPS"),
])
def test_without_ascend_dmi_a_slow_device_fails_exactly_its_check(npu_output, check_id, slow, subject):
    got = _judge(_no_dmi_host(_with(npu_output, HEALTHY, slow)))
    want = {c: "fail" if c == check_id else "pass" for c in PERF}
    assert {c: r.status for (_, c), r in got.items()} == want
    message = got[("node01", check_id)].message
    assert subject in message and "the absolute floor binds" in message


def test_without_ascend_dmi_a_uniformly_slow_fleet_fails_on_the_floor(npu_output):
    slow = _with(npu_output, {k: 0.6 * v for k, v in HEALTHY.items()})  # 40 % slow, every device alike
    got = _judge(_no_dmi_host(slow), _no_dmi_host(slow, name="node02", index=1))
    want = {(h, c): "fail" for h in ("node01", "node02") for c in PERF}
    assert {k: r.status for k, r in got.items()} == want
    flops = got[("node02", "npu.flops")].message
    assert "device 0: 172.8 TFLOPS, below its floor 266.1 TFLOPS" in flops
    assert "the absolute floor binds" in flops


def test_a_cpu_only_node_shows_its_figure_and_says_it_cannot_be_compared():
    got = _judge(_no_dmi_host(_run_probe()))
    assert {c: r.status for (_, c), r in got.items()} == dict.fromkeys(PERF, "warn"), got
    hbm = got[("node01", "npu.hbm_bandwidth")].message
    assert re.search(r"sees no NPU, only cpu \(measured cpu: [0-9.]+ GB/s\)", hbm), hbm
    assert "cannot be compared to the 910B3 floor 1440 GB/s" in hbm
    assert "(measured nothing)" in got[("node01", "npu.h2d_bandwidth")].message
    flops = got[("node01", "npu.flops")].message
    assert re.search(r"only cpu \(measured cpu: [0-9.e-]+ TFLOPS\)", flops), flops
    assert "cannot be compared to the 910B3 floor 266.1 TFLOPS" in flops


def test_neither_tool_measured_is_an_error_not_a_pass():
    got = _judge(_no_dmi_host(TORCH_BW_SKIPPED))
    assert {r.status for r in got.values()} == {"error"}
    assert "neither measured" in got[("node01", "npu.hbm_bandwidth")].message


def test_a_probe_that_failed_is_an_error_naming_it():
    host = _no_dmi_host("")
    host.probes["torch-bandwidth"] = ProbeResult(command="python -c ...", rc=1,
                                                 stderr="ModuleNotFoundError: No module named 'torch'\n")
    got = _judge(host)
    assert {r.status for r in got.values()} == {"error"}
    assert "No module named 'torch'" in got[("node01", "npu.h2d_bandwidth")].message


@pytest.mark.parametrize(("text", "line_no", "words"), [
    ("", None, "empty input"),
    ("hbm 0 12\n", 1, "not the torch bandwidth probe's output"),
    ("ascend-check torch-bandwidth v1\nhbm 0 1.0\n", 2, "expected the `device ...` line"),
    ("ascend-check torch-bandwidth v1\ndevice tpu 1 torch 2.1\nhbm 0 1\n", 2, "npu|cuda|cpu"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\nhbm 0 fast\n", 3, "not a number"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\nhbm 0 -3\n", 3, "must be positive"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\nhbm 0 nan\n", 3, "not a finite number"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\nhbm 0 1\nh2d 0 2\n", 4, "pinned or pageable"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\nhbm cpu 1\n", 3, "device 'cpu' on a npu"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\nhbm 0 1\nh3d 0 1\n", 4, "expected `hbm"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\n", 2, "no `hbm` line"),
    ("ascend-check torch-bandwidth v1\nskipped: x\nhbm 0 1\n", 3, "nothing may follow"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\nhbm 0 1\nflops 0 300 bf16\n", 4,
     "fp16 or fp32"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\nhbm 0 1\nflops 0 0 fp16\n", 4,
     "TFLOPS must be positive"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\nhbm 0 1\nflops cpu 1 fp32\n", 4,
     "device 'cpu' on a npu"),
    ("ascend-check torch-bandwidth v1\ndevice npu 1 torch 2.1\nhbm 0 1\nflops 0 300\n", 4, "`flops DEVICE"),
])
def test_the_parser_refuses_what_the_probe_does_not_print_naming_the_line(text, line_no, words):
    with pytest.raises(ParseError) as exc:
        parse_torch_bandwidth(text)
    assert exc.value.line_no == line_no and words in exc.value.reason, (exc.value.line_no, exc.value.reason)
