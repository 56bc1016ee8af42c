"""Reboots for real: a simulated node restarts when `shutdown -r` runs in it (processes gone, runtime
settings back to the boot defaults unless persisted, a new boot id, sshd back after a delay), and site.yml's
reboot handler upgrades a fleet batch by batch: the next batch starts only once the one before came back
and passed its health gate.

Two Ubuntu nodes with reboots on (ascend_common_reboot true, the default of a real fleet).
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from .conftest import BIN, PLAYBOOKS, STACK, sim_fleet

# each play here is a minute or more on 2 cores: make test-e2e (tests/README.md says who runs it, when)
pytestmark = [pytest.mark.sim, pytest.mark.e2e]

NODES = ("node01", "node02")
BOOT_ID = "cat /proc/sys/kernel/random/boot_id"
RUNTIME = "cat /proc/sys/kernel/numa_balancing /sys/kernel/mm/transparent_hugepage/enabled"
DEFRAG = "/sys/kernel/mm/transparent_hugepage/defrag"
_HEADER = re.compile(r"^((?:TASK|RUNNING HANDLER|PLAY) \[.*?\]) \**$", re.M)


@pytest.fixture(scope="module")
def fleet(fleet_factory):
    f = fleet_factory("a2-ubuntu2204,a2-ubuntu2204", 4)
    f.group_vars = {**sim_fleet.group_vars(f.packages, STACK, run_dir=f.cluster.run_dir),
                    "ascend_common_reboot": True, "ascend_common_reboot_timeout": 120}
    f.host_vars = sim_fleet.host_vars([vars(n) for n in f.cluster.nodes])
    f.write_inventory(f.group_vars, f.host_vars)
    return f


def _sections(output: str) -> list[tuple[str, str]]:
    parts = _HEADER.split(output)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def test_a_node_reboots_for_real(fleet):
    node = "node01"
    before = fleet.sh(node, BOOT_ID).strip()
    fleet.sh(node, "echo 0 > /proc/sys/kernel/numa_balancing; "  # runtime only: gone after the reboot
                   "echo never > /sys/kernel/mm/transparent_hugepage/enabled; "
                   "echo 'net.ipv4.ip_local_reserved_ports = 60000-60031' > /etc/sysctl.d/99-test.conf; "
                   "mkdir -p /etc/tmpfiles.d; "
                   f"echo 'w {DEFRAG} - - - - never' > /etc/tmpfiles.d/t.conf; "
                   "touch /run/ascend-ready.reboot-required; "
                   "setsid sleep 1000 </dev/null >/dev/null 2>&1 &")
    defaults = fleet.sh("node02", RUNTIME)
    env = {**os.environ, "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run([str(BIN / "ansible"), "-i", str(fleet.inventory / "hosts.ini"), node,
                           "-m", "ansible.builtin.reboot", "-a", "reboot_timeout=120"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "rebooted: true" in proc.stdout, proc.stdout + proc.stderr
    assert fleet.sh(node, BOOT_ID).strip() != before
    assert fleet.sh(node, "pgrep -x sleep || echo none").strip() == "none"
    # the same defaults as the node that did not reboot, and what was persisted applied over them
    assert fleet.sh(node, RUNTIME) == defaults
    assert fleet.sh(node, f"cat {DEFRAG}").split()[-1] == "[never]"
    assert fleet.sh(node, "cat /proc/sys/net/ipv4/ip_local_reserved_ports").strip() == "60000-60031"
    assert not (fleet.root(node) / "run/ascend-ready.reboot-required").exists()
    fleet.sh(node, "rm /etc/sysctl.d/99-test.conf /etc/tmpfiles.d/t.conf")


def test_rolling_upgrade_reboots_batch_after_batch_behind_the_health_gate(fleet):
    first = fleet.play("--skip-tags", "os_prereqs")
    assert first.rc == 0, first.output[-4000:]
    boots = {n: fleet.sh(n, BOOT_ID).strip() for n in NODES}
    for node in NODES:
        fleet.sim("fault", node, "driver-version-drift", "--param", "version=24.1.rc2")
    result = fleet.play("--skip-tags", "os_prereqs", "-e", "ascend_serial=1")
    assert result.rc == 0, result.output[-4000:]
    sections = _sections(result.output)

    def where(task: str, node: str, status: str) -> int:
        return next(i for i, (head, body) in enumerate(sections)
                    if task in head and re.search(rf"^{status}: \[{node}\]", body, re.M))

    order = [where("npu_driver : Run the driver installer", "node01", "changed"),
             where("Reboot the node to load the new NPU driver and firmware", "node01", "changed"),
             where("Ensure every NPU chip came back healthy from the reboot", "node01", "ok"),
             where("npu_driver : Run the driver installer", "node02", "changed"),
             where("Reboot the node to load the new NPU driver and firmware", "node02", "changed"),
             where("Ensure every NPU chip came back healthy from the reboot", "node02", "ok")]
    assert order == sorted(order), order
    for node in NODES:
        assert fleet.sh(node, BOOT_ID).strip() != boots[node]
        assert "Version=24.1.rc2" not in fleet.read(node, "/usr/local/Ascend/driver/version.info")
        assert not (fleet.root(node) / "run/ascend-ready.reboot-required").exists()
    assert fleet.play("--skip-tags", "os_prereqs").changed("node01") == 0


def test_a_node_that_comes_back_unhealthy_stops_the_rolling_upgrade(fleet):
    for node in NODES:
        fleet.sim("fault", node, "driver-version-drift", "--param", "version=24.1.rc2")
    # Forced past the gate before the upgrade, so the chip is still bad when node01 comes back.
    fleet.sim("fault", "node01", "chip-health", "--param", "npu=3")
    try:
        result = fleet.play("--skip-tags", "os_prereqs", "-e", "ascend_serial=1",
                            "-e", "npu_driver_force=true")
        assert result.rc != 0 and result.failed("node01")
        assert re.search(r"node01 came back from the reboot with NPU 3 chip 0: \w+.*the next batch does not "
                         r"start", result.output, re.S), result.output[-4000:]
        ran = [head for head, body in _sections(result.output)
               if "Run the driver installer" in head and "[node02]" in body]
        assert ran == []
        assert "Version=24.1.rc2" in fleet.read("node02", "/usr/local/Ascend/driver/version.info")
        assert "Version=24.1.rc2" not in fleet.read("node01", "/usr/local/Ascend/driver/version.info")
    finally:
        fleet.sim("fault", "node01", "--clear")


def test_an_interrupted_play_leaves_the_reboot_owed_and_the_next_run_makes_it(fleet):
    """Issue 25: Ctrl-C after the driver installer and before the play's end skips the handler; the marker
    the role wrote before the installer stays, os.reboot_pending fails the node, and the re-run (which
    finds the driver installed and changes nothing else) reboots it and clears the marker."""
    import signal
    import time

    node = "node01"
    if (fleet.root(node) / "usr/local/Ascend/driver/version.info").exists():  # provisioned: upgrade it
        fleet.sim("fault", node, "driver-version-drift", "--param", "version=24.1.rc2")
    boot = fleet.sh(node, BOOT_ID).strip()
    env = {**os.environ, "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "PYTHONUNBUFFERED": "1", "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    inventory = str(fleet.inventory / "hosts.ini")
    play = subprocess.Popen([str(BIN / "ansible-playbook"), "-i", inventory, "site.yml",
                             "--skip-tags", "os_prereqs", "--limit", node], cwd=PLAYBOOKS, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    seen = []
    try:
        deadline = time.monotonic() + 600
        for line in play.stdout:  # interrupted once the driver is in and CANN's tasks begin
            seen.append(line)
            if line.startswith("TASK [cann :"):
                os.killpg(play.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the whole process group
                break
            assert time.monotonic() < deadline, "".join(seen)[-3000:]
        rest, _ = play.communicate(timeout=120)
    finally:
        if play.poll() is None:
            play.kill()
    output = "".join(seen) + (rest or "")
    assert "Run the driver installer" in output and "RUNNING HANDLER" not in output, output[-3000:]
    assert fleet.sh(node, BOOT_ID).strip() == boot  # not rebooted
    assert "ascend-ready is installing NPU" in fleet.read(node, "/run/ascend-ready.reboot-required")
    check = subprocess.run([str(BIN / "ascend-check"), "-i", inventory, "--limit", node,
                            "--select", "os.reboot_pending", "--format", "json"],
                           capture_output=True, text=True, timeout=300)
    (result,) = json.loads(check.stdout)["results"]
    assert check.returncode == 1 and result["status"] == "fail", check.stdout[-2000:]
    assert "reboot-required is present" in result["message"]
    again = fleet.play("--skip-tags", "os_prereqs", "--limit", node)
    assert again.rc == 0, again.output[-4000:]
    owed = next(body for head, body in _sections(again.output)
                if "Ensure the reboot an interrupted run owed is made" in head)
    assert f"changed: [{node}]" in owed
    assert fleet.sh(node, BOOT_ID).strip() != boot
    assert not (fleet.root(node) / "run/ascend-ready.reboot-required").exists()
    assert fleet.play("--skip-tags", "os_prereqs", "--limit", node).changed(node) == 0
