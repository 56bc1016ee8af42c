"""NPU checks: count, health, temperature, idle HBM, stray processes, device nodes, PCI functions and the
chip-to-chip topology."""

from __future__ import annotations

import re

import pytest

from ascend_ready.checks.parsers.numa import format_cpulist, parse_cpulist
from ascend_ready.checks.registry import check, evidence, fix_command, not_judged, warn
from ascend_ready.checks.resources import DeviceNodes, NpuHealth, NpuSmi, NpuTopology, NumaNodes, PciFunctions

_SEVERITY = {"OK": 0, "Warning": 1, "Alarm": 2, "Critical": 3}


def _rank(health: str) -> int:
    return _SEVERITY.get(health, 3)


@check(
    "npu.count",
    title="npu-smi lists the profile's NPUs and chips",
    severity="critical",
    reads=[NpuSmi],
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
    reads=[NpuSmi, NpuHealth],
    fix="Read the error codes with `npu-smi info -t health -i N -c C`; if they persist, reset the chip",
    command="npu-smi set -t reset -i <npu> -c <chip>",
    disruptive=True,
)
def test_npu_health(host):
    details = host.npu_health.chips  # (npu, chip) -> `npu-smi info -t health`
    worst, bad, unread, na, resets = "OK", [], [], [], []
    for chip in host.npu_smi.chips:
        detail = details.get((chip.npu_id, chip.chip_id))
        command = host.npu_health.command(chip.npu_id, chip.chip_id)
        if detail is None:
            unread.append(f"{chip.label}: no output of `{command}`")
        elif detail.health is None:
            na.append(f"{chip.label}: `{command}` printed no health status (NA)")
        # The table shows the chip's state; -t health adds the codes (and may be the worse of the two).
        level = max((chip.health, (detail.health if detail and detail.health else "OK")), key=_rank)
        if level == "OK":
            continue
        codes = " ".join(detail.error_codes) if detail and detail.error_codes else "none shown"
        bad.append(f"{chip.label} ({chip.bus_id}): {level}, error codes {codes}")
        resets.append(f"npu-smi set -t reset -i {chip.npu_id} -c {chip.chip_id}")
        evidence(chip.evidence)
        if detail:
            evidence(
                f"{chip.label}: Health Status {detail.health}, Error Code {codes}",
                *(f"{chip.label}: {info}" for info in detail.error_information),
            )
        worst = max(worst, level, key=_rank)
    if resets:
        fix_command("; ".join(resets))
    assert _rank(worst) <= _SEVERITY["Warning"], "; ".join(bad + unread + na)
    if unread:
        not_judged("; ".join(unread), hint="`npu-smi info -l` did not list every chip of the table")
    if bad or na:
        warn("; ".join(bad + na))


@check(
    "npu.temperature",
    title="chip temperatures are within the profile's range",
    severity="major",
    reads=[NpuSmi],
    fix="Check the fans, the air inlet and the BMC's thermal log (an idle chip above range: cooling fault)",
    command="npu-smi info -t temp -i <npu> -c <chip>",
)
def test_npu_temperature(host):
    lo, hi = host.profile.temp_min_c, host.profile.temp_max_c
    out, unread, hot = [], [], []
    for chip in host.npu_smi.chips:
        if chip.temp_c is None:
            unread.append(f"{chip.label} reports no temperature (Temp(C) is NA in `{host.npu_smi.command}`)")
            evidence(chip.evidence)
        elif not lo <= chip.temp_c <= hi:
            out.append(f"{chip.label} at {chip.temp_c} °C (expected {lo:g}-{hi:g} °C)")
            evidence(chip.evidence)
            hot.append(f"npu-smi info -t temp -i {chip.npu_id} -c {chip.chip_id}")
    if hot:
        fix_command("; ".join(hot))
    assert not out, "; ".join(out + unread)
    if unread:
        not_judged("; ".join(unread), hint="a sensor that reports nothing cannot be trusted: check the BMC")


