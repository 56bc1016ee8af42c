"""`npu-smi` outputs rendered from a node view: the main-table model, `info -t ...`, `info -m`, `info -l`.

The main table itself is drawn by `npu_smi_table.render(model)`; everything else is key/value text in
the tool's `"\\t%-30s : %s"` format (npu-smi sources; TAB-indented in raw captures).
"""

from __future__ import annotations

import time

from ascend_ready.sim.hw import numa
from ascend_ready.sim.hw.faults import ERROR_INFO
from ascend_ready.sim.hw.state import (
    NodeView,
    find_npu,
    hbm_used,
    memory_used,
    present_npus,
    worst_health,
)
from ascend_ready.sim.render import npu_smi_table


class ToolError(Exception):
    """A vendor-tool failure: the text it prints (stdout) and its exit status."""

    def __init__(self, text: str, rc: int = 1):
        super().__init__(text)
        self.text, self.rc = text, rc


def kv(key: str, value) -> str:
    return f"\t{key:<30} : {value}\n"


def driver_major(view: NodeView) -> int:
    """Major of the installed driver (23 for 23.0.7), 0 when none is installed."""
    head = (view.driver_version or "").split(".")[0]
    return int(head) if head.isdigit() else 0


def layout_for(view: NodeView) -> str:
    """Main-table layout by product and installed driver: 310P -> 310p-106, 26.x -> 910-116, else 910-98."""
    if view.state["product"]["family"] == "310p":
        return "310p-106"
    return "910-116" if driver_major(view) >= 26 else "910-98"


def table_model(view: NodeView) -> dict:
    """The docs/design/simulator.md §3 model of `npu-smi info` for this node."""
    state, layout = view.state, layout_for(view)
    a3 = state["product"]["family"] == "910_93"
    p310 = layout.startswith("310")
    npus = []
    for npu in present_npus(state):
        chips = []
        for chip in npu["chips"]:
            chips.append({
                "chip_id": chip["chip_id"],
                "phy_id": chip["phy_id"] if a3 else None,
                "device_id": chip["logic_id"] if p310 else None,
                "name": chip["name"], "health": chip["health"], "power_w": chip["power_w"],
                "temp_c": chip["temp_c"], "bus_id": chip["bus_id"], "aicore_pct": chip["aicore_pct"],
                "memory_used_mb": memory_used(state, npu, chip), "memory_total_mb": chip["memory_total_mb"],
                "hbm_used_mb": None if p310 else hbm_used(state, npu, chip),
                "hbm_total_mb": None if p310 else chip["hbm_total_mb"],
                "hugepages_used": chip["hugepages_used"], "hugepages_total": chip["hugepages_total"],
            })
        first = chips[0]
        health = worst_health([c["health"] for c in chips])
        npus.append({"id": npu["id"], "name": first["name"], "health": health,
                     "power_w": first["power_w"], "temp_c": first["temp_c"], "chips": chips})
    present = {npu["id"] for npu in present_npus(state)}
    processes = [{"npu_id": p["npu_id"], "chip_id": p["chip_id"], "pid": p["pid"], "name": p["name"],
                  "memory_mb": p["memory_mb"], "container_pid": None}
                 for p in state["processes"] if p["npu_id"] in present]
    version = view.driver_version or "NA"
    return {"layout": layout, "tool_version": version, "driver_version": version, "npus": npus,
            "process_table": "present", "processes": processes}


def info(view: NodeView) -> str:
    return npu_smi_table.render(table_model(view))


# ---------------------------------------------------------------- info -t TYPE -i N [-c C]

def _npu(view: NodeView, npu_id: int) -> dict:
    npu = find_npu(view.state, npu_id)
    if npu is None:
        raise ToolError("Invalid card id.\n")
    return npu


def _chips(npu: dict, chip_id: int | None) -> list[dict]:
    if chip_id is None:
        return npu["chips"]
    if not 0 <= chip_id < len(npu["chips"]):
        raise ToolError("Invalid chip id.\n")
    return [npu["chips"][chip_id]]


def _head(npu: dict) -> str:
    return kv("NPU ID", npu["id"]) + kv("Chip Count", len(npu["chips"])) + "\n"


