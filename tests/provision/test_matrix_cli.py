"""`ascend-matrix` through click's CliRunner: every exit code, both output formats."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from ascend_ready.provision.cli import main
from ascend_ready.provision.matrix import MATRIX_PATH, matrix_json_schema


@pytest.fixture
def run():
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(main, list(args))

    return invoke


def test_show_table_lists_every_stack(run):
    r = run("show")
    assert r.exit_code == 0, r.output
    assert "cann-8.0.0-torch-2.1.0" in r.output and "2.1.0.post10" in r.output
    assert "cann-9.0.0-torch-2.9.0 *" in r.output
    assert sum(line.startswith("│ cann-") for line in r.output.splitlines()) == 24


def test_show_json_filtered_by_cann(run):
    r = run("show", "--cann", "8.5.0", "--format", "json")
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert [s["torch_npu"] for s in data["stacks"]] == ["2.9.0", "2.8.0.post2", "2.7.1.post2", "2.6.0.post5"]
    assert {s["glibc"] for s in data["stacks"]} == {"2.28"}


def test_show_unknown_cann_exits_2(run):
    r = run("show", "--cann", "8.4.0")
    assert r.exit_code == 2
    assert "error: cann: CANN 8.4.0 is not in the matrix" in r.stderr
    assert "hint: known CANN versions: 7.0.0, 8.0.0" in r.stderr


def test_resolve_table(run):
    r = run("resolve", "--os", "centos7.6")
    assert r.exit_code == 0, r.output
    assert "resolved stack cann-8.3.RC1-torch-2.1.0" in r.output
    assert "Ascend-cann-kernels-910b_8.3.RC1_linux-aarch64.run" in r.output
    assert "warning: centos7.6 ships python3 3.6; install Python 3.11 for this stack" in r.output


def test_resolve_json(run):
    r = run("resolve", "--cann", "8.5.0", "--product", "310p", "--arch", "x86_64", "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["packages"]["ops"] == "Ascend-cann-310p-ops_8.5.0_linux-x86_64.run"
    assert data["layout"]["install_root"] == "/usr/local/Ascend/cann-8.5.0"
    assert (data["driver"], data["firmware"]) == ("25.5.1", "7.8.0.6.201")


def test_resolve_nothing_fits_exits_2_without_traceback(run):
    r = run("resolve", "--python", "3.6")
    assert r.exit_code == 2
    assert r.stderr.startswith("error: no stack fits: python 3.6 rules out")
    assert "hint: no stack in the matrix satisfies python 3.6" in r.stderr
    assert "Traceback" not in r.output


def test_resolve_bad_arch_is_a_usage_error(run):
    r = run("resolve", "--arch", "riscv64")
    assert r.exit_code == 2 and "riscv64" in r.stderr


def test_judge_valid_exits_0(run):
    r = run("judge", "--driver", "24.1.rc2", "--firmware", "7.3.0.1.231", "--cann", "8.0.0",
            "--torch", "2.1.0", "--torch-npu", "2.1.0.post10")
    assert r.exit_code == 0, r.output
    assert "valid: matches cann-8.0.0-torch-2.1.0" in r.output


def test_judge_off_exits_1_table(run):
    r = run("judge", "--driver", "24.1.rc2", "--firmware", "7.3.0.1.231", "--cann", "8.0.0",
            "--torch", "2.1.0", "--torch-npu", "2.1.0.post8")
    assert r.exit_code == 1
    assert "torch_npu" in r.output and "2.1.0.post10" in r.output


def test_judge_off_exits_1_json(run):
    r = run("judge", "--driver", "24.1.rc2", "--firmware", "7.1.0.6.220", "--format", "json")
    assert r.exit_code == 1
    data = json.loads(r.output)
    assert data["valid"] is False
    assert data["findings"][0] == {
        "component": "firmware", "installed": "7.1.0.6.220", "expected": "7.3.0.1.231",
        "reason": "firmware 7.1.0.6.220 is older than 7.3.0.1.231, which HDK 24.1.RC2 pairs with 910b driver "
                  "24.1.rc2 (firmware is per product and per driver)"}


def test_judge_nothing_given_exits_2(run):
    r = run("judge")
    assert r.exit_code == 2 and "error: nothing to judge" in r.stderr


def test_judge_bad_version_exits_2(run):
    r = run("judge", "--torch", "2.x")
    assert r.exit_code == 2 and "error: torch: bad version '2.x'" in r.stderr


def test_schema(run):
    r = run("schema")
    assert r.exit_code == 0
    assert json.loads(r.output) == matrix_json_schema()


def test_other_matrix_file(run, tmp_path):
    data = yaml.safe_load(MATRIX_PATH.read_text())
    data["stacks"] = [s for s in data["stacks"] if s["cann"] == "8.0.0"]
    path = tmp_path / "small.yml"
    path.write_text(yaml.safe_dump(data))
    r = run("--matrix", str(path), "resolve", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["id"] == "cann-8.0.0-torch-2.4.0"


def test_invalid_matrix_file_exits_2(run, tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text(MATRIX_PATH.read_text().replace("schema_version: 1", "schema_version: 1\nextra: true", 1))
    r = run("--matrix", str(path), "show")
    assert r.exit_code == 2
    assert "extra: unknown key" in r.stderr and "hint:" in r.stderr


def test_missing_matrix_file_exits_2(run, tmp_path):
    r = run("--matrix", str(tmp_path / "none.yml"), "show")
    assert r.exit_code == 2 and "error: cannot read matrix file" in r.stderr


@pytest.mark.parametrize("args", [["--torch", "0.1"], ["--torch-npu", "9.9.9"], ["--driver", "1.0"]])
def test_judge_unknown_version_exits_1_naming_the_field(run, args):
    r = run("judge", *args, "--format", "json")
    assert r.exit_code == 1, r.output
    (finding,) = json.loads(r.output)["findings"]
    assert finding["component"] == args[0][2:].replace("-", "_") and "nearest known" in finding["reason"]


def test_matrix_cli_errors_go_through_the_one_guard(run, monkeypatch):
    from ascend_ready.provision import cli

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "load_matrix", interrupted)
    r = run("show")
    assert r.exit_code == 130 and "error: interrupted" in r.stderr and "Traceback" not in r.output
