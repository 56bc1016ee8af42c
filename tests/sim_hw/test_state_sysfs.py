"""Hardware profiles, the host API shapes, and the fake sysfs tree (kernel file formats, relative links)."""

from __future__ import annotations

import json
import os

import pytest

from ascend_ready.sim import hw
from ascend_ready.sim.render import npu_smi


def test_hardware_catalogue():
    assert set(hw.HARDWARE) == {"atlas-800t-a2", "atlas-800t-a3", "atlas-300i-duo"}
    assert hw.DEFAULT_HARDWARE == "atlas-800t-a2"
    with pytest.raises(KeyError, match="unknown hardware"):
        hw.initial_state("atlas-9000", node_index=0, node_name="n")
    for kind, spec in hw.FAULTS.items():
        assert spec.description and spec.shows_in, kind
        assert set(spec.param_help) <= set(spec.params), kind


def test_a2_profile(a2_state):
    chips = [c for npu in a2_state["npus"] for c in npu["chips"]]
    assert len(chips) == 8 and {c["name"] for c in chips} == {"910B3"}
    bus_ids = [c["bus_id"] for c in chips]
    assert bus_ids[:4] == ["0000:C1:00.0", "0000:01:00.0", "0000:C2:00.0", "0000:02:00.0"]
    for c in chips:
        assert 3340 <= c["hbm_used_mb"] <= 3420 and c["hbm_total_mb"] == 65536
        assert 35 <= c["temp_c"] <= 45 and 86 <= c["power_w"] <= 96
    # deterministic per node, different between nodes
    again = hw.initial_state("atlas-800t-a2", node_index=0, node_name="node01")
    other = hw.initial_state("atlas-800t-a2", node_index=1, node_name="node02")
    assert again == a2_state and other["npus"][0]["chips"][0] != a2_state["npus"][0]["chips"][0]
    json.dumps(a2_state)   # state.json material


def test_a3_profile(make_node):
    node = make_node(hw.initial_state("atlas-800t-a3", node_index=0, node_name="n"), driver="24.1.rc3.7")
    model = npu_smi.table_model(node.view())
    assert len(model["npus"]) == 8 and all(len(n["chips"]) == 2 for n in model["npus"])
    assert model["npus"][0]["name"] == "Ascend910"
    assert [c["power_w"] is None for c in model["npus"][0]["chips"]] == [False, True]
    assert len(node.state["pci_functions"]) == 16
    assert len([n for n in hw.device_nodes(node.state) if n["path"][len("/dev/davinci"):].isdigit()]) == 16


def test_duo_profile(make_node):
    node = make_node(hw.initial_state("atlas-300i-duo", node_index=0, node_name="n"), driver="24.1.0.1")
    model = npu_smi.table_model(node.view())
    assert model["layout"] == "310p-106" and [n["id"] for n in model["npus"]] == [1, 2, 3, 4]
    first = model["npus"][0]["chips"]
    assert first[0]["bus_id"] == first[1]["bus_id"] and [c["device_id"] for c in first] == [0, 1]
    assert first[0]["hbm_total_mb"] is None and first[0]["memory_total_mb"] == 44280
    assert len(node.state["pci_functions"]) == 4
    assert node.run("hccn_tool", "-i", "0", "-link", "-g")[1] == 1   # no device NICs on 300I Duo


@pytest.mark.parametrize(("version", "layout"), [("23.0.7", "910-98"), ("25.5.1", "910-98"),
                                                  ("26.0.rc1", "910-116")])
def test_layout_follows_installed_driver(make_node, a2_state, version, layout):
    node = make_node(a2_state, driver=version)
    assert npu_smi.layout_for(node.view()) == layout
    assert f"Version: {version}" in node.out("npu-smi", "info")


def test_device_nodes(a2_state):
    nodes = hw.device_nodes(a2_state)
    dav0 = nodes[0]
    assert dav0 == {"path": "/dev/davinci0", "kind": "c", "major": 236, "minor": 0, "mode": 0o660,
                    "owner": "HwHiAiUser", "group": "HwHiAiUser"}
    assert [n["path"] for n in nodes][-3:] == ["/dev/davinci_manager", "/dev/hisi_hdc", "/dev/devmm_svm"]


def test_sysfs_npu_function(make_node, a2_state):
    sysfs = make_node(a2_state).sim / "sysfs"
    fn = sysfs / "devices/pci0000:c0/0000:c0:00.0/0000:c1:00.0"
    files = {p.name: p.read_text() for p in fn.iterdir()}
    assert files["vendor"] == "0x19e5\n" and files["device"] == "0xd802\n" and files["class"] == "0x120000\n"
    assert files["max_link_speed"] == "32.0 GT/s PCIe\n" and files["max_link_width"] == "16\n"
    # a healthy 910B trains at the Kunpeng root port's 16 GT/s
    assert files["current_link_speed"] == "16.0 GT/s PCIe\n" and files["current_link_width"] == "16\n"
    assert "PCI_ID=19E5:D802\n" in files["uevent"]
    port = {p.name: p.read_text() for p in fn.parent.iterdir() if p.is_file()}
    assert port["device"] == "0xa120\n" and port["class"] == "0x060400\n"
    assert port["max_link_speed"] == "16.0 GT/s PCIe\n" and port["secondary_bus_number"] == "193\n"


