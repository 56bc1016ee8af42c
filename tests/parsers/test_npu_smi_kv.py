"""npu-smi key/value views (-t board|health|usages|temp|power|common|memory, -m, -l) on real samples."""

from __future__ import annotations

import pytest

from ascend_ready.checks.parsers.npu_smi_kv import (
    parse_npu_smi_board,
    parse_npu_smi_common,
    parse_npu_smi_health,
    parse_npu_smi_l,
    parse_npu_smi_m,
    parse_npu_smi_memory,
    parse_npu_smi_power,
    parse_npu_smi_temp,
    parse_npu_smi_usages,
)
from ascend_ready.errors import ParseError


def test_health_alarm_with_three_codes_and_multiline_information(sample):
    health = parse_npu_smi_health(sample("npu-smi-info-t-health_alarm-multicode_mindcluster-faultdiag.txt"))
    assert health.health == "Alarm"
    assert health.error_codes == ["A4025021", "8C03A000", "8C084E00"]
    assert health.error_information == [
        "ascend_monitor adda heart beat lost error",
        "node type=process-manager, sensor type=General Software, event state=The process start failed "
        "or exit abnormally",
        "node type=adda, sensor type=Heartbeat Sensor, event state=Heartbeat Lost.",
    ]


def test_health_ok_prints_na_codes():
    text = "\tHealth Status                  : OK\n\tError Code                     : NA\n" \
           "\tError Information              : NA\n"
    health = parse_npu_smi_health(text)
    assert (health.health, health.error_codes, health.error_information) == ("OK", [], [])


def test_usages_910b_25x_keys(sample):
    view = parse_npu_smi_usages(sample("npu-smi-info-t-usages_910b_25.5.1_yunion-telegraf-test.txt"))
    assert (view.npu_id, view.chip_count, len(view.chips)) == (0, 1, 1)
    chip = view.chips[0]
    assert chip.chip_id == 0
    assert chip.hbm_capacity_mb == 65536
    assert chip.hbm_usage_pct == 5
    assert chip.ctrlcpu_usage_pct == 6
    assert chip.aivector_usage_pct == 0 and chip.npu_utilization_pct == 0
    assert chip.fields["DDR Bandwidth Usage Rate(%)"] == "0"


def test_temp_with_mcu_section_after_last_chip(sample):
    view = parse_npu_smi_temp(sample("npu-smi-info-t-temp_910b_25.5.1_yunion-telegraf-test.txt"))
    assert [(c.chip_id, c.temperature_c) for c in view.chips] == [(0, 39)]
    assert len(view.aux) == 1
    assert view.aux[0].chip_name == "MCU"
    assert view.aux[0].sensors_c == {"LM75A_TE (C)": 36, "LM75B_TE (C)": 36}


def test_board_a2_card_view(sample):
    board = parse_npu_smi_board(sample("npu-smi-info-t-board_910b-d802_25.5.1_yunion-telegraf-test.txt"))
    assert board.npu_id == 0 and board.chip_id is None
    assert board.software_version == "25.5.1"
    assert board.firmware_version == "7.8.0.6.201"
    assert board.pcie_bus_id == "0000:C1:00.0"
    assert (board.pci_vendor_id, board.pci_device_id) == ("19e5", "d802")
    assert (board.subsystem_vendor_id, board.subsystem_device_id) == ("19e5", "3003")
    assert board.model is None  # printed NA
    assert board.chip_count == 1


COMMON_910B = """\tNPU ID                         : 0
\tChip Count                     : 1

\tChip ID                        : 0
\tMemory Usage Rate(%)           : 0
\tHBM Usage Rate(%)              : 5
\tAicore Usage Rate(%)           : 0
\tAicore Freq(MHZ)               : 1800
\tAicore curFreq(MHZ)            : 800
\tAicore Count                   : 24
\tTemperature(C)                 : 38
\tNPU Real-time Power(W)         : 91.3

\tChip Name                      : mcu
\tTemperature(C)                 : 35
"""


