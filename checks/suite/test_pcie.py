"""PCIe checks: every NPU link trains at full width and at the speed its slot can give; AER errors warn."""

from __future__ import annotations

import pytest

from ascend_ready.checks.registry import check, evidence, warn
from ascend_ready.checks.resources import Dmesg, PcieLinks


def _links(host):
    links = host.pcie_links.links
    if not links:
        pytest.fail("no NPU PCIe function found (sysfs and lspci -vvv show none)")
    return links


@check(
    "pcie.link_width",
    title="every NPU link trains at the expected width (x16)",
    severity="critical",
    reads=[PcieLinks],
    fix="Reseat the card or riser and check the slot's bifurcation setting in the BIOS",
    disruptive=True,
)
def test_link_width(host):
    expected = host.profile.pcie_width
    bad = []
    for link in _links(host):
        if link.width != expected:
            bad.append(f"{link.label} trains at {_width(link.width)}, should be x{expected}")
            evidence(link.evidence)
    assert not bad, "; ".join(bad)


@check(
    "pcie.link_speed",
    title="every NPU link trains at the speed its slot can give",
    severity="major",
    reads=[PcieLinks],
    fix="Check the slot and riser, then the root port's speed setting in the BIOS; "
    "a link below its slot's speed usually needs reseating",
    disruptive=True,
)
def test_link_speed(host):
    bad = []
    for link in _links(host):
        slot = link.slot_speed_gts
        # A 910B advertises 32 GT/s; behind a Gen4 (16 GT/s) root port, 16 GT/s is healthy even though
        # lspci prints "(downgraded)": the slot gives the lower of the two capabilities.
        if slot is None or link.speed_gts is None or link.speed_gts < slot:
            port = f" behind {link.port_bdf} (max {_speed(link.port_max_speed_gts)})" if link.port_bdf else ""
            bad.append(
                f"{link.label} trains at {_speed(link.speed_gts)}, should be {_speed(slot)} "
                f"(device max {_speed(link.max_speed_gts)}{port})"
            )
            evidence(link.evidence)
    assert not bad, "; ".join(bad)


@check(
    "pcie.aer",
    title="no PCIe AER errors logged for the NPUs",
    severity="minor",
    reads=[Dmesg, PcieLinks],
    fix="Corrected errors that keep growing point at a marginal link (riser, card seating); "
    "watch `dmesg -w` and the AER counters",
    command="dmesg | grep -i aer",
)
def test_aer(host):
    links = host.pcie_links.links
    watched = {link.bdf for link in links} | {link.port_bdf for link in links if link.port_bdf}
    events = [
        e
        for e in host.dmesg.log.of_kind("aer_corrected", "aer_uncorrected", "pcie_bus_error")
        if e.device is None or e.device in watched
    ]
    counters = host.pcie_links.aer_counters  # sysfs keeps counting after dmesg has rotated
    evidence(f"dmesg: {e.message}" for e in events[:20])
    evidence(f"{bdf}: {name} {n}" for bdf, totals in counters.items() for name, n in totals.items())
    found = []
    if events:
        worst = (
            "uncorrected"
            if any(e.kind == "aer_uncorrected" or "Uncorrected" in (e.severity or "") for e in events)
            else "corrected"
        )
        devices = sorted({e.device for e in events if e.device})
        found.append(
            f"{len(events)} AER/PCIe bus error line(s) in dmesg ({worst}) "
            f"for {', '.join(devices) or 'the NPUs'}"
        )
    for bdf, totals in counters.items():
        found.append(f"{bdf} AER counters " + ", ".join(f"{name} {n}" for name, n in totals.items()))
    if found:
        warn("; ".join(found))


def _width(width: int | None) -> str:
    return "link down" if width is None else f"x{width}"


def _speed(speed: float | None) -> str:
    return "unknown (link down)" if speed is None else f"{speed:g} GT/s"
