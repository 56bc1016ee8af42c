"""Fleet consistency checks: every node's fingerprint against the fleet's majority (or the profile's pins).

They run whenever two or more hosts of one product (profile) are judged together. A node that differs
fails, naming the field, its value and the majority's; a field without a majority warns on every node,
naming who has what; a value a node could not report counts as `(not read)`: that node's check is an
error naming what was not read and why (nothing was read to fail), and it is never the majority.
"""

from __future__ import annotations

from collections.abc import Callable

from ascend_ready.checks.cluster.aliases import alias_note, aliases
from ascend_ready.checks.cluster.fleet import MISSING, compare, groups
from ascend_ready.checks.registry import check, evidence, warn
from ascend_ready.checks.remediation import PLAYBOOK
from ascend_ready.checks.resources import (
    CannComponents,
    DriverVersion,
    FirmwareVersion,
    Glibc,
    HccnConfFile,
    KernelHeaders,
    MachineIdentity,
    NicTls,
    NpuSmi,
    OsRelease,
    ProbeFailed,
    PythonPackages,
    Thp,
    Toolkit,
)
from ascend_ready.checks.resources.stack import installed_stack
from ascend_ready.errors import AscendReadyError

Fields = Callable[[object], dict[str, str]]


def _stack(host) -> dict[str, str]:
    stack, _ = installed_stack(host)
    return {k: v or "(not installed)" for k, v in stack.items()}


def _os(host) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, read in (
        ("os", lambda: host.os_release.release.label),
        ("kernel", lambda: host.kernel_headers.headers.kernel),
        ("glibc", lambda: f"{host.glibc.version.major}.{host.glibc.version.minor}"),
        ("thp_enabled", lambda: host.thp.mode("enabled").selected),
        ("thp_defrag", lambda: host.thp.mode("defrag").selected),
    ):
        out[name] = _read(read)
    return out


def _hardware(host) -> dict[str, str]:
    def models() -> str:
        return ",".join(sorted({c.name for c in host.npu_smi.chips})) or "(none)"

    return {"npu_model": _read(models), "npu_count": _read(lambda: str(len(host.npu_smi.npu_ids)))}


def _hccn(host) -> dict[str, str]:
    def tls() -> str:
        nics = host.nic_tls
        if nics.missing:
            raise ProbeFailed(f"no -tls answer from devices {nics.missing}")
        values = sorted({"1" if r.value.tls_enabled else "0" for r in nics.devices.values()})
        return "/".join(values) or "(no device)"

    def netmask() -> str:
        conf = host.hccn_conf.conf
        if conf is None:
            return "(no /etc/hccn.conf)"
        return "/".join(sorted({d.netmask or "-" for d in conf.devices.values()}))

    return {"tls": _read(tls), "hccn_netmask": _read(netmask)}


#: what each fleet check compares, by check id (the controller records these in a fingerprint file)
FLEET_FIELDS: dict[str, Fields] = {}


def reference_key(check_id: str, product: str) -> str:
    """The key of a fleet check's recorded fingerprints for one product (Fleet.reference)."""
    return f"{check_id}:{product}"


