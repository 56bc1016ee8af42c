"""fleet.* checks on 4 hosts the simulator renders: the odd node out is named with field and majority."""

from __future__ import annotations

import pytest
from checks_fakenode import REPO, fake_host

from ascend_ready.checks.parsers.os_commands import parse_os_release
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import Snapshot
from ascend_ready.errors import ParseError

TOOLKIT_82 = "/usr/local/Ascend/cann/aarch64-linux/ascend_toolkit_install.info"


def _fleet(changes: dict[str, dict[str, str | dict]] | None = None, n: int = 4, profile=None):
    hosts = {}
    for i in range(n):
        name = f"node{i + 1:02d}"
        host = fake_host(name, index=i)
        for pid, text in (changes or {}).get(name, {}).items():  # new stdout, or fields of the result
            update = text if isinstance(text, dict) else {"stdout": text}
            host.probes[pid] = host.probes[pid].model_copy(update=update)
        hosts[name] = host
    prof = profile or load_profile("atlas-800t-a2")
    report = run_checks(Snapshot(hosts=hosts), {h: prof for h in hosts}, select_checks("quick", ["fleet.*"]))
    return {(r.host, r.check_id): r for r in report.results}


def _tls_on(text: str) -> str:
    return text.replace("tls switch[0]", "tls switch[1]")


def test_a_uniform_fleet_passes_every_fleet_check():
    results = _fleet()
    assert {r.status for r in results.values()} == {"pass"}, {k: r.message for k, r in results.items()}
    assert {c for _, c in results} == {"fleet.stack", "fleet.os", "fleet.hardware", "fleet.hccn"}


def test_the_node_on_another_cann_and_the_node_with_another_tls_switch_are_named():
    base = fake_host("x")
    toolkit = base.probes["toolkit-version"].stdout
    old = toolkit.replace(_version_of(toolkit), "8.0.0")
    tls = {f"hccn-tls.{d}": _tls_on(base.probes[f"hccn-tls.{d}"].stdout) for d in range(8)}
    results = _fleet({"node03": {"toolkit-version": old}, "node04": tls})
    stack = results[("node03", "fleet.stack")]
    assert stack.status == "fail"
    assert stack.message == (f"node03: cann is 8.0.0, the majority (3 of 4 nodes) has {_version_of(toolkit)}")
    assert results[("node04", "fleet.hccn")].status == "fail"
    assert results[("node04", "fleet.hccn")].message == "node04: tls is 1, the majority (3 of 4 nodes) has 0"
    for node in ("node01", "node02"):
        assert results[(node, "fleet.stack")].status == "pass"
        assert results[(node, "fleet.hccn")].status == "pass"
    assert any("node03:" in line and "cann=8.0.0" in line for line in stack.evidence)


def test_a_node_whose_probe_failed_is_an_error_naming_what_was_not_read():
    results = _fleet({"node02": {"os-release": "garbled\n"}})
    r = results[("node02", "fleet.os")]
    assert r.status == "error" and r.message.startswith("os not read (cannot parse os-release")
    assert "the node cannot be compared with the fleet on os" in r.message
    assert all(results[(n, "fleet.os")].status == "pass" for n in ("node01", "node03", "node04"))


def test_npu_smi_hung_on_one_node_is_an_error_in_fleet_hardware_not_a_fail():
    """The fault sweep's case: `npu-smi` hung on node02 said `fail` ("npu_count is (not read)")."""
    hung = {"rc": 124, "stdout": "", "timed_out": True, "timeout_s": 10.0}  # as the watchdog records it
    results = _fleet({"node02": {"npu-smi-info": hung}})
    r = results[("node02", "fleet.hardware")]
    assert r.status == "error" and "npu_count not read" in r.message and "npu_model not read" in r.message
    assert results[("node01", "fleet.hardware")].status == "pass"


def test_a_real_difference_still_fails_beside_what_was_not_read():
    results = _fleet({"node03": {"os-release": "garbled\n", "thp-enabled": "[always] madvise never\n"}})
    r = results[("node03", "fleet.os")]
    assert r.status == "fail" and "thp_enabled is always" in r.message and "; and os not read" in r.message


