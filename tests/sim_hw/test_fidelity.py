"""Byte-for-byte fidelity: each shared vendor sample rendered back from a simulated state.

Only the whitespace caveats documented in the samples' headers are allowed: a TAB in the real tool's
output appears as 8 spaces in some copies, and the lspci dump was tab-expanded, stripped of trailing
spaces and hard-wrapped by the author's terminal.
"""

from __future__ import annotations

import calendar
import time
from pathlib import Path

import pytest

from ascend_ready.sim import hw
from ascend_ready.sim.hw.state import device_nodes
from ascend_ready.sim.render import hccn, npu_smi

TAB = "\t"


def tabs_as_spaces(text: str) -> str:
    return text.replace(TAB, " " * 8)


def epoch(stamp: str) -> int:
    return calendar.timegm(time.strptime(stamp, "%a %b %d %H:%M:%S %Y"))


def set_chips(state: dict, rows: list[tuple], *, name: str | None = None) -> dict:
    """Per chip in order: (power_w, temp_c, hbm_used_mb[, memory_used_mb, memory_total_mb, hugepages])."""
    chips = [chip for npu in state["npus"] for chip in npu["chips"]]
    for chip, row in zip(chips, rows, strict=True):
        chip["power_w"], chip["temp_c"], used = row[:3]
        if chip["hbm_total_mb"]:
            chip["hbm_used_mb"] = used
        if len(row) > 3:
            chip["memory_used_mb"], chip["memory_total_mb"] = row[3], row[4]
            chip["hugepages_used"] = chip["hugepages_total"] = row[5]
        if name:
            chip["name"] = name
    return state


# ---------------------------------------------------------------- npu-smi info (main table, §3 model)

def test_main_table_910b2_23_0_7(make_node, sample):
    state = hw.initial_state("atlas-800t-a2", node_index=0, node_name="n")
    set_chips(state, [(96.5, 36, 29954), (98.7, 37, 29951), (94.2, 35, 29950), (91.5, 38, 29951),
                      (96.6, 36, 3347), (96.0, 39, 3350), (97.5, 35, 3347), (93.8, 37, 3347)], name="910B2")
    node = make_node(state, driver="23.0.7")
    model = npu_smi.table_model(node.view())
    assert model["layout"] == "910-98"
    assert model["npus"][0]["chips"][0] == {
        "chip_id": 0, "phy_id": None, "device_id": None, "name": "910B2", "health": "OK", "power_w": 96.5,
        "temp_c": 36, "bus_id": "0000:C1:00.0", "aicore_pct": 0, "memory_used_mb": 0, "memory_total_mb": 0,
        "hbm_used_mb": 29954, "hbm_total_mb": 65536, "hugepages_used": 0, "hugepages_total": 0}
    assert node.out("npu-smi", "info") == sample("npu-smi-info_910b2_23.0.7_vllm-ascend-362.txt")


def test_main_table_a3_24_1_rc3_7(make_node, sample):
    state = hw.initial_state("atlas-800t-a3", node_index=0, node_name="n")
    rows = [(178.5, 36, 3416), (None, 36, 3189), (188.2, 36, 3413), (None, 35, 3185), (176.6, 36, 3412),
            (None, 37, 3186), (178.5, 36, 3412), (None, 36, 3185), (180.9, 37, 3402), (None, 36, 3198),
            (188.7, 36, 3399), (None, 36, 3201), (183.0, 37, 3400), (None, 36, 3200), (186.4, 36, 3413),
            (None, 37, 3188)]
    node = make_node(set_chips(state, rows), driver="24.1.rc3.7")
    model = npu_smi.table_model(node.view())
    assert [c["phy_id"] for c in model["npus"][7]["chips"]] == [14, 15]
    assert node.out("npu-smi", "info") == sample("npu-smi-info_910-93-a3_24.1.rc3.7_vllm-ascend-2666.txt")


