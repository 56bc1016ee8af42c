"""The ping mesh's schedule and culprit isolation, against a model fabric whose faults are known."""

from __future__ import annotations

import itertools

import pytest

from ascend_ready.checks.cluster.mesh import Ping, PingOutcome, duplicate_ips, isolate, round_robin, rounds


def _nodes(n: int) -> list[str]:
    return [f"node{i:02d}" for i in range(1, n + 1)]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 31, 32])
def test_round_robin_covers_every_pair_once_and_no_node_twice_in_a_round(n):
    nodes = _nodes(n)
    schedule = round_robin(nodes)
    assert len(schedule) == (n - 1 if n % 2 == 0 else n)
    pairs = [frozenset(p) for r in schedule for p in r]
    assert sorted(map(sorted, pairs)) == sorted(map(sorted, itertools.combinations(nodes, 2)))
    for r in schedule:
        used = [x for pair in r for x in pair]
        assert len(used) == len(set(used)), r


def test_rounds_ping_every_plane_of_a_pair_in_the_same_round_and_each_nic_once():
    sched = rounds(_nodes(32), range(8))
    assert len(sched) == 31
    assert sum(len(r) for r in sched) == 32 * 31 // 2 * 8
    for r in sched:
        nics = [(x, p.plane) for p in r for x in (p.src, p.dst)]
        assert len(nics) == len(set(nics))


def test_duplicate_device_ips_across_nodes_are_named():
    dups = duplicate_ips({"node01": {0: "192.168.0.11", 1: "192.168.1.11"},
                          "node02": {0: "192.168.0.12", 1: "192.168.1.11"}})
    assert [str(d) for d in dups] == ["device IP 192.168.1.11 is held by node01 device 1, node02 device 1"]
    assert duplicate_ips({"a": {0: "10.0.0.1"}, "b": {0: "10.0.0.2"}}) == []


class Fabric:
    """A model of the parameter plane: dead device NICs, cut links, and one-off losses."""

    def __init__(self, dead=(), cut=(), flaky=()):
        self.dead, self.cut, self.flaky = set(dead), {frozenset(c[:2]) | {c[2]} for c in cut}, set(flaky)
        self.asked: list[list[Ping]] = []

    def __call__(self, pings):
        self.asked.append(list(pings))
        out = {}
        for p in pings:
            bad = ((p.src, p.plane) in self.dead or (p.dst, p.plane) in self.dead
                   or (frozenset((p.src, p.dst)) | {p.plane}) in self.cut)
            if p in self.flaky:
                self.flaky.discard(p)
                bad = True
            loss = "100.00% packet loss" if bad else "0.00% packet loss"
            text = f"{p.src} dev {p.plane} -> {p.dst}: {loss}"
            out[p] = PingOutcome(not bad, text)
        return out


def test_one_dead_device_is_the_culprit_not_31_failed_pairs():
    fabric = Fabric(dead={("node07", 3)})
    result = isolate(rounds(_nodes(32), range(8)), fabric)
    assert set(result.culprits) == {("node07", 3)}
    assert not result.bad_links and not result.unresolved
    assert result.rounds == 31 and result.pings == 3968
    assert result.retests == 1  # one re-test from a known-good peer confirms it
    assert any("node07" in e for e in result.culprits[("node07", 3)])


def test_a_plane_cut_between_two_good_nodes_is_a_bad_link():
    fabric = Fabric(cut={("node02", "node04", 5)})
    result = isolate(rounds(_nodes(4), range(8)), fabric)
    assert result.culprits == {}
    assert list(result.bad_links) == [("node02", "node04", 5)]


def test_a_one_off_loss_is_transient_not_a_fault():
    flaky = Ping(2, "node01", "node03")
    result = isolate(rounds(_nodes(4), range(8)), Fabric(flaky={flaky}))
    assert result.ok
    assert result.transient == [flaky]


def test_two_nodes_with_one_dead_end_cannot_be_told_apart():
    result = isolate(rounds(_nodes(2), [0]), Fabric(dead={("node02", 0)}))
    assert not result.ok
    assert list(result.unresolved) == [("node01", "node02", 0)]
    assert "known good" in result.unresolved[("node01", "node02", 0)][1]


def test_known_bad_ends_are_not_pinged_or_blamed_again():
    fabric = Fabric(dead={("node03", 1)})
    result = isolate(rounds(_nodes(4), range(2)), fabric, skip={("node03", 1)})
    assert result.ok
    assert all(not (p.plane == 1 and "node03" in (p.src, p.dst)) for r in fabric.asked for p in r)


def test_a_result_the_runner_did_not_report_is_a_failure():
    def silent(pings):
        return {}

    result = isolate(rounds(_nodes(3), [0]), silent)
    assert not result.ok
    assert all("no result" in e[0] for e in result.unresolved.values())
