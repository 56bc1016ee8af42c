"""Writes a node's simdir: state.json + gen, the fake PCI sysfs tree and the kernel log (dmesg).

Called by the host before a node boots and after every fault change; node-side tools only read it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ascend_ready.sim.hw import numa
from ascend_ready.sim.hw.state import host_functions, present_functions, trained_link

#: PCIE_SPEED2MBS_ENC of the kernel (drivers/pci/pci.h): per-lane Mb/s after line encoding
_MBS = {2.5: 2000, 5.0: 4000, 8.0: 7877, 16.0: 15754, 32.0: 31508, 64.0: 63016}


def speed_str(speed: float | None) -> str:
    """The kernel's sysfs/log spelling of a link speed (pci_speed_string): '16.0 GT/s PCIe'."""
    return "Unknown" if speed is None else f"{speed:.1f} GT/s PCIe"


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_simdir(state: dict, simdir: Path) -> None:
    """Write `state` into `simdir` (state.json, gen bump, sysfs/, dmesg).

    Fault stamps (the generation a fault first appeared at) are carried over from the previous
    state.json, so a device setting the node changed after a fault wins over it, and one changed
    before it loses (see NodeView.nic_value).
    """
    simdir = Path(simdir)
    for sub in ("runtime", "render"):
        (simdir / sub).mkdir(parents=True, exist_ok=True)
    try:
        gen = int((simdir / "gen").read_text().strip() or 0) + 1
    except (OSError, ValueError):
        gen = 1
    try:
        old_stamps = json.loads((simdir / "state.json").read_text()).get("fault_stamps", {})
    except (OSError, ValueError):
        old_stamps = {}
    out = dict(state)
    out["fault_stamps"] = {str(f["id"]): old_stamps.get(str(f["id"]), gen) for f in state["faults"]}
    _atomic_write(simdir / "state.json", json.dumps(out, indent=1, sort_keys=True))
    write_sysfs(state, simdir / "sysfs")
    write_numa_sysfs(state, simdir / "sysfs")
    _atomic_write(simdir / "dmesg", render_dmesg(state))
    # gen last: a tool that sees the new generation also sees the new state.
    _atomic_write(simdir / "gen", f"{gen}\n")


# ---------------------------------------------------------------- sysfs

def _hex(value: str, width: int = 4) -> str:
    return f"0x{int(value, 16):0{width}x}\n"


def _files(directory: Path, files: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        target = directory / name
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)


def write_numa_sysfs(state: dict, sysfs: Path) -> None:
    """devices/system/node/ of the presented host CPU (sim/hw/numa.py); the node boots with it over the
    kernel's own. Nothing where the hardware presents none (the node then shows the real host's)."""
    host = numa.host_cpu(state)
    if host is None:
        return
    root = sysfs / "devices" / "system" / "node"
    for rel, text in numa.sysfs_files(host).items():
        _files((root / rel).parent, {Path(rel).name: text})


