"""Issue 9, "fail closed everywhere", at the check layer: a value the tools did not print (a cut table,
`NA`, a missing device, a probe that never ran) is an error naming what is missing, never a pass; an NPU
is known by its device id; fix commands can be applied in any order; and every check runs with only the
probes its resources declare.

Inputs are what the simulator renders (tests/checks/checks_fakenode.py) or real captures, cut or edited
as each test says.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from checks_fakenode import fake_host, judge

from ascend_ready.checks.parsers.npu_smi_info import parse_npu_smi_info
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import all_checks, select_checks
from ascend_ready.checks.resources import Host, NpuSmi, Sysctl
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import ProbeResult, Snapshot
from ascend_ready.checks.suite.test_os import LIMITS_FILE
from ascend_ready.sim.render.npu_smi_table import render

REPO = Path(__file__).resolve().parents[2]
#: the npu.* checks that read the `npu-smi info` table
TABLE_CHECKS = (
    "npu.count",
    "npu.health",
    "npu.temperature",
    "npu.hbm_idle",
    "npu.hbm_usage",
    "npu.processes",
    "npu.device_nodes",
    "npu.pci_functions",
)


def lines_upto(text: str, marker: str, *, after: int = 0) -> str:
    """`text` up to and including the line that contains `marker` (and `after` lines more)."""
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if marker in line)
    return "".join(lines[: at + 1 + after])


# ---------------------------------------------------------------- 1. a cut `npu-smi info` table

BUSY = [("stray-process", {"npu": 5, "pid": 4242, "name": "python3", "memory_mb": 18000})]


@pytest.mark.parametrize(
    ("where", "after"),
    [
        ("No running processes found in NPU 3", 1),  # after the rule that closes NPU 3's rows
        ("No running processes found in NPU 3", 0),  # after NPU 3's row, before its rule
        ("Process id", 1),  # right after the process table's header rule
    ],
)
def test_a_table_cut_in_the_process_table_is_never_judged(where, after):
    # An 18 GB process holds NPU 5; the output stops at a row boundary before its row. Read as it
    # stands, the table shows no process: npu.processes passed.
    full = fake_host(faults=BUSY).probes["npu-smi-info"].stdout
    cut = lines_upto(full, where, after=after)
    assert parse_npu_smi_info(cut).processes == []  # what the parser alone makes of it
    results = judge(fake_host(faults=BUSY, outputs={"npu-smi-info": cut}), select=["npu.*"])
    for cid in TABLE_CHECKS:
        assert results[cid].status == "error", (cid, results[cid].status, results[cid].message)
        assert results[cid].message.startswith("`npu-smi info` output is cut: "), results[cid].message


def test_a_device_table_cut_before_the_process_table_is_never_judged(sample):
    # The real 910B2 capture (vllm-ascend#362), its process table dropped: npu-smi 23.0 prints one.
    text = sample("npu-smi-info_910b2_23.0.7_vllm-ascend-362.txt")
    cut = text[
        : text.index(
            "+---------------------------+---------------+------------------------------"
            "----------------------+\n| NPU     Chip"
        )
    ]
    results = judge(fake_host(outputs={"npu-smi-info": cut}), select=["npu.*"])
    for cid in ("npu.count", "npu.temperature", "npu.processes"):
        assert results[cid].status == "error"
        assert "ends after the device table, without the process table npu-smi 23.0.7 prints" in (
            results[cid].message
        )


def test_the_real_partial_a3_capture_is_never_judged():
    # vllm-ascend#12980: the excerpt stops after NPU 0 chip 1 (the parser marks it truncated).
    cut = REPO / "tests/parsers/real/npu-smi-info_ascend910-a3-116col-PARTIAL_26.0.rc2_vllm-ascend-12980.txt"
    results = judge(
        fake_host(hardware="atlas-800t-a3", outputs={"npu-smi-info": cut.read_text()}),
        select=["npu.*"],
        profile="atlas-800t-a3",
    )
    for cid in ("npu.count", "npu.health", "npu.temperature", "npu.hbm_idle", "npu.processes"):
        assert results[cid].status == "error" and "output is cut" in results[cid].message


# ---------------------------------------------------------------- 2. NA values


def _temp_na(state):
    state["npus"][3]["chips"][0]["temp_c"] = None  # the simulator prints NA, as npu-smi does


def test_a_chip_without_a_temperature_is_an_error_naming_it():
    host = fake_host(edit=_temp_na)
    assert "| 3     910B" in host.probes["npu-smi-info"].stdout
    r = judge(host, select=["npu.temperature"])["npu.temperature"]
    assert r.status == "error"
    assert r.message.startswith("NPU 3 chip 0 reports no temperature (Temp(C) is NA in `npu-smi info`)")
    # A real fault elsewhere still fails, and the message names the unread chip too.
    r = judge(
        fake_host(edit=_temp_na, faults=[("hot-chip", {"npu": 6, "temp_c": 96})]), select=["npu.temperature"]
    )["npu.temperature"]
    assert r.status == "fail" and "NPU 6 chip 0 at 96" in r.message and "NPU 3 chip 0 reports no" in r.message


def test_a_chip_without_hbm_usage_is_an_error_naming_it(sample):
    # The real 910B2 table re-rendered by the simulator's renderer with NPU 2's HBM printed as NA.
    info = parse_npu_smi_info(sample("npu-smi-info_910b2_23.0.7_vllm-ascend-362.txt")).model_dump()
    info["npus"][2]["chips"][0].update(hbm_used_mb=None, hbm_total_mb=None)
    table = render(info)
    assert "NA   / NA" in table
    results = judge(fake_host(outputs={"npu-smi-info": table}), select=["npu.hbm_*"])
    for cid in ("npu.hbm_idle", "npu.hbm_usage"):
        assert "NPU 2 chip 0 reports no HBM usage (HBM-Usage is NA in `npu-smi info`)" in results[cid].message
    # hbm_idle still fails on the real chips holding ~30 GB; hbm_usage has nothing else to fail on
    assert results["npu.hbm_idle"].status == "fail" and results["npu.hbm_usage"].status == "error"


def test_a_health_detail_that_prints_na_warns_and_a_missing_one_is_an_error(sample):
    na = sample("npu-smi-info-t-health_alarm-multicode_mindcluster-faultdiag.txt")
    host = fake_host()
    detail = host.probes["npu-smi-health.2.0"].stdout
    lines = [line for line in detail.splitlines() if "Health" in line]
    assert lines, detail
    r = judge(
        fake_host(outputs={"npu-smi-health.2.0": detail.replace(lines[0].split(":")[-1], " NA")}),
        select=["npu.health"],
    )["npu.health"]
    assert r.status == "warn"
    assert r.message == "NPU 2 chip 0: `npu-smi info -t health -i 2 -c 0` printed no health status (NA)"
    r = judge(fake_host(drop=("npu-smi-health.4.0",)), select=["npu.health"])["npu.health"]
    assert r.status == "error"
    assert r.message.startswith("NPU 4 chip 0: no output of `npu-smi info -t health -i 4 -c 0`")
    assert na  # the alarm sample itself is judged in test_check_suite


def test_a_device_nic_that_printed_nothing_is_an_error_naming_it():
    for cid, probe in (
        ("hccl.link_up", "hccn-link"),
        ("hccl.net_health", "hccn-net-health"),
        ("hccl.ip", "hccn-ip"),
        ("hccl.tls", "hccn-tls"),
    ):
        r = judge(fake_host(drop=(f"{probe}.6",)), select=[cid])[cid]
        assert r.status == "error", (cid, r.status, r.message)
        assert r.message.startswith("device 6: no output of `hccn_tool -i 6 -")


# ---------------------------------------------------------------- 3. NPU identity


def test_a_kunpeng_hosts_own_accelerators_are_not_npus():
    # The simulator's A2 node carries the Kunpeng 920's HiSilicon engines: ZIP (a250) in the same
    # Processing accelerators class [1200] as the NPUs, SEC (a255) and HPRE (a258) beside them.
    host = fake_host()
    lspci, sysfs = host.probes["lspci"].stdout, host.probes["sysfs-pci-link"].stdout
    assert (
        "Processing accelerators [1200]: Huawei Technologies Co., Ltd. HiSilicon ZIP Engine [19e5:a250]"
        in lspci
    )
    assert "HiSilicon SEC Engine [19e5:a255]" in lspci and "HiSilicon HPRE Engine [19e5:a258]" in lspci
    assert "/sys/bus/pci/devices/0000:75:00.0/class:0x120000" in sysfs
    results = judge(host, select=["npu.pci_functions", "pcie.*"])
    assert {cid: r.status for cid, r in results.items()} == {
        "npu.pci_functions": "pass",
        "pcie.link_width": "pass",
        "pcie.link_speed": "pass",
        "pcie.aer": "pass",
    }
    # The lspci -vvv fallback (no sysfs link attributes) names the engines without ids: not NPUs either.
    fallback = judge(fake_host(outputs={"sysfs-pci-link": ""}), select=["pcie.*"])
    assert {r.status for r in fallback.values()} == {"pass"}


# ---------------------------------------------------------------- 4. fix commands


def _apply(command: str, path: Path) -> None:
    subprocess.run(["sh", "-c", command.replace(LIMITS_FILE, str(path))], check=True, capture_output=True)


@pytest.mark.parametrize("order", [("os.nofile", "os.memlock"), ("os.memlock", "os.nofile")])
def test_limit_fixes_applied_in_any_order_keep_both(tmp_path, order):
    limits = "user ascend\nnofile 1024 1024\nmemlock 64 64\n"
    prof = load_profile().model_copy(update={"training_user": "ascend"})
    host = fake_host(outputs={"user-limits": limits})
    report = run_checks(
        Snapshot(hosts={host.name: host}),
        {host.name: prof},
        select_checks("quick", select=["os.nofile", "os.memlock"]),
    )
    fixes = {r.check_id: r.remediation.command for r in report.results if r.status == "fail"}
    assert set(fixes) == {"os.nofile", "os.memlock"}
    path = tmp_path / "90-ascend-ready.conf"
    path.write_text("# {{ ansible_managed }}\n* soft nofile 1048576\n")  # what the playbook left there
    for cid in order:
        _apply(fixes[cid], path)
    lines = path.read_text().splitlines()
    assert lines[:2] == ["# {{ ansible_managed }}", "* soft nofile 1048576"]  # appended, not overwritten
    for line in (
        "ascend soft nofile 1048576",
        "ascend hard nofile 1048576",
        "ascend soft memlock unlimited",
        "ascend hard memlock unlimited",
    ):
        assert line in lines


def test_the_limits_fix_writes_the_file_the_playbook_manages():
    defaults = yaml.safe_load((REPO / "playbooks/roles/tuning/defaults/main.yml").read_text())
    assert defaults["tuning_limits_file"] == LIMITS_FILE
    template = (REPO / "playbooks/roles/tuning/templates/limits.conf.j2").read_text()
    assert "{{ who }} soft nofile {{ tuning_nofile }}" in template  # the line shape the fix appends


# ---------------------------------------------------------------- 5. a probe that never ran


def test_a_probe_that_never_ran_is_not_reported_as_hung():
    hung = ProbeResult(command="hccn_tool -i 0 -link -g", rc=124, timed_out=True, timeout_s=10, duration_s=10)
    skipped = ProbeResult(
        command="hccn_tool -i 1 -link -g", rc=-1, not_run="`hccn_tool` timed out earlier in this batch"
    )
    r = judge(fake_host(outputs={"hccn-link.0": hung}), select=["hccl.link_up"])["hccl.link_up"]
    assert r.status == "error" and r.message.startswith("`hccn_tool -i 0 -link -g` timed out after 10 s")
    r = judge(fake_host(outputs={"hccn-link.1": skipped}), select=["hccl.link_up"])["hccl.link_up"]
    assert r.status == "error"
    assert r.message.startswith(
        "`hccn_tool -i 1 -link -g` not run: `hccn_tool` timed out earlier in this batch"
    )
    assert "hangs" not in r.message
    never = ProbeResult(
        command="cat /sys/kernel/mm/transparent_hugepage/enabled", rc=-1, not_run="host deadline of 60 s"
    )
    r = judge(fake_host(outputs={"thp-enabled": never}), select=["os.thp"])["os.thp"]
    assert r.status == "error" and r.message.startswith(
        "`cat /sys/kernel/mm/transparent_hugepage/enabled` not run: host deadline of 60 s"
    )


# ---------------------------------------------------------------- derived probes


#: checks whose healthy double warns: npu.sdc's is the SDC worker's real output on CPU torch (no NPU run is
#: captured yet), which on an NPU host says its NPUs were not exercised; burn_in.load's likewise
WARNS_ON_ITS_DOUBLE = {"npu.sdc", "burn_in.load"}


@pytest.mark.parametrize("hardware", ["atlas-800t-a2", "atlas-800t-a3", "atlas-300i-duo"])
def test_every_check_runs_with_only_the_probes_its_resources_declare(hardware):
    full = fake_host(hardware=hardware)
    for spec in all_checks().values():
        assert spec.reads is not None, f"{spec.id} lists probes by hand"
        keep = set(spec.probes)
        only = full.model_copy(
            update={"probes": {pid: res for pid, res in full.probes.items() if pid.partition(".")[0] in keep}}
        )
        r = judge(only, select=[spec.id], profile=hardware, tier=spec.tier)[spec.id]
        assert "no output of probe" not in r.message, (spec.id, r.message)
        assert "internal error" not in r.message, (spec.id, r.message)
        allowed = ("pass", "skip", "warn") if spec.id in WARNS_ON_ITS_DOUBLE else ("pass", "skip")
        assert r.status in allowed, (spec.id, r.status, r.message)


def test_a_resource_read_the_check_does_not_declare_is_a_bug_not_a_missing_probe():
    host = Host(fake_host(), load_profile())
    with host.reading("npu.count", [NpuSmi]):
        assert host.npu_smi.npu_ids
        with pytest.raises(RuntimeError, match=r"check npu\.count reads Sysctl, which its reads=\["):
            host.resource(Sysctl)
        with pytest.raises(RuntimeError, match=r"reads probe 'sysctl', which no resource"):
            host.stdout("sysctl")
    assert host.sysctl.get("kernel.numa_balancing") == "0"  # outside a check nothing is limited


def test_a_device_without_ip_disagrees_with_the_hccn_conf_that_names_one():
    # Before: a device that runs no IP was skipped by hccl.conf (only hccl.ip said so).
    host = fake_host(faults=[("device-ip-missing", {"device": 3})])
    assert "address_3=" in host.probes["hccn-conf"].stdout
    r = judge(host, select=["hccl.conf"])["hccl.conf"]
    assert r.status == "fail" and r.message.startswith("device 3 runs no IP, hccn.conf says 192.4.1.13")


def test_a_check_names_the_resources_it_reads_and_its_probes_are_theirs():
    from ascend_ready.checks.registry import CHECKS, check

    def body(host):
        pass

    try:
        spec = check("third.party", title="t", reads=[Sysctl], fix="f")(body).__check__
        assert (spec.probes, spec.reads) == (("sysctl",), (Sysctl,))
    finally:
        CHECKS.pop("third.party", None)
    with pytest.raises(ValueError, match="give reads="):
        check("third.other", title="t", reads=[], fix="f")
    with pytest.raises(TypeError):  # probe ids listed by hand are gone: a check reads resources
        check("third.other", title="t", probes=["sysctl"], fix="f")
