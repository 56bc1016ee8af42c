"""Every fault kind: render every tool output before and after injection; exactly the outputs the fault
touches change (and in the way it should), and clear_faults brings every output back."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ascend_ready.errors import SimError
from ascend_ready.sim import hw
from ascend_ready.sim.hw.state import device_nodes

NPUS = range(8)
INFO_TYPES = ("board", "health", "temp", "usages", "power", "common")
HCCN_GETS = ("link", "net_health", "ip", "gateway", "netdetect", "tls", "optical", "lldp", "link_stat", "fec")


def snapshot(node) -> dict[str, str]:
    """tool call / sysfs file / device node / version file -> what it shows (errors as 'rc=N: text')."""
    def call(tool, *args):
        text, rc = node.run(tool, *args)
        if args[-2:] == ("-link_stat", "-g") and rc == 0:
            text = text.split("\n", 1)[1]   # drop 'current time', the wall clock
        return text if rc == 0 else f"rc={rc}: {text}"

    snap: dict[str, str] = {}
    if "npu-smi" in node.state["hang"]:
        try:
            subprocess.run([sys.executable, "-m", "ascend_ready.sim.node.tool", "npu-smi", "info"],
                           env={"ASCEND_SIM_ROOT": str(node.sim), "ASCEND_SIM_FSROOT": str(node.root)},
                           capture_output=True, timeout=1.5, check=False)
            hung = "RETURNED"
        except subprocess.TimeoutExpired:
            hung = "HANG"
        npu_smi = lambda *a: hung   # noqa: E731
    else:
        npu_smi = lambda *a: call("npu-smi", *a)   # noqa: E731
    snap["npu-smi info"] = npu_smi("info")
    snap["npu-smi info -m"] = npu_smi("info", "-m")
    snap["npu-smi info -l"] = npu_smi("info", "-l")
    for n in NPUS:
        for t in INFO_TYPES:
            snap[f"npu-smi info -t {t} -i {n}"] = npu_smi("info", "-t", t, "-i", str(n))
    for d in NPUS:
        for get in HCCN_GETS:
            snap[f"hccn_tool -i {d} -{get} -g"] = call("hccn_tool", "-i", str(d), f"-{get}", "-g")
        peer = f"192.{(d + 1) % 4 + 1}.0.{10 + (d + 1) % 8}"
        snap[f"hccn_tool -i {d} -ping"] = call("hccn_tool", "-i", str(d), "-ping", "-g", "address", peer)
    snap["lspci"] = call("lspci")
    snap["lspci -vvv"] = call("lspci", "-vvv")
    snap["dmesg"] = call("dmesg")
    tracking = call("chronyc", "tracking")  # without its reference time, the wall clock
    snap["chronyc tracking"] = "".join(line for line in tracking.splitlines(keepends=True)
                                       if not line.startswith("Ref time (UTC)  : ") or "1970" in line)
    snap.update({f"sysfs/{k}": v for k, v in node.sysfs().items()})
    snap["/dev"] = repr(device_nodes(node.state))
    for part in ("driver", "firmware"):
        snap[f"{part}/version.info"] = (node.root / f"usr/local/Ascend/{part}/version.info").read_text()
    return snap


def changed(before: dict, after: dict) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


@pytest.fixture
def node(make_node, a2_state):
    n = make_node(a2_state)
    n.provision_nics(list(NPUS))
    return n


def inject(node, kind, **params):
    before = snapshot(node)
    node.write(hw.inject_fault(node.state, kind, **params))
    after = snapshot(node)
    return before, after


def assert_clears(node, before):
    node.write(hw.clear_faults(node.state))
    assert changed(before, snapshot(node)) == set()


def test_chip_health(node):
    before, after = inject(node, "chip-health", npu=2, level="Warning")
    assert changed(before, after) == {"npu-smi info", "npu-smi info -t health -i 2"}
    assert "| 2     910B3               | Warning       |" in after["npu-smi info"]
    assert "\tError Code                     : 8C03A000\n" in after["npu-smi info -t health -i 2"]
    assert_clears(node, before)


def test_hot_chip(node):
    before, after = inject(node, "hot-chip", npu=0, temp_c=97)
    assert changed(before, after) == {"npu-smi info", "npu-smi info -t temp -i 0",
                                      "npu-smi info -t common -i 0"}
    assert "\tNPU Temperature (C)            : 97\n" in after["npu-smi info -t temp -i 0"]
    assert_clears(node, before)


def test_npu_throttle_after_changes_npu_smi_common_once_its_delay_has_passed(node):
    later, hot = inject(node, "npu-throttle-after", npu=3, after_s=3600)
    assert changed(later, hot) == set()  # an hour to go: the chip reports as before
    node.write(hw.clear_faults(node.state))
    before, after = inject(node, "npu-throttle-after", npu=3, after_s=0)
    assert changed(before, after) == {"npu-smi info -t common -i 3"}
    common = after["npu-smi info -t common -i 3"]
    for line in ("\tAicore Usage Rate(%)           : 100\n", "\tAicore Freq(MHZ)               : 1800\n",
                 "\tAicore curFreq(MHZ)            : 1000\n", "\tTemperature(C)                 : 97\n"):
        assert line in common, common
    assert_clears(node, before)
    with pytest.raises(SimError, match=r"freq_mhz in 1\.\.1799"):
        hw.inject_fault(node.state, "npu-throttle-after", freq_mhz=1800)


def test_stray_process(node):
    before, after = inject(node, "stray-process", npu=5, pid=4242, memory_mb=30000)
    assert changed(before, after) == {"npu-smi info", "npu-smi info -t usages -i 5",
                                      "npu-smi info -t common -i 5"}
    hbm = node.state["npus"][5]["chips"][0]["hbm_used_mb"] + 30000
    assert f"{hbm}/ 65536" in after["npu-smi info"]
    row = "| 5       0                 | 4242          | python3                  | 30000"
    assert row in after["npu-smi info"]
    assert "No running processes found in NPU 5" not in after["npu-smi info"]
    assert_clears(node, before)


def test_pcie_width(node):
    before, after = inject(node, "pcie-width", npu=1, width=8)
    assert changed(before, after) == {
        "lspci -vvv", "dmesg", "sysfs/devices/pci0000:00/0000:00:00.0/0000:01:00.0/current_link_width",
        "sysfs/devices/pci0000:00/0000:00:00.0/current_link_width"}
    assert after["sysfs/devices/pci0000:00/0000:00:00.0/0000:01:00.0/current_link_width"] == "8\n"
    assert after["sysfs/devices/pci0000:00/0000:00:00.0/0000:01:00.0/max_link_width"] == "16\n"
    assert "LnkSta:\tSpeed 16GT/s (downgraded), Width x8 (downgraded)" in after["lspci -vvv"]
    assert "limited by 16.0 GT/s PCIe x8 link at 0000:00:00.0" in after["dmesg"]
    assert_clears(node, before)


def test_pcie_speed(node):
    before, after = inject(node, "pcie-speed", npu=0, speed=8.0)
    fn = "sysfs/devices/pci0000:c0/0000:c0:00.0/0000:c1:00.0/current_link_speed"
    assert changed(before, after) == {"lspci -vvv", "dmesg", fn,
                                      "sysfs/devices/pci0000:c0/0000:c0:00.0/current_link_speed"}
    assert after[fn] == "8.0 GT/s PCIe\n" and before[fn] == "16.0 GT/s PCIe\n"
    assert "LnkSta:\tSpeed 8GT/s (downgraded), Width x16 (ok)" in after["lspci -vvv"]
    assert_clears(node, before)


def test_npu_missing(node):
    before, after = inject(node, "npu-missing", npu=3)
    diff = changed(before, after)
    fn_files = {k for k in before if k.startswith("sysfs/devices/pci0000:00/0000:00:02.0/0000:02:00.0/")}
    assert fn_files and fn_files <= diff and not fn_files & after.keys()
    assert "sysfs/bus/pci/devices/0000:02:00.0" in diff - after.keys()
    expected = ({"npu-smi info", "npu-smi info -m", "npu-smi info -l", "lspci", "lspci -vvv", "dmesg", "/dev",
                 "sysfs/devices/pci0000:00/0000:00:02.0/current_link_speed",
                 "sysfs/devices/pci0000:00/0000:00:02.0/current_link_width",
                 "sysfs/bus/pci/devices/0000:02:00.0"}
                | {f"npu-smi info -t {t} -i 3" for t in INFO_TYPES} | fn_files
                | {f"hccn_tool -i 3 -{g} -g" for g in HCCN_GETS} | {"hccn_tool -i 3 -ping"})
    assert diff == expected
    assert after["npu-smi info -t board -i 3"].startswith("rc=1: Invalid card id.")
    assert "02:00.0" not in after["lspci"] and "/dev/davinci3'" not in after["/dev"]
    assert "| 3     910B3" not in after["npu-smi info"] and "\tTotal Count                    : 7\n" in \
        after["npu-smi info -l"]
    assert after["sysfs/devices/pci0000:00/0000:00:02.0/current_link_width"] == "0\n"
    assert "pciehp: Slot(3): Card not present" in after["dmesg"]
    assert_clears(node, before)


def test_accelerator_vfs(node):
    """SR-IOV on the host's ZIP engines (`echo 2 > .../0000:75:00.0/sriov_numvfs`): their VFs appear beside
    the PF, with physfn/virtfnN links; nothing of the NPUs changes."""
    before, after = inject(node, "accelerator-vfs", engine="zip", count=2)
    pf = "sysfs/devices/pci0000:74/0000:74:00.0/0000:75:00.0"
    vf = "sysfs/devices/pci0000:74/0000:74:00.0/0000:75:00.1"
    diff = changed(before, after)
    links = {"sysfs/bus/pci/devices/0000:75:00.2", "sysfs/bus/pci/devices/0000:b5:00.1"}
    assert {"lspci", "lspci -vvv", "dmesg", f"{pf}/sriov_numvfs", f"{pf}/virtfn0", f"{vf}/device",
            f"{vf}/physfn", *links} <= diff
    assert not {k for k in diff if k.startswith(("npu-smi", "hccn_tool", "/dev", "sysfs/devices/pci0000:00"))}
    assert [ln for ln in after["lspci"].splitlines() if "d802" in ln or "Device " in ln] == [
        ln for ln in before["lspci"].splitlines() if "d802" in ln or "Device " in ln]
    assert after[f"{pf}/sriov_numvfs"] == "2\n" and after[f"{vf}/device"] == "0xa251\n"
    assert after[f"{vf}/physfn"] == "-> ../0000:75:00.0" and after[f"{pf}/virtfn1"] == "-> ../0000:75:00.2"
    assert ("75:00.1 Processing accelerators: Huawei Technologies Co., Ltd. HiSilicon ZIP Engine(Virtual "
            "Function) (rev 21)") in after["lspci"]
    assert "0000:76:00.1" not in after["lspci"]  # the SEC engines keep SR-IOV off
    with pytest.raises(SimError, match=r"outside 0\.\.63"):
        hw.inject_fault(node.state, "accelerator-vfs", count=64)
    duo = hw.initial_state("atlas-300i-duo", node_index=0, node_name="n")
    with pytest.raises(SimError, match="no accelerator engine on n"):
        hw.inject_fault(duo, "accelerator-vfs")
    assert_clears(node, before)


def test_link_down(node):
    before, after = inject(node, "link-down", device=4)
    gets = ("link", "net_health", "link_stat", "optical", "lldp")
    assert changed(before, after) == {f"hccn_tool -i 4 -{g} -g" for g in gets} | {"hccn_tool -i 4 -ping"}
    assert after["hccn_tool -i 4 -link -g"] == "link status: DOWN\n"
    assert after["hccn_tool -i 4 -net_health -g"] == "net health status: Fault\n"
    assert "LINK DOWN" in after["hccn_tool -i 4 -link_stat -g"].split("\n")[2]
    assert "0 received, 100.00% packet loss" in after["hccn_tool -i 4 -ping"]
    assert_clears(node, before)


def test_net_health_fault(node):
    before, after = inject(node, "net-health-fault", device=6)
    assert changed(before, after) == {"hccn_tool -i 6 -net_health -g"}
    assert after["hccn_tool -i 6 -net_health -g"] == "net health status: Fault\n"
    assert_clears(node, before)


def test_device_ip_missing(node):
    before, after = inject(node, "device-ip-missing", device=0)
    assert changed(before, after) == {"hccn_tool -i 0 -ip -g", "hccn_tool -i 0 -ping"}
    assert after["hccn_tool -i 0 -ip -g"] == "rc=1: Get ipconf failed, because no ip was preset there!\n"
    assert_clears(node, before)


def test_device_ip_missing_then_fixed_by_node(node):
    """A node that sets the address again (after the fault) wins; the fault stays in the state."""
    node.write(hw.inject_fault(node.state, "device-ip-missing", device=0))
    node.out("hccn_tool", "-i", "0", "-ip", "-s", "address", "192.1.0.99", "netmask", "255.255.0.0")
    assert node.out("hccn_tool", "-i", "0", "-ip", "-g") == "ipaddr:192.1.0.99\nnetmask:255.255.0.0\n"
    assert "address_0=192.1.0.99\n" in (node.root / "etc" / "hccn.conf").read_text()


def test_device_ip_duplicate(node):
    before, after = inject(node, "device-ip-duplicate", device=5, same_as=1)
    assert changed(before, after) == {"hccn_tool -i 5 -ip -g"}
    assert after["hccn_tool -i 5 -ip -g"] == before["hccn_tool -i 1 -ip -g"]
    assert_clears(node, before)


def test_tls_mismatch(node):
    before, after = inject(node, "tls-mismatch", device=7)
    assert changed(before, after) == {"hccn_tool -i 7 -tls -g"}
    assert after["hccn_tool -i 7 -tls -g"].startswith("dev_id:7, tls switch[1](0:disable, 1:enable)")
    assert_clears(node, before)


def test_driver_version_drift(node):
    before, after = inject(node, "driver-version-drift", version="23.0.6")
    assert changed(before, after) == {"npu-smi info", "driver/version.info"} | {
        f"npu-smi info -t board -i {n}" for n in NPUS}
    assert "| npu-smi 23.0.6                   Version: 23.0.6 " in after["npu-smi info"]
    assert after["driver/version.info"].startswith("Version=23.0.6\n")
    assert after["driver/version.info"].endswith("package_version=23.0.6\n")
    assert_clears(node, before)


def test_firmware_version_drift(node):
    before, after = inject(node, "firmware-version-drift", version="7.1.0.5.220")
    boards = {f"npu-smi info -t board -i {n}" for n in NPUS}
    assert changed(before, after) == {"firmware/version.info"} | boards
    assert "\tFirmware Version               : 7.1.0.5.220\n" in after["npu-smi info -t board -i 0"]
    assert after["firmware/version.info"].endswith("package_version=23.0.7\n")
    assert_clears(node, before)


def test_root_fault_keeps_a_reinstall(node):
    """Clearing drift must not undo a driver the node installed meanwhile."""
    node.write(hw.inject_fault(node.state, "driver-version-drift", version="23.0.6"))
    info = node.root / "usr/local/Ascend/driver/version.info"
    info.write_text("Version=24.1.rc2\n")
    node.write(hw.clear_faults(node.state))
    assert info.read_text() == "Version=24.1.rc2\n"


def test_npu_smi_hang_changes_only_npu_smi(node):
    before, after = inject(node, "npu-smi-hang")
    npu_smi = {k for k in before if k.startswith("npu-smi")}
    assert changed(before, after) == npu_smi
    assert_clears(node, before)


def test_clock_unsynced(node):
    assert "Leap status     : Normal\n" in node.out("chronyc", "tracking")
    before, after = inject(node, "clock-unsynced")
    assert changed(before, after) == {"chronyc tracking"}
    assert after["chronyc tracking"].splitlines()[:3] == [
        "Reference ID    : 00000000 ()", "Stratum         : 0", "Ref time (UTC)  : Thu Jan 01 00:00:00 1970"]
    assert after["chronyc tracking"].endswith("Leap status     : Not synchronised\n")
    assert_clears(node, before)


def test_clock_offset_changes_only_chronyc_and_keeps_it_synchronised(node):
    before, after = inject(node, "clock-offset", seconds=612)
    assert changed(before, after) == {"chronyc tracking"}
    tracking = after["chronyc tracking"]
    assert "System time     : 612.000000000 seconds fast of NTP time\n" in tracking
    assert tracking.endswith("Leap status     : Normal\n")  # chronyd slews it: still synchronised
    assert_clears(node, before)


# ---------------------------------------------------------------- performance faults (issue 29): ascend-dmi

def _dmi(node, *args: str) -> str:
    return node.out("ascend-dmi", *args, "-q")


def _perf_inject(node, kind, **params):
    """The fault changes no tool output but ascend-dmi's (npu-smi keeps reporting a healthy chip)."""
    before, after = inject(node, kind, **params)
    assert changed(before, after) == set()
    return before


