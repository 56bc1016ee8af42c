"""`lspci` over the simulated PCI tree: the short listing and the `-vvv` dump of NPUs, their root ports
and the host CPU's own functions (Kunpeng on-die bridges, KAE engines, SAS/AHCI, USB, HNS3 NICs).

Layout and wording follow pciutils (ls-caps.c: TABs, `(downgraded)`/`(ok)` only on endpoints; the
`(prog-if ..)` of -v titles), the 910B `lspci -vvv` capture in the shared samples
(lspci-vvv_910b4-d802_link-downgraded) and, for the host functions, the Kunpeng captures named in
ascend_ready.sim.hw.profiles (names from pci.ids).
"""

from __future__ import annotations

from ascend_ready.sim.hw.profiles import (
    CLASS_NAMES,
    ENGINES,
    HOST_DEVICE_NAMES,
    KERNEL_MODULES,
    PROG_IF_NAMES,
)
from ascend_ready.sim.hw.state import NodeView, host_functions, present_functions, trained_link
from ascend_ready.sim.render.npu_smi import ToolError

VENDOR = "Huawei Technologies Co., Ltd."
USAGE = ("Usage: lspci [<switches>]\n\n"
         "Basic display modes:\n"
         "-mm\t\tProduce machine-readable output (single -m for an obsolete format)\n"
         "-t\t\tShow bus tree\n\n"
         "Display options:\n"
         "-v\t\tBe verbose (-vv or -vvv for higher verbosity)\n"
         "-k\t\tShow kernel drivers handling each device\n"
         "-n\t\tShow numeric ID's\n"
         "-nn\t\tShow both textual and numeric ID's (names & numbers)\n"
         "-D\t\tAlways show domain numbers\n\n"
         "Selection of devices:\n"
         "-s [[[[<domain>]:]<bus>]:][<slot>][.[<func>]]\tShow only devices in selected slots\n"
         "-d [<vendor>]:[<device>][:<class>]\t\tShow only devices with specified ID's\n")


def _gts(speed: float | None) -> str:
    if speed is None:
        return "unknown"
    return f"{speed:g}GT/s"


def _cmp(sta: float, cap: float) -> str:
    return " (downgraded)" if sta < cap else " (overdriven)" if sta > cap else " (ok)"


def devices(view: NodeView) -> list[dict]:
    """Every visible function by address: root ports (always there), present NPU functions, host functions."""
    state, prod = view.state, view.state["product"]
    present = {f["bdf"] for f in present_functions(state)}
    out: dict[str, dict] = {}
    for fn in state["pci_functions"]:
        rp = fn["root_port"]
        up = fn["bdf"] in present
        link = trained_link(fn) if up else {"speed": None, "width": 0}
        out[rp["bdf"]] = {"bdf": rp["bdf"], "kind": "port", "class": "0604", "prog_if": "00",
                          "device": rp["device"], "rev": rp["revision"], "fn": fn, "link": link, "up": up}
        if up:
            out[fn["bdf"]] = {"bdf": fn["bdf"], "kind": "npu", "class": "1200", "prog_if": "00",
                              "device": prod["pci_device"], "rev": prod["pci_revision"], "fn": fn,
                              "link": link, "up": True}
    for fn in host_functions(state):
        out[fn["bdf"]] = {"bdf": fn["bdf"], "kind": "host", "class": fn["class"][:4],
                          "prog_if": fn["class"][4:], "device": fn["device"], "rev": fn["revision"], "fn": fn}
    return [out[k] for k in sorted(out)]


def _name(dev: dict) -> str | None:
    """The pci.ids name; None where pci.ids has none (the 910B captures print `Device d802`)."""
    if dev["kind"] == "port":
        return "HiSilicon PCIe Root Port with Gen4"
    if dev["kind"] == "host":
        return HOST_DEVICE_NAMES.get(dev["device"])
    return None


