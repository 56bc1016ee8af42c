"""The preflight gate and launch contract of ascend-train, with a fake ascend-check."""

from __future__ import annotations

import json

import pytest
from ascend_ready.training import launch
from ascend_ready.training.cli import main
from ascend_ready.training.config import LaunchConfig
from ascend_ready.training.preflight import failed_checks
from click.testing import CliRunner

FAILING = {
    "checks": [
        {"id": "npu_health", "host": "node01", "status": "passed", "message": "8/8 OK"},
        {"id": "hccn_link", "host": "node02", "status": "failed", "message": "eth3 link DOWN"},
    ]
}


def invoke(tmp_path, check, *args):
    return CliRunner().invoke(
        main,
        [
            "grpo",
            "-c",
            "tiny",
            "-o",
            str(tmp_path / "run"),
            "--preflight-command",
            str(check),
            *args,
            "max_steps=1",
        ],
    )


def test_failed_preflight_refuses_and_lists_the_failed_checks(tmp_path, fake_check):
    result = invoke(tmp_path, fake_check(1, FAILING), "--hosts", "node01,node02")
    assert result.exit_code == 1
    assert "preflight failed (checks failed); refusing to train" in result.stderr
    assert "node02: hccn_link: failed: eth3 link DOWN" in result.stderr
    assert "node01" not in result.stderr.split("refusing to train")[1]
    assert "hint: fix the failures or pass --skip-preflight" in result.stderr
    assert (tmp_path / "argv.txt").read_text().split() == ["--hosts", "node01,node02", "--format", "json"]
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_unreachable_hosts_refuse_with_the_stderr_tail(tmp_path, fake_check):
    result = invoke(tmp_path, fake_check(3, None), "-i", "inventory.ini")
    assert result.exit_code == 1
    assert "hosts unreachable" in result.stderr and "node9: connection refused" in result.stderr
    assert (tmp_path / "argv.txt").read_text().split() == ["-i", "inventory.ini", "--format", "json"]


def test_missing_preflight_command_is_a_config_error(tmp_path):
    result = invoke(tmp_path, tmp_path / "no-such-check")
    assert result.exit_code == 2 and "preflight command not found" in result.stderr


def test_skip_preflight_is_loud_and_trains(tmp_path, fake_check):
    never = fake_check(1, FAILING)
    result = invoke(tmp_path, never, "--skip-preflight")
    assert result.exit_code == 0, result.output
    assert "WARNING: PREFLIGHT SKIPPED" in result.stderr
    assert not (tmp_path / "argv.txt").exists()  # ascend-check was never run


def test_passing_preflight_checks_the_local_node_and_prints_hccl_env(tmp_path, passing_check):
    result = invoke(tmp_path, passing_check)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "argv.txt").read_text().split() == ["--format", "json"]
    assert "preflight: passed" in result.stderr
    assert "HCCL_CONNECT_TIMEOUT=1800" in result.stderr and "HCCL_EXEC_TIMEOUT=3600" in result.stderr
    run = tmp_path / "run"
    assert f"plot:        {run / 'metrics.png'}" in result.stderr
    assert f"tensorboard --logdir {run / 'tensorboard'}" in result.stderr
    assert (run / "config.yaml").is_file()  # the resolved config the run (and its workers) used


def test_bad_override_is_shown_as_field_lines(tmp_path, passing_check):
    result = invoke(tmp_path, passing_check, "grpo.num_generations=1", "nonsense=3")
    assert result.exit_code == 2
    assert "grpo.num_generations: Input should be greater than or equal to 2" in result.stderr
    assert "nonsense: Extra inputs are not permitted" in result.stderr
    assert "Traceback" not in result.output


def test_failed_checks_reads_the_ascend_check_report_layout():
    report = {
        "schema_version": 1,
        "results": [
            {"check_id": "npu.health", "host": "n1", "status": "pass", "message": ""},
            {"check_id": "hccl.ip", "host": "n1", "status": "fail", "message": "no device NICs found"},
            {"check_id": "os.thp", "host": "n2", "status": "warn", "message": "THP is madvise"},
            {"check_id": "pcie.link", "host": "n2", "status": "error", "message": "lspci timed out"},
        ],
    }
    assert failed_checks(json.dumps(report)) == [
        "n1: hccl.ip: fail: no device NICs found",
        "n2: pcie.link: error: lspci timed out",
    ]
    many = {"results": [{"check_id": f"c{i}", "host": "n", "status": "fail"} for i in range(20)]}
    lines = failed_checks(json.dumps(many))
    assert len(lines) == 16 and lines[-1].startswith("... and 5 more")


def test_failed_checks_is_tolerant_of_odd_reports():
    assert failed_checks("not json") == []
    assert failed_checks('{"summary": 1}') == []
    assert failed_checks('{"checks": [{"id": "x", "status": "error"}, "junk"]}') == ["?: x: error:"]


def test_hccl_env_defaults_and_environment_precedence():
    cfg = LaunchConfig(
        hccl={"socket_ifname": "eth0", "connect_timeout": 600, "extra_env": {"HCCL_BUFFSIZE": "400"}}
    )
    env = launch.hccl_env(cfg, environ={"HCCL_EXEC_TIMEOUT": "7200"})
    assert env["HCCL_CONNECT_TIMEOUT"] == "600"
    assert env["HCCL_EXEC_TIMEOUT"] == "7200"  # the operator's explicit export wins
    assert env["HCCL_SOCKET_IFNAME"] == "eth0" and env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert env["HCCL_BUFFSIZE"] == "400" and env["HCCL_EVENT_TIMEOUT"] == "3632"


def test_torchrun_command_carries_the_topology():
    cfg = LaunchConfig(nnodes=2, nproc_per_node=8, node_rank=1, master_addr="10.0.0.1")
    cmd = launch.torchrun_command(cfg, ["grpo", "--config", "c.yaml"])
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert {"--nnodes=2", "--nproc-per-node=8", "--node-rank=1", "--master-addr=10.0.0.1"} <= set(cmd)
    assert cmd[-5:] == ["-m", "ascend_ready.training.cli", "grpo", "--config", "c.yaml"]


def test_visible_devices_must_cover_the_processes(monkeypatch):
    from ascend_ready.errors import ConfigError

    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "4,5")
    assert "i-th listed NPU" in launch.check_visible_devices(2, "npu")
    with pytest.raises(ConfigError, match="shows 2 NPUs for 8 processes"):
        launch.check_visible_devices(8, "npu")
    monkeypatch.delenv("ASCEND_RT_VISIBLE_DEVICES")
    assert launch.check_visible_devices(8, "npu") is None