def board(view: NodeView, npu_id: int, chip_id: int | None = None) -> str:
    """Card board info (telegraf npu_smi fixture, 25.5.1); with -c, the chip's identity lines."""
    npu, prod = _npu(view, npu_id), view.state["product"]
    chips = _chips(npu, chip_id)
    firmware = view.firmware_version or prod["firmware_version"]
    if chip_id is not None:
        chip = chips[0]
        return (kv("NPU ID", npu["id"]) + kv("Chip ID", chip["chip_id"]) + kv("Chip Type", "Ascend")
                + kv("Chip Name", chip["name"]) + kv("Chip Version", "V1") + kv("Board ID", prod["board_id"])
                + kv("PCB ID", "A") + kv("BOM ID", 1) + kv("PCIe Bus Info", chip["bus_id"])
                + kv("Firmware Version", firmware))
    return "".join([
        kv("NPU ID", npu["id"]), kv("Product Name", prod["product_name"]), kv("Model", "NA"),
        kv("Manufacturer", "Huawei"), kv("Serial Number", npu["serial"]),
        kv("Software Version", view.driver_version or "NA"), kv("Firmware Version", firmware),
        kv("Compatibility", "OK"), kv("Board ID", prod["board_id"]), kv("PCB ID", "A"), kv("BOM ID", 1),
        kv("PCIe Bus Info", npu["chips"][0]["bus_id"]), kv("Slot ID", npu["slot_id"]), kv("Class ID", "NA"),
        kv("PCI Vendor ID", "0x19E5"), kv("PCI Device ID", f"0x{prod['pci_device'].upper()}"),
        kv("Subsystem Vendor ID", "0x19E5"),
        kv("Subsystem Device ID", f"0x{prod['pci_subsys_device'].upper()}"),
        kv("Chip Count", len(npu["chips"])),
    ])


def health(view: NodeView, npu_id: int, chip_id: int | None = None) -> str:
    """Health with error codes; information lines continue under an empty key, blank-line separated
    (MindCluster FaultDiag capture of `npu-smi info -i 0 -c 0 -t health`)."""
    chips = _chips(_npu(view, npu_id), chip_id)
    codes = [code for chip in chips for code in chip["error_codes"]]
    out = kv("Health Status", worst_health([c["health"] for c in chips]))
    if not codes:
        return out + kv("Error Code", "NA") + kv("Error Information", "NA")
    out += kv("Error Code", " ".join(codes))
    infos = [ERROR_INFO.get(code, "NA") for code in codes]
    out += kv("Error Information", infos[0])
    return out + "".join("\n" + kv("", text) for text in infos[1:])


def temp(view: NodeView, npu_id: int, chip_id: int | None = None) -> str:
    """Chip temperatures then the board MCU sensors (telegraf fixture, 25.5.1)."""
    npu = _npu(view, npu_id)
    chips = _chips(npu, chip_id)
    body = "\n".join(kv("NPU Temperature (C)", c["temp_c"]) + kv("Chip ID", c["chip_id"]) for c in chips)
    if chip_id is not None:
        return body
    mcu = npu["chips"][0]["temp_c"] - 3
    board = kv("LM75A_TE (C)", mcu) + kv("LM75B_TE (C)", mcu) + kv("Chip Name", "MCU")
    return _head(npu) + body + "\n" + board


def _pct(used: int, total: int) -> int:
    return used * 100 // total if total else 0


def usages(view: NodeView, npu_id: int, chip_id: int | None = None) -> str:
    """Utilisation rates; 25.x drivers add Aivector/NPU Utilization/Aicube (telegraf fixture, 25.5.1)."""
    state, npu = view.state, _npu(view, npu_id)
    new_keys = driver_major(view) >= 25
    sections = []
    for chip in _chips(npu, chip_id):
        hbm = bool(chip["hbm_total_mb"])
        lines = [kv("DDR Capacity(MB)", chip["memory_total_mb"]),
                 kv("DDR Usage Rate(%)", _pct(memory_used(state, npu, chip), chip["memory_total_mb"])),
                 kv("DDR Hugepages Total(page)", chip["hugepages_total"]),
                 kv("DDR Hugepages Usage Rate(%)", _pct(chip["hugepages_used"], chip["hugepages_total"]))]
        if hbm:
            lines += [kv("HBM Capacity(MB)", chip["hbm_total_mb"]),
                      kv("HBM Usage Rate(%)", _pct(hbm_used(state, npu, chip), chip["hbm_total_mb"]))]
        lines.append(kv("Aicore Usage Rate(%)", chip["aicore_pct"]))
        if new_keys:
            lines.append(kv("Aivector Usage Rate(%)", chip["aicore_pct"]))
        lines += [kv("Aicpu Usage Rate(%)", 0), kv("Ctrlcpu Usage Rate(%)", chip["ctrlcpu_pct"]),
                  kv("DDR Bandwidth Usage Rate(%)", 0)]
        if hbm:
            lines.append(kv("HBM Bandwidth Usage Rate(%)", 0))
        if new_keys:
            lines += [kv("NPU Utilization(%)", chip["aicore_pct"]),
                      kv("Aicube Usage Rate(%)", chip["aicore_pct"])]
        lines.append(kv("Chip ID", chip["chip_id"]))
        sections.append("".join(lines))
    body = "\n".join(sections)
    return body if chip_id is not None else _head(npu) + body


def _power(chip: dict) -> str:
    return "NA" if chip["power_w"] is None else f"{chip['power_w']:.1f}"


