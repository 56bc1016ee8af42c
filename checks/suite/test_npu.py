"""NPU checks: count, health, temperature, idle HBM, stray processes, device nodes and PCI functions."""

from __future__ import annotations

import pytest

from ascend_ready.checks.registry import check, evidence, warn

_SEVERITY = {"OK": 0, "Warning": 1, "Alarm": 2, "Critical": 3}


@check(
    "npu.count",
    title="npu-smi lists the profile's NPUs and chips",
    severity="critical",
    probes=["npu-smi-info"],
    fix="Check that every card is seated and the driver loaded them (dmesg | grep -i devdrv); "
    "a missing card needs a power cycle or replacement",
    command="npu-smi info",
    disruptive=True,
)
def test_npu_count(host):
    smi, profile = host.npu_smi, host.profile
    evidence(
        f"npu-smi lists NPU ids {smi.npu_ids or 'none'}",
        *(f"NPU {n.id}: {len(n.chips)} chip(s) {n.name}" for n in smi.info.npus),
    )
    assert len(smi.npu_ids) == profile.npu_count, (
        f"npu-smi lists {len(smi.npu_ids)} NPUs, the {profile.product} has {profile.npu_count}"
    )
    odd = [n.id for n in smi.info.npus if len(n.chips) != profile.chips_per_npu]
    assert not odd, f"NPU(s) {odd} do not show {profile.chips_per_npu} chip(s) each"
    if profile.chip_names:
        wrong = sorted({c.name for c in smi.chips} - set(profile.chip_names))
        assert not wrong, (
            f"chip name(s) {wrong} are not a {profile.product} ({', '.join(profile.chip_names)})"
        )


@check(
    "npu.health",
    title="every chip reports health OK",
    severity="critical",
    probes=["npu-smi-info", "npu-smi-health"],
    fix="Read the error codes with `npu-smi info -t health -i N -c C`; if they persist, reset the chip",
    command="npu-smi set -t reset -i <npu> -c <chip>",
    disruptive=True,
)
def test_npu_health(host):
    details = host.npu_health  # (npu, chip) -> `npu-smi info -t health`
    worst, bad = "OK", []
    for chip in host.npu_smi.chips:
        detail = details.get((chip.npu_id, chip.chip_id))
        # The table shows the chip's state; -t health adds the codes (and may be the worse of the two).
        level = max(
            (chip.health, (detail.health if detail and detail.health else "OK")),
            key=lambda h: _SEVERITY.get(h, 3),
        )
        if level == "OK":
            continue
        codes = " ".join(detail.error_codes) if detail and detail.error_codes else "none shown"
        bad.append(f"{chip.label} ({chip.bus_id}): {level}, error codes {codes}")
        evidence(chip.evidence)
        if detail:
            evidence(
                f"{chip.label}: Health Status {detail.health}, Error Code {codes}",
                *(f"{chip.label}: {info}" for info in detail.error_information),
            )
        worst = max(worst, level, key=lambda h: _SEVERITY.get(h, 3))
    if worst == "Warning":
        warn("; ".join(bad))
    assert not bad, "; ".join(bad)


@check(
    "npu.temperature",
    title="chip temperatures are within the profile's range",
    severity="major",
    probes=["npu-smi-info"],
    fix="Check the fans, the air inlet and the BMC's thermal log (an idle chip above range: cooling fault)",
    command="npu-smi info -t temp -i <npu>",
)
def test_npu_temperature(host):
    lo, hi = host.profile.temp_min_c, host.profile.temp_max_c
    out = []
    for chip in host.npu_smi.chips:
        if chip.temp_c is None:
            continue
        if not lo <= chip.temp_c <= hi:
            out.append(f"{chip.label} at {chip.temp_c} °C (expected {lo:g}-{hi:g} °C)")
            evidence(chip.evidence)
    assert not out, "; ".join(out)


def _hbm_chips(host):
    chips = [c for c in host.npu_smi.chips if c.hbm_total_mb]
    if not chips:
        pytest.skip(f"no HBM reported on this node ({host.profile.product})")
    return chips