def test_main_table_310p3_duo_with_processes(make_node, sample):
    state = hw.initial_state("atlas-300i-duo", node_index=0, node_name="n")
    state["npus"] = state["npus"][:2]
    set_chips(state, [(None, 62, 0, 16302, 44280, 7210), (None, 62, 0, 15543, 43693, 7210),
                      (None, 61, 0, 35563, 44280, 17057), (None, 61, 0, 35204, 43693, 16823)])
    # the resident memory of the sample is what the processes hold on top of the idle reservation
    procs = [(1, 0, 3277562, 14513), (1, 1, 3277565, 14513), (2, 0, 3034986, 34207), (2, 1, 3034989, 33740)]
    for npu_id, chip_id, pid, mem in procs:
        state = hw.inject_fault(state, "stray-process", npu=npu_id, chip=chip_id, pid=pid,
                                name="mindie_llm_back", memory_mb=mem)
        chip = state["npus"][npu_id - 1]["chips"][chip_id]
        chip["memory_used_mb"] -= mem
    node = make_node(state, driver="24.1.0.1")
    assert npu_smi.table_model(node.view())["layout"] == "310p-106"
    assert node.out("npu-smi", "info") == sample("npu-smi-info_310p3-duo-x2-procs_24.1.0.1_nputop-test.txt")


# ---------------------------------------------------------------- npu-smi info -t / -m / -l

@pytest.fixture
def a2_25(make_node):
    """NPU 0 of the 25.5.1 910B host of the telegraf fixtures."""
    state = hw.initial_state("atlas-800t-a2", node_index=0, node_name="n")
    npu = state["npus"][0]
    npu["serial"] = "1025C9048791"
    chip = npu["chips"][0]
    chip.update(temp_c=39, hbm_used_mb=3400, ctrlcpu_pct=6)
    return make_node(state, driver="25.5.1", firmware="7.8.0.6.201")


def test_info_board(a2_25, sample):
    out = a2_25.out("npu-smi", "info", "-t", "board", "-i", "0")
    assert out.startswith(TAB)
    assert tabs_as_spaces(out) == sample("npu-smi-info-t-board_910b-d802_25.5.1_yunion-telegraf-test.txt")


def test_info_temp(a2_25, sample):
    out = a2_25.out("npu-smi", "info", "-t", "temp", "-i", "0")
    assert tabs_as_spaces(out) == sample("npu-smi-info-t-temp_910b_25.5.1_yunion-telegraf-test.txt")


def test_info_usages(a2_25, sample):
    out = a2_25.out("npu-smi", "info", "-t", "usages", "-i", "0")
    assert tabs_as_spaces(out) == sample("npu-smi-info-t-usages_910b_25.5.1_yunion-telegraf-test.txt")


def test_info_usages_23_has_no_25x_keys(make_node, a2_state):
    out = make_node(a2_state, driver="23.0.7").out("npu-smi", "info", "-t", "usages", "-i", "0")
    assert "Aivector" not in out and "NPU Utilization(%)" not in out
    assert "\tHBM Capacity(MB)               : 65536\n" in out


def test_info_health_alarm(make_node, a2_state, sample):
    state = hw.inject_fault(a2_state, "chip-health", npu=0, level="Alarm")
    out = make_node(state).out("npu-smi", "info", "-i", "0", "-c", "0", "-t", "health")
    # the raw capture keeps TABs: compared byte for byte
    assert out == sample("npu-smi-info-t-health_alarm-multicode_mindcluster-faultdiag.txt")


def test_info_mapping(a2_25, sample):
    out = a2_25.out("npu-smi", "info", "-m")
    kept = "".join(out.splitlines(keepends=True)[:5])   # the sample was cut to NPU 0 and 1
    assert kept == sample("npu-smi-info-m_910b3-mcu_25.5.1_ts-probe-test-EXCERPT.txt")
    assert len(out.splitlines()) == 1 + 8 * 2


def test_info_list(a2_25, sample):
    out = a2_25.out("npu-smi", "info", "-l")
    assert tabs_as_spaces(out) == sample("npu-smi-info-l_910b-8npu_yunion-telegraf-test.txt")