def power(view: NodeView, npu_id: int, chip_id: int | None = None) -> str:
    """Power: card level 'Power Dissipation(W)', chip level 'NPU Real-time Power(W)' (npu-smi sources:
    npu_get_power_info; 310P chips answer not-supported)."""
    npu = _npu(view, npu_id)
    chips = _chips(npu, chip_id)
    if chip_id is None:
        return kv("Power Dissipation(W)", _power(npu["chips"][0]))
    if view.state["product"]["family"] == "310p":
        raise ToolError("This device does not support querying power.\n", rc=255)
    return kv("NPU Real-time Power(W)", _power(chips[0]))


def common(view: NodeView, npu_id: int, chip_id: int | None = None) -> str:
    """Common info: per chip usage/frequency/temperature/power, then the MCU (npu-smi sources
    print_chip_common_info; sample outputs in gpustack's npu_smi detector docstring)."""
    state, npu = view.state, _npu(view, npu_id)
    sections = []
    for chip in _chips(npu, chip_id):
        lines = [kv("Chip ID", chip["chip_id"]),
                 kv("Memory Usage Rate(%)", _pct(memory_used(state, npu, chip), chip["memory_total_mb"]))]
        if chip["hbm_total_mb"]:
            lines.append(kv("HBM Usage Rate(%)", _pct(hbm_used(state, npu, chip), chip["hbm_total_mb"])))
        busy, freq, temp_c = chip["aicore_pct"], 800 if not chip["aicore_pct"] else 1800, chip["temp_c"]
        hot = throttled(chip)
        if hot is not None:  # past the fault's delay: loaded, hot and clocked down (sim/hw/faults.py)
            busy, freq, temp_c = 100, hot["freq_mhz"], hot["temp_c"]
        lines += [kv("Aicore Usage Rate(%)", busy), kv("Aicore Freq(MHZ)", 1800),
                  kv("Aicore curFreq(MHZ)", freq)]
        if chip["hbm_total_mb"]:
            lines.append(kv("Aicore Count", 20))
        lines.append(kv("Temperature(C)", temp_c))
        if chip["power_w"] is not None:
            lines.append(kv("NPU Real-time Power(W)", _power(chip)))
        sections.append("".join(lines))
    body = "\n".join(sections)
    if chip_id is not None:
        return kv("NPU ID", npu["id"]) + body
    mcu = kv("Chip Name", "mcu") + kv("Temperature(C)", npu["chips"][0]["temp_c"] - 3)
    return _head(npu) + body + "\n" + mcu


def throttled(chip: dict, now: float | None = None) -> dict | None:
    """The chip's npu-throttle-after fault once its delay has passed (None before, or without one)."""
    hot = chip.get("throttle_after")
    if hot is None or (time.time() if now is None else now) < hot["since"] + hot["after_s"]:
        return None
    return hot


def ecc(view: NodeView, npu_id: int, chip_id: int | None = None) -> str:
    """ECC counts per chip as npu-smi 23.0.5 prints them (the `npu-smi info -i 0 -t ecc` echo of MindCluster's
    fault-diagnosis guide, Ascend/mind-cluster docs/zh/faultdiag/user_guide.md, kept in
    tests/parsers/real/): keys padded to 40 (the DCMI sample prints them with `%-40s`), DDR then HBM, each
    with its current single/double-bit counts, their aggregate totals and isolated pages, and the chip's
    id closing its section. chip["ecc"] holds e.g. {"hbm_double": 2, "hbm_double_pages": 1} (0 where
    not named); nothing clears a simulated chip's counts, so its current count is its aggregate too."""
    def line(key: str, value) -> str:
        return f"\t{key:<40} : {value}\n"

    npu = _npu(view, npu_id)
    sections = []
    for chip in _chips(npu, chip_id):
        counts = chip.get("ecc", {})
        lines = []
        for mem in ("DDR", "HBM") if chip["hbm_total_mb"] else ("DDR",):
            got = {k: counts.get(f"{mem.lower()}_{k}", 0) for k in ("single", "double", "single_pages",
                                                                    "double_pages")}
            lines += [line(f"{mem} Single Bit Error Count", got["single"]),
                      line(f"{mem} Double Bit Error Count", got["double"]),
                      line(f"{mem} Single Bit Aggregate Total Err Cnt", got["single"]),
                      line(f"{mem} Double Bit Aggregate Total Err Cnt", got["double"]),
                      line(f"{mem} Single Bit Isolated Pages Count", got["single_pages"]),
                      line(f"{mem} Double Bit Isolated Pages Count", got["double_pages"])]
        lines.append(line("Chip ID", chip["chip_id"]))
        sections.append("".join(lines))
    body = "\n".join(sections)
    if chip_id is not None:
        return line("NPU ID", npu["id"]) + body
    return line("NPU ID", npu["id"]) + line("Chip Count", len(npu["chips"])) + "\n" + body


