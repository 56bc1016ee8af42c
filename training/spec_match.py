"""`--launch-spec FILE -i INVENTORY`: the spec decides which hosts start (it holds what the preflight
judged), the inventory how they are reached (its SSH settings, become, training user). A spec made from
another inventory was used and the `-i` silently ignored (issue 25, "Also"); here such a pair is refused
before any SSH session opens, naming the hosts that differ, and a pair that agrees says which wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ascend_ready.errors import ConfigError, reasons

__all__ = ["refuse_other_inventory"]


def refuse_other_inventory(spec, spec_path: str, targets: Sequence, source: str,
                           log: Callable[[str], None]) -> None:
    """ConfigError unless `targets` (the hosts -i/--hosts name, fleet.transport.Target) are the spec's
    hosts at the spec's addresses; on agreement, log which of the two decides what."""
    if not targets:
        return
    named = {t.name: t for t in targets}
    only_spec = sorted(set(spec.hosts) - set(named))
    only_inv = sorted(set(named) - set(spec.hosts))
    moved = sorted(f"{n} ({spec.hosts[n].address} in the spec, {named[n].address or n} in {source})"
                   for n in set(spec.hosts) & set(named)
                   if named[n].address and named[n].address != spec.hosts[n].address)
    why = reasons(("in the spec only: {}", only_spec), (f"in {source} only: {{}}", only_inv),
                  ("at another address: {}", moved))
    if why:
        raise ConfigError(f"the launch spec {spec_path} was not made from {source}: " + why,
                          hint=f"make the spec from it (ascend-check -i INVENTORY --launch-spec "
                          f"{spec_path}), or drop -i/--hosts to start the spec's hosts as it recorded them")
    log(f"launch spec: {spec_path} decides which hosts start (as its preflight judged them); {source} "
        "how they are reached (SSH settings, become, training user)")
