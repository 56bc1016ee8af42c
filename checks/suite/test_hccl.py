"""HCCL device-NIC checks: link UP, net health, IPs set and unique, hccn.conf agreement, TLS consistency."""

from __future__ import annotations

from collections import Counter

import pytest

from ascend_ready.checks.registry import check, evidence, fix_command, not_judged
from ascend_ready.checks.remediation import PLAYBOOK
from ascend_ready.checks.resources import (
    DeviceNodes,
    HccnConfFile,
    MeshResult,
    NicIp,
    NicLink,
    NicNetHealth,
    NicPing,
    NicTls,
    same_subnet,
)


def _nics(host, resource):
    """Device id -> its answer; no device NIC at all fails, a device that printed nothing is an error."""
    if not host.profile.hccn:
        pytest.skip(f"{host.profile.product} has no RoCE device NICs")
    if not host.device_nodes.ids:
        pytest.fail("no device NICs found (no /dev/davinciN to query with hccn_tool)")
    return resource.devices


def _unread(resource) -> list[str]:
    return [f"device {d}: no output of `{resource.command(d)}`" for d in resource.missing]


def _per_device(commands: list[str]) -> None:
    """The fix names the devices that failed: one command each, in device order."""
    if commands:
        fix_command("; ".join(dict.fromkeys(commands)))


def _verdict(problems: list[str], resource) -> None:
    """Fail on what is wrong (naming what could not be read too); else error on what was not read."""
    unread = _unread(resource)
    assert not problems, "; ".join(problems + unread)
    if unread:
        not_judged("; ".join(unread))


@check(
    "hccl.link_up",
    title="every device NIC link is UP",
    severity="critical",
    reads=[DeviceNodes, NicLink],
    fix="Check the optical module, the cable and the switch port; `hccn_tool -i N -link_stat -g` shows flaps",
    command="hccn_tool -i N -link -g",
)
def test_link_up(host):
    nics = _nics(host, host.nic_link)
    down = [n for n in nics.values() if n.value.status != "UP"]
    for n in down:
        evidence(n.evidence)
    _per_device([f"hccn_tool -i {n.device_id} -link -g" for n in down])
    _verdict([f"device {n.device_id} link {n.value.status}" for n in down], host.nic_link)


@check(
    "hccl.net_health",
    title="every device NIC's network health is Success",
    severity="critical",
    reads=[DeviceNodes, NicNetHealth],
    fix="Check the detect address (netdetect_N in /etc/hccn.conf) is reachable from the device NIC",
    command="hccn_tool -i N -net_health -g",
)
def test_net_health(host):
    nics = _nics(host, host.nic_net_health)
    bad = [n for n in nics.values() if not n.value.healthy]
    for n in bad:
        evidence(n.evidence)
    _per_device([f"hccn_tool -i {n.device_id} -net_health -g" for n in bad])
    _verdict([f"device {n.device_id} net health {n.value.status!r}" for n in bad], host.nic_net_health)


@check(
    "hccl.ip",
    title="every device NIC has an IP, unique on the node",
    severity="critical",
    reads=[DeviceNodes, NicIp],
    fix="Set the addresses from the inventory's hccn_devices (the hccn role writes /etc/hccn.conf and "
    "applies it)",
    command=PLAYBOOK + " --limit <host> --tags hccn",
    disruptive=True,
)
def test_ip(host):
    nics = _nics(host, host.nic_ip)
    missing = [n for n in nics.values() if not n.value.address]
    counts = Counter(n.value.address for n in nics.values() if n.value.address)
    dup = [n for n in nics.values() if n.value.address and counts[n.value.address] > 1]
    for n in missing + dup:
        evidence(n.evidence)
    problems = [f"device {n.device_id} has no IP" for n in missing]
    problems += [f"device {n.device_id} shares {n.value.address} with another device" for n in dup]
    _verdict(problems, host.nic_ip)


