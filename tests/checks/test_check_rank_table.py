"""`ascend-check --rank-table/--hostfile/--exclude`: the table of the healthy devices on hosts the simulator
renders, what it leaves out and says so, and bad input refused before any host is probed. Also fleet.*
on a field no node reported (nothing read is never a unanimous pass). Over real SSH: tests/cluster/
test_mesh_sim.py."""

from __future__ import annotations

import pytest
from checks_fakenode import fake_host
from click.testing import CliRunner

from ascend_ready.checks.cli import main
from ascend_ready.checks.cluster.ranktable import fleet_rank_table, hostfile, parse_exclude
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import ProbeResult, Snapshot
from ascend_ready.errors import ConfigError
from ascend_ready.fleet.transport import FanoutOptions, Target

A2 = load_profile("atlas-800t-a2")
NOT_FOUND = ProbeResult(command="hccn_tool -i 0 -ip -g", rc=127, stdout="",
                        stderr="sh: 1: hccn_tool: not found\n")


def _fleet(**hosts):
    """node01..node03, each a fake_host with the given keyword arguments; every probe the table reads is
    in the snapshot, so no fan-out is made."""
    snaps = {}
    for i in range(3):
        name = f"node0{i + 1}"
        snap = fake_host(name, index=i, **hosts.get(name, {}))
        snap.profile = A2
        snaps[name] = snap
    targets = [Target(name, address=snap.address) for name, snap in snaps.items()]
    return Snapshot(hosts=snaps), targets


def _table(snapshot, targets, **kwargs):
    notes: list[str] = []
    table = fleet_rank_table(snapshot, targets, FanoutOptions(), note=notes.append, **kwargs)
    devices = None if table is None else {s["server_id"]: [int(d["device_id"]) for d in s["device"]]
                                          for s in table["server_list"]}
    return table, devices, notes


ALL = list(range(8))


def test_the_table_holds_the_healthy_devices_and_says_which_it_left_out():
    snapshot, targets = _fleet(node02={"faults": [("chip-health", {"npu": 3, "level": "Critical"})]})
    table, devices, notes = _table(snapshot, targets)
    assert devices == {"node01": ALL, "node02": [0, 1, 2, 4, 5, 6, 7], "node03": ALL}
    assert notes == ["rank table leaves out: node02 (device 3: NPU 3 chip 0 health Critical in npu-smi info)"]
    assert [d["rank_id"] for s in table["server_list"] for d in s["device"]] == [str(r) for r in range(23)]
    assert hostfile(table) == "10.0.0.1 slots=8\n10.0.0.2 slots=7\n10.0.0.3 slots=8\n"


def test_exclude_leaves_out_hosts_and_devices_and_failed_hosts_are_named():
    snapshot, targets = _fleet(node02={"faults": [("chip-health", {"npu": 3, "level": "Critical"})]})
    _, devices, notes = _table(snapshot, targets, exclude=["node01:5", "node03", "node02:3"],
                               failed={"node01": ["hccl.mesh"], "node03": ["hccl.mesh"]})
    assert devices == {"node01": [0, 1, 2, 3, 4, 6, 7], "node02": [0, 1, 2, 4, 5, 6, 7]}
    assert notes[-1] == ("rank table keeps hosts whose checks failed: node01 (hccl.mesh) (the report names "
                         "the devices; leave them out with --exclude HOST or HOST:DEVICE)")


def test_a_host_whose_device_ips_were_not_read_is_left_out_naming_why():
    broken = {f"hccn-ip.{d}": NOT_FOUND for d in ALL}
    snapshot, targets = _fleet(node03={"outputs": broken})
    _, devices, notes = _table(snapshot, targets)
    assert devices == {"node01": ALL, "node02": ALL}
    assert len(notes) == 1 and notes[0].startswith("rank table leaves out: node03 (device IPs not read: ")
    assert "hccn_tool: not found" in notes[0]


def test_a_host_whose_npu_smi_was_not_read_has_no_healthy_device():
    gone = ProbeResult(command="npu-smi info", rc=127, stdout="", stderr="sh: 1: npu-smi: not found\n")
    snapshot, targets = _fleet(node02={"outputs": {"npu-smi-info": gone}})
    _, devices, notes = _table(snapshot, targets)
    assert devices == {"node01": ALL, "node03": ALL}
    assert notes == ["rank table leaves out: node02 (npu-smi info not read (sh: 1: npu-smi: not found); "
                     "no healthy device has a device IP)"]