def test_info_power_and_common(a2_25):
    chip = a2_25.state["npus"][0]["chips"][0]
    assert a2_25.out("npu-smi", "info", "-t", "power", "-i", "0") == \
        f"\tPower Dissipation(W)           : {chip['power_w']:.1f}\n"
    common = a2_25.out("npu-smi", "info", "-t", "common", "-i", "0")
    assert "\tTemperature(C)                 : 39\n" in common
    assert common.endswith("\tChip Name                      : mcu\n\tTemperature(C)                 : 36\n")


# ---------------------------------------------------------------- hccn_tool and hccn.conf

def test_hccn_ip_loop(make_node, a2_state, sample):
    addresses = ["192.1.45.172", "192.2.167.33", "192.3.103.252", "192.4.166.202",
                 "192.1.157.81", "192.2.8.198", "192.3.26.213", "192.4.32.120"]
    node = make_node(a2_state)
    for d, address in enumerate(addresses):
        node.out("hccn_tool", "-i", str(d), "-ip", "-s", "address", address, "netmask", "255.255.0.0")
    blocks = [f"/usr/local/Ascend/driver/tools/hccn_tool -i {d} -ip -g\n"
              + node.out("hccn_tool", "-i", str(d), "-ip", "-g") for d in range(8)]
    assert "\n".join(blocks) == sample("hccn_tool-ip-g-loop_8npu_mindcluster-faultdiag-worker9.txt")


def test_hccn_ip_unset(make_node, a2_state):
    assert make_node(a2_state).run("hccn_tool", "-i", "3", "-ip", "-g") == \
        ("Get ipconf failed, because no ip was preset there!\n", 1)


def test_hccn_link_stat(make_node, a2_state, sample):
    # The fixture's weekdays belong to 2023 (Tue Aug 1), its year says 2022: a real clock cannot print
    # both, so the comparison runs in 2023 and swaps the year only.
    nic = a2_state["npus"][0]["chips"][0]["nic"]
    nic["link_events"] = [[epoch("Tue Aug  1 14:43:26 2023"), "UP"],
                          [epoch("Tue Aug  1 14:43:40 2023"), "DOWN"],
                          [epoch("Tue Aug  1 14:43:40 2023"), "UP"]]
    view = make_node(a2_state, driver="23.0.7").view()
    result = hccn.run(view, ["-i", "0", "-link_stat", "-g"], now=epoch("Wed Aug  2 03:09:26 2023"))
    expected = sample("hccn_tool-link_stat-g_910a_mindcluster-faultdiag.txt")
    assert result.text == expected.replace(" 2022", " 2023")
    newer = make_node(a2_state, driver="24.1.rc2").view()
    assert hccn.run(newer, ["-i", "0", "-link_stat", "-g"]).text.startswith("[device 0]current time")


def test_hccn_net_health_socket_failed(make_node, a2_state, sample):
    state = hw.inject_fault(a2_state, "net-health-fault", device=0, status="Socket failed")
    node = make_node(state)
    assert node.out("hccn_tool", "-i", "0", "-net_health", "-g") == \
        sample("hccn_tool-net_health-g_socket-failed_mindcluster-faultdiag.txt")


def test_hccn_ping(make_node, a2_state, sample):
    node = make_node(a2_state)
    node.out("hccn_tool", "-i", "3", "-ip", "-s", "address", "29.1.137.206", "netmask", "255.255.0.0")
    text = sample("hccn_tool-ping-g_910b1_arthurchiao-blog.txt")
    command, expected = text.split("\n", 1)
    assert command == "$ hccn_tool -i 3 -ping -g address 29.1.137.205"
    assert node.out("hccn_tool", *command.split()[2:]) == expected


def test_hccn_conf(make_node, a2_state, sample):
    node = make_node(a2_state)
    conf = node.root / "etc" / "hccn.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("send_arp_status_0=1\nsend_arp_status_7=1\n")   # written by the cloud image
    for d, address in ((0, "29.1.137.205"), (7, "29.1.170.143")):
        node.out("hccn_tool", "-i", str(d), "-ip", "-s", "address", address, "netmask", "255.255.0.0")
        node.out("hccn_tool", "-i", str(d), "-netdetect", "-s", "address", "29.1.0.1")
        node.out("hccn_tool", "-i", str(d), "-gateway", "-s", "gateway", "29.1.0.1")
    lines = sample("hccn.conf_8npu-gateway-netdetect_arthurchiao-blog.txt").splitlines(keepends=True)
    assert lines[0].startswith("$ cat /etc/hccn.conf") and lines[6] == "...\n"
    assert conf.read_text() == "".join(lines[1:6] + lines[7:])