def write_sysfs(state: dict, sysfs: Path) -> None:
    """The PCI tree: devices/pciDDDD:BB/<root port>/<npu fn>, and bus/pci/devices/<bdf> relative links.

    Host-bridge directories are never removed or replaced (the core bind-mounts them); a missing NPU
    only loses its own function directory, and its root port reports a link that is down.
    """
    prod = state["product"]
    devices, bus = sysfs / "devices", sysfs / "bus" / "pci" / "devices"
    bus.mkdir(parents=True, exist_ok=True)
    present = {f["bdf"] for f in present_functions(state)}
    links: dict[str, str] = {}
    for fn in state["pci_functions"]:
        rp = fn["root_port"]
        bridge = f"pci{rp['bdf'][:7]}"
        rp_dir = devices / bridge / rp["bdf"]
        fn_dir = rp_dir / fn["bdf"]
        up = fn["bdf"] in present
        link = trained_link(fn) if up else {"speed": None, "width": 0}
        secondary = int(fn["bdf"][5:7], 16)
        _files(rp_dir, {
            "vendor": "0x19e5\n", "device": _hex(rp["device"]), "class": "0x060400\n",
            "revision": f"0x{rp['revision']}\n", "numa_node": f"{fn['numa_node']}\n",
            "max_link_speed": speed_str(rp["speed"]) + "\n", "max_link_width": f"{rp['width']}\n",
            "current_link_speed": speed_str(link["speed"]) + "\n", "current_link_width": f"{link['width']}\n",
            "secondary_bus_number": f"{secondary}\n", "subordinate_bus_number": f"{secondary}\n",
        })
        links[rp["bdf"]] = f"../../../devices/{bridge}/{rp['bdf']}"
        if not up:
            shutil.rmtree(fn_dir, ignore_errors=True)
            continue
        dev_id, sub_id = prod["pci_device"], prod["pci_subsys_device"]
        _files(fn_dir, {
            "vendor": "0x19e5\n", "device": _hex(dev_id), "class": "0x120000\n",
            "subsystem_vendor": "0x19e5\n", "subsystem_device": _hex(sub_id),
            "revision": f"0x{prod['pci_revision']}\n", "numa_node": f"{fn['numa_node']}\n",
            "irq": f"{fn['irq']}\n",
            "max_link_speed": speed_str(fn["link_cap"]["speed"]) + "\n",
            "max_link_width": f"{fn['link_cap']['width']}\n",
            "current_link_speed": speed_str(link["speed"]) + "\n", "current_link_width": f"{link['width']}\n",
            "uevent": (f"PCI_CLASS=120000\nPCI_ID=19E5:{dev_id.upper()}\n"
                       f"PCI_SUBSYS_ID=19E5:{sub_id.upper()}\n"
                       f"PCI_SLOT_NAME={fn['bdf']}\n"
                       f"MODALIAS=pci:v000019E5d0000{dev_id.upper()}sv000019E5sd0000{sub_id.upper()}"
                       f"bc12sc00i00\n"),
        })
        links[fn["bdf"]] = f"../../../devices/{bridge}/{rp['bdf']}/{fn['bdf']}"
    links.update(_write_host_functions(state, devices))
    for entry in bus.iterdir():
        if entry.name not in links:
            entry.unlink()
    for name, target in links.items():
        entry = bus / name
        if entry.is_symlink() and os.readlink(entry) == target:
            continue
        if entry.is_symlink() or entry.exists():
            entry.unlink()
        entry.symlink_to(target)


def host_path(fn: dict) -> str:
    """A host function's directory under sysfs/devices: pciDDDD:BB[/<parent bridge>]/<bdf>."""
    top = fn["parent"] or fn["bdf"]
    return f"pci{top[:7]}/" + (f"{fn['parent']}/" if fn["parent"] else "") + fn["bdf"]


def _link(path: Path, target: str) -> None:
    if path.is_symlink() and os.readlink(path) == target:
        return
    if path.is_symlink() or path.exists():
        path.unlink()
    path.symlink_to(target)


