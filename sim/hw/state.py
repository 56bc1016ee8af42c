"""A node's simulated hardware state: a JSON-able dict built from a profile, plus read helpers.

The host writes the state (state.json); node-side tools read it through `NodeView`, which also merges
what the node changed itself with vendor tools (simdir runtime/) and the installed version files.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from ascend_ready.sim.hw import numa
from ascend_ready.sim.hw.profiles import ENGINES, PROFILES

SCHEMA = 1
HEALTH_ORDER = ("OK", "Warning", "Alarm", "Critical")
#: device-NIC keys a node can set with hccn_tool and a fault can override
NIC_KEYS = ("address", "netmask", "gateway", "netdetect", "tls")


def _host_bridge(bdf: str) -> str:
    # Kunpeng 920: one PCIe host bridge per 0x40 buses (pci0000:00, :40, :80, :c0).
    return f"{bdf[:4]}:{int(bdf[5:7], 16) & 0xC0:02x}"


#: epoch of the (simulated) boot at which every device port first came up
BOOT_EPOCH = 1764000000


def _nic() -> dict:
    # link_events: [epoch, "UP"|"DOWN"] in time order (hccn_tool -link_stat); net_health: the status the
    # health probe reports once a netdetect address is set.
    return {"link": "UP", "net_health": "Success", "link_events": [[BOOT_EPOCH, "UP"]]}


def initial_state(hardware: str, *, node_index: int, node_name: str) -> dict:
    """The healthy state of one node of `hardware` (a key of HARDWARE); deterministic per node_index."""
    if hardware not in PROFILES:
        raise KeyError(f"unknown hardware {hardware!r}; known: {', '.join(sorted(PROFILES))}")
    p = PROFILES[hardware]
    rng = random.Random(f"{hardware}/{node_index}")
    npus, functions = [], []
    logic = 0
    chips_per = p["chips_per_npu"]
    shared_bus = p["family"] == "310p"
    slot_in_rc: dict[str, int] = {}
    for n, npu_id in enumerate(p["npu_ids"]):
        chips = []
        for c in range(chips_per):
            bus_id = p["bus_ids"][n] if shared_bus else p["bus_ids"][n * chips_per + c]
            power = None
            if p["power_w"] is not None and (c == 0 or p["second_chip_power"]):
                power = round(rng.uniform(*p["power_w"]), 1)
            chips.append({
                "chip_id": c, "logic_id": logic, "phy_id": logic, "name": p["chip_name"],
                "health": "OK", "error_codes": [],
                "temp_c": rng.randint(*p["temp_c"]), "power_w": power,
                "hbm_total_mb": p["hbm_total_mb"], "hbm_used_mb": rng.randint(*p["hbm_idle_mb"]),
                # the second 310P3 of a Duo card reports 587 MB less DDR (44280 / 43693, nputop fixture)
                "memory_total_mb": p["memory_total_mb"] - (587 if c else 0) if p["memory_total_mb"] else 0,
                "memory_used_mb": rng.randint(*p["memory_idle_mb"]),
                "hugepages_total": 0, "hugepages_used": 0, "aicore_pct": 0,
                "ctrlcpu_pct": rng.randint(3, 8), "bus_id": bus_id,
                "nic": _nic() if p["has_device_nic"] else None,
            })
            logic += 1
        bdfs = sorted({ch["bus_id"].lower() for ch in chips})
        for bdf in bdfs:
            rc = _host_bridge(bdf)
            slot = slot_in_rc.get(rc, 0)
            slot_in_rc[rc] = slot + 1
            k = len(functions)
            functions.append({
                "bdf": bdf, "npu_id": npu_id,
                "link_cap": dict(p["device_link"]),
                "link_trained": None,  # None: min(device capability, root-port capability)
                "root_port": {"bdf": f"{rc}:{2 * slot:02x}.0", "device": p["root_port"]["device"],
                              "revision": p["root_port"]["revision"],
                              "speed": p["root_port"]["speed"], "width": p["root_port"]["width"]},
                "irq": 102 + 8 * k, "numa_node": _npu_numa_node(p, bdf),
                "bar_base": 0x82000000000 + 0x4000000000 * k,
                "dsn": f"{(k * 2 + 4) & 0xFF:02x}-02-20-02-04-02-20-02",
            })
        npus.append({
            "id": npu_id, "present": True, "slot_id": n,
            "serial": f"1025C9{rng.randint(0, 999999):06d}",
            "chips": chips,
        })
    return {
        "schema": SCHEMA,
        "hardware": hardware,
        "node": {"name": node_name, "index": node_index},
        "product": {key: p[key] for key in (
            "family", "chip_name", "m_chip_name", "pci_device", "pci_subsys_device", "pci_revision",
            "product_name", "board_id", "has_device_nic", "firmware_version")},
        "npus": npus,
        "pci_functions": functions,
        "host_functions": _host_functions(p["host_functions"]),
        "host_cpu": dict(p["host_cpu"]) if p.get("host_cpu") else None,
        "processes": [],
        "hang": [],
        "clock_synced": True,  # what `chronyc tracking` reports (the node's clock is the host's)
        "clock_offset_s": 0.0,  # its System time offset beyond chronyd's usual microseconds (+ fast)
        "faults": [],
        "fault_seq": 0,
    }


def _npu_numa_node(p: dict, bdf: str) -> int:
    """The NUMA node sysfs and lspci give an NPU: its root complex's node on a host with a presented NUMA
    layout (the node npu-smi's CPU Affinity names), else one node per host bridge; inference cards 0."""
    if p.get("host_cpu"):
        return numa.npu_node(p["host_cpu"], bdf)
    return (int(bdf[5:7], 16) >> 6) if p["family"] != "310p" else 0


def _host_functions(table: list[dict]) -> list[dict]:
    """The host CPU's own PCI functions (profiles.KUNPENG_920...): engines get their SR-IOV fields, off."""
    out = []
    for k, fn in enumerate(table):
        fn = {**fn, "irq": 40 + 2 * k}
        if fn["class"].startswith("0604"):  # the bus behind a bridge: its children's
            fn["secondary"] = min(int(c["bdf"][5:7], 16) for c in table if c["parent"] == fn["bdf"])
        if fn["device"] in ENGINES:
            vf_device, _driver, total = ENGINES[fn["device"]]
            fn.update(vf_device=vf_device, total_vfs=total, num_vfs=0)
        out.append(fn)
    return out


# ---------------------------------------------------------------- read helpers (host and node)

def _rid(bdf: str) -> int:
    return int(bdf[5:7], 16) << 8 | int(bdf[8:10], 16) << 3 | int(bdf[11])


def _bdf(domain: str, rid: int) -> str:
    return f"{domain}:{rid >> 8:02x}:{(rid >> 3) & 0x1F:02x}.{rid & 7}"


def host_functions(state: dict) -> list[dict]:
    """Every host function the OS lists, with the virtual functions of engines whose SR-IOV is on.

    A VF is `{"physfn": <PF bdf>, "vf_index": i, ...}` at routing id PF + 1 + i (offset 1, stride 1, the
    0000:75:00.1 / 75:00.2 VFs of 75:00.0 in the KAE pass-through scripts) with the VF device id.
    """
    out = []
    for fn in state.get("host_functions", []):
        out.append(fn)
        for i in range(fn.get("num_vfs", 0)):
            out.append({**{k: v for k, v in fn.items() if k not in ("num_vfs", "total_vfs", "vf_device")},
                        "bdf": _bdf(fn["bdf"][:4], _rid(fn["bdf"]) + 1 + i), "device": fn["vf_device"],
                        "physfn": fn["bdf"], "vf_index": i, "irq": 0})
    return out


def present_npus(state: dict) -> list[dict]:
    return [npu for npu in state["npus"] if npu["present"]]


def all_chips(state: dict, *, present_only: bool = True) -> list[tuple[dict, dict]]:
    """(npu, chip) pairs in NPU order."""
    npus = present_npus(state) if present_only else state["npus"]
    return [(npu, chip) for npu in npus for chip in npu["chips"]]


def find_npu(state: dict, npu_id: int, *, present_only: bool = True) -> dict | None:
    for npu in state["npus"]:
        if npu["id"] == npu_id and (npu["present"] or not present_only):
            return npu
    return None


def find_chip_by_logic(state: dict, logic_id: int) -> tuple[dict, dict] | None:
    for npu, chip in all_chips(state):
        if chip["logic_id"] == logic_id:
            return npu, chip
    return None


def present_functions(state: dict) -> list[dict]:
    present = {npu["id"] for npu in present_npus(state)}
    return [f for f in state["pci_functions"] if f["npu_id"] in present]


def trained_link(fn: dict) -> dict:
    """The link the function trained at: a fault's value, else the lower of both ends' capabilities."""
    if fn["link_trained"] is not None:
        return fn["link_trained"]
    rp = fn["root_port"]
    cap = fn["link_cap"]
    return {"speed": min(cap["speed"], rp["speed"]), "width": min(cap["width"], rp["width"])}


def process_memory(state: dict, npu_id: int, chip_id: int) -> int:
    return sum(p["memory_mb"] for p in state["processes"]
               if p["npu_id"] == npu_id and p["chip_id"] == chip_id)


def hbm_used(state: dict, npu: dict, chip: dict) -> int:
    """HBM in use: the idle runtime reservation plus what processes hold (910 parts)."""
    if not chip["hbm_total_mb"]:
        return 0
    return chip["hbm_used_mb"] + process_memory(state, npu["id"], chip["chip_id"])


def memory_used(state: dict, npu: dict, chip: dict) -> int:
    """DDR in use; on 310P (no HBM) processes hold DDR."""
    extra = 0 if chip["hbm_total_mb"] else process_memory(state, npu["id"], chip["chip_id"])
    return chip["memory_used_mb"] + extra


def worst_health(healths: list[str]) -> str:
    return max(healths, key=HEALTH_ORDER.index) if healths else "OK"


def device_nodes(state: dict) -> list[dict]:
    """Character devices the driver creates: one davinciN per present chip + the managers.

    Majors, owner and mode follow the ArthurChiao 910B1 capture (`crw-rw---- HwHiAiUser HwHiAiUser 237, 0
    /dev/hisi_hdc`, devmm_svm 238); davinci* use 236. owner/group/mode are the driver's defaults: the node
    applies the installed driver's own (ascend_ready.sim.nodeinit.device_owner).
    """
    def node(path: str, major: int, minor: int) -> dict:
        return {"path": path, "kind": "c", "major": major, "minor": minor, "mode": 0o660,
                "owner": "HwHiAiUser", "group": "HwHiAiUser"}

    chips = [chip for _npu, chip in all_chips(state)]
    nodes = [node(f"/dev/davinci{chip['logic_id']}", 236, chip["logic_id"]) for chip in chips]
    nodes += [node("/dev/davinci_manager", 236, 255), node("/dev/hisi_hdc", 237, 0),
              node("/dev/devmm_svm", 238, 0)]
    return nodes


# ---------------------------------------------------------------- node view

def read_version(path: Path) -> str | None:
    """The `Version=` value of an Ascend version.info file, or None when it is absent."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Version="):
            return line.split("=", 1)[1].strip()
    return None


@dataclass
class NodeView:
    """Everything a node-side tool renders from: state + node runtime changes + installed versions."""

    state: dict
    gen: int = 0
    runtime: dict = field(default_factory=dict)   # {"<logic id>": {key: [value, gen]}}
    driver_version: str | None = None
    firmware_version: str | None = None

    @classmethod
    def load(cls, simdir: Path, fsroot: Path) -> NodeView:
        state = json.loads((simdir / "state.json").read_text())
        try:
            gen = int((simdir / "gen").read_text().strip() or 0)
        except (OSError, ValueError):
            gen = 0
        try:
            runtime = json.loads((simdir / "runtime" / "hccn.json").read_text())
        except (OSError, ValueError):
            runtime = {}
        asc = fsroot / "usr" / "local" / "Ascend"
        return cls(state, gen, runtime, read_version(asc / "driver" / "version.info"),
                   read_version(asc / "firmware" / "version.info"))

    def nic_value(self, logic_id: int, key: str):
        """A device-NIC setting as the device holds it: the latest of node change and fault override."""
        best = (-2, None)
        rt = self.runtime.get(str(logic_id), {}).get(key)
        if rt is not None:
            best = (rt[1], rt[0])
        stamps = self.state.get("fault_stamps", {})
        for fault in self.state["faults"]:
            override = _nic_override(self, fault, logic_id, key)
            if override is not _NO:
                stamp = stamps.get(str(fault["id"]), self.gen)
                # A node change made at the same generation came after the fault was written.
                if stamp > best[0]:
                    best = (stamp, override)
        if best[0] == -2:
            return 0 if key == "tls" else None
        return best[1]

    def raw_nic_value(self, logic_id: int, key: str):
        """The setting as the node last set it, ignoring faults (what a duplicate-IP fault copies)."""
        rt = self.runtime.get(str(logic_id), {}).get(key)
        return rt[0] if rt is not None else (0 if key == "tls" else None)


_NO = object()


def _nic_override(view: NodeView, fault: dict, logic_id: int, key: str):
    params = fault["params"]
    if params.get("device") != logic_id:
        return _NO
    kind = fault["kind"]
    if kind == "device-ip-missing" and key in ("address", "netmask"):
        return None
    if kind == "device-ip-duplicate" and key in ("address", "netmask"):
        if params.get("address"):  # a given address (another node's): the device's own netmask unless given
            return params["address"] if key == "address" else params.get("netmask") or view.raw_nic_value(
                logic_id, "netmask")
        return view.raw_nic_value(params["same_as"], key)
    if kind == "tls-mismatch" and key == "tls":
        return params["enable"]
    return _NO


def simdir_from_env() -> Path:
    return Path(os.environ.get("ASCEND_SIM_ROOT", "/var/lib/ascend-sim"))


def fsroot_from_env() -> Path:
    return Path(os.environ.get("ASCEND_SIM_FSROOT", "/"))