def test_hccn_tls(make_node, a2_state):
    node = make_node(hw.inject_fault(a2_state, "tls-mismatch", device=2))
    switches = [node.out("hccn_tool", "-i", str(d), "-tls", "-g").split("\n")[0] for d in range(3)]
    assert switches[0] == ("dev_id:0, tls switch[0](0:disable, 1:enable), tls preconfigured[1](0:non-preset, "
                           "1:preset), tls alarm time threshold[60]days")
    assert "tls switch[1]" in switches[2] and "tls switch[0]" in switches[1]


# ---------------------------------------------------------------- lspci, /dev

def test_lspci_vvv_one_npu(make_node, a2_state, sample):
    a2_state["product"]["pci_subsys_device"] = "3002"
    fn = next(f for f in a2_state["pci_functions"] if f["bdf"] == "0000:01:00.0")
    fn.update(irq=102, numa_node=0, bar_base=0x82000000000, dsn="04-02-20-02-04-02-20-02")
    out = make_node(a2_state, driver="23.0.rc3").out("lspci", "-vvv", "-s", "01:00.0")
    assert out.endswith("\n\n")   # lspci ends each verbose block with an empty line
    got = [line.expandtabs(8).rstrip() for line in out[:-1].splitlines()]
    want = sample("lspci-vvv_910b4-d802_link-downgraded_kata-npu-passthrough-doc.txt").splitlines()
    want[-4:] = ["".join(want[-4:])]   # undo the terminal's hard wrap (150 cols) of "Kernel modules:"
    assert got == want
    assert "\t\tLnkSta:\tSpeed 16GT/s (downgraded), Width x16 (ok)\n" in out


def test_lspci_grep_acce(make_node, a2_state, sample):
    # The capture's host shows no accelerator of its own (a Kunpeng with KAE shows its ZIP engines here
    # too, see test_lspci_lists_the_kunpeng_host_functions).
    a2_state["host_functions"] = []
    a2_state["product"]["pci_device"] = "d801"
    buses = ["3d", "3e", "60", "61", "b1", "b2", "da", "db"]
    for fn, bus in zip(a2_state["pci_functions"], buses, strict=True):
        fn["bdf"] = f"0000:{bus}:00.0"
    out = make_node(a2_state).out("lspci")
    acce = "".join(line for line in out.splitlines(keepends=True) if "acce" in line)
    assert acce == sample("lspci-grep-acce_910a-d801-8dev_mindcluster-faultdiag.txt")


def test_ls_dev_davinci(a2_state, sample):
    paths = sorted(n["path"] for n in device_nodes(a2_state) if n["path"].startswith("/dev/davinci"))
    assert sample("ls-dev-davinci_910b1-8npu_arthurchiao-blog.txt").split("\n")[1] == "  ".join(paths)
    managers = {n["path"]: (n["major"], n["minor"], n["owner"]) for n in device_nodes(a2_state)}
    assert managers["/dev/hisi_hdc"] == (237, 0, "HwHiAiUser")
    assert managers["/dev/devmm_svm"] == (238, 0, "HwHiAiUser")


