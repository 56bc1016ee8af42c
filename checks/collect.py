"""Fan-out of the probe batches: each host's probes in ONE script (checks/probes.py) run through the fleet's
transport under the host deadline, read back into a HostSnapshot; a host that cannot be reached is recorded
in its snapshot and the run goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ascend_ready.checks.probes import (
    Probe,
    ProbeStream,
    batch_order,
    build_script,
    deadline_reason,
    new_stream,
    not_run_result,
)
from ascend_ready.checks.snapshot import HostSnapshot
from ascend_ready.errors import HostUnreachable
from ascend_ready.fleet.transport import (
    FanoutOptions,
    Target,
    abort_clients,
    prepare,
    run_script,
    track_clients,
)

__all__ = ["collect", "collect_host"]

#: Seconds of the host deadline kept for the batch's last output to arrive: the batch starts no
#: probe later than this before the deadline.
_DEADLINE_MARGIN_S = 1.0


def collect(
    targets: Sequence[Target],
    plan: Callable[[Target], tuple[list[Probe], str]],
    options: FanoutOptions,
    progress: Callable[[HostSnapshot], None] | None = None,
    while_waiting: Callable[[], None] | None = None,
) -> list[HostSnapshot]:
    """Run every target's batch with bounded concurrency; `plan(target)` gives (probes, training user).

    Results come back in target order; `progress` is called as each host finishes. `while_waiting` runs
    in the calling thread once the first hosts have sent their batch (then they mostly wait on their
    nodes; before, its CPU would only slow their connecting down).
    """
    first_wave = min(max(1, options.concurrency), len(targets))
    started = threading.Semaphore(0)
    live: set = set()

    def one(target: Target) -> HostSnapshot:
        track_clients(live)
        once = []

        def sent() -> None:
            if not once:
                once.append(True)
                started.release()

        try:
            probes, user = plan(target)
            snap = collect_host(target, probes, options, user=user, sent=sent)
        finally:
            sent()  # also when it failed before sending
        if progress is not None:
            progress(snap)
        return snap

    if not targets:
        return []
    prepare(targets)
    with ThreadPoolExecutor(max_workers=first_wave) as pool:
        try:
            futures = [pool.submit(one, t) for t in targets]
            if while_waiting is not None:
                give_up = time.monotonic() + options.connect_timeout_s
                for _ in range(first_wave):
                    if not started.acquire(timeout=max(0.0, give_up - time.monotonic())):
                        break
                while_waiting()
            return [f.result() for f in futures]
        except BaseException:  # Ctrl-C: the pool's exit waits for its threads, so end them now
            pool.shutdown(wait=False, cancel_futures=True)
            abort_clients(live)
            raise


def collect_host(
    target: Target,
    probes: Sequence[Probe],
    options: FanoutOptions,
    *,
    user: str = "root",
    sent: Callable[[], object] | None = None,
) -> HostSnapshot:
    """One host's snapshot. Never raises for the host's faults: they land in `.reachable`/`.error`.
    `sent` is called once the batch is on its way to the node."""
    started = time.monotonic()
    deadline = started + options.host_deadline_s

    def script_now() -> tuple[str, ProbeStream]:
        # Built once connected, so the batch's budget is what the connection left of the deadline.
        budget = max(0.0, deadline - time.monotonic() - _DEADLINE_MARGIN_S)
        script, nonce = build_script(probes, default_timeout_s=options.probe_timeout_s, user=user,
                                     budget_s=budget)
        if sent is not None:
            sent()
        return script, new_stream(
            nonce, probes, default_timeout_s=options.probe_timeout_s, host_deadline_s=options.host_deadline_s
        )

    snap = HostSnapshot(
        name=target.name, address=target.address, groups=list(target.groups), vars=dict(target.vars)
    )
    stream: ProbeStream | None = None
    try:
        stream = run_script(target, script_now, deadline, options)
    except HostUnreachable as exc:
        snap.reachable = False
        snap.error = exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
    if stream is None:
        snap.collect_s = round(time.monotonic() - started, 3)
        return snap
    if snap.reachable and not stream.complete:
        snap.error = snap.error or (
            f"the probe batch did not finish within the host deadline of {options.host_deadline_s:g} s"
        )
        stream.finish(snap.error)
    snap.probes = dict(stream.results)
    if snap.reachable and not stream.complete:
        _mark_missing(snap, probes, deadline_reason(options.host_deadline_s), options.probe_timeout_s)
    snap.collect_s = round(time.monotonic() - started, 3)
    return snap


def _mark_missing(snap: HostSnapshot, probes: Sequence[Probe], why: str, default_timeout_s: float) -> None:
    """Probes that never reported are not run (`why`), so their checks error naming the command. The
    per-device loop that was running when the batch was cut also gets its base entry: which of its
    devices did not report is unknown. (A loop before the last probe that reported had finished.)"""
    order = [p for p in batch_order(probes) if not p.background]
    reported = {pid.partition(".")[0] for pid in snap.probes}
    last = max((i for i, p in enumerate(order) if p.id in reported), default=-1)
    for i, probe in enumerate(order[max(last, 0) :], start=max(last, 0)):
        if probe.id in snap.probes:
            continue
        cut = i == last and probe.foreach is not None
        reason = why + (" (the batch was cut during this per-device loop)" if cut else "")
        snap.probes[probe.id] = not_run_result(probe, "", reason, default_timeout_s)
    for probe in probes:
        if probe.background and probe.id not in snap.probes:
            reason = f"{why} (it runs beside the batch and reports at its end)"
            snap.probes[probe.id] = not_run_result(probe, "", reason, default_timeout_s)