def _title(dev: dict, numeric: int, domain: bool, verbose: bool) -> str:
    bdf = dev["bdf"] if domain else dev["bdf"][5:]
    cls = CLASS_NAMES.get(dev["class"], f"Class {dev['class']}")
    name = _name(dev)
    if numeric == 1:
        head = f"{bdf} {dev['class']}: 19e5:{dev['device']} (rev {dev['rev']})"
    elif numeric >= 2:
        named = f"{name} [19e5:{dev['device']}]" if name else f"Device [19e5:{dev['device']}]"
        head = f"{bdf} {cls} [{dev['class']}]: {VENDOR} {named} (rev {dev['rev']})"
    else:
        head = f"{bdf} {cls}: {VENDOR} {name or 'Device ' + dev['device']} (rev {dev['rev']})"
    # -v and up show the programming interface where it is not 00 or has a name (-n: numbers only).
    prog_name = None if numeric == 1 else PROG_IF_NAMES.get(dev["class"] + dev["prog_if"])
    if verbose and (prog_name or dev["prog_if"] != "00"):
        head += f" (prog-if {dev['prog_if']}" + (f" [{prog_name}]" if prog_name else "") + ")"
    return head


def _npu_detail(view: NodeView, dev: dict) -> list[str]:
    fn, prod, link = dev["fn"], view.state["product"], dev["link"]
    cap = fn["link_cap"]
    base = fn["bar_base"]
    lines = [
        f"\tSubsystem: {VENDOR} Device {prod['pci_subsys_device']}",
        "\tControl: I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr+ Stepping- SERR+ "
        "FastB2B- DisINTx+",
        "\tStatus: Cap+ 66MHz- UDF- FastB2B- ParErr- DEVSEL=fast >TAbort- <TAbort- <MAbort- "
        ">SERR- <PERR- INTx-",
        "\tLatency: 0, Cache Line Size: 32 bytes",
        f"\tInterrupt: pin A routed to IRQ {fn['irq']}",
        f"\tNUMA node: {fn['numa_node']}",
        f"\tRegion 0: Memory at {base + 0x1C20000000:x} (64-bit, prefetchable) [size=512M]",
        f"\tRegion 2: Memory at {base + 0x1C00000000:x} (64-bit, prefetchable) [size=512M]",
        f"\tRegion 4: Memory at {base:x} (64-bit, prefetchable) [size=64G]",
        "\tCapabilities: [40] Express (v2) Endpoint, MSI 00",
        "\t\tDevCap:\tMaxPayload 256 bytes, PhantFunc 0, Latency L0s unlimited, L1 unlimited",
        "\t\t\tExtTag+ AttnBtn- AttnInd- PwrInd- RBE+ FLReset- SlotPowerLimit 25.000W",
        "\t\tDevCtl:\tCorrErr+ NonFatalErr+ FatalErr+ UnsupReq+",
        "\t\t\tRlxdOrd+ ExtTag+ PhantFunc- AuxPwr- NoSnoop-",
        "\t\t\tMaxPayload 256 bytes, MaxReadReq 512 bytes",
        "\t\tDevSta:\tCorrErr+ NonFatalErr- FatalErr- UnsupReq+ AuxPwr+ TransPend-",
        f"\t\tLnkCap:\tPort #0, Speed {_gts(cap['speed'])}, Width x{cap['width']}, ASPM L0s L1, "
        "Exit Latency L0s <4us, L1 <8us",
        "\t\t\tClockPM- Surprise- LLActRep- BwNot- ASPMOptComp+",
        "\t\tLnkCtl:\tASPM Disabled; RCB 128 bytes Disabled- CommClk-",
        "\t\t\tExtSynch- ClockPM- AutWidDis- BWInt- AutBWInt-",
        f"\t\tLnkSta:\tSpeed {_gts(link['speed'])}{_cmp(link['speed'], cap['speed'])}, "
        f"Width x{link['width']}{_cmp(link['width'], cap['width'])}",
        "\t\t\tTrErr- Train- SlotClk- DLActive- BWMgmt- ABWMgmt-",
        "\t\tDevCap2: Completion Timeout: Range BCD, TimeoutDis+, NROPrPrP-, LTR-",
        "\t\t\t 10BitTagComp-, 10BitTagReq-, OBFF Not Supported, ExtFmt+, EETLPPrefix-",
        "\t\t\t EmergencyPowerReduction Not Supported, EmergencyPowerReductionInit-",
        "\t\t\t FRS-, TPHComp-, ExtTPHComp-",
        "\t\t\t AtomicOpsCap: 32bit- 64bit- 128bitCAS-",
        "\t\tDevCtl2: Completion Timeout: 4s to 13s, TimeoutDis-, LTR-, OBFF Disabled",
        "\t\t\t AtomicOpsCtl: ReqEn-",
        f"\t\tLnkCtl2: Target Link Speed: {_gts(cap['speed'])}, EnterCompliance- SpeedDis-",
        "\t\t\t Transmit Margin: Normal Operating Range, EnterModifiedCompliance- ComplianceSOS-",
        "\t\t\t Compliance De-emphasis: -6dB",
        "\t\tLnkSta2: Current De-emphasis Level: -3.5dB, EqualizationComplete+, EqualizationPhase1+",
        "\t\t\t EqualizationPhase2+, EqualizationPhase3+, LinkEqualizationRequest-",
        "\tCapabilities: [a0] MSI-X: Enable+ Count=256 Masked-",
        "\t\tVector table: BAR=0 offset=1fff0000",
        "\t\tPBA: BAR=0 offset=1fff4000",
        "\tCapabilities: [b0] Power Management version 3",
        "\t\tFlags: PMEClk- DSI- D1- D2- AuxCurrent=0mA PME(D0-,D1-,D2-,D3hot-,D3cold-)",
        "\t\tStatus: D0 NoSoftRst+ PME-Enable- DSel=0 DScale=0 PME-",
        "\tCapabilities: [100 v2] Advanced Error Reporting",
        "\t\tUESta:\tDLP- SDES- TLP- FCP- CmpltTO- CmpltAbrt- UnxCmplt- RxOF- MalfTLP- ECRC- "
        "UnsupReq- ACSViol-",
        "\t\tUEMsk:\tDLP- SDES- TLP- FCP- CmpltTO- CmpltAbrt- UnxCmplt- RxOF- MalfTLP- ECRC- "
        "UnsupReq+ ACSViol-",
        "\t\tUESvrt:\tDLP- SDES- TLP- FCP- CmpltTO- CmpltAbrt- UnxCmplt- RxOF- MalfTLP- ECRC- "
        "UnsupReq- ACSViol-",
        "\t\tCESta:\tRxErr- BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr+",
        "\t\tCEMsk:\tRxErr- BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr+",
        "\t\tAERCap:\tFirst Error Pointer: 00, ECRCGenCap+ ECRCGenEn- ECRCChkCap+ ECRCChkEn-",
        "\t\t\tMultHdrRecCap- MultHdrRecEn- TLPPfxPres- HdrLogCap-",
        "\t\tHeaderLog: 04000001 0000000f 01010000 85a9d217",
        "\tCapabilities: [150 v1] Alternative Routing-ID Interpretation (ARI)",
        "\t\tARICap:\tMFVC- ACS-, Next Function: 1",
        "\t\tARICtl:\tMFVC- ACS-, Function Group: 0",
        "\tCapabilities: [1a0 v1] Extended Capability ID 0x2e",
        "\tCapabilities: [200 v1] Single Root I/O Virtualization (SR-IOV)",
        "\t\tIOVCap:\tMigration-, Interrupt Message Number: 000",
        "\t\tIOVCtl:\tEnable- Migration- Interrupt- MSE- ARIHierarchy+",
        "\t\tIOVSta:\tMigration-",
        "\t\tInitial VFs: 12, Total VFs: 12, Number of VFs: 0, Function Dependency Link: 00",
        f"\t\tVF offset: 4, stride: 1, Device ID: {prod['pci_device']}",
        "\t\tSupported Page Size: 00000553, System Page Size: 00000001",
        f"\t\tRegion 0: Memory at {base + 0x1C70000000:016x} (64-bit, prefetchable)",
        f"\t\tRegion 2: Memory at {base + 0x1C40000000:016x} (64-bit, prefetchable)",
        f"\t\tRegion 4: Memory at {base + 0x1000000000:016x} (64-bit, prefetchable)",
        "\t\tVF Migration: offset: 00000000, BIR: 0",
        "\tCapabilities: [2a0 v1] Transaction Processing Hints",
        "\t\tDevice specific mode supported",
        "\t\tNo steering table available",
        "\tCapabilities: [310 v1] Secondary PCI Express",
        "\t\tLnkCtl3: LnkEquIntrruptEn-, PerformEqu-",
        "\t\tLaneErrStat: 0",
        "\tCapabilities: [3c0 v2] L1 PM Substates",
        "\t\tL1SubCap: PCI-PM_L1.2+ PCI-PM_L1.1+ ASPM_L1.2+ ASPM_L1.1+ L1_PM_Substates+",
        "\t\t\t  PortCommonModeRestoreTime=1us PortTPowerOnTime=10us",
        "\t\tL1SubCtl1: PCI-PM_L1.2- PCI-PM_L1.1- ASPM_L1.2- ASPM_L1.1-",
        "\t\t\t   T_CommonMode=0us LTR1.2_Threshold=0ns",
        "\t\tL1SubCtl2: T_PwrOn=10us",
        f"\tCapabilities: [4e0 v1] Device Serial Number {fn['dsn']}",
        "\tCapabilities: [630 v1] Access Control Services",
        "\t\tACSCap:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-",
        "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-",
        "\tCapabilities: [6d0 v1] Latency Tolerance Reporting",
        "\t\tMax snoop latency: 0ns",
        "\t\tMax no snoop latency: 0ns",
        "\tCapabilities: [700 v1] Data Link Feature <?>",
        "\tCapabilities: [70c v1] Lane Margining at the Receiver <?>",
        "\tCapabilities: [780 v1] Extended Capability ID 0x2a",
        "\tCapabilities: [880 v1] Physical Layer 16.0 GT/s <?>",
    ]
    if view.driver_version is not None:
        lines += ["\tKernel driver in use: devdrv_device_driver", f"\tKernel modules: {KERNEL_MODULES}"]
    return lines


