"""The burn-in tier's checks (checks/suite/test_burn_in.py) without a cluster: --duration refused before
anything runs, the judging functions on real-shaped samples (what the simulator's npu-smi and hccn_tool
print), and the burn-in probe itself run on this machine (its load on the checkout's CPU torch, its samples
from the simulator's renderers through burn_in_tools.py) and judged by the checks. The run on simulated
nodes: test_sim_checks.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from checks_fakenode import fake_host, judge
from click.testing import CliRunner

from ascend_ready.checks.burn_in import counter_growth, drop_over_time, parse_duration, throttled_at
from ascend_ready.checks.cli import main
from ascend_ready.checks.parsers.hccn import parse_hccn_link_stat
from ascend_ready.checks.parsers.npu_smi_kv import parse_npu_smi_common, parse_npu_smi_ecc
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.report import REPORT_SCHEMA_VERSION, Report
from ascend_ready.checks.resources.burn_in import BURN_IN_CODE, Frame, _script, parse_burn_in
from ascend_ready.errors import ConfigError
from ascend_ready.sim.hw.faults import inject_fault
from ascend_ready.sim.hw.state import NodeView, initial_state
from ascend_ready.sim.render import hccn, npu_smi

TOOLS = Path(__file__).with_name("burn_in_tools.py")
#: NPUs of the node the probe samples here
NPUS = 2


# ---------------------------------------------------------------- --duration


@pytest.mark.parametrize("text,seconds", [("60s", 60), ("10m", 600), ("1.5h", 5400), ("5s", 5)])
def test_a_duration_is_a_number_and_a_unit(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text,says", [("60", "is not a duration"), ("10x", "is not a duration"),
                                       ("-5s", "is not a duration"), ("1s", "burn-in takes 5 s to 24 h"),
                                       ("2d", "is not a duration"), ("25h", "burn-in takes 5 s to 24 h")])
def test_a_bad_duration_is_refused(text, says):
    with pytest.raises(ConfigError, match=says):
        parse_duration(text)


@pytest.mark.parametrize("args,says", [
    (["--tier", "burn-in"], "--tier burn-in needs --duration D"),
    (["--tier", "burn-in", "--duration", "10"], "--duration '10' is not a duration"),
    (["--tier", "full", "--duration", "10m"], "--duration 10m is the burn-in's, not the full tier's"),
])
def test_the_cli_refuses_a_bad_duration_before_anything_is_written(tmp_path, args, says):
    page = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["--hosts", "127.0.0.1:1", *args, "--html", str(page)])
    assert res.exit_code == 2, res.output
    assert says in res.output and "hint: " in res.output and "Traceback" not in res.output
    assert not page.exists() and res.stdout == ""


# ---------------------------------------------------------------- the judging, on real-shaped samples


def _view(state) -> NodeView:
    return NodeView(state)


def test_burn_in_load__a_drop_from_the_first_fifth_to_the_last_is_measured_a_short_window_not():
    # matmul TFLOPS of one device per round, as the load prints them (a 910B3 clocking down late)
    rounds = [(0.0, 281.3), (10.0, 280.9), (20.0, 279.8), (30.0, 250.1), (40.0, 221.7), (50.0, 220.4)]
    drop = drop_over_time(rounds, 0.0, 50.0)
    assert (drop.first, drop.last) == (281.1, 221.05)  # t <= 10 s and t >= 40 s
    assert round(drop.fraction, 3) == 0.214
    steady = drop_over_time([(t, 281.0 + (t % 20) / 10) for t, _ in rounds], 0.0, 50.0)
    assert abs(steady.fraction) < 0.01
    assert drop_over_time([(0.0, 281.3)], 0.0, 0.0) is None


def test_burn_in_ecc__growth_is_read_from_npu_smi_ecc_at_the_window_start_and_end():
    state = initial_state("atlas-800t-a2", node_index=1, node_name="node01")
    first = parse_npu_smi_ecc(npu_smi.ecc(_view(state), 0))
    state["npus"][0]["chips"][0]["ecc"] = {"hbm_single": 3, "hbm_double": 1}
    last = parse_npu_smi_ecc(npu_smi.ecc(_view(state), 0))

    def counts(view):
        return {f"chip {c.chip_id}": {"hbm_single_bit_errors": c.hbm_single_bit_errors,
                                      "hbm_double_bit_errors": c.hbm_double_bit_errors} for c in view.chips}

    grew = counter_growth(counts(first), counts(last))
    assert [g.line() for g in grew] == ["chip 0: hbm_single_bit_errors 0 -> 3 (+3)",
                                        "chip 0: hbm_double_bit_errors 0 -> 1 (+1)"]
    assert counter_growth(counts(last), counts(first)) == []  # cleared in the window: no growth


def test_burn_in_links__a_flap_is_link_stat_counting_up_between_the_window_start_and_end():
    state = initial_state("atlas-800t-a2", node_index=1, node_name="node01")
    before = parse_hccn_link_stat(hccn.run(_view(state), ["-i", "2", "-link_stat", "-g"]).text)
    flapped = inject_fault(state, "link-down", device=2)
    nic = next(c for n in flapped["npus"] for c in n["chips"] if c["logic_id"] == 2)["nic"]
    nic["link"] = "UP"
    nic["link_events"].append([nic["link_events"][-1][0] + 20, "UP"])
    after = parse_hccn_link_stat(hccn.run(_view(flapped), ["-i", "2", "-link_stat", "-g"]).text)

    def counters(stat):
        return {"device 2": {"link_up_count": stat.link_up_count, "link_records": len(stat.records)}}

    assert [g.line() for g in counter_growth(counters(before), counters(after))] == [
        "device 2: link_up_count 1 -> 2 (+1)", "device 2: link_records 1 -> 3 (+2)"]


def test_burn_in_throttle__a_chip_loaded_below_its_clock_not_an_idle_one():
    state = initial_state("atlas-800t-a2", node_index=1, node_name="node01")
    idle = parse_npu_smi_common(npu_smi.common(_view(state), 0)).chips[0]
    assert (idle.aicore_usage_pct, idle.aicore_cur_freq_mhz, idle.aicore_freq_mhz) == (0, 800, 1800)
    hot_state = inject_fault(state, "npu-throttle-after", after_s=0)
    hot = parse_npu_smi_common(npu_smi.common(_view(hot_state), 0)).chips[0]
    assert (hot.aicore_usage_pct, hot.aicore_cur_freq_mhz, hot.temperature_c) == (100, 1000, 97)

    def row(t, m):
        return (t, m.aicore_usage_pct, m.aicore_cur_freq_mhz, m.aicore_freq_mhz)

    assert throttled_at([row(0.0, idle), row(1.0, idle)]) is None
    assert throttled_at([row(0.0, idle), row(31.5, hot), row(32.5, hot)]) == 31.5


# ---------------------------------------------------------------- the probe run here, then judged


@pytest.fixture(scope="module")
def probe_output(tmp_path_factory) -> str:
    """The burn-in probe's output of a 5 s run on this machine, npu 0 throttling 1 s in."""
    tmp = tmp_path_factory.mktemp("burn-in")
    state = initial_state("atlas-800t-a2", node_index=1, node_name="node01")
    state["npus"] = state["npus"][:NPUS]  # each sample costs a Python start per tool call here
    state = inject_fault(state, "npu-throttle-after", after_s=1)
    (tmp / "state.json").write_text(json.dumps(state))
    (tmp / "bin").mkdir()
    (tmp / "dev").mkdir()
    for d in range(NPUS):  # the device nodes the probe's per-device loop lists
        (tmp / "dev" / f"davinci{d}").touch()
    for tool in ("npu-smi", "hccn_tool"):
        run = f'exec {sys.executable} {TOOLS} {tmp}/state.json {tool} "$@"'
        (tmp / "bin" / tool).write_text(f"#!/bin/sh\n{run}\n")
        (tmp / "bin" / tool).chmod(0o755)
    profile = load_profile("atlas-800t-a2").model_copy(update={"python": sys.executable})
    env = {**os.environ, "PATH": f"{tmp / 'bin'}:{os.environ['PATH']}"}
    script = _script(profile, 5).replace("/dev/davinci", f"{tmp}/dev/davinci")
    res = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env,
                         timeout=180)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_the_probe_splits_into_samples_and_rounds(probe_output):
    run = parse_burn_in(probe_output)
    assert (run.duration_s, run.interval_s, run.load_rc) == (5, 1, 0)
    assert run.rounds and run.rounds[0].copies.device == "cpu" and "cpu" in run.rounds[0].matmul
    kinds = {f.kind for f in run.frames}
    assert kinds == {"npu-smi-common", "npu-smi-ecc", "hccn-link-stat", "hccn-stat"}
    assert {f.subject for f in run.of("npu-smi-ecc") if f.end} == set(range(NPUS))
    assert {f.subject for f in run.of("hccn-link-stat")} == set(range(NPUS))
    assert all(isinstance(f, Frame) and f.t >= 0 for f in run.frames)