def fleet_fingerprints(hosts) -> dict[str, dict[str, dict[str, str]]]:
    """Every fleet check's fingerprint of every host, keyed as Fleet.reference reads them."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for check_id, fields in FLEET_FIELDS.items():
        for h in hosts:
            out.setdefault(reference_key(check_id, h.profile.product), {})[h.name] = fields(h)
    return out


class _NotRead(str):
    """MISSING, with why the node could not report the value (the resource's error)."""

    why: str = ""


def _read(fn: Callable[[], str]) -> str:
    try:
        return str(fn())
    except (ProbeFailed, AscendReadyError) as exc:
        missing = _NotRead(MISSING)
        missing.why = exc.message
        return missing


def _identity(host) -> tuple[str, str] | None:
    """The host's machine identity key, None where it was not read (then it counts as its own machine)."""
    try:
        return host.machine_identity.identity.key
    except (ProbeFailed, AscendReadyError):
        return None


def _judge(host, check_id: str, fields: Fields) -> None:
    """Compare `host` with the rest of the fleet on `fields`; fail/warn naming what differs."""
    # Hosts of another product (an A3 beside A2s) are their own fleet: they differ by design.
    peers = [h for h in host.fleet.hosts if h.profile.product == host.profile.product]
    key = f"{check_id}:{host.profile.product}:fingerprints"
    memo = host.fleet.memo
    # one machine listed under two names counts once toward the majority (as its first name)
    same = memo.get(f"aliases:{host.profile.product}")
    if same is None:
        same = memo[f"aliases:{host.profile.product}"] = aliases((h.name, _identity(h)) for h in peers)
    if host.name in same:
        warn(f"{alias_note(host.name, same[host.name])}: judged once, as {same[host.name]}; list it once in "
             "the inventory")
    peers = [h for h in peers if h.name not in same]
    recorded = host.fleet.reference.get(reference_key(check_id, host.profile.product))
    if len(peers) < 2 and recorded:
        # node-local mode: this node read now, the others as the controller's fingerprint file has them
        others = {n: dict(v) for n, v in recorded.items() if n != host.name}
        if others:
            memo[key] = {**others, host.name: fields(host)}
            evidence(f"the other nodes as the fleet fingerprint file recorded them ({len(others)} node(s))")
    if len(peers) < 2 and key not in memo:
        import pytest

        why = ("the fleet fingerprint file has no other node of it" if host.fleet.reference else
               "give --fleet-fingerprints FILE (written by `ascend-check -i INVENTORY --fleet-fingerprints "
               "FILE` on the controller) to compare a node judged alone with its fleet")
        pytest.skip(f"fleet checks compare two or more {host.profile.product} hosts; one was judged ({why})")
    if key not in memo:
        memo[key] = {h.name: fields(h) for h in peers}
    prints: dict[str, dict[str, str]] = memo[key]  # type: ignore[assignment]
    pins = {k: v for k, v in host.profile.fleet_pins.items() if k in prints[host.name]}
    deviations, ties = compare(prints, pins or None, pinned_by="profile's fleet_pins")
    for fingerprint, nodes in groups(prints):
        evidence(f"{', '.join(nodes)}: " + " ".join(f"{k}={v}" for k, v in sorted(fingerprint.items())))
    # A value this node did not report is `error` (not judged), never `fail`: nothing was read to fail.
    mine = [str(d) for d in deviations if d.node == host.name and d.value != MISSING]
    unread = {f: getattr(v, "why", "") for f, v in prints[host.name].items() if v == MISSING}
    not_read = "; ".join(f"{f} not read" + (f" ({why})" if why else "") for f, why in sorted(unread.items()))
    assert not mine, "; ".join(mine) + (f"; and {not_read}" if not_read else "")
    if unread:
        raise ProbeFailed(f"{not_read}: the node cannot be compared with the fleet on "
                          f"{', '.join(sorted(unread))}")
    mine_ties = [str(t) for t in ties if any(host.name in nodes for _, nodes in t.holders)]
    if mine_ties:
        warn("; ".join(mine_ties))


@check(
    "fleet.stack",
    title="the node has the fleet's driver, firmware, CANN and torch/torch_npu versions",
    severity="critical",
    reads=[DriverVersion, FirmwareVersion, Toolkit, CannComponents, PythonPackages, MachineIdentity],
    fix="Provision the odd node with the fleet's stack (stack_id of the majority)",
    command=PLAYBOOK + " --limit <host>",
)
def test_fleet_stack(host):
    _judge(host, "fleet.stack", _stack)


@check(
    "fleet.os",
    title="the node runs the fleet's OS release, kernel, glibc and THP settings",
    severity="major",
    reads=[OsRelease, KernelHeaders, Glibc, Thp, MachineIdentity],
    fix="Reinstall or upgrade the odd node to the fleet's OS and kernel; re-run the tuning role for THP",
)
def test_fleet_os(host):
    _judge(host, "fleet.os", _os)


@check(
    "fleet.hardware",
    title="the node has the fleet's NPU model and count",
    severity="major",
    reads=[NpuSmi, MachineIdentity],
    fix="Check the odd node's cards (npu-smi info) and its inventory group: a different product needs "
    "its own profile and its own job",
    disruptive=True,
)
def test_fleet_hardware(host):
    _judge(host, "fleet.hardware", _hardware)


@check(
    "fleet.hccn",
    title="the node's device NICs have the fleet's TLS switch and netmask",
    severity="critical",
    reads=[NicTls, HccnConfFile, MachineIdentity],
    fix="Set the TLS switch the fleet uses on every device (hccn_tool -i N -tls -s enable 0|1) and the "
    "netmask in /etc/hccn.conf through the hccn role",
    command=PLAYBOOK + " --limit <host> --tags hccn",
)
def test_fleet_hccn(host):
    _judge(host, "fleet.hccn", _hccn)


FLEET_FIELDS.update(
    {"fleet.stack": _stack, "fleet.os": _os, "fleet.hardware": _hardware, "fleet.hccn": _hccn}
)
