"""Silent data corruption (full tier): fixed kernels on fixed seeded inputs on every device, compared bit for
bit with their exact result, across repeats, across the node's devices and with the fleet's golden digest
(checks/cluster/sdc.py). A device that computes wrong passes every health check: only its bits show it."""

from __future__ import annotations

from ascend_ready.checks.cluster.sdc import SdcRun, Votes, judge_sdc, votes
from ascend_ready.checks.registry import check, evidence, not_judged, warn
from ascend_ready.checks.resources import NodeSku, NpuSmi, SdcProbe, Toolkit
from ascend_ready.errors import AscendReadyError


def _group(host, run: SdcRun) -> str:
    """Whose digests must equal this host's: one chip, CANN version, torch / torch_npu and device kind."""
    try:
        chip = host.resource(NodeSku).chip_name
    except AscendReadyError:  # npu.count says why npu-smi is unreadable
        chip = "?"
    try:
        found = host.resource(Toolkit).installed
        cann = found[0].version if found else "none"
    except AscendReadyError:  # versions.toolkit says why
        cann = "?"
    torch = f"torch {run.torch or '?'}" + (f" / torch_npu {run.torch_npu}" if run.torch_npu else "")
    return f"{chip} / CANN {cann} / {torch} / {run.kind}"


def sdc_fingerprints(hosts) -> dict[str, dict[str, dict[str, str]]]:
    """Every host's golden-digest votes for the fleet fingerprint file (`npu.sdc:<product>` -> node ->
    `group` and kernel -> its devices' digests, comma-separated), where its snapshot has the SDC run."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for h in hosts:
        try:
            run = h.resource(SdcProbe).run
            fields = {"group": _group(h, run), **{k: ",".join(v) for k, v in votes(run).items()}}
        except AscendReadyError:  # no SDC run (the quick tier) or an unreadable one: no votes
            continue
        out.setdefault(f"npu.sdc:{h.profile.product}", {})[h.name] = fields
    return out


def _peers(host) -> dict[str, tuple[str, Votes]]:
    """host -> (its group, its votes), for every host judged together (memoised per run); a host judged
    alone takes the other nodes' from the fleet fingerprint file (ascend-check node --fleet-fingerprints)."""
    def vote(peer) -> tuple[str, Votes]:
        run = peer.resource(SdcProbe).run
        return _group(peer, run), votes(run)

    out = dict(host.fleet.per_host("npu.sdc", vote))
    if len(host.fleet.hosts) < 2:
        recorded = host.fleet.reference.get(f"npu.sdc:{host.profile.product}", {})
        for name, fields in recorded.items():
            if name != host.name and "group" in fields:
                kernels = {k: v.split(",") for k, v in fields.items() if k != "group"}
                out[name] = (fields["group"], kernels)
    return out


@check(
    "npu.sdc",
    title="every device computes fixed kernels bit for bit right: the exact result, the same bits on every "
    "repeat, as the node's other devices and as the fleet's golden digest (silent data corruption)",
    severity="critical",
    tier="full",
    reads=[SdcProbe, NodeSku, NpuSmi, Toolkit],
    fix="Keep the named device out of jobs (drain the node: it computes wrong without an error), run "
    "ascend-check --tier full --select npu.sdc again to see that it repeats, and have the card replaced "
    "with this report; where every device of a node differs from the fleet's golden digest, compare its "
    "CANN, driver and firmware with the fleet first (fleet.stack)",
)
def test_sdc(host):
    run = host.resource(SdcProbe).run
    peers = _peers(host)
    group = _group(host, run)
    same = {name: v for name, (g, v) in peers.items() if g == group}
    same[host.name] = votes(run)
    if len(host.fleet.hosts) < 2 and len(same) > 1:
        evidence(f"the other nodes of {group} as the fleet fingerprint file recorded them ({len(same) - 1})")
    problems, warnings, lines = judge_sdc(host.name, run, same, group)
    evidence(lines)
    assert not problems, "; ".join(problems)
    silent = [r for r in run.failed_ranks if r not in run.errors]
    errors = [*run.errors.values(), *(f"rank {r} exited without printing why" for r in silent)]
    if errors or not run.done:
        not_judged("; ".join(errors) or "the worker stopped before it printed its last line",
                   hint="fix what the message names (the training interpreter's torch and torch_npu, the "
                   "devices it sees), then run ascend-check --tier full --select npu.sdc again")
    if not run.results:
        not_judged("the worker printed no result", hint="run it by hand: python -m "
                   "ascend_ready.checks.cluster.sdc_worker")
    warnings += _coverage(host, run)
    if warnings:
        warn("; ".join(warnings))


def _coverage(host, run: SdcRun) -> list[str]:
    """What the run did not exercise of the NPUs npu-smi lists: a pass is only for the devices it ran on."""
    try:
        chips = len(host.resource(NodeSku).names)
    except AscendReadyError:  # npu.count says why npu-smi is unreadable
        return []
    if chips and run.kind != "npu":
        return [f"it ran on {run.kind}, not on the {chips} NPU(s) npu-smi lists: the training interpreter "
                f"({run.python or '?'}) has no torch_npu or sees no /dev/davinciN (versions.torch_npu_import "
                "says why), so the NPUs were not exercised"]
    if run.kind == "npu" and run.ranks < chips:
        return [f"it exercised {run.ranks} of the {chips} NPUs npu-smi lists (ASCEND_RT_VISIBLE_DEVICES?)"]
    return []