def test_lspci_lists_the_kunpeng_host_functions(make_node, a2_state):
    """Titles as the Kunpeng captures print them (kunpengcompute/KAE README `lspci | grep ZIP|SEC|HPRE|RDE`;
    an openEuler 22.03 `lspci -Dnn`), class 1200 for ZIP and 1000 for SEC/HPRE."""
    node = make_node(a2_state)
    hw_ = "Huawei Technologies Co., Ltd. HiSilicon"
    plain = node.out("lspci").splitlines()
    for line in (f"75:00.0 Processing accelerators: {hw_} ZIP Engine (rev 21)",
                 f"76:00.0 Network and computing encryption device: {hw_} SEC Engine (rev 21)",
                 f"78:01.0 RAID bus controller: {hw_} RDE Engine (rev 21)",
                 f"79:00.0 Network and computing encryption device: {hw_} HPRE Engine (rev 21)",
                 f"b5:00.0 Processing accelerators: {hw_} ZIP Engine (rev 21)",
                 f"74:02.0 Serial Attached SCSI controller: {hw_} SAS 3.0 HBA (rev 21)",
                 f"7a:02.0 USB controller: {hw_} USB 3.0 Host Controller (rev 21)"):
        assert line in plain
    nn = node.out("lspci", "-D", "-nn")
    assert ("0000:bd:00.0 Ethernet controller [0200]: Huawei Technologies Co., Ltd. HNS GE/10GE/25GE RDMA "
            "Network Controller [19e5:a222] (rev 21)\n") in nn
    assert (f"0000:76:00.0 Network and computing encryption device [1000]: {hw_} SEC Engine [19e5:a255] "
            "(rev 21)\n") in nn
    accel = [ln for ln in nn.splitlines() if "[1200]" in ln]
    assert len(accel) == 10 and sum("[19e5:d802]" in ln for ln in accel) == 8
    vvv = node.out("lspci", "-vvv", "-s", "74:03.0")
    assert vvv.startswith(f"74:03.0 SATA controller: {hw_} AHCI HBA (rev 21) (prog-if 01 [AHCI 1.0])\n")
    assert "\tCapabilities: [40] Express (v2) Root Complex Integrated Endpoint, MSI 00\n" in vvv
    assert "Kernel driver in use: hisi_zip\n" in node.out("lspci", "-k", "-s", "75:00.0")


def test_npu_smi_topo(make_node, a2_state):
    """`npu-smi info -t topo`: the A2 rows are those of the ArthurChiao 910B1 capture (same bus order, so the
    same CPU affinities), header and legend those of the ms-swift 910B3 capture (TAB + 3 spaces, NA line);
    the A3's SIO/HCCS_SW pattern and legend those of the sglang#30453 capture."""
    real = Path(__file__).parents[1] / "parsers" / "real"
    blog = (real / "npu-smi-info-t-topo_910b1-8npu-hccs_23.0.rc2_arthurchiao-blog.txt").read_text()
    blog = blog.splitlines()
    swift = (real / "npu-smi-info-t-topo_910b3-8npu-hccs-prompt_24.1.rc1_ms-swift-doc.txt").read_text()
    swift = swift.split("\n", 1)[1]  # the prompt line
    capture = (real / "npu-smi-info-t-topo_ascend910-93-a3-phyid-sio_container_sglang-30453.txt").read_text()
    a3_legend = capture[capture.index("Legend:"):]
    out = make_node(a2_state).out("npu-smi", "info", "-t", "topo")
    lines = out.splitlines()
    assert lines[0] == swift.splitlines()[0]
    assert lines[1:9] == blog[2:10]
    # the legend of a raw capture ("multipul", as the tool spells it; the ms-swift doc corrected it)
    assert out[out.index("Legend:"):] == "".join(
        line for line in a3_legend.splitlines(keepends=True) if not line.startswith(("  SIO", "  HCCS_SW")))
    a3 = make_node(hw.initial_state("atlas-800t-a3", node_index=0, node_name="n"), driver="24.1.rc3.7")
    a3_out = a3.out("npu-smi", "info", "-t", "topo")
    assert a3_out[a3_out.index("Legend:"):] == a3_legend
    row12 = next(line for line in a3_out.splitlines() if line.startswith("Phy-ID12 "))
    assert row12.split() == ["Phy-ID12", *["HCCS_SW"] * 12, "X", "SIO", "HCCS_SW", "HCCS_SW"]
    duo = make_node(hw.initial_state("atlas-300i-duo", node_index=0, node_name="n"), driver="24.1.0.1")
    assert duo.run("npu-smi", "info", "-t", "topo")[1] == 1
