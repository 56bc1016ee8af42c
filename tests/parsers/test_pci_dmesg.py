"""lspci, lspci -vvv, PCI sysfs and dmesg parsers."""

from __future__ import annotations

import pytest

from ascend_ready.checks.parsers.dmesg import parse_dmesg
from ascend_ready.checks.parsers.lspci import parse_lspci, parse_lspci_vvv
from ascend_ready.checks.parsers.sysfs import parse_sysfs_link
from ascend_ready.errors import ParseError

VVV = "lspci-vvv_910b4-d802_link-downgraded_kata-npu-passthrough-doc.txt"


def test_lspci_grep_acce_eight_910a(sample):
    devices = parse_lspci(sample("lspci-grep-acce_910a-d801-8dev_mindcluster-faultdiag.txt")).devices
    assert [d.bdf for d in devices] == ["0000:3d:00.0", "0000:3e:00.0", "0000:60:00.0", "0000:61:00.0",
                                        "0000:b1:00.0", "0000:b2:00.0", "0000:da:00.0", "0000:db:00.0"]
    assert {(d.vendor_id, d.device_id, d.revision, d.is_ascend_npu) for d in devices} == {
        ("19e5", "d801", "20", True)}


def test_lspci_nn_form():
    line = ("0000:c1:00.0 Processing accelerators [1200]: Huawei Technologies Co., Ltd. Device [19e5:d802]"
            " (rev 20)\n")
    device = parse_lspci(line).devices[0]
    assert (device.bdf, device.class_id) == ("0000:c1:00.0", "1200")
    assert (device.vendor_id, device.device_id) == ("19e5", "d802")


def test_lspci_vvv_downgraded_link(sample):
    link = parse_lspci_vvv(sample(VVV)).devices[0]
    assert link.device.bdf == "0000:01:00.0" and link.device.device_id == "d802"
    assert (link.cap_speed_gts, link.cap_width) == (32.0, 16)
    assert (link.speed_gts, link.width) == (16.0, 16)
    assert (link.speed_downgraded, link.width_downgraded) == (True, False)
    assert link.target_speed_gts == 32.0
    assert link.numa_node == 0 and link.driver == "devdrv_device_driver"
    assert link.aer and link.uncorrectable_errors == [] and link.correctable_errors == ["AdvNonFatalErr"]
    # the Kernel modules line was hard-wrapped over 4 physical lines by the terminal
    assert link.kernel_modules[6] == "drv_pcie_hdc_host"
    assert link.kernel_modules[-1] == "drv_virtmng_host" and len(link.kernel_modules) == 24
    assert link.evidence[1] == "LnkSta: Speed 16GT/s (downgraded), Width x16 (ok)"


def test_lspci_vvv_garbled_lnksta_names_line(sample):
    text = sample(VVV).replace("LnkSta: Speed 16GT/s (downgraded)", "LnkSta: Speed ??GT/s (downgraded)")
    with pytest.raises(ParseError) as err:
        parse_lspci_vvv(text)
    assert err.value.line_no == 22 and "LnkSta" in err.value.reason


def test_lspci_vvv_stray_unindented_line_is_not_a_wrap():
    with pytest.raises(ParseError) as err:
        parse_lspci_vvv("01:00.0 Processing accelerators: Huawei Technologies Co., Ltd. Device d802\n"
                        "\tNUMA node: 0\nrandom words\n")
    assert err.value.line_no == 3


def test_sysfs_batch():
    base = "/sys/bus/pci/devices/0000:c1:00.0"
    text = (f"{base}/current_link_speed:16.0 GT/s PCIe\n{base}/current_link_width:16\n"
            f"{base}/max_link_speed:32.0 GT/s PCIe\n{base}/max_link_width:16\n{base}/vendor:0x19e5\n"
            f"{base}/device:0xd802\n{base}/aer_dev_correctable:RxErr 3\n"
            f"{base}/aer_dev_correctable:TOTAL_ERR_COR 3\n"
            "/sys/bus/pci/devices/0000:01:00.0/current_link_speed=Unknown\n")
    devices = parse_sysfs_link(text).devices
    npu = devices["0000:c1:00.0"]
    assert (npu.current_link_speed_gts, npu.current_link_width, npu.max_link_speed_gts) == (16.0, 16, 32.0)
    assert (npu.vendor_id, npu.device_id) == ("19e5", "d802")
    assert npu.aer == {"aer_dev_correctable": {"RxErr": 3, "TOTAL_ERR_COR": 3}}
    assert devices["0000:01:00.0"].link_down and devices["0000:01:00.0"].current_link_speed_gts is None
    gen3 = parse_sysfs_link(f"{base}/current_link_speed:8.0 GT/s\n").devices["0000:c1:00.0"]
    assert gen3.current_link_speed_gts == 8.0


def test_sysfs_bad_values_name_the_line():
    with pytest.raises(ParseError) as err:
        parse_sysfs_link("/sys/bus/pci/devices/0000:c1:00.0/current_link_speed:fast\n")
    assert err.value.line_no == 1
    with pytest.raises(ParseError, match="unsupported sysfs attribute"):
        parse_sysfs_link("/sys/bus/pci/devices/0000:c1:00.0/power_state:D0\n")


DMESG = """[    2.101211] pci 0000:c1:00.0: [19e5:d802] type 00 class 0x120000
[ 3571.112233] pcieport 0000:c0:00.0: AER: Corrected error received: 0000:c1:00.0
[ 3571.112240] devdrv_device_driver 0000:c1:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer\
, (Receiver ID)
[ 3575.000001] pcieport 0000:c0:00.0: AER: Uncorrected (Non-Fatal) error received: 0000:c1:00.0
[ 3580.000000] pcieport 0000:c0:00.0: pciehp: Slot(0): Link Down
[ 3581.000000] drv_pcie_host 0000:c1:00.0: [devdrv_pcie] link up again
"""


def test_dmesg_classifies_pcie_events():
    log = parse_dmesg(DMESG)
    assert [e.kind for e in log.events] == ["other", "aer_corrected", "pcie_bus_error", "aer_uncorrected",
                                            "link_down", "link_up"]
    corrected = log.of_kind("aer_corrected")[0]
    assert (corrected.device, corrected.severity) == ("0000:c1:00.0", "Corrected")
    assert corrected.time == "3571.112233"
    assert log.events[2].severity == "Corrected" and log.events[3].severity == "Uncorrected (Non-Fatal)"


def test_dmesg_human_and_iso_timestamps():
    log = parse_dmesg("[Wed Aug  2 03:09:26 2022] devdrv: device 0 ready\n"
                      "2024-09-04T09:38:41,269221+08:00 hdcdrv: init\n")
    assert [e.kind for e in log.events] == ["ascend_driver", "ascend_driver"]
    assert log.events[1].time == "2024-09-04T09:38:41,269221+08:00"


def test_dmesg_without_timestamps_fails():
    with pytest.raises(ParseError) as err:
        parse_dmesg("[    1.0] ok\nAER: Corrected error received\n")
    assert err.value.line_no == 2 and "dmesg -t" in err.value.hint
