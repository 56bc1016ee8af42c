"""The preflight gate and launch contract of ascend-train. The gate runs the real ascend-check, on snapshots
of simulated nodes instead of live hosts, so every report it reads is one ascend-check printed."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from training_fakecheck import healthy, link_down, save_snapshot, unreachable

from ascend_ready.checks.cli import main as check_main
from ascend_ready.errors import ParseError
from ascend_ready.training import launch
from ascend_ready.training.cli import main
from ascend_ready.training.config import LaunchConfig
from ascend_ready.training.preflight import MAX_LISTED, failed_checks, read_report


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


def printed_report(tmp_path, *hosts) -> tuple[int, str]:
    """(exit code, stdout) of `ascend-check --snapshot DIR --format json` on those hosts."""
    snap = save_snapshot(tmp_path / "judged", *hosts)
    result = CliRunner().invoke(check_main, ["--snapshot", str(snap), "--format", "json"])
    return result.exit_code, result.stdout


def test_failed_preflight_refuses_and_lists_the_failed_checks(tmp_path, ascend_check):
    check = ascend_check(healthy("node01"), link_down("node02", 1))
    result = invoke(tmp_path, check, "--hosts", "node01,node02")
    assert result.exit_code == 1
    assert "preflight failed (checks failed); refusing to train" in result.stderr
    assert "  - node02: hccl.link_up: fail: device 3 link DOWN" in result.stderr
    assert "node01" not in result.stderr.split("refusing to train")[1]
    assert "hint: fix the failures or pass --skip-preflight" in result.stderr
    assert (tmp_path / "argv.txt").read_text().split() == ["--hosts", "node01,node02", "--format", "json"]
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_unreachable_hosts_refuse_naming_the_hosts(tmp_path, ascend_check):
    # ascend-check prints nothing on stderr here: the host and the reason come from the report itself.
    inventory = tmp_path / "inventory.ini"  # read by ascend-train before the preflight (exit 2 if it cannot)
    inventory.write_text("[npu]\nnode01\nnode09\n")
    result = invoke(tmp_path, ascend_check(healthy("node01"), unreachable("node09")), "-i", str(inventory))
    assert result.exit_code == 1
    assert "preflight failed (hosts unreachable); refusing to train" in result.stderr
    assert "  - node09: unreachable: root@node09:22: timed out" in result.stderr
    assert (tmp_path / "argv.txt").read_text().split() == ["-i", str(inventory), "--format", "json"]


def test_usage_error_refuses_with_ascend_checks_own_message(tmp_path, ascend_check):
    result = invoke(tmp_path, ascend_check())  # an empty snapshot directory
    assert result.exit_code == 1
    assert "preflight failed (usage or configuration error); refusing to train" in result.stderr
    assert "is not a snapshot: no manifest.json" in result.stderr


def test_missing_preflight_command_is_a_config_error(tmp_path):
    result = invoke(tmp_path, tmp_path / "no-such-check")
    assert result.exit_code == 2 and "preflight command not found" in result.stderr


@pytest.mark.parametrize(
    "stdout, reason",
    [
        ("", "nothing on stdout"),
        ('{"checks": [{"id": "npu_health", "status": "passed"}]}', "checks: Extra inputs are not permitted"),
    ],
    ids=["silent", "foreign-shape"],
)
def test_exit_0_without_an_ascend_check_report_is_no_pass(tmp_path, stdout, reason):
    # Not ascend-check (a stub, another tool): the gate must not pass what it could not read.
    stub = tmp_path / "not-ascend-check"
    stub.write_text(f"#!/bin/sh\ncat <<'OUT'\n{stdout}\nOUT\nexit 0\n")
    stub.chmod(0o755)
    result = invoke(tmp_path, stub)
    assert result.exit_code == 1
    assert "preflight failed (exit 0 but no readable report); refusing to train" in result.stderr
    assert f"cannot parse the ascend-check report: {reason}" in result.stderr
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_skip_preflight_is_loud_and_trains(tmp_path, ascend_check):
    never = ascend_check(link_down("node02", 1))
    result = invoke(tmp_path, never, "--skip-preflight")
    assert result.exit_code == 0, result.output
    assert "WARNING: PREFLIGHT SKIPPED" in result.stderr
    assert not (tmp_path / "argv.txt").exists()  # ascend-check was never run


def test_passing_preflight_checks_the_local_node_and_prints_hccl_env(tmp_path, passing_check):
    result = invoke(tmp_path, passing_check)
    assert result.exit_code == 0, result.output
    # the local node is judged as the job runs: this user, this interpreter (the venv, as the runbook says)
    import getpass
    import sys

    assert (tmp_path / "argv.txt").read_text().split() == [
        "--training-user", getpass.getuser(), "--python", sys.executable, "--format", "json"]
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


def test_failed_checks_of_a_printed_report(tmp_path):
    code, stdout = printed_report(tmp_path, healthy("node01"), link_down("node02", 1), unreachable("node09"))
    assert code == 1
    report = read_report(stdout)
    assert failed_checks(report) == [
        "node09: unreachable: root@node09:22: timed out",
        "node02: hccl.link_up: fail: device 3 link DOWN",
        "node02: hccl.net_health: fail: device 3 net health 'Fault'",
    ]
    # warnings and passes are not failures; a healthy report lists nothing
    assert {r.status for r in report.results} >= {"pass", "fail"}
    code, stdout = printed_report(tmp_path / "ok", healthy("node01"))
    assert code == 0 and failed_checks(read_report(stdout)) == []


def test_failed_checks_lists_at_most_fifteen(tmp_path):
    gone = [unreachable(f"node{i:02d}") for i in range(10, 24)]
    _, stdout = printed_report(tmp_path, link_down("node02", 1), *gone)
    report = read_report(stdout)
    total = len(report.unreachable) + sum(r.status in ("fail", "error") for r in report.results)
    lines = failed_checks(report)
    assert total > MAX_LISTED and len(lines) == MAX_LISTED + 1
    assert lines[-1] == f"... and {total - MAX_LISTED} more (run ascend-check to see them all)"


def test_read_report_names_what_is_not_a_report():
    with pytest.raises(ParseError, match="nothing on stdout"):
        read_report("  \n")
    with pytest.raises(ParseError, match=r"results\.0\.check_id: Field required"):
        read_report(json.dumps({"results": [{"id": "x", "host": "n", "status": "fail"}]}))


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