def _port_detail(dev: dict) -> list[str]:
    rp, link = dev["fn"]["root_port"], dev["link"]
    sec = dev["fn"]["bdf"][5:7]
    active = "+" if dev["up"] else "-"
    return [
        "\tControl: I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- "
        "FastB2B- DisINTx+",
        "\tStatus: Cap+ 66MHz- UDF- FastB2B- ParErr- DEVSEL=fast >TAbort- <TAbort- <MAbort- "
        ">SERR- <PERR- INTx-",
        "\tLatency: 0, Cache Line Size: 32 bytes",
        f"\tBus: primary={rp['bdf'][5:7]}, secondary={sec}, subordinate={sec}, sec-latency=0",
        "\tCapabilities: [40] Power Management version 3",
        "\tCapabilities: [80] Express (v2) Root Port (Slot-), MSI 00",
        f"\t\tLnkCap:\tPort #0, Speed {_gts(rp['speed'])}, Width x{rp['width']}, ASPM not supported",
        "\t\t\tClockPM- Surprise- LLActRep+ BwNot+ ASPMOptComp+",
        f"\t\tLnkSta:\tSpeed {_gts(link['speed'])}, Width x{link['width']}",
        f"\t\t\tTrErr- Train- SlotClk- DLActive{active} BWMgmt- ABWMgmt-",
        "\tKernel driver in use: pcieport",
    ]


