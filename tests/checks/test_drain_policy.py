"""The drain breaker, 'cannot judge' and return to service (checks/drain_policy.py, slurm_health.py) against
a slurmctld stand-in that prints what Slurm 22.05.8 printed on the simulated cluster (slurm_fake.py)."""

from __future__ import annotations

from datetime import datetime

import pytest
from slurm_fake import CAPTURE, FakeSlurm, Node

from ascend_ready.checks.drain_policy import (
    DrainPolicy,
    breaker_verdict,
    parse_partition_nodes,
    render_metrics,
)
from ascend_ready.checks.slurm_health import act_on_verdict
from ascend_ready.errors import RemoteError

SDC = "ascend-check: sdc.matmul_checksum"


def act(slurm: FakeSlurm, node: str, reason: str | None, **kw):
    """act_on_verdict at the stand-in's clock (Slurm's reason times are its)."""
    return act_on_verdict(node, reason, run=slurm, now=slurm.clock, **kw)


def test_the_real_sinfo_capture_reads_partition_state_user_time_and_reason():
    rows = parse_partition_nodes(CAPTURE.read_text())
    assert [r.name for r in rows] == ["node01", "node02", "node03", "node04"]
    assert {r.partition for r in rows} == {"main"}  # the default partition's "*" dropped
    node02, node04 = rows[1], rows[3]
    assert node02.drained_by_us and node02.reason_time == datetime(2026, 12, 2, 6, 38, 5)
    assert not node04.drained_by_us and node04.reason == "replace DIMM B3"  # an admin's: never counted
    assert rows[0].reason_time is None and not rows[0].drained_by_us


@pytest.mark.parametrize(
    "text, what",
    [
        ("node01|main*|idle|Unknown\n", "line 1"),
        ("node01|main*|drained|root|yesterday|ascend-check: x\n", "'yesterday'"),
    ],
)
def test_sinfo_the_breaker_cannot_read_is_an_error_never_a_drain(text, what):
    with pytest.raises(RemoteError, match=what):
        parse_partition_nodes(text)


def test_three_of_four_failing_at_once_drain_two_and_the_third_is_held_back_saying_why():
    slurm = FakeSlurm()
    actions = {n: act(slurm, n, SDC, judged=True) for n in ("node01", "node02", "node03")}
    assert [a.action for a in actions.values()] == ["drain", "drain", "held"]
    assert slurm.nodes["node03"].state == "idle"
    held = actions["node03"]
    assert "NOT drained" in held.note and "2 of 4" in held.note and "node01, node02" in held.note
    comment = slurm.nodes["node03"].comment
    assert comment == "ascend-check: drain held back by the breaker: sdc.matmul_checksum"
    metrics = render_metrics("node03", held)
    assert 'ascend_check_drain_held_back{host="node03"} 1.0\n' in metrics
    assert 'ascend_check_slurm_action{action="held",host="node03"} 1.0\n' in metrics
    # one of them leaves: the breaker lets the held-back node drain at its next run
    act(slurm, "node01", None, tier="full")
    assert act(slurm, "node03", SDC, judged=True).action == "drain"


def test_an_admins_drain_is_not_counted_and_old_drains_leave_the_window():
    slurm = FakeSlurm.from_capture()  # node02 ours at 06:38:05, node04 the admin's
    slurm.tick(10)
    assert act(slurm, "node01", SDC, judged=True).action == "drain"  # 2 of 4 allowed
    slurm.tick(10)
    assert act(slurm, "node03", SDC, judged=True).action == "held"
    slurm.tick(3600)
    assert act(slurm, "node03", SDC, judged=True).action == "drain"  # a new window


def _sinfo(slurm: FakeSlurm) -> str:
    return slurm(["sinfo", "-h", "-N", "-o", "%N|%P|%T|%u|%H|%E"], 10).stdout