def test_npu_throttle(node):
    healthy = _dmi(node, "-f", "-d", "1")
    before = _perf_inject(node, "npu-throttle", npu=1, factor="0.6")
    slow = _dmi(node, "-f", "-d", "1")
    value = lambda text: float(text.splitlines()[3].split()[3])  # noqa: E731 - the TFLOPS cell
    assert value(slow) == pytest.approx(0.6 * value(healthy), rel=1e-3)
    assert _dmi(node, "-f", "-d", "2") == _dmi(node, "-f", "-d", "2")  # the others keep their figure
    assert value(_dmi(node, "-f", "-d", "2")) > 290
    assert_clears(node, before)
    assert _dmi(node, "-f", "-d", "1") == healthy
    every = hw.inject_fault(node.state, "npu-throttle", npu="all", factor=0.5)
    assert {c["perf"]["flops"] for n in every["npus"] for c in n["chips"]} == {0.5}
    with pytest.raises(SimError, match="factor"):
        hw.inject_fault(node.state, "npu-throttle", factor=1.5)


def test_hbm_degraded(node):
    healthy = _dmi(node, "--bw", "-t", "d2d", "-d", "2")
    before = _perf_inject(node, "hbm-degraded", npu=2, factor=0.5)
    bw = lambda text: float(text.splitlines()[2].split()[3])  # noqa: E731 - the Bandwidth(GB/s) cell
    assert bw(_dmi(node, "--bw", "-t", "d2d", "-d", "2")) == pytest.approx(bw(healthy) / 2, rel=1e-3)
    assert bw(_dmi(node, "--bw", "-t", "d2d", "-d", "3")) > 1500
    assert_clears(node, before)