def _edited(text: str, kind: str, subject: int, new: str) -> str:
    """`text` with the window's last sample of `kind` for `subject` replaced by `new` (a tool's output)."""
    marker = f"@@burn-in {kind} {subject}\n"
    head, _, tail = text.rpartition(marker)
    rest = tail.split("@@burn-in ", 1)[1]
    return head + marker + new + "@@burn-in " + rest


def test_burn_in_thermal__and_the_others_fail_a_hot_chip_ecc_growth_and_a_flap(probe_output):
    state = initial_state("atlas-800t-a2", node_index=1, node_name="node01")
    state["npus"][1]["chips"][0]["ecc"] = {"hbm_double": 2}
    text = _edited(probe_output, "npu-smi-ecc", 1, npu_smi.ecc(_view(state), 1))
    flapped = inject_fault(state, "link-down", device=1)
    text = _edited(text, "hccn-link-stat", 1, hccn.run(_view(flapped), ["-i", "1", "-link_stat", "-g"]).text)
    host = fake_host(outputs={"burn-in": text})
    got = judge(host, tier="burn-in", select=["burn_in.*"])
    statuses = {k: r.status for k, r in got.items()}
    assert statuses == {"burn_in.ecc": "fail", "burn_in.links": "fail", "burn_in.load": "warn",
                        "burn_in.thermal": "fail", "burn_in.throttle": "fail"}, got
    assert got["burn_in.ecc"].message == "ECC errors grew: npu 1 chip 0: hbm_double_bit_errors 0 -> 2 (+2)"
    assert got["burn_in.links"].message == "link flapped: device 1: link_records 1 -> 2 (+1)"
    assert "npu 0 chip 0 at 100 % AI Core ran at 1000 of 1800 MHz from " in got["burn_in.throttle"].message
    assert got["burn_in.thermal"].message.startswith("npu 0 chip 0 reached 97 C at ")
    temps = [s for s in got["burn_in.thermal"].series if s.metric == "temperature_c"]
    assert len(temps) == NPUS and max(v for v in temps[0].values if v is not None) == 97
    assert "sees no NPU, only cpu" in got["burn_in.load"].message
    report = Report(tier="burn-in", results=list(got.values()))
    again = Report.model_validate_json(report.model_dump_json())
    assert again.schema_version == REPORT_SCHEMA_VERSION == 3 and again.results[0].series