def test_two_drains_in_the_same_second_past_the_limit_undo_the_later_reader():
    policy = DrainPolicy(max_share=0.25)  # 1 of 4
    slurm = FakeSlurm()
    # node01 and node02 each read the partition before the other drained, and both drained
    t = slurm.clock.isoformat()
    slurm.nodes["node01"] = Node("drained", "root", t, SDC)
    slurm.nodes["node02"] = Node("drained", "root", t, SDC)
    rows = parse_partition_nodes(_sinfo(slurm))
    now = slurm.clock
    # a tie in the same second: both step back (the next run drains one), never both kept
    assert not breaker_verdict("node01", rows, policy, now, drained_self=True).allowed
    assert not breaker_verdict("node02", rows, policy, now, drained_self=True).allowed
    slurm.tick()
    slurm.nodes["node02"].time = slurm.clock.isoformat()
    rows = parse_partition_nodes(_sinfo(slurm))
    assert breaker_verdict("node01", rows, policy, now, drained_self=True).allowed  # the earlier one stays
    assert not breaker_verdict("node02", rows, policy, now, drained_self=True).allowed


def test_a_drain_that_raced_another_is_undone_and_said():
    slurm = FakeSlurm()
    real = slurm.__call__

    def racing(argv, timeout):  # node01 drains between node02's count and node02's drain
        out = real(argv, timeout)
        if argv[0] == "scontrol" and "NodeName=node02" in argv and "State=DRAIN" in argv:
            slurm.nodes["node01"] = Node("drained", "root", slurm.clock.isoformat(), SDC)
        return out

    action = act_on_verdict("node02", SDC, run=racing, now=slurm.clock, judged=True,
                            policy=DrainPolicy(max_share=0.25))
    assert action.action == "held" and "undone" in action.note
    assert slurm.nodes["node02"].state == "idle" and slurm.nodes["node02"].comment


def test_the_limit_is_a_share_yet_one_node_may_always_go_and_never_all():
    policy = DrainPolicy()
    assert [policy.limit(n) for n in (1, 2, 3, 4, 5, 10)] == [1, 1, 1, 2, 2, 5]
    assert DrainPolicy(max_share=1.0).limit(4) == 3
    assert DrainPolicy(max_share=0.0).limit(4) == 1


def test_cannot_judge_drains_only_when_configured_and_never_lifts_our_drain():
    slurm = FakeSlurm()
    unjudged = "ascend-check: cannot judge npu.health"
    action = act(slurm, "node01", unjudged, judged=False)
    assert action.action == "unjudged" and slurm.nodes["node01"].state == "idle" and not slurm.updates
    configured = act(slurm, "node01", unjudged, judged=False,
                                policy=DrainPolicy(drain_on_error=True))
    assert configured.action == "drain" and slurm.nodes["node01"].reason == unjudged
    slurm.nodes["node02"] = Node("drained", "root", "2026-12-02T06:00:00", SDC)
    kept = act(slurm, "node02", unjudged, judged=False)
    assert kept.action == "unjudged" and slurm.nodes["node02"].reason == SDC


def test_a_quick_pass_never_resumes_our_drain_a_full_pass_does_an_admins_stays():
    slurm = FakeSlurm.from_capture()
    assert act(slurm, "node02", None).action == "recheck"
    assert slurm.nodes["node02"].state == "drained" and not slurm.updates
    assert act(slurm, "node02", None, tier="full").action == "resume"
    assert slurm.nodes["node02"].state == "idle"
    admin = act(slurm, "node04", None, tier="full")
    assert admin.action == "none" and slurm.nodes["node04"].reason == "replace DIMM B3"


def test_a_burn_in_pass_resumes_our_drain_and_with_resume_tier_burn_in_a_full_pass_no_longer_does():
    """The burn-in tier is the full tier and sustained load: its pass returns a node as a full pass does.
    Where the operator asked for a burn-in before return (`--resume-tier burn-in`), a full pass leaves the
    node drained and says which re-check to run."""
    slurm = FakeSlurm.from_capture()
    assert act(slurm, "node02", None, tier="burn-in").action == "resume"
    slurm = FakeSlurm.from_capture()
    strict = DrainPolicy.resuming_from("burn-in")
    held = act(slurm, "node02", None, tier="full", policy=strict)
    assert held.action == "recheck" and slurm.nodes["node02"].state == "drained" and not slurm.updates
    assert "ascend-check node --slurm-health --tier burn-in --duration 10m" in held.note
    assert act(slurm, "node02", None, tier="burn-in", policy=strict).action == "resume"
    assert slurm.nodes["node02"].state == "idle"