def test_hccs_link_down(node):
    before = _perf_inject(node, "hccs-link-down", device=0, other=5)
    rows = {int(r.split()[0]): r.split()[1:] for r in _dmi(node, "--bw", "-t", "p2p").split("\n\n")[0]
            .splitlines()[2:]}
    assert float(rows[0][5]) == float(rows[5][0]) < 25 < 50 < float(rows[0][4])  # through the host's PCIe
    assert_clears(node, before)
    with pytest.raises(SimError, match="two different devices"):
        hw.inject_fault(node.state, "hccs-link-down", device=3, other=3)


def test_pcie_width_halves_the_host_device_copies(node):
    args = ("--bw", "-t", "h2d", "-d", "1", "-s", "536870912", "--et", "50")
    bw = lambda text: float(text.splitlines()[2].split()[3])  # noqa: E731
    healthy = bw(_dmi(node, *args))
    node.write(hw.inject_fault(node.state, "pcie-width", npu=1, width=8))
    assert bw(_dmi(node, *args)) == pytest.approx(healthy / 2, rel=1e-3)
    assert bw(_dmi(node, "--bw", "-t", "d2h", "-d", "1")) < 13
    text, rc = node.run("ascend-dmi", "-f", "-d", "1")  # without -q it asks first; a probe never does
    assert rc == 1 and text.endswith("Do you want to continue?(Y/N)\n")
    text, rc = node.run("ascend-dmi", "-f", "-d", "9", "-q")
    assert rc == 1 and "device ID does not exist" in text


