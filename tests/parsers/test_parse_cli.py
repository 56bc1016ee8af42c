"""`ascend-check parse KIND FILE|-`: JSON on stdout, exit 0/1/2, errors on stderr."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from sample_support import SAMPLES_DIR, read_sample

from ascend_ready.checks.parse_cli import parse_command

HEALTH = "npu-smi-info-t-health_alarm-multicode_mindcluster-faultdiag.txt"


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always keeps stderr apart
        return CliRunner()


def test_parse_file_prints_json(tmp_path):
    path = tmp_path / "health.txt"
    path.write_text(read_sample(HEALTH))
    result = _runner().invoke(parse_command, ["npu-smi-health", str(path)])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["health"] == "Alarm" and data["error_codes"] == ["A4025021", "8C03A000", "8C084E00"]


def test_parse_stdin():
    text = read_sample("lspci-grep-acce_910a-d801-8dev_mindcluster-faultdiag.txt")
    result = _runner().invoke(parse_command, ["lspci", "-"], input=text)
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)["devices"]) == 8


def test_parse_error_exit_1_names_line():
    result = _runner().invoke(parse_command, ["hccn-ip", "-"], input="ipaddr:10.0.0.1\nnetmask:garbage\n")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "error: cannot parse hccn-ip at line 2" in result.stderr
    assert "hint: " in result.stderr


def test_binary_input_exit_1():
    result = _runner().invoke(parse_command, ["dmesg", "-"], input=b"\x00\x01\xff\xfe garbage")
    assert result.exit_code == 1 and "error: cannot parse dmesg" in result.stderr


def test_unknown_kind_exit_2_lists_kinds():
    result = _runner().invoke(parse_command, ["no-such-kind", str(SAMPLES_DIR / HEALTH)])
    assert result.exit_code == 2
    assert "unknown output kind 'no-such-kind'" in result.stderr and "npu-smi-health" in result.stderr


def test_missing_file_exit_2(tmp_path):
    result = _runner().invoke(parse_command, ["lspci", str(tmp_path / "absent.txt")])
    assert result.exit_code == 2 and "cannot read" in result.stderr


def test_missing_arguments_exit_2():
    result = _runner().invoke(parse_command, ["lspci"])
    assert result.exit_code == 2 and "known kinds:" in result.stderr


def test_list_kinds():
    result = _runner().invoke(parse_command, ["--list"])
    assert result.exit_code == 0
    kinds = result.stdout.split()
    assert "hccn-link-stat" in kinds and "toolkit-install-info" in kinds and kinds == sorted(kinds)


TOPO = Path(__file__).parent / "real" / "npu-smi-info-t-topo_910b3-8npu-hccs-prompt_24.1.rc1_ms-swift-doc.txt"


def test_new_triage_kinds_are_listed_and_parse_real_captures():
    kinds = _runner().invoke(parse_command, ["--list"]).stdout.split()
    assert {"npu-smi-topo", "hccn-status", "hccn-hw-stats", "hccn-route"} <= set(kinds)
    result = _runner().invoke(parse_command, ["npu-smi-topo", str(TOPO)])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["devices"][0] == "NPU0" and data["links"]["NPU0"]["NPU7"] == "HCCS"
    assert data["cpu_affinity"]["NPU7"] == "48-71"


def test_topo_cut_matrix_exit_1_names_line():
    text = TOPO.read_text().split("NPU7       HCCS", 1)[0]  # the capture cut before NPU7's row
    result = _runner().invoke(parse_command, ["npu-smi-topo", "-"], input=text)
    assert result.exit_code == 1 and "no row for NPU7" in result.stderr
