"""Every captured output in tests/parsers/real/ (see its INDEX.md) through its parser, with real values.

These captures were not used to write the parsers: they come from vllm-ascend/ollama/HAMi issues, vendor
documentation copied into gpustack and MindCluster, and public notes. Outputs a parser must refuse
(masked or edited pastes) are kept too, and their ParseError must name the offending line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascend_ready.checks.parsers.base import get_parser
from ascend_ready.checks.parsers.hccn import (
    parse_hccn_fec,
    parse_hccn_hw_stats,
    parse_hccn_link_stat,
    parse_hccn_optical,
    parse_hccn_route,
    parse_hccn_status,
)
from ascend_ready.checks.parsers.lspci import parse_lspci
from ascend_ready.checks.parsers.npu_smi_info import parse_npu_smi_info
from ascend_ready.checks.parsers.npu_smi_kv import (
    parse_npu_smi_board,
    parse_npu_smi_health,
    parse_npu_smi_usages,
)
from ascend_ready.checks.parsers.npu_smi_topo import parse_npu_smi_topo
from ascend_ready.checks.parsers.version_info import parse_toolkit_install_info
from ascend_ready.errors import ParseError

REAL = Path(__file__).parent / "real"

#: file -> the parser KIND it is output of
KINDS = {
    "npu-smi-info_910a-93col_22.0.3.1_gpustack-huawei-doc.txt": "npu-smi-info",
    "npu-smi-info_910a-93col-warning-procs_24.1.RC2_gpustack-huawei-doc.txt": "npu-smi-info",
    "npu-smi-info_310-102col-4chip_21.0.4.B030_gpustack-huawei-doc.txt": "npu-smi-info",
    "npu-smi-info_910prob-93col-container_23.0.rc1_vllm-ascend-237.txt": "npu-smi-info",
    "npu-smi-info_910prob-93col-blankline-proc_23.0.rc1_mindformers-blog.txt": "npu-smi-info",
    "npu-smi-info_910prob-98col-ddr_24.1.0_vllm-ascend-1047.txt": "npu-smi-info",
    "npu-smi-info_910b-first-gen-910-ddr_24.1.0_opdev-910a-readme.txt": "npu-smi-info",
    "npu-smi-info_910b4-mindie-procs_24.1.rc2_mindie-notes.txt": "npu-smi-info",
    "npu-smi-info_910b2c-16npu-x86-procs_25.0.rc1.1_vllm-ascend-2732.txt": "npu-smi-info",
    "npu-smi-info_310b4-sudo-prompt_23.0.rc3_atlas200i-dk-notes.txt": "npu-smi-info",
    "npu-smi-info_310p3-duo-hostview-PARTIAL_24.1.rc2_ollama-5315.txt": "npu-smi-info",
    "npu-smi-info_ascend910-a3-116col-PARTIAL_26.0.rc2_vllm-ascend-12980.txt": "npu-smi-info",
    "npu-smi-info_910b4-1-masked-busid-cut_25.2.0_hami-webui-47.txt": "npu-smi-info",
    "npu-smi-info_910a-xxx-edited-no-proc-header_24.1.rc2_llama-cpp-cann-doc.txt": "npu-smi-info",
    "error_npu-smi_dcmi-8005-module-initialize_vllm-ascend-2698.txt": "npu-smi-info",
    "npu-smi-info-t-board_910a-card_23.0.5_mindcluster-faultdiag.txt": "npu-smi-board",
    "npu-smi-info-t-board-c0_910a-chip_23.0.5_mindcluster-faultdiag.txt": "npu-smi-board",
    "npu-smi-info-t-usages_910a_23.0.5_mindcluster-faultdiag.txt": "npu-smi-usages",
    "npu-smi-info-t-ecc_910a-ddr-hbm-aggregate_23.0.5_mindcluster-doc.txt": "npu-smi-ecc",
    "npu-smi-info-t-health_910a-ok-na_mindcluster-doc.txt": "npu-smi-health",
    "hccn_tool-optical-g_910a-hisense-not-present_mindcluster-faultdiag.txt": "hccn-optical",
    "hccn_tool-fec-g_910a-no-fec_mindcluster-faultdiag.txt": "hccn-fec",
    "hccn_tool-link_stat-g_flap-with-down-count_hccl-troubleshooting-doc.txt": "hccn-link-stat",
    "hccn_tool-link_stat-g_device-prefix_mindcluster-doc.txt": "hccn-link-stat",
    "ascend_toolkit_install.info_8.1.RC1-bracket-prompt_vllm-ascend-1047.txt": "toolkit-install-info",
    "ascend_toolkit_install.info_8.2.RC1-x86_64_vllm-ascend-2732.txt": "toolkit-install-info",
    "ascend_toolkit_install.info_8.0.T6-gt-prompt_mllm-npu-readme.txt": "toolkit-install-info",
    "npu-smi-info-t-board_910a-bare-command_23.0.5_mindcluster-doc.txt": "npu-smi-board",
    "npu-smi-info-t-topo_910b3-8npu-hccs-prompt_24.1.rc1_ms-swift-doc.txt": "npu-smi-topo",
    "npu-smi-info-t-topo_910b1-8npu-hccs_23.0.rc2_arthurchiao-blog.txt": "npu-smi-topo",
    "npu-smi-info-t-topo_ascend910-93-a3-phyid-sio_container_sglang-30453.txt": "npu-smi-topo",
    "hccn_tool-status-g_eth3-200G-fibre-bare-command_ascend-notes.txt": "hccn-status",
    "hccn_tool-status-g_eth3-ELIDED_arthurchiao-blog.txt": "hccn-status",
    "hccn_tool-hw_stats-g_devid3_arthurchiao-blog.txt": "hccn-hw-stats",
    "hccn_tool-route-g_default-gw_arthurchiao-blog.txt": "hccn-route",
    "hccn_tool-route-g_no-default-gt-prompt_ascend-notes.txt": "hccn-route",
    "hccn_tool-lldp-g_huawei-vrp-sysdesc_arthurchiao-blog.txt": "hccn-lldp",
    "lspci-grep-ZIP_kunpeng920-zip-engine-bare-command_kae-readme.txt": "lspci",
    "lspci-Dnn-grep-network_kunpeng920-sec-engine-bash-prompt_openeuler-notes.txt": "lspci",
    "ascend-dmi-f-int8-fp16_310p_cann8.5.0_orange-station-notes.txt": "ascend-dmi-flops",
    "ascend-dmi-f-fp16_a3-npu0-2die_26.1_flagperf-fixture.txt": "ascend-dmi-flops",
    "ascend-dmi-bw-h2d_a3-2dev_26.1_flagperf-fixture.txt": "ascend-dmi-bw",
    "ascend-dmi-bw-p2p-card_a3-3npu_26.1_flagperf-fixture.txt": "ascend-dmi-p2p",
}

#: file -> (line number, words of the reason) of the ParseError its parser must raise
REFUSED = {
    "npu-smi-info_910b4-1-masked-busid-cut_25.2.0_hami-webui-47.txt": (8, "Bus-Id '0000:xx:00.0'"),
    "npu-smi-info_910a-xxx-edited-no-proc-header_24.1.rc2_llama-cpp-cann-doc.txt":
        (13, "process-table header"),
    "error_npu-smi_dcmi-8005-module-initialize_vllm-ascend-2698.txt": (2, "printed an error"),
    # the blog author elided the mode list and the lines after Speed with `...`: not ethtool output
    "hccn_tool-status-g_eth3-ELIDED_arthurchiao-blog.txt": (12, "'Key: value'"),
}


def real(name: str) -> str:
    return (REAL / name).read_text()


def test_every_capture_is_listed_here_and_in_the_index():
    files = {p.name for p in REAL.glob("*.txt")}
    assert files == set(KINDS)
    index = (REAL / "INDEX.md").read_text()
    assert not [name for name in files if f"`{name}`" not in index]


@pytest.mark.parametrize("name", sorted(set(KINDS) - set(REFUSED)))
def test_capture_parses(name):
    model = get_parser(KINDS[name])(real(name))
    assert model.model_dump()


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_capture_names_its_line(name):
    line_no, words = REFUSED[name]
    with pytest.raises(ParseError) as exc:
        get_parser(KINDS[name])(real(name))
    assert exc.value.line_no == line_no
    assert words in exc.value.reason
    assert exc.value.line == real(name).splitlines()[line_no - 1]


# -- npu-smi info main table -------------------------------------------------------------------------------

def chips(info):
    return [c for n in info.npus for c in n.chips]


def test_910a_93_columns_22x():
    info = parse_npu_smi_info(real("npu-smi-info_910a-93col_22.0.3.1_gpustack-huawei-doc.txt"))
    assert (info.layout, info.tool_version, info.driver_version) == ("910-93", "22.0.3.1", "22.0.3.1")
    assert [n.id for n in info.npus] == list(range(8)) and {n.name for n in info.npus} == {"910A"}
    assert info.process_table == "absent" and not info.truncated
    npu3 = info.npus[3]
    assert (npu3.power_w, npu3.temp_c, npu3.chips[0].bus_id) == (191.7, 42, "0000:3E:00.0")
    assert {(c.hugepages_used, c.hugepages_total) for c in chips(info)} == {(15, 15)}
    assert (chips(info)[0].memory_used_mb, chips(info)[0].memory_total_mb) == (1867, 15077)
    assert (chips(info)[0].hbm_used_mb, chips(info)[0].hbm_total_mb) == (0, 32768)


def test_910a_93_columns_warning_cards_and_four_processes_each():
    info = parse_npu_smi_info(real("npu-smi-info_910a-93col-warning-procs_24.1.RC2_gpustack-huawei-doc.txt"))
    assert (info.layout, info.driver_version) == ("910-93", "24.1.RC2")
    assert [n.id for n in info.npus if n.health != "OK"] == [3, 7]
    assert {n.health for n in info.npus} == {"OK", "Warning"}
    assert info.npus[3].power_w == 206.9 and info.npus[3].chips[0].memory_total_mb == 15039
    assert {n.name for n in info.npus} == {"xxx"}  # Huawei masks the chip name in its manuals
    assert len(info.processes) == 32
    assert [p.pid for p in info.processes if p.npu_id == 7] == [37671, 37647, 37655, 37663]
    assert {(p.name, p.memory_mb) for p in info.processes} == {("hlt_host_devmm_", 686)}
    assert chips(info)[0].hugepages_used == 1232


def test_310_102_columns_four_chips_on_npu_6():
    info = parse_npu_smi_info(real("npu-smi-info_310-102col-4chip_21.0.4.B030_gpustack-huawei-doc.txt"))
    assert (info.layout, info.tool_version, info.driver_version) == ("310-102", "21.0.4", "21.0.4.B030")
    assert [n.id for n in info.npus] == [6]
    npu = info.npus[0]
    assert [(c.chip_id, c.device_id) for c in npu.chips] == [(0, 3), (1, 4), (2, 5), (3, 6)]
    assert [c.bus_id for c in npu.chips] == ["0000:89:00.0", "0000:8A:00.0", "0000:8B:00.0", "0000:8C:00.0"]
    assert [c.temp_c for c in npu.chips] == [73, 74, 70, 65]
    # the value columns drift by one space on the third chip (`70            0        / 970`)
    assert {(c.hugepages_used, c.hugepages_total) for c in npu.chips} == {(0, 970)}
    first = npu.chips[0]
    assert (first.memory_used_mb, first.memory_total_mb, first.hbm_used_mb) == (2703, 8192, None)


def test_910prob_93_columns_container_view_of_npu_2():
    info = parse_npu_smi_info(real("npu-smi-info_910prob-93col-container_23.0.rc1_vllm-ascend-237.txt"))
    assert (info.layout, info.driver_version) == ("910-93", "23.0.rc1")
    assert [n.id for n in info.npus] == [2]
    chip = info.npus[0].chips[0]
    assert (info.npus[0].name, chip.bus_id) == ("910ProB", "0000:41:00.0")
    assert (chip.memory_used_mb, chip.hbm_used_mb) == (2322, 1)
    assert info.process_table == "present" and info.processes == []


def test_blank_line_between_device_and_process_table():
    info = parse_npu_smi_info(real("npu-smi-info_910prob-93col-blankline-proc_23.0.rc1_mindformers-blog.txt"))
    assert info.process_table == "present"
    assert [(p.npu_id, p.pid, p.name, p.memory_mb) for p in info.processes] == [(0, 55115, "python", 30784)]
    assert chips(info)[0].hbm_used_mb == 30711  # printed `30711/ 32768`


def test_blank_lines_are_skipped_only_between_the_two_tables():
    lines = real("npu-smi-info_910prob-93col-blankline-proc_23.0.rc1_mindformers-blog.txt").splitlines()
    inside = "\n".join([*lines[:8], "", *lines[8:]]) + "\n"  # a blank line between the two chip rows
    with pytest.raises(ParseError) as exc:
        parse_npu_smi_info(inside)
    assert exc.value.line_no == 9
    trailing = "\n".join([*lines[:10], "", "garbage"]) + "\n"
    with pytest.raises(ParseError) as exc:
        parse_npu_smi_info(trailing)
    assert exc.value.line == "garbage"


def test_first_generation_910_in_the_98_column_layout():
    prob = parse_npu_smi_info(real("npu-smi-info_910prob-98col-ddr_24.1.0_vllm-ascend-1047.txt"))
    named_910b = parse_npu_smi_info(real("npu-smi-info_910b-first-gen-910-ddr_24.1.0_opdev-910a-readme.txt"))
    for info, name in ((prob, "910ProB"), (named_910b, "910B")):
        assert (info.layout, info.driver_version, len(info.npus)) == ("910-98", "24.1.0", 8)
        assert {n.name for n in info.npus} == {name}
        # first-gen 910 reports its DDR in Memory-Usage and 32 GB HBM (A2 910B reports 0 / 0 DDR)
        assert {c.memory_total_mb for c in chips(info)} == {13553, 15567, 15665}
        assert {c.hbm_total_mb for c in chips(info)} == {32768}
    assert [c.hbm_used_mb for c in chips(prob)] == [18, 8, 5, 4, 10, 14, 3, 2]
    assert prob.process_table == "present" and prob.processes == []
    assert (chips(named_910b)[0].memory_used_mb, chips(named_910b)[0].hbm_used_mb) == (1197, 1365)
    assert named_910b.process_table == "absent"


def test_910b4_one_mindie_process_per_npu():
    info = parse_npu_smi_info(real("npu-smi-info_910b4-mindie-procs_24.1.rc2_mindie-notes.txt"))
    assert info.driver_version == "24.1.rc2" and {n.name for n in info.npus} == {"910B4"}
    assert [c.hbm_used_mb for c in chips(info)][:3] == [30209, 30208, 30206]
    assert [(p.npu_id, p.pid) for p in info.processes] == [(i, 518867 + i) for i in range(8)]
    assert {(p.name, p.memory_mb) for p in info.processes} == {("mindieservice_b", 27474)}


def test_sixteen_910b2c_with_two_digit_ids_and_path_process_names():
    info = parse_npu_smi_info(real("npu-smi-info_910b2c-16npu-x86-procs_25.0.rc1.1_vllm-ascend-2732.txt"))
    assert (info.tool_version, info.driver_version) == ("25.0.rc1.1", "25.0.rc1.1")
    assert [n.id for n in info.npus] == list(range(16))
    assert info.npus[15].power_w == 101.9 and info.npus[15].chips[0].bus_id == "0000:C9:00.0"
    assert len(info.processes) == 30
    assert [p.pid for p in info.processes if p.npu_id == 0][5] == 189430
    assert [p.memory_mb for p in info.processes if p.npu_id == 0].count(113) == 5
    assert {p.name for p in info.processes} == {"/usr/bin/python"}
    # PID 189446 holds memory on NPU 0 (113 MB) and is the main process of NPU 1
    assert [(p.npu_id, p.memory_mb) for p in info.processes if p.pid == 189446] == [(0, 113), (1, 56999)]


def test_310b4_after_prompt_and_sudo_password_line():
    info = parse_npu_smi_info(real("npu-smi-info_310b4-sudo-prompt_23.0.rc3_atlas200i-dk-notes.txt"))
    assert (info.layout, info.driver_version) == ("310p-106", "23.0.rc3")
    npu = info.npus[0]
    assert (npu.name, npu.health, npu.power_w, npu.temp_c) == ("310B4", "OK", 7.2, 37)
    chip = npu.chips[0]
    assert (chip.bus_id, chip.device_id, chip.memory_used_mb, chip.memory_total_mb) == (None, 0, 1797, 3513)
    assert (chip.hugepages_used, chip.hugepages_total) == (15, 15)


def test_310p3_duo_two_chips_share_one_bus_id():
    info = parse_npu_smi_info(real("npu-smi-info_310p3-duo-hostview-PARTIAL_24.1.rc2_ollama-5315.txt"))
    assert [n.id for n in info.npus] == [1]
    npu = info.npus[0]
    assert [(c.chip_id, c.device_id, c.bus_id) for c in npu.chips] == [(0, 0, "0000:01:00.0"),
                                                                       (1, 1, "0000:01:00.0")]
    assert (npu.power_w, npu.temp_c) == (None, 59)
    assert [c.memory_total_mb for c in npu.chips] == [44280, 43693]


def test_a3_in_the_116_column_layout_of_26x():
    info = parse_npu_smi_info(real("npu-smi-info_ascend910-a3-116col-PARTIAL_26.0.rc2_vllm-ascend-12980.txt"))
    assert (info.layout, info.driver_version, info.truncated) == ("910-116", "26.0.rc2", True)
    assert [(c.chip_id, c.phy_id, c.bus_id) for c in chips(info)] == [(0, 0, "0000:9D:00.0"),
                                                                       (1, 1, "0000:9F:00.0")]
    assert (info.npus[0].power_w, chips(info)[1].power_w, chips(info)[1].hbm_used_mb) == (162.6, None, 2874)


# -- npu-smi info -t ... ------------------------------------------------------------------------------------

def test_board_card_and_chip_views_910a():
    card = parse_npu_smi_board(real("npu-smi-info-t-board_910a-card_23.0.5_mindcluster-faultdiag.txt"))
    assert (card.npu_id, card.software_version, card.firmware_version) == (0, "23.0.5", "7.1.0.7.220")
    assert (card.pci_vendor_id, card.pci_device_id, card.subsystem_vendor_id) == ("19e5", "d801", "0200")
    assert (card.pcie_bus_id, card.slot_id, card.chip_count) == ("0000:61:00.0", 0, 1)
    assert card.compatibility == "OK"
    chip = parse_npu_smi_board(real("npu-smi-info-t-board-c0_910a-chip_23.0.5_mindcluster-faultdiag.txt"))
    assert (chip.npu_id, chip.chip_id, chip.chip_type, chip.chip_name) == (0, 0, "Ascend", "910A")
    assert chip.fields["VDie ID"] == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"
    assert chip.software_version is None and chip.firmware_version == "7.1.0.7.220"


def test_usages_910a_chip_id_closes_the_section():
    view = parse_npu_smi_usages(real("npu-smi-info-t-usages_910a_23.0.5_mindcluster-faultdiag.txt"))
    assert (view.npu_id, view.chip_count, len(view.chips), view.aux) == (0, 1, 1, [])
    chip = view.chips[0]
    assert (chip.chip_id, chip.ddr_capacity_mb, chip.ddr_usage_pct) == (0, 13553, 6)
    assert chip.hbm_capacity_mb == 31129
    assert chip.fields["DDR Bandwidth Usage Rate(%)"] == "0"


def test_ecc_910a_ddr_then_hbm_with_aggregate_totals_and_chip_id_last():
    """The counts burn_in.ecc compares at the window's start and end, read from the real key set: current
    single/double-bit counts beside their lifetime aggregates (kept as fields, not judged: a count the
    window did not grow is not the window's), the chip's id closing its section."""
    from ascend_ready.checks.parsers.npu_smi_kv import parse_npu_smi_ecc

    view = parse_npu_smi_ecc(real("npu-smi-info-t-ecc_910a-ddr-hbm-aggregate_23.0.5_mindcluster-doc.txt"))
    assert (view.npu_id, view.chip_count, len(view.chips), view.aux) == (0, 1, 1, [])
    chip = view.chips[0]
    assert chip.chip_id == 0
    assert (chip.hbm_single_bit_errors, chip.hbm_double_bit_errors, chip.ddr_single_bit_errors,
            chip.ddr_double_bit_errors, chip.hbm_double_bit_isolated_pages) == (0, 0, 0, 0, 0)
    assert chip.fields["HBM Double Bit Aggregate Total Err Cnt"] == "0"


def test_health_ok_with_na_codes():
    health = parse_npu_smi_health(real("npu-smi-info-t-health_910a-ok-na_mindcluster-doc.txt"))
    assert (health.health, health.error_codes, health.error_information) == ("OK", [], [])


# -- hccn_tool -----------------------------------------------------------------------------------------------

def test_optical_module_not_present_with_full_lane_dump():
    optical = parse_hccn_optical(
        real("hccn_tool-optical-g_910a-hisense-not-present_mindcluster-faultdiag.txt"))
    assert (optical.device_id, optical.present, optical.vendor_name) == (0, False, "Hisense")
    assert (optical.temperature_c, optical.vcc_mv, optical.temp_high_c) == (47.0, 3262.9, 70.0)
    assert optical.tx_power_mw == [4.4035, 1.3968, 1.414, 1.4988]
    assert optical.rx_power_mw == [1.0189, 0.0054, 0.9907, 1.0213]
    assert optical.tx_bias_ma == [7.936, 7.928, 7.936, 7.924]
    assert optical.media_snr_db == [23.1211, 22.6289, 22.1875, 23.2969]
    assert (optical.rx_power_low_mw, optical.tx_power_high_mw) == (0.1445, 3.5481)
    assert (optical.rx_los_flag, optical.tx_los_flag) == ("0xff", "0x0")
    assert optical.fields["Host SNR Lane0"] == "not supported"
    assert optical.fields["xsfp wave length"] == "850 nm"


def test_fec_off():
    fec = parse_hccn_fec(real("hccn_tool-fec-g_910a-no-fec_mindcluster-faultdiag.txt"))
    assert (fec.device_id, fec.mode, fec.enabled) == (0, "no FEC mode", False)


def test_link_stat_with_down_count_and_flap():
    stat = parse_hccn_link_stat(
        real("hccn_tool-link_stat-g_flap-with-down-count_hccl-troubleshooting-doc.txt"))
    assert (stat.device_id, stat.current_time) == (0, "Tue Oct 28 21:46:46 2025")
    assert (stat.link_up_count, stat.link_down_count) == (2, 1)
    assert [(r.time, r.status) for r in stat.records] == [("Sun Oct  5 10:13:51 2025", "UP"),
                                                          ("Sun Oct  5 10:13:50 2025", "DOWN"),
                                                          ("Sun Oct  5 10:13:35 2025", "UP")]


def test_link_stat_device_prefix_without_down_count():
    stat = parse_hccn_link_stat(real("hccn_tool-link_stat-g_device-prefix_mindcluster-doc.txt"))
    assert (stat.device_id, stat.link_up_count, stat.link_down_count) == (0, 2, None)
    assert [r.status for r in stat.records] == ["UP", "DOWN", "UP"]


STATUS = "hccn_tool-status-g_eth3-200G-fibre-bare-command_ascend-notes.txt"


def test_status_200g_dac_link_up_after_the_bare_command():
    status = parse_hccn_status(real(STATUS))
    assert (status.device_id, status.interface, status.speed_mbps) == (3, "eth3", 200000)
    assert (status.duplex, status.auto_negotiation, status.link_detected) == ("Full", False, True)
    assert status.port == "Direct Attach Copper"
    assert len(status.supported_link_modes) == 18 and status.supported_link_modes[-1] == "200000baseCR4/Full"
    assert status.supported_fec_modes == ["None", "RS"] == status.advertised_fec_modes
    assert status.fields["Current message level"] == "0x00000036 (54) probe link ifdown ifup"


def test_status_cut_before_link_detected_is_refused():
    # the capture without its last line: a status that does not say whether the link is up is no status
    text = real(STATUS).rsplit("        Link", 1)[0]
    with pytest.raises(ParseError) as exc:
        parse_hccn_status(text)
    assert "no 'Link detected:' line" in exc.value.reason and exc.value.line_no == 37


def test_hw_stats_counters():
    stats = parse_hccn_hw_stats(real("hccn_tool-hw_stats-g_devid3_arthurchiao-blog.txt"))
    assert stats.device_id == 3 and len(stats.counters) == 14
    assert (stats.counters["qp_alloc"], stats.counters["qp_active"], stats.counters["aeqe"]) == (1, 1, 0)


@pytest.mark.parametrize(("edit", "line_no"), [
    (("qp_active: 1", "qp_active: 1x"), 13),        # a garbled value
    (("[devid 3] aeqe", "[devid 4] aeqe"), 14),     # another device's counter
    (("[devid 3] ceqe: 0", "[devid 3] ceqe:"), 15),  # the last line cut
])
def test_hw_stats_garbled_line_is_named(edit, line_no):
    text = real("hccn_tool-hw_stats-g_devid3_arthurchiao-blog.txt").replace(*edit)
    with pytest.raises(ParseError) as exc:
        parse_hccn_hw_stats(text)
    assert exc.value.line_no == line_no


def test_route_tables_with_and_without_default_gateway():
    with_gw = parse_hccn_route(real("hccn_tool-route-g_default-gw_arthurchiao-blog.txt"))
    assert with_gw.device_id == 3 and len(with_gw.routes) == 5
    default = with_gw.default_route
    assert (default.gateway, default.iface, default.flags) == ("29.1.0.1", "eth3", "UG")
    assert [(r.destination, r.prefix_len, r.gateway) for r in with_gw.routes[1:3]] == [
        ("29.1.0.0", 16, None), ("127.0.0.1", 32, None)]
    local = parse_hccn_route(real("hccn_tool-route-g_no-default-gt-prompt_ascend-notes.txt"))
    assert local.default_route is None and local.routes[0].destination == "10.20.11.0"
    assert {r.iface for r in local.routes} == {"eth3", "lo", "end3v0"}


@pytest.mark.parametrize(("edit", "line_no", "words"), [
    (("0      0        0 lo", "0      0        0"), 6, "7 columns"),          # a row cut mid-way
    (("255.255.0.0     U", "255.0.255.0     U"), 5, "not a netmask"),          # a garbled Genmask
    (("192.168.2.0     *", "192.168.2.7     *"), 8, "does not fit Genmask"),  # host bits in the destination
])
def test_route_garbled_row_is_named(edit, line_no, words):
    text = real("hccn_tool-route-g_default-gw_arthurchiao-blog.txt").replace(*edit)
    with pytest.raises(ParseError) as exc:
        parse_hccn_route(text)
    assert exc.value.line_no == line_no and words in exc.value.reason


# -- npu-smi info -t topo -----------------------------------------------------------------------------------

def test_topo_910b3_eight_npus_all_hccs_with_cpu_affinity():
    topo = parse_npu_smi_topo(real("npu-smi-info-t-topo_910b3-8npu-hccs-prompt_24.1.rc1_ms-swift-doc.txt"))
    assert topo.devices == [f"NPU{i}" for i in range(8)]
    assert topo.pairs_not("HCCS") == []
    assert topo.link("NPU0", "NPU7") == "HCCS" and topo.link("NPU3", "NPU3") == "X"
    assert topo.cpu_affinity == {"NPU0": "144-167", "NPU1": "144-167", "NPU2": "96-119", "NPU3": "96-119",
                                 "NPU4": "0-23", "NPU5": "0-23", "NPU6": "48-71", "NPU7": "48-71"}
    assert topo.numa_node == {} and topo.legend["HCCS"] == "Connection traversing HCCS."
    assert len(topo.matrix) == 64


def test_topo_910b1_header_without_leading_tab_and_legend_without_blank_line():
    topo = parse_npu_smi_topo(real("npu-smi-info-t-topo_910b1-8npu-hccs_23.0.rc2_arthurchiao-blog.txt"))
    assert topo.pairs_not("HCCS") == [] and topo.cpu_affinity["NPU1"] == "0-23"
    assert topo.legend["PXB"] == "Path traversing multipul PCIe switches"  # npu-smi's own spelling


TOPO_A3 = "npu-smi-info-t-topo_ascend910-93-a3-phyid-sio_container_sglang-30453.txt"


def test_topo_a3_phy_ids_sio_and_no_affinity_column():
    topo = parse_npu_smi_topo(real(TOPO_A3))
    assert topo.devices == ["Phy-ID12", "Phy-ID13"]
    assert topo.pairs_not("HCCS") == [("Phy-ID12", "Phy-ID13", "SIO")] and topo.pairs_not("SIO") == []
    assert topo.cpu_affinity == {} and "HCCS_SW" in topo.legend


TOPO_A2 = "npu-smi-info-t-topo_910b3-8npu-hccs-prompt_24.1.rc1_ms-swift-doc.txt"


@pytest.mark.parametrize(("edit", "line_no", "words"), [
    # the matrix cut before NPU7's row
    (lambda t: "".join(line for line in t.splitlines(True) if not line.startswith("NPU7")), 9,
     "no row for NPU7"),
    # a garbled cell, an asymmetric cell, the affinity lost, junk after the legend
    (lambda t: t.replace("NPU2       HCCS       HCCS       X", "NPU2       HCCS       HCSS       X"), 5,
     "unknown link type 'HCSS'"),
    (lambda t: t.replace("NPU2       HCCS       HCCS       X", "NPU2       HCCS       SYS        X"), 5,
     "NPU1 to NPU2 is HCCS but NPU2 to NPU1 is SYS"),
    (lambda t: t.replace("HCCS       48-71\n", "HCCS\n", 1), 9, "expected 9"),
    (lambda t: t + "NPU8       HCCS\n", 21, "legend line"),
])
def test_topo_cut_or_garbled_matrix_is_refused(edit, line_no, words):
    with pytest.raises(ParseError) as exc:
        parse_npu_smi_topo(edit(real(TOPO_A2)))
    assert exc.value.line_no == line_no and words in exc.value.reason


# -- lspci ------------------------------------------------------------------------------------------------

def test_lspci_after_a_bash_prompt_on_a_kunpeng_host():
    name = "lspci-Dnn-grep-network_kunpeng920-sec-engine-bash-prompt_openeuler-notes.txt"
    listing = parse_lspci(real(name))
    assert [d.bdf for d in listing.devices][:2] == ["0000:06:00.0", "0000:75:00.0"]
    sec = listing.devices[1]
    assert (sec.class_id, sec.device_id, sec.is_ascend_npu, sec.npu_model) == ("1000", "a255", False, None)


# -- version files -------------------------------------------------------------------------------------------

def test_toolkit_info_after_a_bracketed_root_prompt():
    info = parse_toolkit_install_info(
        real("ascend_toolkit_install.info_8.1.RC1-bracket-prompt_vllm-ascend-1047.txt"))
    assert (info.version, info.innerversion, info.arch) == ("8.1.RC1", "V100R001C21SPC001B238", "aarch64")
    assert (info.layout, info.install_dir) == ("ascend-toolkit", "/usr/local/Ascend/ascend-toolkit/8.1.RC1")
    assert info.compatible_version[-1] == ["V100R001C21"]


def test_toolkit_info_8_0_t6_after_a_bare_gt_prompt():
    info = parse_toolkit_install_info(
        real("ascend_toolkit_install.info_8.0.T6-gt-prompt_mllm-npu-readme.txt"))
    assert (info.version, info.innerversion, info.arch) == ("8.0.T6", "V100R001C17B214", "x86_64")
    assert info.compatible_version[0] == ["V100R001C15", "V100R001C18"]


def test_board_after_the_bare_command_of_a_collection():
    board = parse_npu_smi_board(
        real("npu-smi-info-t-board_910a-bare-command_23.0.5_mindcluster-doc.txt"))
    assert (board.npu_id, board.software_version) == (0, "23.0.5")
    assert (board.pci_device_id, board.chip_count) == ("d801", 1)


def test_toolkit_info_x86_64():
    info = parse_toolkit_install_info(real("ascend_toolkit_install.info_8.2.RC1-x86_64_vllm-ascend-2732.txt"))
    assert (info.version, info.arch, info.path) == ("8.2.RC1", "x86_64",
                                                    "/usr/local/Ascend/ascend-toolkit/8.2.RC1/x86_64-linux")
    assert len(info.compatible_version) == 6
    assert info.install_dir == "/usr/local/Ascend/ascend-toolkit/8.2.RC1"


MAIN_TABLES = sorted(n for n, k in KINDS.items() if k == "npu-smi-info" and n not in REFUSED)


@pytest.mark.parametrize("name", MAIN_TABLES)
def test_main_tables_have_constant_width(name):
    """The captures were transcribed: every table line of one capture has the same width."""
    widths = {len(line) for line in real(name).splitlines() if re.match(r"\s*[+|]", line)}
    assert len(widths) == 1