def _write_host_functions(state: dict, devices: Path) -> dict[str, str]:
    """The host CPU's own functions (Kunpeng on-die bridges, engines and their VFs, SAS, USB, NICs).

    Endpoints have no PCIe link registers modelled: their link files read as the kernel prints a function
    without them (`Unknown`, width 0). Bridges get no link files at all.
    """
    functions = host_functions(state)
    links, wanted = {}, set()
    for fn in functions:
        rel = host_path(fn)
        d = devices / rel
        wanted.add(d)
        dev, cls = fn["device"], fn["class"]
        files = {
            "vendor": "0x19e5\n", "device": _hex(dev), "class": f"0x{cls}\n",
            "subsystem_vendor": "0x0000\n", "subsystem_device": "0x0000\n",
            "revision": f"0x{fn['revision']}\n", "numa_node": f"{fn['numa_node']}\n", "irq": f"{fn['irq']}\n",
            "uevent": ((f"DRIVER={fn['driver']}\n" if fn["driver"] else "")
                       + f"PCI_CLASS={cls.upper().lstrip('0') or '0'}\nPCI_ID=19E5:{dev.upper()}\n"
                       f"PCI_SUBSYS_ID=0000:0000\nPCI_SLOT_NAME={fn['bdf']}\n"
                       f"MODALIAS=pci:v000019E5d0000{dev.upper()}sv00000000sd00000000"
                       f"bc{cls[:2].upper()}sc{cls[2:4].upper()}i{cls[4:].upper()}\n"),
        }
        if "secondary" in fn:
            files.update(secondary_bus_number=f"{fn['secondary']}\n",
                         subordinate_bus_number=f"{fn['secondary']}\n")
        else:
            files.update(current_link_speed="Unknown\n", current_link_width="0\n",
                         max_link_speed="Unknown\n", max_link_width="0\n")
        if "total_vfs" in fn:
            files.update(sriov_totalvfs=f"{fn['total_vfs']}\n", sriov_numvfs=f"{fn['num_vfs']}\n",
                         sriov_offset="1\n", sriov_stride="1\n", sriov_vf_device=f"{fn['vf_device']}\n")
        _files(d, files)
        if "physfn" in fn:
            _link(d / "physfn", f"../{fn['physfn']}")
        vfs = [v for v in functions if v.get("physfn") == fn["bdf"]]
        for v in vfs:
            _link(d / f"virtfn{v['vf_index']}", f"../{v['bdf']}")
        for old in d.glob("virtfn*"):
            if old.name[6:].isdigit() and int(old.name[6:]) >= len(vfs):
                old.unlink()
        links[fn["bdf"]] = f"../../../devices/{rel}"
    # VFs of an engine whose SR-IOV was turned off again leave the tree (the host bridges stay).
    for bridge in devices.glob("pci*"):
        for d in [*bridge.glob("*/*/physfn"), *bridge.glob("*/physfn")]:
            if d.parent not in wanted:
                shutil.rmtree(d.parent, ignore_errors=True)
    return links


# ---------------------------------------------------------------- dmesg

def _bw(speed: float, width: int) -> str:
    mbs = _MBS.get(speed, 0) * width
    return f"{mbs // 1000}.{mbs % 1000:03d}"


def render_dmesg(state: dict) -> str:
    """Kernel log lines of PCI enumeration, in the wording of drivers/pci/probe.c and pci.c (Linux 6.1)."""
    prod = state["product"]
    lines: list[tuple[float, str]] = [(0.0, "Booting Linux on physical CPU 0x0000080000 [0x481fd010]")]
    present = {f["bdf"] for f in present_functions(state)}
    for k, fn in enumerate(host_functions(state)):
        kind = "01" if fn["class"].startswith("0604") else "00"
        lines.append((1.2 + 0.002 * k,
                      f"pci {fn['bdf']}: [19e5:{fn['device']}] type {kind} class 0x{fn['class']}"))
    for k, fn in enumerate(state["pci_functions"]):
        rp, t = fn["root_port"], 1.8 + 0.004 * k
        lines.append((t, f"pci {rp['bdf']}: [19e5:{rp['device']}] type 01 class 0x060400"))
        if fn["bdf"] not in present:
            lines.append((6.2 + 0.004 * k, f"pcieport {rp['bdf']}: pciehp: Slot({k}): Card not present"))
            continue
        lines.append((t + 0.001, f"pci {fn['bdf']}: [19e5:{prod['pci_device']}] type 00 class 0x120000"))
        link, cap = trained_link(fn), fn["link_cap"]
        if link["speed"] * link["width"] < cap["speed"] * cap["width"]:
            lines.append((t + 0.002, (
                f"pci {fn['bdf']}: {_bw(link['speed'], link['width'])} Gb/s available PCIe bandwidth, "
                f"limited by {speed_str(link['speed'])} x{link['width']} link at {rp['bdf']} "
                f"(capable of {_bw(cap['speed'], cap['width'])} Gb/s with {speed_str(cap['speed'])} "
                f"x{cap['width']} link)")))
    return "".join(f"[{t:12.6f}] {msg}\n" for t, msg in sorted(lines, key=lambda x: x[0]))
