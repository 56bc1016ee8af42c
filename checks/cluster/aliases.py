"""One machine listed twice (two inventory names, two addresses): hosts whose machine-id and boot id are the
same are one running machine (checks/resources/identity.py). The fleet's majority counts it once, and the
rank table refuses it saying which name is which, instead of naming its device IPs as duplicates."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ascend_ready.checks.parsers.os_commands import parse_machine_identity
from ascend_ready.errors import ParseError

__all__ = ["alias_note", "aliases"]


def aliases(identities: Iterable[tuple[str, object]]) -> dict[str, str]:
    """alias -> the first name (in the order given: the inventory's) of the same machine. `identities`:
    (host name, its identity key, or None where it was not read: such a host is its own machine)."""
    first: dict[object, str] = {}
    out: dict[str, str] = {}
    for name, key in identities:
        if key is None:
            continue
        if key in first:
            out[name] = first[key]
        else:
            first[key] = name
    return out


def snapshot_aliases(hosts: Mapping[str, object]) -> dict[str, str]:
    """aliases() of snapshot hosts (name -> HostSnapshot) from their machine-identity probe output."""

    keyed = []
    for name, snap in hosts.items():
        res = getattr(snap, "probes", {}).get("machine-identity")
        key = None
        if res is not None and res.rc == 0:
            try:
                key = parse_machine_identity(res.stdout).key
            except ParseError:
                key = None
        keyed.append((name, key))
    return aliases(keyed)


def alias_note(alias: str, same_as: str) -> str:
    return (f"{alias} is {same_as}: the same machine (same /etc/machine-id and boot id) listed under two "
            "names")