def test_common_sections_started_by_chip_id():
    # format of npu-smi's print_common_info(): Chip ID opens the section, the MCU section follows
    view = parse_npu_smi_common(COMMON_910B)
    chip = view.chips[0]
    assert (chip.chip_id, chip.temperature_c, chip.power_w, chip.aicore_count) == (0, 38, 91.3, 24)
    assert (chip.aicore_freq_mhz, chip.aicore_cur_freq_mhz) == (1800, 800)
    assert view.aux[0].chip_name == "mcu" and view.aux[0].temperature_c == 35


def test_power_single_chip_view():
    view = parse_npu_smi_power("\tNPU Real-time Power(W)         : 96.5\n")
    assert view.chips[0].power_w == 96.5 and view.chips[0].chip_id is None


def test_memory_view():
    text = ("\tDDR Capacity(MB)               : 0\n\tDDR Clock Speed(MHz)           : 0\n"
            "\tHBM Capacity(MB)               : 65536\n\tHBM Clock Speed(MHz)           : 1600\n"
            "\tHBM Temperature(C)             : 40\n\tHBM Manufacturer ID            : 0x1\n")
    chip = parse_npu_smi_memory(text).chips[0]
    assert (chip.hbm_capacity_mb, chip.hbm_clock_mhz, chip.hbm_temperature_c) == (65536, 1600, 40)


def test_mapping_910a_and_910b3_with_mcu(sample):
    old = parse_npu_smi_m(sample("npu-smi-info-m_910a_mindcluster-faultdiag.txt"))
    assert [(c.npu_id, c.logic_id) for c in old.chips] == [(i, i) for i in range(8)]
    assert {c.chip_name for c in old.chips} == {"Ascend 910A"}
    new = parse_npu_smi_m(sample("npu-smi-info-m_910b3-mcu_25.5.1_ts-probe-test-EXCERPT.txt"))
    assert [(c.npu_id, c.chip_id, c.logic_id, c.chip_name, c.is_aux) for c in new.chips] == [
        (0, 0, 0, "Ascend 910B3", False), (0, 1, None, "Mcu", True),
        (1, 0, 1, "Ascend 910B3", False), (1, 1, None, "Mcu", True)]


def test_mapping_a3_phy_id_column():
    text = ("\tNPU ID                         Chip ID                        Chip Logic ID                  "
            "Chip Phy-ID                    Chip Name\n"
            "\t0                              0                              0                              "
            "0                              Ascend910\n"
            "\t0                              1                              1                              "
            "1                              Ascend910\n")
    chips = parse_npu_smi_m(text).chips
    assert [(c.chip_id, c.phy_id, c.chip_name) for c in chips] == [(0, 0, "Ascend910"), (1, 1, "Ascend910")]


def test_list_eight_npus(sample):
    listing = parse_npu_smi_l(sample("npu-smi-info-l_910b-8npu_yunion-telegraf-test.txt"))
    assert listing.total_count == 8
    assert [(n.npu_id, n.chip_count) for n in listing.npus] == [(i, 1) for i in range(8)]


def test_list_truncated_is_an_error(sample):
    text = sample("npu-smi-info-l_910b-8npu_yunion-telegraf-test.txt").rsplit("NPU ID", 1)[0]
    with pytest.raises(ParseError, match="Total Count says 8 but 7"):
        parse_npu_smi_l(text)


def test_invalid_card_id_names_line_and_hints():
    with pytest.raises(ParseError) as err:
        parse_npu_smi_board("Invalid card id.\nUsage: npu-smi info <watch|proc|-h|-m|-l|-t type> ...\n")
    assert err.value.line_no == 1 and err.value.line == "Invalid card id."
    assert "npu-smi info -l" in err.value.hint


def test_driver_failure_lines_are_errors(sample):
    with pytest.raises(ParseError) as err:
        parse_npu_smi_usages(sample("error_npu-smi_dcmi-8020-device-used_cann-container-image-46.txt"))
    assert err.value.line_no == 2 and "driver" in err.value.hint