def test_no_host_with_a_device_ip_writes_nothing_and_says_so():
    broken = {f"hccn-ip.{d}": NOT_FOUND for d in ALL}
    snapshot, targets = _fleet(**{f"node0{i}": {"outputs": broken} for i in (1, 2, 3)})
    table, _devices, notes = _table(snapshot, targets)
    assert table is None
    assert notes[-1] == "rank table not written: no reachable host has a healthy device with a device IP"


def test_a_device_the_node_lacks_and_excluding_everything_are_refused():
    snapshot, targets = _fleet()
    with pytest.raises(ConfigError, match="node01 has no device 9") as err:
        _table(snapshot, targets, exclude=["node01:9"])
    assert "devices of node01: 0, 1, 2, 3, 4, 5, 6, 7" in err.value.hint
    with pytest.raises(ConfigError, match="no device is left"):
        _table(snapshot, targets, exclude=["node01", "node02", "node03"])


def test_a_device_ip_on_two_nodes_is_refused_naming_what_to_exclude():
    copy = fake_host("node01", index=0).probes["hccn-ip.1"]
    snapshot, targets = _fleet(node03={"outputs": {"hccn-ip.1": copy}})
    with pytest.raises(ConfigError, match="of node03 device 1 is also node01 device 1's") as err:
        _table(snapshot, targets)
    assert "--exclude node03:1" in err.value.hint
    _, devices, _notes = _table(snapshot, targets, exclude=["node03:1"])
    assert devices["node03"] == [0, 2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("item", ["node01:x", "node01:", ":3", "node 01", "node01:-1"])
def test_a_malformed_exclude_is_refused_with_the_syntax(item):
    with pytest.raises(ConfigError, match=r"expected HOST .* or HOST:DEVICE") as err:
        parse_exclude([item])
    assert "--exclude node03 --exclude node02:5" in err.value.hint


# ---------------------------------------------------------------- the CLI, before any host is probed


def _cli(*args: str):
    # TEST-NET-1 addresses: were anything probed, the run would hang on them, not exit 2 at once
    return CliRunner().invoke(main, ["--hosts", "192.0.2.1,192.0.2.2", *args])


@pytest.mark.parametrize(("args", "says"), [
    (["--rank-table", "t.json", "--exclude", "192.0.2.1:x"], "--exclude '192.0.2.1:x': expected HOST"),
    (["--rank-table", "t.json", "--exclude", "node09"], "no host 'node09' among the hosts checked"),
    (["--exclude", "192.0.2.1"], "no rank table was asked for"),
    (["--rank-table", "/nonexistent-dir/t.json"], "--rank-table /nonexistent-dir/t.json: directory"),
    (["--hostfile", "/nonexistent-dir/hosts"], "--hostfile /nonexistent-dir/hosts: directory"),
])
def test_bad_rank_table_options_exit_2_before_anything_runs(tmp_path, monkeypatch, args, says):
    monkeypatch.chdir(tmp_path)
    result = _cli(*args)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_rank_table_from_a_snapshot_is_refused(tmp_path):
    result = CliRunner().invoke(main, ["--snapshot", str(tmp_path), "--rank-table", str(tmp_path / "t.json")])
    assert result.exit_code == 2, result.output
    assert "--rank-table/--hostfile need a live run" in result.output
    assert not (tmp_path / "t.json").exists()


# ---------------------------------------------------------------- fleet.*: nothing read is not a pass


def test_a_field_no_node_reported_is_an_error_on_every_node():
    # nothing was read to fail: `error`, naming what was not read (issue 18: it used to say `fail`)
    hosts = {f"node0{i}": fake_host(f"node0{i}", index=i, drop=("npu-smi-info",)) for i in (1, 2, 3)}
    report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, A2),
                        select_checks("quick", ["fleet.hardware"]))
    assert {r.host: r.status for r in report.results} == dict.fromkeys(hosts, "error")
    message = next(r.message for r in report.results if r.host == "node02")
    assert message.startswith("npu_count not read (") and "cannot be compared with the fleet on npu_count" \
        in message


def test_one_machine_under_two_names_is_refused_saying_which_it_is():
    """Issue 25: node03 is node01 listed again: said so, not "--exclude node03:0" for its device IPs."""
    node01 = fake_host("node01", index=0)
    snapshot, targets = _fleet()
    snapshot.hosts["node03"] = node01.model_copy(update={"name": "node03"}, deep=True)
    snapshot.hosts["node03"].profile = A2
    with pytest.raises(ConfigError) as err:
        _table(snapshot, targets)
    assert err.value.message.startswith(
        "node03 is node01: the same machine (same /etc/machine-id and boot id)")
    assert "--exclude" not in err.value.hint and "list each machine once" in err.value.hint
