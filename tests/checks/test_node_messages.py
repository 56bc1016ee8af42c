"""Messages of a node's run (issue 25): a missing training venv is one line naming the path and the fix,
never the inline script; a per-device probe none of whose instances ran names its words, never `{1}`;
a full textfile directory leaves no temporary file and tells root what to do, not to run as root."""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path

import pytest
from checks_fakenode import fake_host
from click.testing import CliRunner

from ascend_ready.checks import node_mode
from ascend_ready.checks.cli import main
from ascend_ready.checks.probes import build_script, not_run_result, parse_stream
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.resources.npu import NPU_SMI_HEALTH
from ascend_ready.checks.resources.versions import TRAINING_ENV
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import Snapshot

MISSING = "/home/ascend/venvs/ascend-cann-8.2.RC1-torch-2.6.0/bin/python"


def _judge(host, check_id):
    report = run_checks(Snapshot(hosts={host.name: host}), {host.name: host.profile},
                        select_checks("full", select=[check_id]))
    (result,) = report.results
    return result


def test_a_missing_training_venv_is_one_line_naming_the_path_and_the_fix():
    profile = load_profile().model_copy(update={"python": MISSING})
    probe = TRAINING_ENV(profile)
    # what the batch records when the interpreter is not there: run it for real on this machine
    script, nonce = build_script([probe])
    out = subprocess.run(["/bin/sh", "-s"], input=script.encode(), capture_output=True, timeout=30).stdout
    result = parse_stream(out, nonce, [probe]).results["training-env"]
    assert result.rc == 127
    host = fake_host(profile=profile, outputs={"training-env": result})
    host.profile = profile
    judged = _judge(host, "versions.training_env")
    assert judged.status == "error"
    assert judged.message.startswith(f"no interpreter {MISSING} on the node (the training venv is missing)")
    assert "site.yml --tags python_env" in judged.message
    assert "import" not in judged.message and len(judged.message.splitlines()) == 1


def test_a_per_device_probe_that_never_ran_names_its_words_not_a_template():
    result = not_run_result(NPU_SMI_HEALTH(load_profile()), "", "host deadline of 1 s")
    assert result.command == "npu-smi info -t health -i <npu> -c <chip>"
    assert "{1}" not in result.command


def test_a_full_textfile_directory_leaves_no_temporary_file_and_says_what_to_do(tmp_path, monkeypatch):
    from ascend_ready.checks import report as report_mod

    real_write = Path.write_text

    def full(self, text, *a, **kw):
        if self.name.endswith(".tmp"):
            real_write(self, "")  # the file is created, then the disk is full (as ENOSPC leaves it)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, text, *a, **kw)

    monkeypatch.setattr(report_mod.Path, "write_text", full)
    prom = tmp_path / "tf" / "ascend_check.prom"
    with pytest.raises(Exception) as err:
        node_mode._write(prom, "metrics\n", "textfile")
    assert "No space left on device" in err.value.message
    assert "free space on the file system" in err.value.hint and "run as root" not in err.value.hint
    assert list(prom.parent.iterdir()) == []


def test_the_node_cli_with_a_full_textfile_directory_exits_2_with_the_hint(tmp_path, monkeypatch):
    a2 = load_profile("atlas-800t-a2")

    def fake(name, options, fleet):
        host = fake_host(name)
        host.profile = a2
        snap = Snapshot(hosts={name: host})
        return run_checks(snap, {name: a2}, options.checks()), snap

    monkeypatch.setattr(node_mode, "run_node", fake)

    def boom(path, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("ascend_ready.checks.report.write_atomic", boom)
    result = CliRunner().invoke(main, ["node", "--prometheus", str(tmp_path / "x.prom"), "--no-report"])
    assert result.exit_code == 2, result.output
    assert "No space left on device" in result.output and "run as root" not in result.output
