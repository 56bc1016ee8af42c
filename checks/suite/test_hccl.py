"""HCCL device-NIC checks: link UP, net health, IPs set and unique, hccn.conf agreement, TLS consistency."""

from __future__ import annotations

from collections import Counter

import pytest

from ascend_ready.checks.registry import check, evidence
from ascend_ready.checks.resources import same_subnet


def _nics(host, read):
    if not host.profile.hccn:
        pytest.skip(f"{host.profile.product} has no RoCE device NICs")
    nics = read()
    if not nics:
        pytest.fail("no device NICs found (no /dev/davinciN to query with hccn_tool)")
    return nics


@check(
    "hccl.link_up",
    title="every device NIC link is UP",
    severity="critical",
    probes=["dev-davinci", "hccn-link"],
    fix="Check the optical module, the cable and the switch port; `hccn_tool -i N -link_stat -g` shows flaps",
    command="hccn_tool -i <device> -link -g",
)
def test_link_up(host):
    nics = _nics(host, host.hccn.links)
    down = [n for n in nics.values() if n.link != "UP"]
    for n in down:
        evidence(n.evidence)
    assert not down, "; ".join(f"device {n.device_id} link {n.link or 'not reported'}" for n in down)


@check(
    "hccl.net_health",
    title="every device NIC's network health is Success",
    severity="critical",
    probes=["dev-davinci", "hccn-net-health"],
    fix="Check the detect address (netdetect_N in /etc/hccn.conf) is reachable from the device NIC",
    command="hccn_tool -i <device> -net_health -g",
)
def test_net_health(host):
    nics = _nics(host, host.hccn.net_health)
    bad = [n for n in nics.values() if not n.net_healthy]
    for n in bad:
        evidence(n.evidence)
    assert not bad, "; ".join(f"device {n.device_id} net health {n.net_health!r}" for n in bad)


@check(
    "hccl.ip",
    title="every device NIC has an IP, unique on the node",
    severity="critical",
    probes=["dev-davinci", "hccn-ip"],
    fix="Set the address from /etc/hccn.conf",
    command="hccn_tool -i <device> -ip -s address <ip> netmask <mask>",
    disruptive=True,
)
def test_ip(host):
    nics = _nics(host, host.hccn.ips)
    missing = [n for n in nics.values() if not n.address]
    counts = Counter(n.address for n in nics.values() if n.address)
    dup = [n for n in nics.values() if n.address and counts[n.address] > 1]
    for n in missing + dup:
        evidence(n.evidence)
    problems = [f"device {n.device_id} has no IP" for n in missing]
    problems += [f"device {n.device_id} shares {n.address} with another device" for n in dup]
    assert not problems, "; ".join(problems)


@check(
    "hccl.conf",
    title="device IPs, netmasks and gateways agree with /etc/hccn.conf",
    severity="major",
    probes=["dev-davinci", "hccn-ip", "hccn-conf"],
    fix="Re-apply /etc/hccn.conf (or fix it): the running address and the file must agree across reboots",
    command="hccn_tool -i <device> -ip -s address <ip> netmask <mask>",
    disruptive=True,
)
def test_conf(host):
    nics = _nics(host, host.hccn.ips)
    conf = host.hccn.conf
    assert conf is not None, "/etc/hccn.conf does not exist"
    problems = []
    for n in nics.values():
        entry = conf.devices.get(n.device_id)
        if entry is None:
            problems.append(f"device {n.device_id} has no entries in /etc/hccn.conf")
            continue
        lines = [
            f"hccn.conf: {k}_{n.device_id}={v}"
            for k, v in (("address", entry.address), ("netmask", entry.netmask), ("gateway", entry.gateway))
            if v
        ]
        before = len(problems)
        if n.address and entry.address and n.address != entry.address:
            problems.append(f"device {n.device_id} runs {n.address}, hccn.conf says {entry.address}")
        if n.netmask and entry.netmask and n.netmask != entry.netmask:
            problems.append(f"device {n.device_id} netmask {n.netmask}, hccn.conf says {entry.netmask}")
        address, netmask = entry.address or n.address, entry.netmask or n.netmask
        if entry.gateway and address and netmask and not same_subnet(address, netmask, entry.gateway):
            problems.append(f"device {n.device_id} gateway {entry.gateway} is outside {address}/{netmask}")
        if len(problems) > before:
            evidence(n.evidence, lines)
    assert not problems, "; ".join(problems)


@check(
    "hccl.tls",
    title="the TLS switch is the same on every device",
    severity="major",
    probes=["dev-davinci", "hccn-tls"],
    fix="Set one TLS mode on all devices (a mismatch fails HCCL initialisation)",
    command="hccn_tool -i <device> -tls -s enable <0|1>",
    disruptive=True,
)
def test_tls(host):
    nics = _nics(host, host.hccn.tls)
    modes = Counter(n.tls_enabled for n in nics.values())
    if len(modes) > 1:
        majority = modes.most_common(1)[0][0]
        odd = [n for n in nics.values() if n.tls_enabled != majority]
        for n in odd:
            evidence(n.evidence)
        raise AssertionError(
            f"TLS is {_onoff(majority)} on {modes[majority]} device(s) but "
            + ", ".join(f"{_onoff(n.tls_enabled)} on device {n.device_id}" for n in odd)
        )


@check(
    "hccl.gateway_ping",
    title="every device NIC reaches its gateway",
    severity="major",
    tier="full",
    probes=["dev-davinci", "hccn-ping"],
    fix="Check the switch port, VLAN and the gateway in /etc/hccn.conf",
    command="hccn_tool -i <device> -ping -g address <gateway>",
)
def test_gateway_ping(host):
    pings = _nics(host, host.hccn.pings)
    bad = []
    for dev, (ping, text) in pings.items():
        if ping.received == 0 or ping.loss_pct > 0:
            bad.append(f"device {dev}: {ping.loss_pct:g} % loss to {ping.target}")
            evidence(f"[device {dev}] {line}" for line in text.splitlines() if line.strip())
    assert not bad, "; ".join(bad)


def _onoff(flag: bool | None) -> str:
    return "unknown" if flag is None else ("on" if flag else "off")