def test_a_two_two_split_is_a_tie_on_every_node():
    base = fake_host("x")
    tls = {f"hccn-tls.{d}": _tls_on(base.probes[f"hccn-tls.{d}"].stdout) for d in range(8)}
    results = _fleet({"node03": tls, "node04": tls})
    for node in ("node01", "node02", "node03", "node04"):
        assert results[(node, "fleet.hccn")].status == "warn"
        assert "tls: no majority" in results[(node, "fleet.hccn")].message


def test_profile_pins_win_over_the_majority():
    prof = load_profile("atlas-800t-a2").model_copy(update={"fleet_pins": {"os": "ubuntu 24.04"}})
    results = _fleet(profile=prof)
    assert all(results[(f"node0{i}", "fleet.os")].status == "fail" for i in range(1, 5))
    assert "the profile's fleet_pins has ubuntu 24.04" in results[("node01", "fleet.os")].message


def test_one_host_skips_the_fleet_checks():
    results = _fleet(n=1)
    assert {r.status for r in results.values()} == {"skip"}


def test_hosts_of_another_product_are_their_own_fleet():
    hosts = {f"node0{i}": fake_host(f"node0{i}", index=i) for i in (1, 2)}
    hosts["a3node"] = fake_host("a3node", hardware="atlas-800t-a3", index=3)
    profiles = {**dict.fromkeys(("node01", "node02"), load_profile("atlas-800t-a2")),
                "a3node": load_profile("atlas-800t-a3")}
    report = run_checks(Snapshot(hosts=hosts), profiles, select_checks("quick", ["fleet.hardware"]))
    status = {r.host: r.status for r in report.results}
    assert status == {"node01": "pass", "node02": "pass", "a3node": "skip"}


@pytest.mark.parametrize("os_id", ["centos76", "kylinv10", "openeuler2203", "ubuntu2204"])
def test_os_release_of_every_simulated_os(os_id):
    rel = parse_os_release((REPO / f"sim/osfiles/{os_id}/root/etc/os-release").read_text())
    assert rel.id and rel.version_id


def test_os_release_cut_before_its_version_is_refused():
    text = (REPO / "sim/osfiles/kylinv10/root/etc/os-release").read_text()
    cut = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("VERSION_ID"))
    with pytest.raises(ParseError, match="no VERSION_ID"):
        parse_os_release(cut)


def _version_of(toolkit: str) -> str:
    return next(line.split("=", 1)[1] for line in toolkit.splitlines() if line.startswith("version="))


def test_one_machine_listed_under_two_names_counts_once_toward_the_majority():
    """Issue 25: node01b is node01 (same machine-id and boot id); Ubuntu node01 and Kylin node02 are then a
    1-1 tie (a warning), not a 2-1 majority that fails the healthy Kylin node."""
    prof = load_profile("atlas-800t-a2")
    kylin = (REPO / "sim/osfiles/kylinv10/root/etc/os-release").read_text()
    node01, node02 = fake_host("node01", index=0), fake_host("node02", index=1)
    node02.probes["os-release"] = node02.probes["os-release"].model_copy(update={"stdout": kylin})
    node01b = node01.model_copy(update={"name": "node01b"}, deep=True)
    hosts = {"node01": node01, "node02": node02, "node01b": node01b}
    report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, prof),
                        select_checks("quick", ["fleet.*"]))
    results = {(r.host, r.check_id): r for r in report.results}
    assert results[("node02", "fleet.os")].status == "warn"
    assert "no majority" in results[("node02", "fleet.os")].message
    alias = results[("node01b", "fleet.os")]
    assert alias.status == "warn" and alias.message.startswith(
        "node01b is node01: the same machine (same /etc/machine-id and boot id) listed under two names")
    # two machines of one cloned image (same machine-id, another boot) are two machines
    clone = fake_host("node03", index=2)
    clone.probes["machine-identity"] = clone.probes["machine-identity"].model_copy(update={"stdout": (
        node01.probes["machine-identity"].stdout.split("\n")[0] + "\n"
        + fake_host("node03").probes["machine-identity"].stdout.split("\n")[1] + "\n")})
    hosts = {"node01": node01, "node02": node02, "node03": clone}
    report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, prof),
                        select_checks("quick", ["fleet.os"]))
    assert {r.host: r.status for r in report.results}["node02"] == "fail"