def _host_detail(dev: dict) -> list[str]:
    """An on-die function, modelled on the one captured Kunpeng on-die capability list (the SAS HBA's
    `lspci -v -s 74:02.0`, LKML 2025-06-03, Zenghui Yu: Express Root Complex Integrated Endpoint, MSI, PM):
    no link registers. Bridges show their bus numbers, engines their SR-IOV capability."""
    fn = dev["fn"]
    lines = [
        "\tControl: I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- "
        "FastB2B- DisINTx+",
        "\tStatus: Cap+ 66MHz- UDF- FastB2B- ParErr- DEVSEL=fast >TAbort- <TAbort- <MAbort- "
        ">SERR- <PERR- INTx-",
        "\tLatency: 0",
    ]
    if dev["class"] == "0604":
        sec = f"{fn['secondary']:02x}"
        lines += [f"\tBus: primary={fn['bdf'][5:7]}, secondary={sec}, subordinate={sec}, sec-latency=0",
                  f"\tNUMA node: {fn['numa_node']}",
                  "\tCapabilities: [40] Express (v2) Root Port (Slot-), MSI 00"]
    else:
        if fn["irq"]:
            lines.append(f"\tInterrupt: pin A routed to IRQ {fn['irq']}")
        lines += [f"\tNUMA node: {fn['numa_node']}",
                  "\tCapabilities: [40] Express (v2) Root Complex Integrated Endpoint, MSI 00",
                  "\tCapabilities: [80] MSI: Enable+ Count=32/32 Maskable+ 64bit+",
                  "\tCapabilities: [b0] Power Management version 3"]
        if "total_vfs" in fn:
            lines += ["\tCapabilities: [200 v1] Single Root I/O Virtualization (SR-IOV)",
                      f"\t\tInitial VFs: {fn['total_vfs']}, Total VFs: {fn['total_vfs']}, "
                      f"Number of VFs: {fn['num_vfs']}, Function Dependency Link: 00",
                      f"\t\tVF offset: 1, stride: 1, Device ID: {fn['vf_device']}"]
    if fn["driver"]:
        lines.append(f"\tKernel driver in use: {fn['driver']}")
    engine = next((e for pf, e in ENGINES.items() if fn["device"] in (pf, e[0])), None)
    if engine is not None:
        lines.append(f"\tKernel modules: {engine[1]}")
    return lines