@check(
    "hccl.conf",
    title="device IPs, netmasks and gateways agree with /etc/hccn.conf",
    severity="major",
    reads=[DeviceNodes, NicIp, HccnConfFile],
    fix="Re-apply /etc/hccn.conf (or fix it): the running address and the file must agree across reboots",
    command="hccn_tool -i N -ip -s address <ip> netmask <mask>",
    disruptive=True,
)
def test_conf(host):
    nics = _nics(host, host.nic_ip)
    conf = host.hccn_conf.conf
    assert conf is not None, "/etc/hccn.conf does not exist"
    problems, fixes = [], []
    for n in nics.values():
        entry = conf.devices.get(n.device_id)
        if entry is None:
            problems.append(f"device {n.device_id} has no entries in /etc/hccn.conf")
            fixes.append(PLAYBOOK + " --limit <host> --tags hccn")
            continue
        lines = [
            f"hccn.conf: {k}_{n.device_id}={v}"
            for k, v in (("address", entry.address), ("netmask", entry.netmask), ("gateway", entry.gateway))
            if v
        ]
        before = len(problems)
        ip = n.value
        if entry.address and ip.address != entry.address:
            runs = f"runs {ip.address}" if ip.address else "runs no IP"
            problems.append(f"device {n.device_id} {runs}, hccn.conf says {entry.address}")
        if entry.netmask and ip.netmask and ip.netmask != entry.netmask:
            problems.append(f"device {n.device_id} netmask {ip.netmask}, hccn.conf says {entry.netmask}")
        running_differs = len(problems) > before
        address, netmask = entry.address or ip.address, entry.netmask or ip.netmask
        file_wrong = bool(entry.gateway and address and netmask and not same_subnet(address, netmask,
                                                                                    entry.gateway))
        if file_wrong:
            problems.append(f"device {n.device_id} gateway {entry.gateway} is outside {address}/{netmask}")
        if len(problems) > before:
            evidence(n.evidence, lines)
            # the running address off the file's: set the file's; the file itself wrong: the role rewrites it
            if running_differs and not file_wrong and entry.address and netmask:
                fixes.append(f"hccn_tool -i {n.device_id} -ip -s address {entry.address} netmask {netmask}")
            else:
                fixes.append(PLAYBOOK + " --limit <host> --tags hccn")
    _per_device(fixes)
    _verdict(problems, host.nic_ip)


@check(
    "hccl.tls",
    title="the TLS switch is the same on every device",
    severity="major",
    reads=[DeviceNodes, NicTls],
    fix="Set one TLS mode on all devices (a mismatch fails HCCL initialisation)",
    command="hccn_tool -i N -tls -s enable <0|1>",
    disruptive=True,
)
def test_tls(host):
    nics = _nics(host, host.nic_tls)
    modes = Counter(n.value.tls_enabled for n in nics.values())
    problems = []
    if len(modes) > 1:
        majority = modes.most_common(1)[0][0]
        odd = [n for n in nics.values() if n.value.tls_enabled != majority]
        for n in odd:
            evidence(n.evidence)
        _per_device([f"hccn_tool -i {n.device_id} -tls -s enable {int(majority)}" for n in odd])
        problems.append(
            f"TLS is {_onoff(majority)} on {modes[majority]} device(s) but "
            + ", ".join(f"{_onoff(n.value.tls_enabled)} on device {n.device_id}" for n in odd)
        )
    _verdict(problems, host.nic_tls)


@check(
    "hccl.gateway_ping",
    title="every device NIC reaches its gateway",
    severity="major",
    tier="full",
    reads=[DeviceNodes, NicPing],
    fix="Check the switch port, VLAN and the gateway in /etc/hccn.conf",
    command="hccn_tool -i N -ping -g address <gateway>",
)
def test_gateway_ping(host):
    pings = _nics(host, host.nic_ping)
    bad, fixes = [], []
    for dev, n in pings.items():
        if n.value.received == 0 or n.value.loss_pct > 0:
            bad.append(f"device {dev}: {n.value.loss_pct:g} % loss to {n.value.target}")
            evidence(n.evidence)
            fixes.append(f"hccn_tool -i {dev} -ping -g address {n.value.target}")
    _per_device(fixes)
    _verdict(bad, host.nic_ping)


@check(
    "hccl.mesh",
    title="every device NIC reaches the same device of every other node (ping mesh)",
    severity="critical",
    tier="full",
    reads=[MeshResult],
    fix="Check the named device's link and optics (hccn_tool -i N -link -g, -optical -g), the switch "
    "port and VLAN of its plane, and that no two nodes share a device IP (hccn_tool -i N -ip -g)",
)
def test_mesh(host):
    if len(host.fleet) < 2:
        pytest.skip("the mesh pings between hosts: judge two or more together")
    mesh = host.mesh.result
    evidence(f"mesh of {len(mesh.hosts)} hosts: {mesh.rounds} rounds, {mesh.pings} pings, "
             f"{mesh.retests} re-tests", *mesh.findings)
    assert not mesh.findings, "; ".join(mesh.findings)


def _onoff(flag: bool) -> str:
    return "on" if flag else "off"