def test_burn_in_thermal__a_sample_without_a_temperature_is_not_judged_not_passed(probe_output):
    """npu-smi prints `NA` for a sensor it could not read: the window then has a hole where the chip may
    have been hot, so thermal is `error` naming the chip and the sample's time, never a pass."""
    marker = "@@burn-in npu-smi-common 1\n"
    head, _, tail = probe_output.rpartition(marker)
    sample, sep, rest = tail.partition("@@burn-in ")
    lines = [re.sub(r"^(\s*Temperature\(C\)\s*:\s*)\d+", r"\1NA", ln) for ln in sample.split("\n")]
    assert lines != sample.split("\n"), "the sample printed no Temperature(C) line"
    text = head + marker + "\n".join(lines) + sep + rest
    text = re.sub(r"(Temperature\(C\)\s*:\s*)9\d\b", r"\g<1>60", text)  # npu 0's throttle fault, cooled
    host = fake_host(outputs={"burn-in": text})
    got = judge(host, tier="burn-in", select=["burn_in.thermal"])["burn_in.thermal"]
    assert got.status == "error" and "npu 1 chip 0: no temperature at " in got.message, got


def _every_sample(text: str, subject: int, label: str, value: str, last_only: bool) -> str:
    """`text` with `label`'s value set to `value` in npu `subject`'s last (or every) common sample."""
    marker = f"@@burn-in npu-smi-common {subject}\n"
    pattern = rf"^(\s*{re.escape(label)}\s*:\s*)\S+"
    parts = text.split(marker)
    for i in range(len(parts) - 1 if last_only else 1, len(parts)):
        sample, sep, rest = parts[i].partition("@@burn-in ")
        edited = re.sub(pattern, rf"\g<1>{value}", sample, flags=re.M)
        assert edited != sample, f"the sample printed no {label} line"
        parts[i] = edited + sep + rest
    return marker.join(parts)


