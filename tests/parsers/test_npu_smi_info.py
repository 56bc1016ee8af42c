"""The `npu-smi info` parser on every shared main-table sample, on garbled input, and under fuzzing."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_support import read_sample

from ascend_ready.checks.parsers.base import get_parser
from ascend_ready.checks.parsers.npu_smi_info import parse_npu_smi_info as parse
from ascend_ready.errors import ParseError

A2 = "npu-smi-info_910b2_23.0.7_vllm-ascend-362.txt"
A2_PROCS = "npu-smi-info_910b1-procs_25.5.1_go-cmdb-test.txt"
A2_BLANK = "npu-smi-info_910b3-procs-blankname_25.0.rc1.b010_vllm-ascend-6299.txt"
A2_26 = "npu-smi-info_910b4_26.0.rc1_triton-ascend-docs.txt"
A3 = "npu-smi-info_910-93-a3_24.1.rc3.7_vllm-ascend-2666.txt"
A910_OLD = "npu-smi-info_910a_1.8.21-drv20.2.2_guoehi-slurm-doc.txt"
A910_WARN = "npu-smi-info_910a-warning_23.0.rc3_modelarts-notebook-log.txt"
P310_DUO = "npu-smi-info_310p3-duo-x2-procs_24.1.0.1_nputop-test.txt"
P310_HAMI = "npu-smi-info_310p3_25.5.1_hami-website-blog.txt"
B310 = "npu-smi-info_310b4-alarm_nputop-test.txt"
C310 = "npu-smi-info_310-atlas300i-x4chip_20.2.0_gpustack-fixture-huawei-doc.txt"
ALL = [A2, A2_PROCS, A2_BLANK, A2_26, A3, A910_OLD, A910_WARN, P310_DUO, P310_HAMI, B310, C310]
DCMI = "error_npu-smi_dcmi-8020-device-used_cann-container-image-46.txt"


def chips(info):
    return [c for n in info.npus for c in n.chips]


def error(text: str) -> ParseError:
    with pytest.raises(ParseError) as exc:
        parse(text)
    return exc.value


@pytest.mark.parametrize("name", ALL)
def test_every_sample_parses_to_json(name):
    info = parse(read_sample(name))
    dumped = json.loads(json.dumps(info.model_dump()))
    assert dumped == info.model_dump()
    assert set(dumped) == {"layout", "tool_version", "driver_version", "npus", "process_table", "processes",
                           "truncated"}
    assert info.npus and all(n.chips for n in info.npus)


def test_registered_under_its_kind():
    assert get_parser("npu-smi-info") is parse


def test_a2_910b2():
    info = parse(read_sample(A2))
    assert (info.layout, info.tool_version, info.driver_version) == ("910-98", "23.0.7", "23.0.7")
    assert [n.id for n in info.npus] == list(range(8))
    npu0 = info.npus[0]
    assert (npu0.name, npu0.health, npu0.power_w, npu0.temp_c) == ("910B2", "OK", 96.5, 36)
    chip = npu0.chips[0]
    assert (chip.chip_id, chip.phy_id, chip.device_id) == (0, None, None)
    assert chip.bus_id == "0000:C1:00.0"
    assert (chip.hbm_used_mb, chip.hbm_total_mb) == (29954, 65536)
    assert (chip.memory_used_mb, chip.memory_total_mb) == (0, 0)
    assert (chip.hugepages_used, chip.hugepages_total) == (0, 0)
    assert info.npus[4].chips[0].hbm_used_mb == 3347
    assert info.npus[7].chips[0].bus_id == "0000:42:00.0"
    assert info.process_table == "present" and info.processes == []


def test_a2_processes_same_pid_on_two_npus():
    info = parse(read_sample(A2_PROCS))
    assert [(p.npu_id, p.chip_id, p.pid, p.memory_mb) for p in info.processes] == [
        (0, 0, 3755936, 114), (0, 0, 3755939, 114), (0, 0, 3755935, 52245), (1, 0, 3755936, 51829)]
    assert {p.name for p in info.processes} == {"python"}
    assert all(p.container_pid is None for p in info.processes)
    assert [c.hbm_used_mb for c in chips(info)] == [56017, 55358]
    assert info.driver_version == "25.5.1"


def test_a2_blank_process_names_and_busy_cores():
    info = parse(read_sample(A2_BLANK))
    assert info.tool_version == info.driver_version == "25.0.rc1.b010"
    assert [p.name for p in info.processes] == [""] * 8
    assert [p.pid for p in info.processes][:2] == [1067983, 1070524]
    assert info.processes[5].memory_mb == 56374
    assert [c.aicore_pct for c in chips(info)] == [27, 29, 29, 29, 30, 29, 29, 29]
    assert chips(info)[0].hbm_used_mb == 59718


def test_26x_wide_layout_cut_after_last_row():
    info = parse(read_sample(A2_26))
    assert (info.layout, info.driver_version, info.truncated) == ("910-116", "26.0.rc1", True)
    chip = info.npus[0].chips[0]
    assert (info.npus[0].name, info.npus[0].power_w, chip.temp_c) == ("910B4", 82.6, 32)
    assert (chip.hbm_used_mb, chip.hbm_total_mb, chip.bus_id) == (2871, 32768, "0000:C1:00.0")
    assert info.process_table == "present" and info.processes == []


def test_a3_two_chips_per_npu_with_phy_ids():
    info = parse(read_sample(A3))
    assert info.layout == "910-98" and len(info.npus) == 8
    assert len(chips(info)) == 16
    assert [c.phy_id for c in chips(info)] == list(range(16))
    assert [c.chip_id for c in chips(info)] == [0, 1] * 8
    npu0 = info.npus[0]
    assert (npu0.name, npu0.power_w, npu0.health) == ("Ascend910", 178.5, "OK")
    assert npu0.chips[1].power_w is None  # printed "-"
    assert info.npus[7].chips[1].bus_id == "0000:83:00.0"
    assert info.npus[7].chips[1].hbm_used_mb == 3188


def test_old_910a_tool_and_driver_versions_differ():
    info = parse(read_sample(A910_OLD))
    assert (info.layout, info.tool_version, info.driver_version) == ("910a-86", "1.8.21", "20.2.2.spc001")
    assert info.process_table == "absent"
    chip = info.npus[0].chips[0]
    assert (chip.memory_used_mb, chip.memory_total_mb) == (591, 14795)
    assert (chip.hbm_used_mb, chip.hbm_total_mb) == (0, 32768)
    assert chip.hugepages_used is None and chip.hugepages_total is None
    assert [n.power_w for n in info.npus][:3] == [68.6, 63.7, 66.1]


def test_910a_warning_inside_prompt_lines():
    info = parse(read_sample(A910_WARN))
    assert [n.id for n in info.npus] == [1]
    assert info.npus[0].health == "Warning"
    chip = info.npus[0].chips[0]
    assert (chip.memory_used_mb, chip.memory_total_mb) == (2681, 15137)
    assert (chip.hbm_used_mb, chip.hbm_total_mb) == (1, 32768)


def test_310p_duo_processes_per_chip():
    info = parse(read_sample(P310_DUO))
    assert info.layout == "310p-106" and [n.id for n in info.npus] == [1, 2]
    assert [c.device_id for c in chips(info)] == [0, 1, 2, 3]
    assert [(c.hugepages_used, c.hugepages_total) for c in chips(info)] == [
        (7210, 7210), (7210, 7210), (17057, 17057), (16823, 16823)]
    assert [(c.memory_used_mb, c.memory_total_mb) for c in chips(info)] == [
        (16302, 44280), (15543, 43693), (35563, 44280), (35204, 43693)]
    assert all(c.power_w is None and c.hbm_used_mb is None for c in chips(info))
    assert [(p.npu_id, p.chip_id, p.pid, p.memory_mb) for p in info.processes] == [
        (1, 0, 3277562, 14513), (1, 1, 3277565, 14513), (2, 0, 3034986, 34207), (2, 1, 3034989, 33740)]
    assert {p.name for p in info.processes} == {"mindie_llm_back"}


def test_310p_card_ids_not_zero_based():
    info = parse(read_sample(P310_HAMI))
    assert [n.id for n in info.npus] == [4, 5]
    assert [(c.device_id, c.bus_id, c.memory_total_mb) for c in chips(info)] == [
        (0, "0000:81:00.0", 21525), (1, "0000:85:00.0", 21525)]
    assert info.process_table == "absent"


def test_310b4_alarm_with_na_bus():
    info = parse(read_sample(B310))
    npu = info.npus[0]
    assert (npu.name, npu.health, npu.power_w, npu.temp_c) == ("310B4", "Alarm", 0.0, 65)
    chip = npu.chips[0]
    assert chip.bus_id is None
    assert (chip.hugepages_used, chip.hugepages_total) == (15, 15)
    assert (chip.memory_used_mb, chip.memory_total_mb) == (3628, 15609)


def test_310_four_chips_on_card_215():
    info = parse(read_sample(C310))
    assert info.layout == "310-80" and [n.id for n in info.npus] == [215]
    npu = info.npus[0]
    assert [c.device_id for c in npu.chips] == [0, 1, 2, 3]
    assert [c.temp_c for c in npu.chips] == [56, 57, 57, 55] and npu.temp_c == 56
    assert [c.bus_id for c in npu.chips] == ["0000:DA:00.0", "0000:DC:00.0", "0000:DD:00.0", "0000:DB:00.0"]
    assert npu.chips[3].memory_used_mb == 2703 and npu.chips[3].hugepages_used is None


def test_npu_health_is_worst_chip_health_unknown_words_worst():
    text = read_sample(C310).splitlines(keepends=True)
    text[9] = text[9].replace("OK      ", "Alarm   ")  # chip 1
    assert parse("".join(text)).npus[0].health == "Alarm"
    text[12] = text[12].replace("OK      ", "Fault   ")  # chip 2: unknown word, kept as printed
    info = parse("".join(text))
    assert info.npus[0].health == "Fault"
    assert [c.health for c in info.npus[0].chips] == ["OK", "Alarm", "Fault", "OK"]


# --- tolerated paste artefacts -------------------------------------------------------------------


def test_prompt_sudo_trailing_spaces_crlf_and_indent():
    table = read_sample(A2_PROCS)
    pasted = "user@host:~$ sudo npu-smi info\n[sudo] password for user: \n\n" + "".join(
        "    " + line.rstrip("\n") + "   \r\n" for line in table.splitlines()) + "\nuser@host:~$ \n"
    assert parse(pasted) == parse(table)


def test_missing_closing_rule_after_a_device_row_is_marked_truncated():
    lines = read_sample(B310).splitlines()
    info = parse("\n".join(lines[:-1]))
    assert info.truncated and info.npus[0].health == "Alarm"


# --- fail closed ---------------------------------------------------------------------------------


def test_dcmi_error_names_the_dcmi_line_with_a_hint():
    err = error(read_sample(DCMI))
    assert err.line_no == 3
    assert err.line == "dcmi model initialized failed, because the device is used. ret is -8020"
    assert "device in use" in err.hint and "error instead of its table" in err.reason


@pytest.mark.parametrize("text", ["", "\n\n   \n"])
def test_empty_input(text):
    assert "empty output" in error(text).reason


def test_unknown_text_before_table():
    err = error("WARNING: something odd\n" + read_sample(A2))
    assert (err.line_no, err.line) == (1, "WARNING: something odd")


def edit(name: str, line_no: int, old: str, new: str) -> tuple[str, str]:
    """The sample with OLD replaced by NEW on 1-based LINE_NO, and the edited line."""
    lines = read_sample(name).splitlines()
    assert old in lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    return "\n".join(lines) + "\n", lines[line_no - 1]


@pytest.mark.parametrize(("name", "line_no", "old", "new", "reason"), [
    (A2, 7, "96.5 ", "9x.5 ", "Power(W) '9x.5' is not a number"),
    (A2, 8, "29954", "2995x", "HBM-Usage(MB) '2995x' is not a whole number"),
    (A2, 7, "| OK            |", "  OK            |", "has 2 cells, expected 3"),
    (A2, 5, "HBM-Usage(MB)", "XYZ-Usage(MB)", "unknown column header 'XYZ-Usage(MB)'"),
    (A2, 5, "HBM-Usage(MB)", "             ", "do not match the 98-column layout 910-98"),
    (A2, 4, "NPU   Name", "GPU   Name", "unknown header"),
    (A2, 8, "0000:C1:00.0", "0000:C1:00.X", "Bus-Id '0000:C1:00.X' is not a PCI address"),
    (A2, 7, "OK", "#?", "Health '#?' is not a status word"),
    (A2, 2, "Version:", "Versoin:", "version row"),
    (A2, 9, "+======", "+=-====", "expected a '+---' or '+===' rule after the chip rows"),
    (A2, 34, "No running processes found in NPU 0", "No running processes found in NPU 9",
     "NPU 9 is not in the device table"),
    (A2, 34, "No running processes found in NPU 0", "Nothing to see here in NPU 0 here ok",
     "unknown one-cell row"),
    (A2_PROCS, 17, "3755939", "37559x9", "process id '37559x9' is not a whole number"),
    (A2_PROCS, 17, "| 0       0  ", "| 0       3  ", "NPU 0 chip 3 is not in the device table"),
    (A2_PROCS, 14, "Process name", "Process nome", "unknown process-table header"),
    (A3, 11, "1     1 ", "0     1 ", "duplicate chip id 0 in NPU 0"),
    (A3, 14, "0     2 ", "0     1 ", "duplicate phy_id 1"),
    (A2, 13, "| 2     910B2", "| 1     910B2", "duplicate NPU id 1"),
])
def test_garbled_line_is_named(name, line_no, old, new, reason):
    text, bad = edit(name, line_no, old, new)
    err = error(text)
    assert reason in err.reason
    assert (err.line_no, err.line) == (line_no, bad)


def test_row_cut_midway_is_named():
    lines = read_sample(A2).splitlines()
    lines[7] = lines[7][:50]
    err = error("\n".join(lines))
    assert (err.line_no, err.line) == (8, lines[7])
    err = error("\n".join(lines[:8]))  # cut at the very end of the capture
    assert (err.line_no, err.line) == (8, lines[7])


def test_output_ending_inside_a_chip_pair():
    lines = read_sample(A2).splitlines()
    err = error("\n".join(lines[:7]))
    assert err.line_no == 7 and "ends before the chip row of NPU 0" in err.reason


def test_lines_after_the_table():
    err = error(read_sample(B310) + "Segmentation fault (core dumped)\n")
    assert (err.line_no, err.line) == (10, "Segmentation fault (core dumped)")
    err = error(read_sample(A2) + read_sample(A2))  # two tables: the second is not ours to guess about
    assert err.line_no == 50 and "out of place" in err.reason


def test_prompt_without_table():
    err = error("root@node01:~# npu-smi info\nroot@node01:~# \n")
    assert err.line_no == 2 and "no npu-smi table found" in err.reason


def test_another_tools_table_is_refused():
    nvidia = ("+" + "-" * 77 + "+\n"
              "| NVIDIA-SMI 515.48.07    Driver Version: 515.48.07    CUDA Version: 11.7     |\n")
    err = error(nvidia)
    assert err.line_no == 1 and "unknown table width 79" in err.reason


def test_unknown_width():
    lines = read_sample(A2).splitlines()
    lines[0] = lines[0][:-1] + "-+"
    err = error("\n".join(lines))
    assert err.line_no == 1 and "unknown table width 99" in err.reason


def test_rule_of_wrong_width():
    lines = read_sample(A2).splitlines()
    lines[8] = lines[8][:-3] + "+"
    err = error("\n".join(lines))
    assert err.line_no == 9 and "96 columns wide" in err.reason


# --- fuzzing: nothing but ParseError escapes -------------------------------------------------------

_mutation = st.one_of(
    st.tuples(st.just("delete"), st.integers(0, 200)),
    st.tuples(st.just("duplicate"), st.integers(0, 200)),
    st.tuples(st.just("cut"), st.integers(0, 200), st.integers(0, 120)),
    st.tuples(st.just("bytes"), st.integers(0, 200), st.integers(0, 120), st.binary(min_size=1, max_size=4)),
)


def _mutate(text: str, mutations) -> str:
    lines = text.splitlines()
    for mut in mutations:
        if not lines:
            break
        i = mut[1] % len(lines)
        if mut[0] == "delete":
            del lines[i]
        elif mut[0] == "duplicate":
            lines.insert(i, lines[i])
        elif mut[0] == "cut":
            lines[i] = lines[i][:mut[2]]
        else:
            junk = mut[3].decode("latin-1")
            lines[i] = lines[i][:mut[2]] + junk + lines[i][mut[2]:]
    return "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from([*ALL, DCMI]), mutations=st.lists(_mutation, min_size=1, max_size=4))
def test_fuzzed_samples_raise_only_parse_error(name, mutations):
    text = _mutate(read_sample(name), mutations)
    try:
        info = parse(text)
    except ParseError as err:
        assert err.kind == "npu-smi-info"
        return
    json.dumps(info.model_dump())  # whatever still parses is a well-formed model