def _hbm_chips(host):
    """Chips with their HBM (used, total); chips that report none are an error naming them."""
    smi = host.npu_smi
    if not smi.has_hbm:
        pytest.skip(f"no HBM reported on this node ({host.profile.product}: npu-smi has no HBM column)")
    chips, unread = [], []
    for chip in smi.chips:
        if chip.hbm_used_mb is None or not chip.hbm_total_mb:
            unread.append(f"{chip.label} reports no HBM usage (HBM-Usage is NA in `{smi.command}`)")
            evidence(chip.evidence)
        else:
            chips.append(chip)
    return chips, unread


@check(
    "npu.hbm_idle",
    title="idle chips hold no more HBM than the driver's baseline",
    severity="major",
    reads=[NpuSmi],
    fix="Something holds device memory (possibly in another container): find and stop it before training",
    command="npu-smi info",
)
def test_hbm_idle(host):
    limit = host.profile.hbm_idle_baseline_mb + host.profile.hbm_idle_margin_mb
    chips, unread = _hbm_chips(host)
    out = []
    for chip in chips:
        if chip.hbm_used_mb > limit:
            out.append(
                f"{chip.label} uses {chip.hbm_used_mb} MB HBM on an idle node (baseline "
                f"{host.profile.hbm_idle_baseline_mb} MB + margin {host.profile.hbm_idle_margin_mb} MB)"
            )
            evidence(chip.evidence)
    assert not out, "; ".join(out + unread)
    if unread:
        not_judged("; ".join(unread))


@check(
    "npu.hbm_usage",
    title="no chip uses more than the profile's maximum share of HBM",
    severity="major",
    reads=[NpuSmi],
    fix="Free device memory (stop the process holding it) before starting a job",
    command="npu-smi info",
)
def test_hbm_usage(host):
    cap = host.profile.hbm_max_used_pct
    chips, unread = _hbm_chips(host)
    out = []
    for chip in chips:
        pct = 100.0 * chip.hbm_used_mb / chip.hbm_total_mb
        if pct > cap:
            out.append(f"{chip.label} uses {pct:.0f} % of its HBM (max {cap:g} %)")
            evidence(chip.evidence)
    assert not out, "; ".join(out + unread)
    if unread:
        not_judged("; ".join(unread))