INFO_TYPES = {"board": board, "health": health, "temp": temp, "usages": usages, "power": power,
              "common": common, "ecc": ecc}


# ---------------------------------------------------------------- info -t topo

_TOPO_LEGEND = ("Legend:\n\n"
                "  X    = Self\n"
                "  SYS  = Path traversing PCIe and NUMA nodes. Nodes are connected through SMP, such as QPI, "
                "UPI.\n"
                "  PHB  = Path traversing PCIe and the PCIe host bridge of a CPU.\n"
                "  PIX  = Path traversing a single PCIe switch\n"
                "  PXB  = Path traversing multipul PCIe switches\n"
                "  HCCS = Connection traversing HCCS.\n")
_A3_LEGEND = ("  SIO  = Path traversing the SIO bus\n"
              "  HCCS_SW = Connection traversing HCCS through a switch\n")


def topo(view: NodeView) -> str:
    """`npu-smi info -t topo`: a TAB and 3 spaces, then `%-11s` per device, one `%-11s` row per device,
    the legend. A2 (ArthurChiao 910B1 and ms-swift 910B3 captures): NPU<logic id>, all HCCS, and the CPU
    Affinity of the chip's NUMA node (24 cores each on the 192-core host, sim/hw/numa.py; the node of
    bus B is B * 8 // 256, which matches the captured order C1/01/C2/02/81/41/82/42 ->
    144-167/0-23/.../48-71). A3 (sglang#30453 capture):
    Phy-ID<n>, SIO between the two chips of an NPU, HCCS_SW across NPUs, no affinity column."""
    state = view.state
    family = state["product"]["family"]
    if family == "310p":  # no capture of an inference card's topology: refused like an unknown type
        raise ToolError(TOPO_UNKNOWN)
    chips = [(npu, chip) for npu in present_npus(state) for chip in npu["chips"]]
    if family == "910_93":
        labels = [f"Phy-ID{chip['phy_id']}" for _npu, chip in chips]
        npu_of = [npu["id"] for npu, _chip in chips]

        def link(a: int, b: int) -> str:
            return "SIO" if npu_of[a] == npu_of[b] else "HCCS_SW"
        affinity = None
        legend = _TOPO_LEGEND + _A3_LEGEND
    else:
        labels = [f"NPU{chip['logic_id']}" for _npu, chip in chips]

        def link(a: int, b: int) -> str:
            return "HCCS"
        host = numa.host_cpu(state) or numa.KUNPENG_920_4P  # a state.json from before host_cpu existed
        affinity = [numa.cpulist(numa.node_cpus(host, numa.npu_node(host, chip["bus_id"])))
                    for _npu, chip in chips]
        legend = _TOPO_LEGEND
    head = "\t   " + "".join(f"{label:<11}" for label in labels) + ("CPU Affinity" if affinity else "")
    rows = [(f"{a:<11}" + "".join(f"{'X' if i == j else link(i, j):<11}" for j in range(len(labels)))
             + (affinity[i] if affinity else "")).rstrip() for i, a in enumerate(labels)]
    return "\n".join([head.rstrip(), *rows]) + "\n\n" + legend + "  NA   = Unknown relationship.\n"


TOPO_UNKNOWN = ("Usage: npu-smi info [-t <type> -i <id> [-c <chip_id>]] | info -t topo | info -m | info -l\n"
                "    type: board, health, temp, usages, power, common\n")


# ---------------------------------------------------------------- info -m / info -l

def mapping(view: NodeView) -> str:
    """`npu-smi info -m`: TAB, 31-wide columns; header and Mcu rows pad the last column to 30, chip rows
    do not (ts-probe fixture of a 25.5.1 910B3 host)."""
    def row(*cols: str, pad_last: bool) -> str:
        head = "".join(f"{c:<31}" for c in cols[:-1])
        return "\t" + head + (f"{cols[-1]:<30}" if pad_last else cols[-1]) + "\n"

    out = row("NPU ID", "Chip ID", "Chip Logic ID", "Chip Name", pad_last=True)
    name = view.state["product"]["m_chip_name"]
    for npu in present_npus(view.state):
        for chip in npu["chips"]:
            out += row(str(npu["id"]), str(chip["chip_id"]), str(chip["logic_id"]), name, pad_last=False)
        out += row(str(npu["id"]), str(len(npu["chips"])), "-", "Mcu", pad_last=True)
    return out


def listing(view: NodeView) -> str:
    """`npu-smi info -l` (telegraf fixture listOutput)."""
    npus = present_npus(view.state)
    blocks = [kv("Total Count", len(npus))]
    blocks += [kv("NPU ID", npu["id"]) + kv("Chip Count", len(npu["chips"])) for npu in npus]
    return "\n".join(blocks)
