"""Fault injection on a node's hardware state: the catalogue (FAULTS), pure inject/clear, root edits.

Each fault both changes the state fields the vendor tools render and is recorded in state["faults"],
so `clear_faults` can rebuild the healthy state and the node view can resolve NIC overrides.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ascend_ready.errors import SimError
from ascend_ready.sim.hw.state import find_chip_by_logic, find_npu, initial_state

#: Error codes and their `npu-smi info -t health` information lines. The Alarm trio is the MindCluster
#: FaultDiag capture (npu-smi-info-t-health_alarm-multicode sample); Warning reuses its process-manager code.
ERROR_INFO = {
    "A4025021": "ascend_monitor adda heart beat lost error",
    "8C03A000": "node type=process-manager, sensor type=General Software, "
                "event state=The process start failed or exit abnormally",
    "8C084E00": "node type=adda, sensor type=Heartbeat Sensor, event state=Heartbeat Lost.",
}
DEFAULT_CODES = {"Warning": ["8C03A000"], "Alarm": ["A4025021", "8C03A000", "8C084E00"],
                 "Critical": ["A4025021"]}


@dataclass(frozen=True)
class FaultSpec:
    """One fault kind: what it breaks, which tool outputs show it, and its parameters (name -> default)."""

    description: str
    shows_in: tuple[str, ...]
    params: dict = field(default_factory=dict)
    param_help: dict = field(default_factory=dict)


FAULTS: dict[str, FaultSpec] = {
    "chip-health": FaultSpec(
        "chip health degraded with error codes", ("npu-smi info", "npu-smi info -t health"),
        {"npu": None, "chip": 0, "level": "Alarm", "codes": None},
        {"npu": "NPU id (default: first)", "chip": "chip id within the NPU",
         "level": "Warning | Alarm | Critical", "codes": "hex error codes (default per level)"}),
    "hot-chip": FaultSpec(
        "chip running hot", ("npu-smi info", "npu-smi info -t temp", "npu-smi info -t common"),
        {"npu": None, "chip": 0, "temp_c": 96}, {"temp_c": "chip temperature in C"}),
    "stray-process": FaultSpec(
        "a leftover process holds device memory",
        ("npu-smi info", "npu-smi info -t usages", "npu-smi info -t common"),
        {"npu": None, "chip": 0, "pid": 31337, "name": "python3", "memory_mb": 20480},
        {"memory_mb": "memory the process holds (HBM on 910, DDR on 310P)"}),
    "pcie-width": FaultSpec(
        "NPU PCIe link trained at a reduced width", ("sysfs", "lspci -vvv", "dmesg"),
        {"npu": None, "width": 8}, {"width": "trained lane count"}),
    "pcie-speed": FaultSpec(
        "NPU PCIe link trained at a reduced speed", ("sysfs", "lspci -vvv", "dmesg"),
        {"npu": None, "speed": 8.0}, {"speed": "trained speed in GT/s"}),
    "npu-missing": FaultSpec(
        "an NPU fell off the PCIe bus", ("sysfs", "lspci", "npu-smi info", "/dev/davinci*", "dmesg"),
        {"npu": None}, {}),
    "link-down": FaultSpec(
        "device RoCE port link DOWN", ("hccn_tool -link", "hccn_tool -net_health", "hccn_tool -link_stat",
                                       "hccn_tool -ping", "hccn_tool -optical"),
        {"device": 0}, {"device": "device (logic) id"}),
    "net-health-fault": FaultSpec(
        "device network health check fails", ("hccn_tool -net_health",), {"device": 0, "status": "Fault"},
        {"status": "reported status: Fault | Socket failed | Init"}),
    "device-ip-missing": FaultSpec(
        "device NIC has no IP address", ("hccn_tool -ip", "hccn_tool -ping"), {"device": 0}, {}),
    "device-ip-duplicate": FaultSpec(
        "device NIC carries another device's IP (of this node, or of a peer: a copied hccn.conf)",
        ("hccn_tool -ip", "hccn_tool -ping"), {"device": 1, "same_as": 0, "peer": None, "address": None,
                                               "netmask": None},
        {"same_as": "device whose address is copied (with peer: the peer's; default: device)",
         "peer": "copy from this node's device (ascend-sim fault reads its address)",
         "address": "carry this address instead (netmask: the device's own unless given)"}),
    "tls-mismatch": FaultSpec(
        "one device's TLS switch differs", ("hccn_tool -tls",), {"device": 0, "enable": 1}, {}),
    "driver-version-drift": FaultSpec(
        "installed driver version.info differs from the fleet (apply_root_faults)",
        ("driver version.info", "npu-smi info", "npu-smi info -t board"), {"version": "23.0.6"}, {}),
    "firmware-version-drift": FaultSpec(
        "installed firmware version.info differs from the fleet (apply_root_faults)",
        ("firmware version.info", "npu-smi info -t board"), {"version": "7.1.0.5.220"}, {}),
    "npu-smi-hang": FaultSpec("npu-smi blocks forever", ("npu-smi",), {}, {}),
    "clock-unsynced": FaultSpec(
        "the time daemon lost its NTP source", ("chronyc tracking",), {}, {}),
    # chronyd still synchronised (Leap status Normal) while it slews a clock that is far off: its System
    # time line says how far (the shape of a real capture: zabbix-tooling/zabbix-agent-extensions#39)
    "clock-offset": FaultSpec(
        "the system clock is off NTP time (+ fast, - slow) while chronyd slews it", ("chronyc tracking",),
        {"seconds": 612.0}, {"seconds": "offset of the system clock from NTP time (+ fast, - slow)"}),
    # Not a defect: what `echo N > /sys/bus/pci/devices/<engine>/sriov_numvfs` does on a Kunpeng host (KAE
    # setups for containers and VMs), so the host's accelerator VFs show in lspci and sysfs.
    "accelerator-vfs": FaultSpec(
        "SR-IOV on for the host CPU's accelerator engines (Kunpeng ZIP/SEC/HPRE): their VFs appear",
        ("sysfs", "lspci"), {"count": 2, "engine": "all"},
        {"count": "VFs per engine (0 turns SR-IOV off)", "engine": "zip | sec | hpre | all"}),
    # ---- performance faults (issue 29): what ascend-dmi measures (sim/render/ascend_dmi.py). A chip that
    # clocks down under load keeps passing npu-smi's health: only a measurement shows it (the toolbox guide:
    # above 90 C the chip throttles, toolboxug_0016); degraded HBM likewise (ascend-dmi --dg -i hbm);
    # a downed HCCS link leaves the pair to copy through the host over PCIe.
    "npu-throttle": FaultSpec(
        "chips clock down under load (heat, power cap): their TFLOPS drop", ("ascend-dmi -f",),
        {"npu": None, "chip": None, "factor": 0.6},
        {"npu": "NPU id, or 'all' (default: first)", "chip": "chip id (default: every chip of the NPU)",
         "factor": "fraction of the healthy TFLOPS the chip reaches"}),
    # A chip that passes at first and throttles once its load has run a while: after `after_s` seconds
    # `npu-smi info -t common` shows it loaded, above the 90 C at which the toolbox guide says the chip
    # throttles (toolboxug_0016), with its AI Core clock below the rated one: the "Aicore curFreq(MHZ)"
    # under "Aicore Freq(MHZ)" that npu-smi prints for a frequency reduction (telegraf's npu_smi fixture
    # prints both keys). The delay counts from the injection, which a burn-in starts right after.
    "npu-throttle-after": FaultSpec(
        "a chip heats up under load and clocks down after N seconds (npu-smi info -t common)",
        ("npu-smi info -t common",),
        {"npu": None, "chip": 0, "after_s": 30.0, "temp_c": 97, "freq_mhz": 1000},
        {"after_s": "seconds after the injection before the chip throttles",
         "temp_c": "the chip's temperature once throttled", "freq_mhz": "its AI Core clock then"}),
    "hbm-degraded": FaultSpec(
        "a chip's device memory runs slow", ("ascend-dmi --bw -t d2d",),
        {"npu": None, "chip": 0, "factor": 0.5},
        {"factor": "fraction of the healthy HBM bandwidth"}),
    "hccs-link-down": FaultSpec(
        "the HCCS link between two devices is down: they copy through the host", ("ascend-dmi --bw -t p2p",),
        {"device": 0, "other": 1},
        {"device": "device (logic) id", "other": "the device at the link's other end"}),
    # ---- silent data corruption (issue 30): a device that returns wrong bits for a fixed kernel, every
    # time, and passes every health check (sim/hw/sdc_hook.py; Meta's and Google's mercurial cores)
    "sdc": FaultSpec(
        "a device returns wrong bits for one kernel, every time, with no error (silent data corruption)",
        ("the training interpreter's torch.matmul (npu.sdc)",),
        {"device": 0, "bit": 3, "index": 0, "kernel": "matmul"},
        {"device": "device (logic) id; on the simulator's CPU torch, the job's rank N (LOCAL_RANK)",
         "bit": "the bit of the element that flips (0: the lowest mantissa bit)",
         "index": "the element of the result (flattened) that is wrong", "kernel": "matmul"}),
}
_ENGINE_DEVICES = {"zip": "a250", "sec": "a255", "hpre": "a258"}


_INT_PARAMS = {"npu", "chip", "temp_c", "freq_mhz", "pid", "memory_mb", "width", "device", "same_as",
               "enable", "count", "other", "bit", "index"}


def _coerce(kind: str, name: str, value):
    """Parameters also arrive as strings (`ascend-sim fault node01 hot-chip temp_c=99`)."""
    try:
        if name == "npu" and value == "all":
            return value
        if name == "factor":
            factor = float(value)
            if not 0 < factor <= 1:
                raise SimError(f"fault {kind}: factor={value!r} must be in (0, 1]")
            return factor
        if name in _INT_PARAMS and value is not None:
            return int(value)
        if name in ("speed", "seconds", "after_s"):
            return float(value)
    except (TypeError, ValueError):
        raise SimError(f"fault {kind}: {name}={value!r} is not a number") from None
    if name == "codes" and isinstance(value, str):
        return value.replace(",", " ").split()
    return value


def _params(kind: str, given: dict) -> dict:
    spec = FAULTS[kind]
    unknown = set(given) - set(spec.params)
    if unknown:
        raise SimError(f"fault {kind}: unknown parameter(s) {', '.join(sorted(unknown))}",
                       hint=f"parameters of {kind}: {', '.join(spec.params) or 'none'}")
    return {name: _coerce(kind, name, value) for name, value in {**spec.params, **given}.items()}


def _chip(state: dict, params: dict) -> tuple[dict, dict]:
    npu_id = params["npu"] if params["npu"] is not None else state["npus"][0]["id"]
    npu = find_npu(state, npu_id, present_only=False)
    if npu is None or not 0 <= params.get("chip", 0) < len(npu["chips"]):
        raise SimError(f"no NPU {npu_id} chip {params.get('chip', 0)} on {state['node']['name']}")
    params["npu"] = npu_id
    return npu, npu["chips"][params.get("chip", 0)]


def _function(state: dict, params: dict) -> dict:
    npu = _chip(state, params)[0]
    return next(f for f in state["pci_functions"] if f["npu_id"] == npu["id"])


def _device(state: dict, key: str, params: dict) -> dict:
    hit = find_chip_by_logic(state, params[key])
    if hit is None or hit[1]["nic"] is None:
        raise SimError(f"no device NIC {params[key]} on {state['node']['name']} ({state['hardware']})")
    return hit[1]


def inject_fault(state: dict, kind: str, **params) -> dict:
    """A copy of `state` with fault `kind` applied (see FAULTS for kinds and parameters)."""
    if kind not in FAULTS:
        raise SimError(f"unknown fault {kind!r}", hint=f"known faults: {', '.join(FAULTS)}")
    new = copy.deepcopy(state)
    p = _params(kind, params)
    if kind == "chip-health":
        if p["level"] not in DEFAULT_CODES:
            raise SimError(f"chip-health level must be one of {', '.join(DEFAULT_CODES)}, not {p['level']!r}")
        _npu, chip = _chip(new, p)
        chip["health"] = p["level"]
        chip["error_codes"] = list(p["codes"] or DEFAULT_CODES[p["level"]])
    elif kind == "hot-chip":
        _chip(new, p)[1]["temp_c"] = int(p["temp_c"])
    elif kind == "npu-throttle-after":
        if p["after_s"] < 0 or not 0 < p["freq_mhz"] < 1800:
            raise SimError("npu-throttle-after: after_s >= 0 and freq_mhz in 1..1799 (rated: 1800)")
        _chip(new, p)[1]["throttle_after"] = {"since": time.time(), "after_s": p["after_s"],
                                              "temp_c": p["temp_c"], "freq_mhz": p["freq_mhz"]}
    elif kind == "stray-process":
        npu, chip = _chip(new, p)
        new["processes"].append({"npu_id": npu["id"], "chip_id": chip["chip_id"], "pid": int(p["pid"]),
                                 "name": p["name"], "memory_mb": int(p["memory_mb"])})
    elif kind == "pcie-width":
        fn = _function(new, p)
        fn["link_trained"] = {"speed": min(fn["link_cap"]["speed"], fn["root_port"]["speed"]),
                              "width": int(p["width"])}
    elif kind == "pcie-speed":
        fn = _function(new, p)
        fn["link_trained"] = {"speed": float(p["speed"]),
                              "width": min(fn["link_cap"]["width"], fn["root_port"]["width"])}
    elif kind == "npu-missing":
        _chip(new, p)[0]["present"] = False
    elif kind == "link-down":
        nic = _device(new, "device", p)["nic"]
        nic["link"] = "DOWN"
        nic["link_events"].append([nic["link_events"][-1][0] + 3600, "DOWN"])
    elif kind == "net-health-fault":
        _device(new, "device", p)["nic"]["net_health"] = p["status"]
    elif kind in ("device-ip-missing", "tls-mismatch"):
        _device(new, "device", p)
    elif kind == "device-ip-duplicate":
        _device(new, "device", p)
        for key in ("address", "netmask"):
            if p[key] is not None and not _is_ipv4(p[key]):
                raise SimError(f"device-ip-duplicate: {key}={p[key]!r} is not an IPv4 address")
        if p["address"] is None:
            if p["peer"] is not None:
                raise SimError("device-ip-duplicate: a peer's address is read by `ascend-sim fault`",
                               hint="here, give the address itself: address=A.B.C.D")
            _device(new, "same_as", p)
    elif kind == "npu-smi-hang":
        new["hang"] = sorted({*new["hang"], "npu-smi"})
    elif kind == "clock-unsynced":
        new["clock_synced"] = False
    elif kind == "clock-offset":
        new["clock_offset_s"] = float(p["seconds"])
    elif kind == "accelerator-vfs":
        _set_vfs(new, p)
    elif kind in ("npu-throttle", "hbm-degraded"):
        _set_perf(new, kind, p)
    elif kind == "hccs-link-down":
        for key in ("device", "other"):
            if find_chip_by_logic(new, p[key]) is None:
                raise SimError(f"hccs-link-down: no device {p[key]} on {new['node']['name']}")
        if p["device"] == p["other"]:
            raise SimError("hccs-link-down: a link joins two different devices")
        new.setdefault("hccs_down", []).append(sorted((p["device"], p["other"])))
    elif kind == "sdc":
        if find_chip_by_logic(new, p["device"]) is None:
            raise SimError(f"sdc: no device {p['device']} on {new['node']['name']}")
        if p["kernel"] != "matmul" or not 0 <= p["bit"] < 16 or p["index"] < 0:
            raise SimError("sdc: kernel=matmul, bit in 0..15 (every dtype has them), index >= 0")
    new["fault_seq"] = new.get("fault_seq", 0) + 1
    new["faults"].append({"id": new["fault_seq"], "kind": kind, "params": p})
    return new


def _is_ipv4(value) -> bool:
    try:
        ipaddress.IPv4Address(str(value))
    except ValueError:
        return False
    return True


def _set_perf(state: dict, kind: str, params: dict) -> None:
    """npu-throttle / hbm-degraded: the measured fraction on the chips named (all NPUs with npu=all)."""
    what = "flops" if kind == "npu-throttle" else "hbm"
    if params["npu"] == "all":
        chips = [c for n in state["npus"] for c in n["chips"]]
    elif params.get("chip") is None:
        npu = _chip(state, {**params, "chip": 0})[0]
        params["npu"] = npu["id"]
        chips = npu["chips"]
    else:
        chips = [_chip(state, params)[1]]
    for chip in chips:
        chip.setdefault("perf", {})[what] = params["factor"]


def _set_vfs(state: dict, params: dict) -> None:
    engine = params["engine"]
    wanted = set(_ENGINE_DEVICES.values()) if engine == "all" else {_ENGINE_DEVICES.get(engine)}
    engines = [f for f in state.get("host_functions", []) if f["device"] in wanted]
    if not engines:
        what = "accelerator engine" if engine == "all" else f"{engine} accelerator engine"
        raise SimError(f"no {what} on {state['node']['name']} ({state['hardware']})",
                       hint="the Kunpeng hosts of atlas-800t-a2/a3 have them; engine: zip | sec | hpre | all")
    for fn in engines:
        if not 0 <= params["count"] <= fn["total_vfs"]:
            raise SimError(f"accelerator-vfs: count {params['count']} is outside 0..{fn['total_vfs']}")
        fn["num_vfs"] = params["count"]


def clear_faults(state: dict) -> dict:
    """The healthy state of the same node (fault ids keep counting so stamps never repeat)."""
    node = state["node"]
    new = initial_state(state["hardware"], node_index=node["index"], node_name=node["name"])
    new["fault_seq"] = state.get("fault_seq", 0)
    return new


# ---------------------------------------------------------------- faults that edit node files

# (file, keys that carry the version): the driver's package_version is its own version, while the
# firmware's package_version names the HDK package it came in and stays.
_VERSION_FILES = {"driver-version-drift": ("usr/local/Ascend/driver/version.info",
                                           ("Version", "package_version")),
                  "firmware-version-drift": ("usr/local/Ascend/firmware/version.info", ("Version",))}
_ORIGINALS = "var/lib/ascend-sim/runtime/root-faults.json"


def _with_version(text: str, version: str, keys: tuple[str, ...]) -> str:
    out = []
    for line in text.splitlines(keepends=True):
        key = line.split("=", 1)[0]
        out.append(f"{key}={version}\n" if key in keys else line)
    return "".join(out)


def apply_root_faults(state: dict, root: Path) -> None:
    """Make the node's files match the version-drift faults of `state` (root = the node's `/`).

    The pristine file is kept in the simdir (runtime/root-faults.json) and put back once the fault is
    cleared, unless something (a reinstall) rewrote the file in between. Files not installed yet are left
    alone: drift applies to what is installed.
    """
    root = Path(root)
    book_path = root / _ORIGINALS
    try:
        book = json.loads(book_path.read_text())
    except (OSError, ValueError):
        book = {}
    wanted = {f["kind"]: f["params"]["version"] for f in state["faults"] if f["kind"] in _VERSION_FILES}
    for kind, (rel, keys) in _VERSION_FILES.items():
        path = root / rel
        entry = book.get(kind)
        current = path.read_text() if path.is_file() else None
        if kind in wanted and current is not None:
            if entry is None or current != entry["written"]:
                entry = {"original": current, "written": None}
            entry["written"] = _with_version(entry["original"], wanted[kind], keys)
            path.write_text(entry["written"])
            book[kind] = entry
        elif kind not in wanted and entry is not None:
            if current == entry["written"]:
                path.write_text(entry["original"])
            del book[kind]
    if book or book_path.exists():
        book_path.parent.mkdir(parents=True, exist_ok=True)
        book_path.write_text(json.dumps(book, indent=1))
    _apply_sdc(state, root)


#: the sdc fault's files in the node: its parameters, the hook (sdc_hook.py) and the login shells' path to it
SDC_FILES = {"fault": "var/lib/ascend-sim/runtime/sdc.json",
             "hook": "usr/lib/ascend-sim/sdc/sitecustomize.py",
             "profile": "etc/profile.d/ascend-sim-sdc.sh"}


def _apply_sdc(state: dict, root: Path) -> None:
    """Put the sdc fault's hook into the node's root while the fault is set; take it out once cleared."""
    found = [f["params"] for f in state["faults"] if f["kind"] == "sdc"]
    paths = {k: root / v for k, v in SDC_FILES.items()}
    if not found:
        for path in paths.values():
            path.unlink(missing_ok=True)
        return
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    paths["fault"].write_text(json.dumps(found[-1]))
    paths["hook"].write_text((Path(__file__).parent / "sdc_hook.py").read_text())
    hook_dir = f"/{Path(SDC_FILES['hook']).parent}"
    paths["profile"].write_text(f"export PYTHONPATH={hook_dir}${{PYTHONPATH:+:$PYTHONPATH}}\n")
