"""Fleet consistency: the odd node out is named with the field and the majority value; ties are ties."""

from __future__ import annotations

from ascend_ready.checks.cluster.fleet import MISSING, compare, groups

BASE = {"cann": "8.2.RC1", "driver": "25.2.0", "tls": "0", "mtu": "4200", "npu_count": "8"}


def _fleet(**changes):
    fleet = {f"node{i:02d}": dict(BASE) for i in range(1, 5)}
    for node, fields in changes.items():
        fleet[node].update(fields)
    return fleet


def test_a_uniform_fleet_has_no_deviation_and_one_group():
    deviations, ties = compare(_fleet())
    assert deviations == [] and ties == []
    assert [nodes for _, nodes in groups(_fleet())] == [["node01", "node02", "node03", "node04"]]


def test_the_node_on_another_cann_and_the_one_with_another_tls_switch_are_named():
    fleet = _fleet(node03={"cann": "8.0.0"}, node04={"tls": "1"})
    deviations, ties = compare(fleet)
    assert [str(d) for d in deviations] == [
        "node03: cann is 8.0.0, the majority (3 of 4 nodes) has 8.2.RC1",
        "node04: tls is 1, the majority (3 of 4 nodes) has 0",
    ]
    assert ties == []
    assert [nodes for _, nodes in groups(fleet)] == [["node01", "node02"], ["node03"], ["node04"]]


def test_a_tie_is_reported_not_guessed():
    fleet = _fleet(node03={"driver": "24.1.rc2"}, node04={"driver": "24.1.rc2"})
    deviations, ties = compare(fleet)
    assert deviations == []
    assert [str(t) for t in ties] == [
        "driver: no majority (24.1.rc2 on node03, node04; 25.2.0 on node01, node02)"]


def test_a_field_a_node_did_not_report_names_that_node():
    fleet = _fleet()
    del fleet["node02"]["mtu"]
    deviations, _ = compare(fleet)
    found = [(d.node, d.field, d.value, d.expected) for d in deviations]
    assert found == [("node02", "mtu", MISSING, "4200")]


def test_a_golden_file_pins_the_expected_values_even_against_the_majority():
    fleet = _fleet(node01={"cann": "8.0.0"})
    deviations, _ = compare(fleet, golden={"cann": "8.0.0"})
    assert sorted(d.node for d in deviations) == ["node02", "node03", "node04"]
    assert all(d.reference == "golden file" for d in deviations)