def test_burn_in_throttle__a_sample_without_its_clock_is_not_judged_not_passed(probe_output):
    """A sample whose curFreq npu-smi printed as NA could have been the throttled one: error naming the
    chip and the sample's time; npu 0's throttle fault (a clock that is read) still fails first."""
    text = _every_sample(probe_output, 1, "Aicore curFreq(MHZ)", "NA", last_only=True)
    got = judge(fake_host(outputs={"burn-in": text}), tier="burn-in", select=["burn_in.throttle"])
    assert got["burn_in.throttle"].status == "fail", got
    cool = re.sub(r"(Aicore curFreq\(MHZ\)\s*:\s*)1000\b", r"\g<1>1800", text)  # npu 0 unthrottled
    got = judge(fake_host(outputs={"burn-in": cool}), tier="burn-in", select=["burn_in.throttle"])
    result = got["burn_in.throttle"]
    assert result.status == "error" and "npu 1 chip 0: no AI Core use or clock at " in result.message, result


def test_burn_in_load__a_chip_whose_use_npu_smi_never_printed_is_not_judged_not_idle(probe_output):
    """A chip at 0 % AI Core use through the window fails (the load did not reach it); one whose use npu-smi
    printed as NA in every sample is `error`: whether the load reached it is unknown."""
    # the load as on an NPU node (torch_npu's devices): the chips' use tells whether it reached them
    text = re.sub(r"^device cpu 1 ", "device npu 1 ", probe_output, flags=re.M)
    text = re.sub(r"^(\w+) cpu [\d.]+", r"\g<1> 0 1.0", text, flags=re.M)  # steady figures: no drop
    idle = judge(fake_host(outputs={"burn-in": text}), tier="burn-in", select=["burn_in.load"])
    idle = idle["burn_in.load"]
    # the fake state loads npu 0 only (its throttle fault): npu 1 printed 0 % use, so the load missed it
    assert idle.status == "fail", idle
    assert idle.message.startswith("npu-smi shows no AI Core use on npu 1 chip 0"), idle
    text = _every_sample(text, 1, "Aicore Usage Rate(%)", "NA", last_only=False)
    got = judge(fake_host(outputs={"burn-in": text}), tier="burn-in", select=["burn_in.load"])
    result = got["burn_in.load"]
    assert result.status == "error", result
    assert "no AI Core use for npu 1 chip 0 in the window" in result.message, result


def test_a_report_of_schema_2_still_reads():
    old = {"schema_version": 2, "tier": "full", "results": [
        {"check_id": "npu.count", "host": "node01", "status": "pass", "severity": "critical", "tier": "quick",
         "title": "t", "evidence": [], "duration_s": 0.1}]}
    report = Report.model_validate(old)
    assert report.results[0].series is None


def test_selecting_only_burn_in_checks_in_another_tier_names_the_tier_to_add():
    res = CliRunner().invoke(main, ["list", "--tier", "full", "--select", "burn_in.*"])
    assert res.exit_code == 2
    assert "matches only burn-in-tier checks (burn_in.ecc," in res.output
    assert "add --tier burn-in" in res.output


def test_burn_in_links__skips_a_card_without_device_nics(probe_output):
    got = judge(fake_host(outputs={"burn-in": probe_output}), profile="atlas-300i-duo", tier="burn-in",
                select=["burn_in.links"])
    assert got["burn_in.links"].status == "skip" and "no RoCE device NICs" in got["burn_in.links"].message