def _driver(view: NodeView, dev: dict) -> str | None:
    if dev["kind"] == "host":
        return dev["fn"]["driver"]
    if dev["kind"] == "port":
        return "pcieport"
    return "devdrv_device_driver" if view.driver_version is not None else None


def _matches(dev: dict, slot: str | None, ids: str | None) -> bool:
    if slot is not None:
        want = slot.lower()
        if want.count(":") < 2:
            want = "0000:" + want if ":" in want else want
        if not dev["bdf"].endswith(want) and dev["bdf"] != want:
            return False
    if ids is not None:
        vendor, _, device = ids.lower().partition(":")
        if (vendor and vendor != "19e5") or (device and device != dev["device"]):
            return False
    return True


def run(view: NodeView, args: list[str]) -> str:
    """One `lspci` invocation; unsupported switches fail like pciutils (usage, exit 2)."""
    verbose, numeric, domain, kernel = 0, 0, False, False
    slot = ids = None
    it = iter(args)
    for arg in it:
        if arg in ("-s", "-d"):
            value = next(it, None)
            if value is None:
                raise ToolError(f"lspci: option requires an argument -- '{arg[1]}'\n" + USAGE, rc=2)
            slot, ids = (value, ids) if arg == "-s" else (slot, value)
        elif arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= set("vnDk"):
            verbose += arg.count("v")
            numeric += arg.count("n")
            domain = domain or "D" in arg
            kernel = kernel or "k" in arg
        else:
            bad = arg[1:2] if arg.startswith("-") else arg
            raise ToolError(f"lspci: invalid option -- '{bad}'\n" + USAGE, rc=2)
    out = []
    for dev in devices(view):
        if not _matches(dev, slot, ids):
            continue
        out.append(_title(dev, numeric, domain, verbose > 0))
        if verbose:
            detail = {"npu": lambda d: _npu_detail(view, d), "port": _port_detail, "host": _host_detail}
            out += [*detail[dev["kind"]](dev), ""]
        elif kernel and (driver := _driver(view, dev)) is not None:
            out.append(f"\tKernel driver in use: {driver}")
    return "".join(line + "\n" for line in out)
