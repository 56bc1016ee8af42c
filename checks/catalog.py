"""The probe catalogue: every command and file ascend-check reads on a node, gathered from the resources
that declare them (checks/resources/: each resource runs its own probes and parses their output).

Commands depend on the hardware profile (install root, users, checkpoint dir), so the catalogue is
built per profile. Checks name the resources they read; `plan()` batches what the selected checks need.
"""

from __future__ import annotations

from ascend_ready.checks.diagnose.probes import PROBES as DIAGNOSE_PROBES
from ascend_ready.checks.probes import Probe
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.resources import ALL
from ascend_ready.checks.resources.base import ProbeDef

__all__ = ["catalog", "plan"]


def _definitions() -> list[ProbeDef]:
    """Every probe definition in batch order, each after the probes it needs."""
    out: dict[str, ProbeDef] = {}

    def add(d: ProbeDef) -> None:
        for need in d.needs:
            add(need)
        known = out.setdefault(d.id, d)
        if known is not d:
            raise RuntimeError(f"two resources define probe {d.id!r}")

    for resource in ALL:
        for d in resource.probes:
            add(d)
    for d in DIAGNOSE_PROBES:  # no check reads these; `collect --plogs` saves them for `diagnose`
        add(d)
    return list(out.values())


def catalog(profile: HardwareProfile) -> dict[str, Probe]:
    """All probes, with commands resolved for `profile`."""
    return {d.id: d(profile) for d in _definitions()}


def plan(profile: HardwareProfile, probe_ids: set[str]) -> list[Probe]:
    """The probes `probe_ids` name plus the ones they need, in catalogue order."""
    table = catalog(profile)
    unknown = probe_ids - set(table)
    if unknown:
        raise KeyError(f"unknown probe(s): {', '.join(sorted(unknown))}")
    wanted = set(probe_ids)
    for pid in probe_ids:
        wanted.update(table[pid].needs)
    return [p for pid, p in table.items() if pid in wanted]