def test_garbled_line_is_named():
    text = "\tNPU ID                         : 0\n\tChip Count                     : 1\n\n" \
           "\tHBM Capacity(MB)               : 6x536\n\tChip ID                        : 0\n"
    with pytest.raises(ParseError) as err:
        parse_npu_smi_usages(text)
    assert err.value.line_no == 4 and "6x536" in str(err.value)


def test_wrong_view_is_rejected(sample):
    with pytest.raises(ParseError, match="not an `npu-smi info -t usages` section"):
        parse_npu_smi_usages(sample("npu-smi-info-t-temp_910b_25.5.1_yunion-telegraf-test.txt"))


# Byte-exact sections of Ascend/mind-cluster component/ascend-faultdiag/test/st_module_testcase/kg_parse/
# npu_info_before.txt @22bb3d98 (910A, driver 23.0.5): the chip-level board view and the 23.0 usages view.
BOARD_910A_CHIP = """\tNPU ID                         : 0
\tChip ID                        : 0
\tChip Type                      : Ascend
\tChip Name                      : 910A
\tChip Version                   : V1
\tBoard ID                       : 0x02
\tPCB ID                         : NA
\tBOM ID                         : 1
\tVDie ID                        : 42C711D4 20B03704 4A10C8D4 14CC040A D2102003
\tNDie ID                        : 27216594 20401010 4E10C8D4 14CC040A A4102003
\tChip Position ID               : 0
\tPCIe Bus Info                  : 0000:61:00.0
\tFirmware Version               : 7.1.0.7.220
"""
USAGES_910A = """\tNPU ID                         : 0
\tChip Count                     : 1

\tDDR Capacity(MB)               : 13553
\tDDR Usage Rate(%)              : 6
\tDDR Hugepages Total(page)      : 0
\tDDR Hugepages Usage Rate(%)    : 0
\tHBM Capacity(MB)               : 31129
\tHBM Usage Rate(%)              : 0
\tAicore Usage Rate(%)           : 0
\tAicpu Usage Rate(%)            : 0
\tCtrlcpu Usage Rate(%)          : 0
\tDDR Bandwidth Usage Rate(%)    : 0
\tHBM Bandwidth Usage Rate(%)    : 0
\tChip ID                        : 0
"""


def test_board_chip_view_910a():
    board = parse_npu_smi_board(BOARD_910A_CHIP)
    assert (board.npu_id, board.chip_id, board.chip_type, board.chip_name) == (0, 0, "Ascend", "910A")
    assert board.firmware_version == "7.1.0.7.220" and board.pcie_bus_id == "0000:61:00.0"
    assert board.fields["VDie ID"] == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"


def test_usages_910a_23x_without_25x_keys():
    chip = parse_npu_smi_usages(USAGES_910A).chips[0]
    assert (chip.ddr_capacity_mb, chip.ddr_usage_pct, chip.hbm_capacity_mb) == (13553, 6, 31129)
    assert chip.aivector_usage_pct is None and chip.npu_utilization_pct is None


def test_failed_board_sensor_reads_as_none(sample):
    text = sample("npu-smi-info-t-temp_910b_25.5.1_yunion-telegraf-test.txt").replace(
        "LM75B_TE (C)                   : 36", "LM75B_TE (C)                   : Failed")
    assert parse_npu_smi_temp(text).aux[0].sensors_c == {"LM75A_TE (C)": 36, "LM75B_TE (C)": None}


def test_health_of_several_chips_is_refused():
    text = ("\tHealth Status                  : OK\n\tError Code                     : NA\n\n"
            "\tHealth Status                  : OK\n\tError Code                     : NA\n")
    with pytest.raises(ParseError) as err:
        parse_npu_smi_health(text)
    assert err.value.line_no == 4 and "-c <chip>" in err.value.hint