def test_every_fault_kind_is_covered():
    tested = {name[5:].replace("_", "-") for name in globals() if name.startswith("test_")}
    missing = [kind for kind in hw.FAULTS if not any(t.startswith(kind) for t in tested)]
    assert missing == []


def test_bad_fault_requests(a2_state):
    with pytest.raises(SimError, match="unknown fault"):
        hw.inject_fault(a2_state, "melted")
    with pytest.raises(SimError, match="unknown parameter"):
        hw.inject_fault(a2_state, "hot-chip", celsius=90)
    with pytest.raises(SimError, match="no NPU 9"):
        hw.inject_fault(a2_state, "chip-health", npu=9)
    duo = hw.initial_state("atlas-300i-duo", node_index=0, node_name="n")
    with pytest.raises(SimError, match="no device NIC"):
        hw.inject_fault(duo, "link-down", device=0)


def test_string_parameters_from_the_cli(a2_state):
    state = hw.inject_fault(a2_state, "chip-health", npu="3", codes="A4025021,8C084E00")
    assert state["npus"][3]["chips"][0]["error_codes"] == ["A4025021", "8C084E00"]
    slow = hw.inject_fault(a2_state, "pcie-speed", npu="1", speed="5")
    assert slow["pci_functions"][1]["link_trained"] == {"speed": 5.0, "width": 16}
    with pytest.raises(SimError, match="is not a number"):
        hw.inject_fault(a2_state, "hot-chip", temp_c="hot")


