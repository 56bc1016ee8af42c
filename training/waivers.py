"""What `--waive CHECK` means, and a waiver that cannot mean it refused (issue 25, "Also": `--waive` of a
failing check was accepted and then ignored: the launch refused on the failure anyway, and nothing said
the waiver had done nothing).

`--waive CHECK` lets training start although the preflight did not judge CHECK (a run narrowed by
--select/--skip, a spec of such a run): the waiver is printed at the launch and recorded in the spec.
It never lets a launch past a check that was judged and did not pass, as a gate whose purpose is to keep
jobs off broken nodes must not: a check that failed is a fact about the node; one that errored is a
probe that did not answer, so nothing is known. Either is refused here with what to do instead, before
anything starts (to start without a check you cannot get judged: --skip it in the preflight and --waive
it; to start without the node: leave it out).
"""

from __future__ import annotations

from collections.abc import Sequence

from ascend_ready.errors import ConfigError

__all__ = ["refuse_waived_in_spec", "refuse_waived_judged"]

_WHAT = ("--waive lets training start without a check judged, never past one that was judged and did not "
         "pass")


def _refuse(lines: list[str]) -> None:
    if lines:
        raise ConfigError("--waive of a check the preflight judged:\n  " + "\n  ".join(lines)
                          + f"\n({_WHAT})",
                          hint="fix the node (each check's message says what it read), leave the node out of "
                          "the inventory, or --skip CHECK in ascend-check and --waive it; --skip-preflight "
                          "starts with no gate at all")


def refuse_waived_judged(report, waive: Sequence[str]) -> None:
    """ConfigError naming each waived check that `report` (checks.report.Report) judged `fail` or
    `error` on some host."""
    if report is None or not waive:
        return
    wanted = set(waive)
    said = {"fail": "failed", "error": "errored (not judged: a probe or tool did not answer)"}
    _refuse([f"{r.check_id} {said[r.status]} on {r.host}" + (f": {r.message}" if r.message else "")
             for r in report.results if r.check_id in wanted and r.status in said])


def refuse_waived_in_spec(spec, waive: Sequence[str]) -> None:
    """ConfigError naming each waived check the launch spec's preflight failed or errored on a host (the
    host is left out of the launch, whatever the waiver says)."""
    if not waive:
        return
    wanted = set(waive)
    _refuse([f"{check} failed or errored on {name} (verdict {h.verdict}): the spec leaves {name} out"
             for name, h in spec.hosts.items() for check in h.failed_checks if check in wanted])
