"""os.reboot_pending (issue 25): a node that has the playbooks' owed-reboot marker fails, naming it, with
the reboot as its remediation; its probe's output here is what the probe's own shell prints on this
machine, with the marker path moved into a temp dir."""

from __future__ import annotations

import subprocess

import pytest
from checks_fakenode import fake_host

from ascend_ready.checks.parsers.os_commands import parse_reboot_marker
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.resources.os import REBOOT_MARKER, REBOOT_PENDING
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import Snapshot
from ascend_ready.errors import ParseError

#: the text the ascend_common role's owe_reboot task writes (roles/ascend_common/tasks/owe_reboot.yml)
ROLE_TEXT = ("ascend-ready is installing NPU driver 25.2.0; reboot to load it (re-running site.yml reboots "
             "the node when reboots are on)")


def probe_output(tmp_path, present: bool) -> str:
    marker = tmp_path / "run" / "ascend-ready.reboot-required"
    marker.parent.mkdir(exist_ok=True)
    if present:
        marker.write_text(ROLE_TEXT)
    elif marker.exists():
        marker.unlink()
    shell = REBOOT_PENDING(load_profile()).shell.replace(REBOOT_MARKER, str(marker))
    return subprocess.run(["/bin/sh", "-c", shell], capture_output=True, text=True, check=True).stdout


def judge(text: str):
    host = fake_host(outputs={"reboot-marker": text})
    report = run_checks(Snapshot(hosts={host.name: host}), {host.name: load_profile()},
                        select_checks("quick", select=["os.reboot_pending"]))
    (result,) = report.results
    return result


def test_a_node_with_the_marker_fails_naming_it_and_the_reboot(tmp_path):
    result = judge(probe_output(tmp_path, present=True))
    assert result.status == "fail"
    assert result.message.endswith(f"/run/ascend-ready.reboot-required is present: {ROLE_TEXT}")
    assert result.remediation.disruptive and "Reboot the node" in result.remediation.text


def test_a_node_without_it_passes(tmp_path):
    text = probe_output(tmp_path, present=False)
    assert judge(text).status == "pass"
    # the healthy fake node prints what the probe prints (its path the real one)
    assert fake_host().probes["reboot-marker"].stdout == text.replace(
        str(tmp_path / "run" / "ascend-ready.reboot-required"), REBOOT_MARKER)


@pytest.mark.parametrize("text", ["", "something else\n", "no marker /run/x\nextra line\n"])
def test_output_the_probe_never_prints_is_refused_and_the_check_errors(text):
    with pytest.raises(ParseError):
        parse_reboot_marker(text)
    assert judge(text).status == "error"