def test_inject_is_pure(a2_state):
    import copy
    pristine = copy.deepcopy(a2_state)
    new = hw.inject_fault(a2_state, "npu-missing", npu=0)
    assert a2_state == pristine and new is not a2_state
    assert new["faults"] == [{"id": 1, "kind": "npu-missing", "params": {"npu": 0}}]


def test_sdc_puts_the_torch_hook_into_the_node_and_clearing_takes_it_out(a2_state, tmp_path):
    """The sdc fault is no tool's output: it is the node's CPU torch computing wrong (sim/hw/sdc_hook.py; the
    bits it flips are in tests/checks/data/sdc, judged in tests/checks/test_sdc.py)."""
    import json

    from ascend_ready.sim.hw.faults import SDC_FILES

    state = hw.inject_fault(a2_state, "sdc", device="3", bit="7")
    hw.apply_root_faults(state, tmp_path)
    assert json.loads((tmp_path / SDC_FILES["fault"]).read_text()) == {"device": 3, "bit": 7, "index": 0,
                                                                       "kernel": "matmul"}
    assert (tmp_path / SDC_FILES["hook"]).read_text().startswith('"""The simulator\'s device emulation')
    assert (tmp_path / SDC_FILES["profile"]).read_text() == (
        "export PYTHONPATH=/usr/lib/ascend-sim/sdc${PYTHONPATH:+:$PYTHONPATH}\n")
    hw.apply_root_faults(hw.clear_faults(state), tmp_path)
    assert not any((tmp_path / p).exists() for p in SDC_FILES.values())
    with pytest.raises(SimError, match="no device 99"):
        hw.inject_fault(a2_state, "sdc", device=99)
    with pytest.raises(SimError, match=r"bit in 0\.\.15"):
        hw.inject_fault(a2_state, "sdc", bit=16)
