"""Issue 9, "fail closed everywhere": each defect of the parsers, on a real capture or a real capture cut or
edited as the test says, fails before the fix and passes after.

Inputs come from ../shared/ascend-samples (`sample`) or tests/parsers/real (`real`); every edit is named
in the test (a line dropped, a line cut, two values swapped, a shell line put above the output).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_ready.checks.parsers.hccn import (
    parse_hccn_collection,
    parse_hccn_ip,
    parse_hccn_link_stat,
    parse_hccn_lldp,
    parse_hccn_net_health,
    parse_per_device,
)
from ascend_ready.checks.parsers.hccn_conf import parse_hccn_conf
from ascend_ready.checks.parsers.lspci import ASCEND_NPU_DEVICE_IDS, parse_lspci
from ascend_ready.checks.parsers.npu_smi_info import parse_npu_smi_info
from ascend_ready.checks.parsers.npu_smi_kv import parse_npu_smi_board, parse_npu_smi_m, parse_npu_smi_temp
from ascend_ready.checks.parsers.sysfs import parse_sysfs_link
from ascend_ready.checks.parsers.version_info import parse_toolkit_install_info
from ascend_ready.errors import ParseError

REAL = Path(__file__).parent / "real"


def real(name: str) -> str:
    return (REAL / name).read_text()


def first_lines(text: str, n: int) -> str:
    return "".join(text.splitlines(keepends=True)[:n])


def refused(parse, text: str) -> ParseError:
    with pytest.raises(ParseError) as err:
        parse(text)
    return err.value


# -- 1. key/value outputs cut after a few lines ----------------------------------------------------------

BOARD_A2 = "npu-smi-info-t-board_910b-d802_25.5.1_yunion-telegraf-test.txt"


def test_board_card_view_cut_before_its_firmware_line_is_refused(sample):
    # the 910B card view cut after its 6th line (`Software Version`): Firmware Version .. Chip Count lost
    error = refused(parse_npu_smi_board, first_lines(sample(BOARD_A2), 6))
    assert error.line_no == 6 and "Software Version" in error.line
    assert "'Firmware Version'" in error.reason and "'Chip Count'" in error.reason
    assert "cut off" in error.reason


def test_board_chip_view_without_its_firmware_line_is_refused():
    # the 910A chip view (`-i 0 -c 0`) without its last line, `Firmware Version : 7.1.0.7.220`
    text = real("npu-smi-info-t-board-c0_910a-chip_23.0.5_mindcluster-faultdiag.txt")
    error = refused(parse_npu_smi_board, first_lines(text, 12))
    assert error.line_no == 12 and "missing 'Firmware Version'" in error.reason


def test_board_views_that_are_whole_still_parse(sample):
    assert parse_npu_smi_board(sample(BOARD_A2)).firmware_version == "7.8.0.6.201"
    chip = parse_npu_smi_board(real("npu-smi-info-t-board-c0_910a-chip_23.0.5_mindcluster-faultdiag.txt"))
    assert chip.firmware_version == "7.1.0.7.220"


def test_toolkit_install_info_of_two_lines_is_refused():
    # the 8.2.RC1 file of vllm-ascend #2732 cut after `version=`
    text = first_lines(real("ascend_toolkit_install.info_8.2.RC1-x86_64_vllm-ascend-2732.txt"), 2)
    error = refused(parse_toolkit_install_info, text)
    assert error.line_no == 2 and error.line == "version=8.2.RC1"
    for key in ("innerversion=", "arch=", "os=", "path="):
        assert key in error.reason


NPU_SMI_M_910B3 = "npu-smi-info-m_910b3-mcu_25.5.1_ts-probe-test-EXCERPT.txt"
NPU_SMI_M_910A = "npu-smi-info-m_910a_mindcluster-faultdiag.txt"


def test_npu_smi_m_npu_missing_its_mcu_row_is_refused(sample):
    # 910B3 mapping without its last line (NPU 1's `Mcu` row): NPU 0 lists chip 0 + MCU, NPU 1 only chip 0
    error = refused(parse_npu_smi_m, first_lines(sample(NPU_SMI_M_910B3), 4))
    assert error.line_no == 4 and "NPU 1 lists 1 row(s)" in error.reason and "chip 1 (MCU)" in error.reason


@pytest.mark.parametrize("cut", ["Ascend 9", "Ascend 910"])
def test_npu_smi_m_last_line_cut_mid_name_is_refused(sample, cut):
    # 910A mapping whose last line stops inside `Ascend 910A` (a paste or a pipe cut mid-line)
    text = sample(NPU_SMI_M_910A).rstrip("\n")
    text = text[: text.rindex("Ascend 910A")] + cut
    error = refused(parse_npu_smi_m, text)
    assert error.line_no == 9 and "cut off" in error.reason


def test_npu_smi_m_whole_outputs_still_parse(sample):
    assert len(parse_npu_smi_m(sample(NPU_SMI_M_910A)).chips) == 8
    assert len(parse_npu_smi_m(sample(NPU_SMI_M_910B3)).chips) == 4


# -- 2. ipaddr / netmask checked for what they are -------------------------------------------------------

IP_LOOP = "hccn_tool-ip-g-loop_8npu_mindcluster-faultdiag-worker9.txt"


def test_ip_with_address_and_netmask_swapped_is_refused(sample):
    # device 0 of the 8-device loop with its two values swapped
    text = sample(IP_LOOP).replace("ipaddr:192.1.45.172\nnetmask:255.255.0.0",
                                   "ipaddr:255.255.0.0\nnetmask:192.1.45.172", 1)
    with pytest.raises(ParseError) as err:
        parse_per_device("hccn-ip", text)
    assert err.value.line_no == 2 and err.value.line == "ipaddr:255.255.0.0"
    assert "not a usable host address" in err.value.reason


def test_ip_netmask_slot_holding_an_address_is_refused(sample):
    # device 0's output alone, its netmask replaced by its own address
    block = first_lines(sample(IP_LOOP), 3).replace("netmask:255.255.0.0", "netmask:192.1.45.172")
    error = refused(parse_hccn_ip, block)
    assert error.line_no == 3 and "not a netmask" in error.reason


def test_ip_subnet_broadcast_as_address_is_refused(sample):
    block = first_lines(sample(IP_LOOP), 3).replace("ipaddr:192.1.45.172", "ipaddr:192.1.255.255")
    error = refused(parse_hccn_ip, block)
    assert error.line_no == 2 and "broadcast address of 192.1.0.0/16" in error.reason


def test_ip_real_values_still_parse(sample):
    ips = parse_per_device("hccn-ip", sample(IP_LOOP))
    assert {(ip.address.split(".")[1], ip.netmask) for ip in ips.values()} == {
        ("1", "255.255.0.0"), ("2", "255.255.0.0"), ("3", "255.255.0.0"), ("4", "255.255.0.0")}


def test_hccn_conf_address_and_netmask_swapped_is_refused(sample):
    text = sample("hccn.conf_8npu-gateway-netdetect_arthurchiao-blog.txt").replace(
        "address_0=29.1.137.205\nnetmask_0=255.255.0.0", "address_0=255.255.0.0\nnetmask_0=29.1.137.205")
    error = refused(parse_hccn_conf, text)
    assert error.line_no == 2 and "address_0" in error.reason


# -- 3. what shells print around an output is accepted, what is inside it is not -------------------------

A2_TABLE = "npu-smi-info_910b2_23.0.7_vllm-ascend-362.txt"


def test_npu_smi_info_after_set_x_trace_and_entrypoint_exports(sample):
    # the 910B2 capture under the lines a `set -x` container entrypoint prints before it
    text = "export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n+ npu-smi info\n" + sample(A2_TABLE)
    info = parse_npu_smi_info(text)
    assert len(info.npus) == 8 and info.process_table == "present" and not info.truncated


def test_npu_smi_info_after_the_bare_command(sample):
    info = parse_npu_smi_info("npu-smi info\n" + sample(A2_TABLE))
    assert len(info.npus) == 8


def test_npu_smi_info_closing_dash_rule_after_the_process_rows(sample):
    # the 26.0.rc1 capture stops after its last process row (truncated); with a closing `+---+` rule of the
    # table's width after that row the table is whole
    text = sample("npu-smi-info_910b4_26.0.rc1_triton-ascend-docs.txt")
    assert parse_npu_smi_info(text).truncated
    width = max(len(line) for line in text.splitlines())
    info = parse_npu_smi_info(text.rstrip("\n") + "\n+" + "-" * (width - 2) + "+\n")
    assert (info.truncated, info.process_table) == (False, "present")


def test_npu_smi_info_shell_lines_inside_the_table_are_refused(sample):
    lines = sample(A2_TABLE).splitlines()
    at = next(i for i, line in enumerate(lines) if "Process id" in line) - 1  # above the process table
    error = refused(parse_npu_smi_info, "\n".join([*lines[:at], "+ npu-smi info", *lines[at:]]) + "\n")
    assert error.line == "+ npu-smi info"
    error = refused(parse_npu_smi_info, "\n".join([*lines[:at], "export A=1", *lines[at:]]) + "\n")
    assert error.line == "export A=1"


def test_npu_smi_info_process_table_cut_at_a_row_boundary_is_truncated(sample):
    # the 8-NPU capture cut after `No running processes found in NPU 3` and its `+===` rule: every line is
    # whole, but NPUs 4-7 of the device table are missing from the process table
    lines = sample(A2_TABLE).splitlines()
    at = next(i for i, line in enumerate(lines) if "No running processes found in NPU 3" in line)
    info = parse_npu_smi_info("\n".join(lines[: at + 2]) + "\n")
    assert info.truncated and info.process_table == "present"
    assert not parse_npu_smi_info(sample(A2_TABLE)).truncated


def test_npu_smi_info_process_header_without_rows_is_truncated(sample):
    lines = sample(A2_TABLE).splitlines()
    at = next(i for i, line in enumerate(lines) if "Process id" in line)
    info = parse_npu_smi_info("\n".join(lines[: at + 2]) + "\n")  # header and its `+===` rule only
    assert info.truncated and info.processes == []


def test_key_value_view_after_a_set_x_trace(sample):
    temp = sample("npu-smi-info-t-temp_910b_25.5.1_yunion-telegraf-test.txt")
    text = "+ npu-smi info -t temp -i 0\n" + temp
    assert parse_npu_smi_temp(text).chips[0].temperature_c == 39


def test_hccn_echo_traced_by_set_x_names_the_device(sample):
    health = sample("hccn_tool-net_health-g_socket-failed_mindcluster-faultdiag.txt")
    text = "+ hccn_tool -i 0 -net_health -g\n" + health
    health = parse_hccn_net_health(text)
    assert (health.device_id, health.status) == (0, "Socket failed")


def test_hccn_collection_run_with_set_x(sample):
    # the 8-device ip loop as `bash -x` prints it: each echo behind `+ `
    tool = "/usr/local/Ascend/driver/tools/hccn_tool"
    text = sample(IP_LOOP).replace(tool, "+ " + tool)
    assert len(parse_hccn_collection(text).entries) == 8


# -- 4. a Huawei switch's multi-line System Description ---------------------------------------------------

LLDP = "hccn_tool-lldp-g_huawei-vrp-sysdesc_arthurchiao-blog.txt"


def test_lldp_system_description_continues_on_unindented_lines():
    lldp = parse_hccn_lldp(real(LLDP))
    assert lldp.system_description == ("Versatile Routing Platform Software\n"
                                       "VRP (R) software, Version 8.211 (DX511 V200R021C10SPC600)\n"
                                       "Huarong DX511")
    assert (lldp.device_id, lldp.port_id) == (3, "400GE1/1/20:2")
    assert lldp.tlvs["Maximum Frame Size TLV"] == ["9216"]
    assert lldp.tlvs["System Capabilities TLV"] == ["Enabled capabilities: Bridge, Router"]


def test_lldp_unindented_text_outside_the_description_is_refused():
    # the same capture with the Port ID value un-indented: only System Description continues that way
    text = real(LLDP).replace("        Ifname: 400GE1/1/20:2", "Ifname: 400GE1/1/20:2")
    error = refused(parse_hccn_lldp, text)
    assert error.line_no == 5 and error.line == "Ifname: 400GE1/1/20:2"


# -- 5. link_stat times as printed --------------------------------------------------------------------------

def test_link_stat_times_keep_the_double_space_of_asctime(sample):
    stat = parse_hccn_link_stat(sample("hccn_tool-link_stat-g_910a_mindcluster-faultdiag.txt"))
    assert stat.current_time == "Wed Aug  2 03:09:26 2022"
    assert [r.time for r in stat.records] == ["Tue Aug  1 14:43:40 2022", "Tue Aug  1 14:43:40 2022",
                                              "Tue Aug  1 14:43:26 2022"]


# -- 7. an NPU is known by its device id --------------------------------------------------------------------

KAE_ZIP = "lspci-grep-ZIP_kunpeng920-zip-engine-bare-command_kae-readme.txt"
KUNPENG_NN = "lspci-Dnn-grep-network_kunpeng920-sec-engine-bash-prompt_openeuler-notes.txt"


def test_kunpeng_hisilicon_zip_engines_are_not_npus():
    # `lspci | grep ZIP` on a Kunpeng 920 (KAE README): the ZIP engines are Huawei "Processing
    # accelerators", and were counted as NPUs before
    devices = parse_lspci(real(KAE_ZIP)).devices
    assert [(d.bdf, d.class_name, d.vendor_id) for d in devices] == [
        ("0000:75:00.0", "Processing accelerators", "19e5"),
        ("0000:b5:00.0", "Processing accelerators", "19e5")]
    assert [d.is_ascend_npu for d in devices] == [False, False]


def test_kunpeng_accelerators_with_ids_are_not_npus_but_910a_is(sample):
    kunpeng = parse_lspci(real(KUNPENG_NN))
    assert [d.device_id for d in kunpeng.devices if d.description.startswith("Huawei")] == [
        "1710", "a255", "a226", "a255", "a222", "a222"]
    assert kunpeng.ascend_npus == []
    npus = parse_lspci(sample("lspci-grep-acce_910a-d801-8dev_mindcluster-faultdiag.txt")).ascend_npus
    assert len(npus) == 8 and {d.npu_model for d in npus} == {"Ascend 910"}


def test_device_id_table_is_the_one_place():
    assert ASCEND_NPU_DEVICE_IDS == {"d100": "Ascend 310", "d500": "Ascend 310P", "d801": "Ascend 910",
                                     "d802": "Ascend 910B", "d803": "Ascend 910_93 (A3)"}


def test_sysfs_npu_filter_by_device_id():
    # sysfs attributes of two functions of a Kunpeng 920 host as its kernel log reports them
    # (`pci 0000:75:00.0: [19e5:a250] type 00 class 0x120000`, code-index 25543896113) and of the 910B at
    # 0000:c1:00.0 of the npu-smi board capture (PCI Device ID 0xD802): both in class 0x1200
    base = "/sys/bus/pci/devices"
    text = (f"{base}/0000:75:00.0/class:0x120000\n{base}/0000:75:00.0/device:0xa250\n"
            f"{base}/0000:c1:00.0/class:0x120000\n{base}/0000:c1:00.0/device:0xd802\n")
    sysfs = parse_sysfs_link(text)
    assert list(sysfs.ascend_npus) == ["0000:c1:00.0"]
    assert sysfs.devices["0000:c1:00.0"].npu_model == "Ascend 910B"
    assert not sysfs.devices["0000:75:00.0"].is_ascend_npu
