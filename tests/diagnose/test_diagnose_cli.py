"""`ascend-check diagnose` with CliRunner: exit codes 0/1/2, the table and JSON outputs, the published
schema, and `collect --plogs` saving the plog probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sample_support import read_sample

from ascend_ready.checks.cli import main
from ascend_ready.checks.diagnose import json_schema
from ascend_ready.checks.report import SCHEMA_DIR

DATA = Path(__file__).with_name("data")
EI0006_SAMPLE = "error_hccl_EI0006-getting-socket-timeout_vllm-ascend-486.txt"


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def failed_log(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(read_sample(EI0006_SAMPLE))
    return path


def test_a_clean_log_exits_0(runner):
    result = runner.invoke(main, ["diagnose", str(DATA / "clean_ascend-train-grpo-tiny-cpu.log")])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("no known error signature (1 file, 15 lines read)")


def test_a_finding_exits_1_with_causes_fix_checks_and_lines(runner, failed_log):
    result = runner.invoke(main, ["diagnose", str(failed_log)])
    assert result.exit_code == 1, result.output
    out = result.stdout
    assert "1 known error signature (1 file, 4 lines read)" in out
    assert "1. [cause] EI0006 on rank 1: HCCL could not set up a socket with a peer rank in time" in out
    assert "likely causes:\n     1) another rank failed or exited before connecting" in out
    assert "HCCL_CONNECT_TIMEOUT=1800" in out
    assert "preflight: ascend-check --select hccl.link_up --select hccl.net_health" in out
    assert f"{failed_log}:4: [rank1]: EI0006: [PID: 1292363]" in out


def test_json_output_has_the_published_shape(runner, failed_log):
    result = runner.invoke(main, ["diagnose", str(failed_log), "--format", "json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["schema_version"] == 1 and report["files"] == [str(failed_log)] and report["lines"] == 4
    [finding] = report["findings"]
    assert {"code", "title", "causes", "fix", "check_ids", "evidence", "role", "rank"} <= set(finding)
    assert finding["code"] == "EI0006" and finding["role"] == "cause" and finding["rank"] == 1
    # one finding with every line of the error: the HcclAllreduce RuntimeError, torch_npu's ERR01100 line
    # and the EI0006 detail, in log order, counted
    lines = read_sample(EI0006_SAMPLE).splitlines()
    shown = [{"file": str(failed_log), "line": n, "text": lines[n - 1]} for n in (2, 3, 4)]
    assert finding["evidence"] == shown
    assert finding["matches"] == 3 and finding["layer"] == "hccl"
    assert "hccl.tls" in finding["check_ids"] and finding["sources"][0] == "vllm-project/vllm-ascend#486"


def test_standard_input_is_read_with_a_dash(runner):
    result = runner.invoke(main, ["diagnose", "-", "--format", "json"], input=read_sample(EI0006_SAMPLE))
    assert result.exit_code == 1
    assert json.loads(result.stdout)["findings"][0]["evidence"][0]["file"] == "<stdin>"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["diagnose", "/nonexistent/train.log"], "error: /nonexistent/train.log: no such file or directory"),
        (["diagnose"], "error: give at least one PATH"),
    ],
)
def test_usage_errors_exit_2_with_one_error_and_hint(runner, args, message):
    result = runner.invoke(main, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(message + "\n") and "\nhint: " in result.stderr
    assert "Traceback" not in result.output and result.stdout == ""


def test_published_schema_matches_the_model(runner):
    published = json.loads((SCHEMA_DIR / "diagnose.schema.json").read_text())
    assert published == json_schema(), (
        f"regenerate: ascend-check schema diagnose > {SCHEMA_DIR}/diagnose.schema.json"
    )
    assert json.loads(runner.invoke(main, ["schema", "diagnose"]).stdout) == published
    assert published["additionalProperties"] is False and "Finding" in published["$defs"]


def test_collect_plogs_saves_the_newest_plog_tails(runner, tmp_path, monkeypatch):
    plogs = tmp_path / "home" / "ascend" / "log" / "debug" / "plog"
    plogs.mkdir(parents=True)
    line = read_sample("error_runtime_107001-invalid-device-id-EE8888_gpustack-3352.txt").splitlines()[1]
    (plogs / "plog-42_20251118093313000.log").write_text("start\n" + line + "\n")
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path / "home" / "ascend" / "log"))
    snap = tmp_path / "snap"
    result = runner.invoke(main, ["collect", "-o", str(snap), "--select", "os.shm", "--plogs"])
    assert result.exit_code == 0, result.output
    [host_dir] = [p for p in snap.iterdir() if p.is_dir()]
    saved = (host_dir / "plogs.out").read_text()
    if "plog-42" not in saved:  # `su - user` reset the environment: the plog root is the user's HOME
        pytest.skip("the training user's login shell does not keep ASCEND_PROCESS_LOG_PATH")
    assert saved.startswith(f"==> {plogs / 'plog-42_20251118093313000.log'} <==\nstart\n")
    result = runner.invoke(main, ["diagnose", str(host_dir / "plogs.out"), "--format", "json"])
    assert result.exit_code == 1
    assert [f["code"] for f in json.loads(result.stdout)["findings"]] == ["107001"]


def test_a_binary_file_is_refused_naming_it_and_nothing_is_written(runner, tmp_path):
    core = tmp_path / "core.4242"
    core.write_bytes(b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64 + b"EI0006: in the middle of a core dump\n")
    result = runner.invoke(main, ["diagnose", str(core), "--format", "json"])
    assert result.exit_code == 2
    said = f"error: {core}: binary file (NUL bytes in its first 8192 bytes), not a log\n"
    assert result.stderr.startswith(said)
    assert "\nhint: " in result.stderr and "Traceback" not in result.output
    assert result.stdout == ""


def test_long_scans_print_progress_on_stderr_even_without_a_tty(runner, failed_log, monkeypatch):
    from ascend_ready.checks.diagnose import scan

    monkeypatch.setattr(scan, "PROGRESS_AFTER_S", 0.0)  # every chunk is "late": one line per chunk read
    monkeypatch.setattr(scan, "PROGRESS_EVERY_S", 0.0)
    result = runner.invoke(main, ["diagnose", str(failed_log), "--format", "json"])
    assert result.exit_code == 1
    progress = result.stderr.splitlines()
    assert progress[0].startswith("diagnose: 0.0 MiB of 0.0 MiB read (1 file, 4 lines), ")
    assert progress[-1].startswith("diagnose: done, 0.0 MiB in ")
    assert json.loads(result.stdout)["findings"][0]["code"] == "EI0006"  # stdout stays the report
    quiet = runner.invoke(main, ["diagnose", str(failed_log), "--format", "json", "-q"])
    assert quiet.exit_code == 1 and quiet.stderr == ""


def test_short_scans_print_no_progress(runner, failed_log):
    result = runner.invoke(main, ["diagnose", str(failed_log)])
    assert result.exit_code == 1 and result.stderr == ""
