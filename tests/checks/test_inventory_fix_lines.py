"""Fix lines carry the host, device, user and inventory they are about, and their ansible-playbook
command runs from where the user is (the checkout's root, or anywhere through a `cd` to it)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from checks_fakenode import fake_host, torch_import_output

from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.remediation import REPO, playbook_command
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import ProbeResult, Snapshot
from ascend_ready.fleet.inventory import INVENTORY_VAR

PLACEHOLDER = re.compile(r"<(host|user|python|inventory|device|dev|node|id|npu|chip)>")
NOT_INSTALLED = ProbeResult(command="...", rc=1, stderr="no ascend_toolkit_install.info\n")


def faulty_fleet(inventory: str | None) -> Snapshot:
    """Three A2 hosts with a fault in every family: device NICs, chips, OS limits, versions, the fleet."""
    a = fake_host("node01", index=0, faults=[("link-down", {"device": 4}),
                                             ("hot-chip", {"npu": 6, "temp_c": 96}),
                                             ("chip-health", {"npu": 3, "level": "Alarm"}),
                                             ("net-health-fault", {"device": 1}),
                                             ("tls-mismatch", {"device": 6, "enable": 1})])
    b = fake_host("node02", index=1, faults=[("device-ip-missing", {"device": 3}),
                                             ("stray-process", {"npu": 0, "pid": 4242, "name": "python3"})],
                  outputs={"user-limits": "user root\nnofile 65536 1024\nmemlock 64 64\n",
                           "torch-import": torch_import_output(7)})
    c = fake_host("node03", index=2, outputs={"toolkit-version": NOT_INSTALLED, "cann-components": "",
                                              "driver-version": "Version=24.1.rc2\n"})
    hosts = {h.name: h for h in (a, b, c)}
    if inventory:
        for h in hosts.values():
            h.vars[INVENTORY_VAR] = inventory
    return Snapshot(hosts=hosts)


def judge(snap: Snapshot):
    profiles = dict.fromkeys(snap.hosts, load_profile("atlas-800t-a2"))
    return run_checks(snap, profiles, select_checks("full")).results


def test_no_fix_line_of_a_failing_run_holds_a_placeholder(tmp_path):
    inventory = str(tmp_path / "rack1" / "hosts.ini")
    results = judge(faulty_fleet(inventory))
    failing = [r for r in results if r.status in ("fail", "warn") and r.remediation]
    assert {r.check_id for r in failing} >= {
        "hccl.link_up", "hccl.net_health", "hccl.tls", "hccl.ip", "npu.processes", "os.nofile", "npu.health",
        "npu.temperature",
        "versions.installed", "versions.torch_npu_import", "fleet.stack",
    }
    for r in failing:
        line = f"{r.remediation.text} {r.remediation.command or ''}"
        assert not PLACEHOLDER.search(line), (r.check_id, r.host, line)
    by = {(r.check_id, r.host): r.remediation for r in failing}
    assert by["hccl.link_up", "node01"].command == "hccn_tool -i 4 -link -g"
    assert by["npu.health", "node01"].command == "npu-smi set -t reset -i 3 -c 0"
    assert by["npu.temperature", "node01"].command == "npu-smi info -t temp -i 6 -c 0"
    # device 4's link is down, so its net health fails too
    health = "hccn_tool -i 1 -net_health -g; hccn_tool -i 4 -net_health -g"
    assert by["hccl.net_health", "node01"].command == health
    assert by["hccl.tls", "node01"].command == "hccn_tool -i 6 -tls -s enable 0"
    assert "su - root -c" in by["versions.torch_npu_import", "node02"].command
    playbook = playbook_command(inventory)
    assert by["versions.installed", "node03"].command == f"{playbook} --limit node03"
    assert by["fleet.stack", "node03"].command == f"{playbook} --limit node03"
    assert by["hccl.ip", "node02"].command == f"{playbook} --limit node02 --tags hccn"


def test_the_playbook_command_runs_from_the_checkout_or_through_a_cd_to_it(tmp_path):
    inventory = str(tmp_path / "hosts.ini")
    here = playbook_command(inventory, cwd=REPO)
    assert here == f"ansible-playbook -i {inventory} playbooks/site.yml"
    inside = playbook_command(str(REPO / "inventory" / "rack1" / "hosts.ini"), cwd=REPO)
    assert inside == "ansible-playbook -i inventory/rack1/hosts.ini playbooks/site.yml"
    elsewhere = playbook_command(inventory, cwd=tmp_path)
    assert shlex.split(elsewhere)[:3] == ["cd", str(REPO), "&&"]
    assert (REPO / shlex.split(elsewhere)[6]).is_file() and (REPO / "ansible.cfg").exists()


def test_without_an_inventory_the_fix_says_what_to_put_in(tmp_path):
    results = judge(faulty_fleet(None))
    (fix,) = [r.remediation for r in results if (r.check_id, r.host) == ("versions.installed", "node03")]
    assert " -i INVENTORY " in fix.command and fix.command.endswith("--limit node03")
    assert "INVENTORY: the Ansible inventory listing node03; this run had none" in fix.text


def test_load_inventory_records_where_the_inventory_is(tmp_path, monkeypatch):
    from ascend_ready.fleet.inventory import load_inventory

    (tmp_path / "hosts.ini").write_text("[g]\nnode01\n")
    monkeypatch.chdir(tmp_path)
    (node,) = load_inventory("hosts.ini")
    assert node.vars[INVENTORY_VAR] == str(Path(tmp_path / "hosts.ini").absolute())