def test_burn_in_load__a_device_below_its_sku_s_floor_fails_one_above_it_passes(probe_output):
    """On an NPU node each device's median FP16 TFLOPS over the window is judged against its SKU's floor
    (sku_perf.yml, as npu.flops judges the same torch.mm shape), not only against the fleet: one node alone
    has no fleet, yet a slow device of it fails."""
    text = re.sub(r"^device cpu 1 ", "device npu 1 ", probe_output, flags=re.M)
    text = _every_sample(text, 1, "Aicore Usage Rate(%)", "95", last_only=False)  # the load reached npu 1

    def load(tflops: str):
        figures = re.sub(r"^(matmul) cpu [\d.]+", rf"\g<1> 0 {tflops}", text, flags=re.M)
        figures = re.sub(r"^(\w+) cpu [\d.]+", r"\g<1> 0 1.0", figures, flags=re.M)
        return judge(fake_host(outputs={"burn-in": figures}), tier="burn-in",
                     select=["burn_in.load"])["burn_in.load"]

    slow = load("120.0")
    assert slow.status == "fail", slow
    assert re.match(r"below the 910B\w* floor [\d.]+ TFLOPS over the window: device 0 120 TFLOPS",
                    slow.message), slow
    assert any("floor" in e and "TFLOPS" in e and "x" in e for e in slow.evidence), slow.evidence
    fast = load("330.0")
    assert fast.status == "pass", fast


@pytest.fixture(scope="module")
def two_rank_load() -> str:
    """The load's own stdout for 3 s on this machine's CPU in two ranks over gloo (`burn(3, ranks=2)`): what
    a node of two devices prints, each round's matmuls and its all-reduce across the ranks."""
    res = subprocess.run([sys.executable, "-c", BURN_IN_CODE + "\nburn(3, ranks=2)\n"], capture_output=True,
                         text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("round ") and "\nallreduce 1 " in res.stdout, res.stdout
    return res.stdout


def _rounds_of(load: str, count: int) -> str:
    """`count` rounds a second apart, each the load's first round as it printed it (how many rounds 3 s
    hold depends on the machine's load: the tests judge the rounds, not the machine)."""
    first = load.split("\nround ", 1)[0] + "\n"
    head, _, body = first.partition("\n")
    start = float(head.split()[1])
    return "".join(f"round {start + k:.2f}\n{body}" for k in range(count))


def _with_load(probe_output: str, load: str) -> str:
    """The probe's output with its load's stdout replaced by `load`, read as a 2-NPU node's (figures set:
    the SKU floor's and a steady all-reduce, so that only what a test changes is judged)."""
    load = re.sub(r"^device cpu 1 ", "device npu 2 ", _rounds_of(load, 5), flags=re.M)
    load = re.sub(r"^(matmul \d) [\d.]+", r"\g<1> 330.0", load, flags=re.M)
    load = re.sub(r"^(allreduce \d) [\d.]+", r"\g<1> 100.0", load, flags=re.M)
    load = re.sub(r"^(\w+) cpu [\d.]+", r"\g<1> 0 1.0", load, flags=re.M)
    head, mark, rest = probe_output.partition("@@burn-in load rc 0\n")
    _, stderr_mark, stderr = rest.partition("@@burn-in load stderr\n")
    text = head + mark + load + stderr_mark + stderr
    for npu in range(NPUS):  # the load reached both chips
        text = _every_sample(text, npu, "Aicore Usage Rate(%)", "95", last_only=False)
    return text


def test_burn_in_load__every_device_takes_part_in_the_all_reduce_and_a_drop_in_it_fails(probe_output,
                                                                                       two_rank_load):
    """Issue 30: the load's rounds all-reduce across the node's devices (one process per device), so the
    links between them are loaded in the window too; a device missing from it, or whose bus bandwidth
    falls from the window's first part to its last, fails burn_in.load; the curve is in the report."""
    def load(text):
        return judge(fake_host(outputs={"burn-in": text}), tier="burn-in",
                     select=["burn_in.load"])["burn_in.load"]

    steady = _with_load(probe_output, two_rank_load)
    run = parse_burn_in(steady)
    assert all(set(r.allreduce) == {"0", "1"} for r in run.rounds) and len(run.rounds) == 5
    got = load(steady)
    assert got.status == "pass", got
    assert {s.subject for s in got.series if s.metric == "allreduce_gbps"} == {"device 0", "device 1"}
    assert any(e.startswith("all-reduce bus bandwidth, median per device: 0 100 GB/s") for e in got.evidence)

    alone = re.sub(r"^allreduce 1 .*\n", "", steady, flags=re.M)
    got = load(alone)
    assert got.status == "fail" and "has no figure for device(s) 1" in got.message, got

    last = steady.rindex("allreduce 1 100.0")
    slowing = steady[:last] + "allreduce 1 40.0" + steady[last + len("allreduce 1 100.0"):]
    got = load(slowing)
    assert got.status == "fail" and "device 1 allreduce dropped" in got.message, got