@check(
    "npu.hbm_idle",
    title="idle chips hold no more HBM than the driver's baseline",
    severity="major",
    probes=["npu-smi-info"],
    fix="Something holds device memory (possibly in another container): find and stop it before training",
    command="npu-smi info",
)
def test_hbm_idle(host):
    limit = host.profile.hbm_idle_baseline_mb + host.profile.hbm_idle_margin_mb
    out = []
    for chip in _hbm_chips(host):
        if chip.hbm_used_mb is not None and chip.hbm_used_mb > limit:
            out.append(
                f"{chip.label} uses {chip.hbm_used_mb} MB HBM on an idle node (baseline "
                f"{host.profile.hbm_idle_baseline_mb} MB + margin {host.profile.hbm_idle_margin_mb} MB)"
            )
            evidence(chip.evidence)
    assert not out, "; ".join(out)


@check(
    "npu.hbm_usage",
    title="no chip uses more than the profile's maximum share of HBM",
    severity="major",
    probes=["npu-smi-info"],
    fix="Free device memory (stop the process holding it) before starting a job",
    command="npu-smi info",
)
def test_hbm_usage(host):
    cap = host.profile.hbm_max_used_pct
    out = []
    for chip in _hbm_chips(host):
        pct = 100.0 * (chip.hbm_used_mb or 0) / chip.hbm_total_mb
        if pct > cap:
            out.append(f"{chip.label} uses {pct:.0f} % of its HBM (max {cap:g} %)")
            evidence(chip.evidence)
    assert not out, "; ".join(out)


@check(
    "npu.processes",
    title="no process holds an NPU before training",
    severity="major",
    probes=["npu-smi-info"],
    fix="Stop the listed processes (they hold NPU memory and compute) or pick other nodes",
    command="kill <pid>",
    disruptive=True,
)
def test_npu_processes(host):
    procs = host.npu_smi.processes
    evidence(
        f"NPU {p.npu_id} chip {p.chip_id}: pid {p.pid} {p.name or '(no name)'} {p.memory_mb} MB"
        for p in procs
    )
    assert not procs, f"{len(procs)} process(es) hold NPUs: " + ", ".join(
        f"pid {p.pid} {p.name or '(no name)'} on NPU {p.npu_id}" for p in procs
    )


@check(
    "npu.device_nodes",
    title="/dev/davinciN exist for every chip npu-smi lists",
    severity="critical",
    probes=["npu-smi-info", "dev-davinci"],
    fix="Reload the driver so it recreates the device nodes (or check the container's device mounts)",
    command="ls -l /dev/davinci*",
    disruptive=True,
)
def test_device_nodes(host):
    chips = host.npu_smi.chips
    nodes = host.davinci_ids
    evidence(f"/dev/davinci{n}" for n in nodes)
    evidence(f"npu-smi lists {len(chips)} chip(s)")
    assert len(nodes) == len(chips), (
        f"{len(nodes)} /dev/davinciN device node(s) but npu-smi lists {len(chips)} chip(s)"
    )


@check(
    "npu.pci_functions",
    title="lspci shows one NPU function per chip npu-smi lists",
    severity="critical",
    probes=["npu-smi-info", "lspci"],
    fix="A function missing from lspci fell off the bus: reseat the card or check the slot in the BMC",
    command="lspci -D -nn -d 19e5:",
    disruptive=True,
)
def test_pci_functions(host):
    profile = host.profile
    functions = {d.bdf: d for d in host.pci_npus}
    evidence(f"{d.bdf} {d.class_name}: {d.description}" for d in functions.values())
    expected = profile.npu_count * profile.pci_functions_per_npu
    assert len(functions) == expected, (
        f"lspci shows {len(functions)} NPU function(s), the {profile.product} has {expected}"
    )
    wrong = sorted(
        b
        for b, d in functions.items()
        if profile.pci_device_ids and d.device_id not in profile.pci_device_ids
    )
    assert not wrong, f"function(s) {wrong} are not a {profile.product} NPU (device {profile.pci_device_ids})"
    unseen = sorted({c.bus_id for c in host.npu_smi.chips if c.bus_id} - set(functions))
    assert not unseen, f"npu-smi reports bus id(s) {unseen} that lspci does not show"