def test_sysfs_bus_links_are_relative(make_node, a2_state):
    bus = make_node(a2_state).sim / "sysfs/bus/pci/devices"
    names = sorted(p.name for p in bus.iterdir())
    assert len(names) == 16 + 36   # 8 NPUs + 8 root ports, and the Kunpeng 920's own 36 functions
    link = bus / "0000:c1:00.0"
    assert os.readlink(link) == "../../../devices/pci0000:c0/0000:c0:00.0/0000:c1:00.0"
    assert (link / "vendor").read_text() == "0x19e5\n"
    assert all(not os.readlink(p).startswith("/") and p.resolve().is_dir() for p in bus.iterdir())


def test_kunpeng_host_functions_in_sysfs(make_node, a2_state):
    """The A2's Kunpeng 920 shows its own functions on their own host bridges, as the KAE pass-through
    paths show them (pci0000:74/0000:74:00.0/0000:75:00.0 ...), never behind the NPU root ports."""
    sysfs = make_node(a2_state).sim / "sysfs"
    bus = sysfs / "bus/pci/devices"
    paths = {"0000:75:00.0": "pci0000:74/0000:74:00.0/0000:75:00.0",   # ZIP
             "0000:76:00.0": "pci0000:74/0000:74:01.0/0000:76:00.0",   # SEC
             "0000:79:00.0": "pci0000:78/0000:78:00.0/0000:79:00.0",   # HPRE
             "0000:b5:00.0": "pci0000:b4/0000:b4:00.0/0000:b5:00.0",   # ZIP, second socket
             "0000:74:02.0": "pci0000:74/0000:74:02.0",                # SAS HBA, on the root bus
             "0000:7d:00.0": "pci0000:7c/0000:7c:00.0/0000:7d:00.0"}   # HNS3 NIC
    for bdf, rel in paths.items():
        assert os.readlink(bus / bdf) == f"../../../devices/{rel}"
    classes = [(bus / bdf / "class").read_text() for bdf in ("0000:75:00.0", "0000:76:00.0", "0000:79:00.0")]
    assert classes == ["0x120000\n", "0x100000\n", "0x100000\n"]  # ZIP, SEC, HPRE
    zip_ = {p.name: p.read_text() for p in (bus / "0000:75:00.0").iterdir() if p.is_file()}
    assert zip_["device"] == "0xa250\n" and zip_["revision"] == "0x21\n" and zip_["numa_node"] == "0\n"
    assert zip_["sriov_totalvfs"] == "63\n" and zip_["sriov_numvfs"] == "0\n"
    assert zip_["current_link_speed"] == "Unknown\n" and zip_["current_link_width"] == "0\n"
    assert "DRIVER=hisi_zip\n" in zip_["uevent"] and "PCI_ID=19E5:A250\n" in zip_["uevent"]
    assert (bus / "0000:74:01.0" / "secondary_bus_number").read_text() == "118\n"   # 0x76
    assert (bus / "0000:b5:00.0" / "numa_node").read_text() == "2\n"
    # the NPU root ports' buses hold only NPUs
    assert {p.name for p in (sysfs / "devices/pci0000:c0").iterdir()} == {"0000:c0:00.0", "0000:c0:02.0"}


def test_a3_host_is_the_new_kunpeng_920():
    """The A3's host (Kunpeng 920 7285Z): its KAE engines at 09/0a/0d, rev 30 (openEuler CCA guide)."""
    state = hw.initial_state("atlas-800t-a3", node_index=0, node_name="n")
    engines = {f["bdf"]: (f["device"], f["revision"], f["parent"]) for f in state["host_functions"]
               if f["class"] != "060400"}
    assert engines == {"0000:09:00.0": ("a250", "30", "0000:08:00.0"),
                       "0000:0a:00.0": ("a258", "30", "0000:08:01.0"),
                       "0000:0d:00.0": ("a255", "30", "0000:08:04.0")}
    assert hw.initial_state("atlas-300i-duo", node_index=0, node_name="n")["host_functions"] == []


def test_host_bridge_dirs_survive_rewrites(make_node, a2_state):
    """The core bind-mounts sysfs/devices/pci*: they must stay the same directories."""
    node = make_node(a2_state)
    bridges = {p: p.stat().st_ino for p in (node.sim / "sysfs/devices").iterdir()}
    node.write(hw.inject_fault(node.state, "npu-missing", npu=0))
    node.write(hw.clear_faults(node.state))
    assert {p: p.stat().st_ino for p in (node.sim / "sysfs/devices").iterdir()} == bridges
    assert (node.sim / "sysfs/bus/pci/devices/0000:c1:00.0/device").read_text() == "0xd802\n"


def test_gen_and_fault_stamps(make_node, a2_state):
    node = make_node(a2_state)
    assert (node.sim / "gen").read_text() == "1\n"
    state = hw.inject_fault(a2_state, "tls-mismatch", device=0)
    node.write(state)
    node.write(hw.inject_fault(state, "hot-chip"))
    assert (node.sim / "gen").read_text() == "3\n"
    assert node.state_json()["fault_stamps"] == {"1": 2, "2": 3}   # the first fault keeps its stamp