@check(
    "npu.processes",
    title="no process holds an NPU before training",
    severity="major",
    reads=[NpuSmi],
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
    if procs:
        fix_command("kill " + " ".join(str(p) for p in sorted({p.pid for p in procs})))
    assert not procs, f"{len(procs)} process(es) hold NPUs: " + ", ".join(
        f"pid {p.pid} {p.name or '(no name)'} on NPU {p.npu_id}" for p in procs
    )


@check(
    "npu.device_nodes",
    title="/dev/davinciN exist for every chip npu-smi lists",
    severity="critical",
    reads=[NpuSmi, DeviceNodes],
    fix="Reload the driver so it recreates the device nodes (or check the container's device mounts)",
    command="ls -l /dev/davinci*",
    disruptive=True,
)
def test_device_nodes(host):
    chips = host.npu_smi.chips
    nodes = host.device_nodes.ids
    evidence(f"/dev/davinci{n}" for n in nodes)
    evidence(f"npu-smi lists {len(chips)} chip(s)")
    assert len(nodes) == len(chips), (
        f"{len(nodes)} /dev/davinciN device node(s) but npu-smi lists {len(chips)} chip(s)"
    )


@check(
    "npu.pci_functions",
    title="lspci shows one NPU function per chip npu-smi lists",
    severity="critical",
    reads=[NpuSmi, PciFunctions],
    fix="A function missing from lspci fell off the bus: reseat the card or check the slot in the BMC",
    command="lspci -D -nn -d 19e5:",
    disruptive=True,
)
def test_pci_functions(host):
    profile = host.profile
    functions = {d.bdf: d for d in host.pci_functions.npus}
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


_LABEL_RE = re.compile(r"(NPU|Phy-ID)(\d+)")


@check(
    "npu.topology",
    title="every two chips are linked as the profile expects (HCCS on an A2)",
    severity="major",
    reads=[NpuTopology, NpuSmi],
    fix="A pair without its chip-to-chip link talks over PCIe: check the NPU modules' seating and the "
    "HCCS ports (`npu-smi info -t hccs -i N`), then the BMC's hardware log",
    command="npu-smi info -t topo",
    disruptive=True,
)
def test_npu_topology(host):
    profile = host.profile
    want, within = profile.topology_link, profile.topology_link_within_npu
    if want is None:
        pytest.skip(f"the {profile.product} has no chip-to-chip link to check (PCIe only)")
    topology = host.npu_topology
    topo = topology.topo
    expected = profile.npu_count * profile.chips_per_npu
    evidence(f"`{topology.command}` lists {', '.join(topo.devices) or 'no devices'}")
    assert len(topo.devices) == expected, (
        f"`{topology.command}` lists {len(topo.devices)} chip(s), the {profile.product} has {expected}"
    )
    npu_of = _npu_of_label(host, topo.devices) if within is not None else {}
    bad, involved = [], set()
    for i, a in enumerate(topo.devices):
        for b in topo.devices[i + 1 :]:
            link = want if npu_of.get(a, a) != npu_of.get(b, b) else within
            got = {topo.link(a, b), topo.link(b, a)}
            if got != {link}:
                bad.append(f"{a}-{b} {'/'.join(sorted(got))}, should be {link}")
                involved.update((a, b))
    evidence(
        line for line in topology.text.splitlines() if line.split(None, 1)[:1] and line.split()[0] in involved
    )
    assert not bad, f"{len(bad)} chip pair(s) without the expected link: " + "; ".join(bad)


@check(
    "npu.numa_affinity",
    title="each chip's CPU affinity lies within one NUMA node (a rank bound to it stays on that node)",
    severity="minor",
    reads=[NpuTopology, NumaNodes],
    fix="Compare `npu-smi info -t topo` with `lscpu`: an affinity across nodes or outside every node means "
    "the BIOS NUMA settings (NUMA disabled, a changed die interleave) differ from what the driver reports; "
    "until fixed, such a rank cannot be bound to one node (`ascend-train --no-numa-bind` runs it unbound)",
    command="npu-smi info -t topo; grep -H . /sys/devices/system/node/node*/cpulist",
)
def test_npu_numa_affinity(host):
    if host.profile.topology_link is None:
        pytest.skip(f"the {host.profile.product} has no chip topology listing to read affinities from")
    topology, numa = host.npu_topology, host.numa_nodes
    affinity = topology.topo.cpu_affinity
    if not affinity:
        pytest.skip(f"`{topology.command}` prints no CPU affinity column on the {host.profile.product}")
    nodes = numa.nodes
    evidence(f"NUMA node{n}: CPUs {format_cpulist(cpus)}" for n, cpus in sorted(nodes.items()))
    if len(nodes) < 2:
        evidence(f"`{numa.command}` lists {len(nodes)} NUMA node(s): every rank runs on the one node")
        return
    across, outside, unknown = [], [], []
    for label, text in affinity.items():
        if not text or text == "NA":
            unknown.append(f"{label}: no CPU affinity ({text or 'empty'})")
            continue
        cpus = parse_cpulist(text)
        holding = sorted(n for n, node_cpus in nodes.items() if node_cpus & cpus)
        evidence(f"{label}: CPU Affinity {text} -> NUMA node(s) {holding or 'none'}")
        if not holding or not cpus <= set().union(*(nodes[n] for n in holding)):
            outside.append(f"{label}: CPU Affinity {text} lies outside every NUMA node")
        elif len(holding) > 1:
            across.append(f"{label}: CPU Affinity {text} spans NUMA nodes {holding}, so a rank bound to it "
                          "runs across nodes")
    if across or outside or unknown:
        warn("; ".join(across + outside + unknown))


def _npu_of_label(host, labels: list[str]) -> dict[str, int]:
    """Topology label (`NPU3`, `Phy-ID5`) -> the NPU (card) of that chip, from the `npu-smi info` table."""
    chips = host.npu_smi.chips
    by_phy = {c.phy_id: c.npu_id for c in chips if c.phy_id is not None}
    out, unknown = {}, []
    for label in labels:
        m = _LABEL_RE.fullmatch(label)
        npu = None
        if m and m[1] == "NPU":
            npu = int(m[2]) if int(m[2]) in {c.npu_id for c in chips} else None
        elif m:
            npu = by_phy.get(int(m[2]))
        if npu is None:
            unknown.append(label)
        out[label] = npu
    if unknown:
        not_judged(f"`npu-smi info` has no chip for topology device(s) {', '.join(unknown)}")
    return out
