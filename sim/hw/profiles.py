"""Hardware profiles of the simulated servers: chips, PCI identities, bus layout and idle telemetry.

Pure data (stdlib only); `state.initial_state` turns one profile into a node's hardware state.
"""

from __future__ import annotations

from ascend_ready.sim.hw.numa import KUNPENG_920_4P

# Bus ids follow the real captures: A2 from vllm-ascend#362 (npu-smi-info_910b2_23.0.7 sample), A3 from
# vllm-ascend#2666 (npu-smi-info_910-93-a3 sample), 300I Duo from the nputop 310P3 Duo fixture.
_A2_BUS = ["0000:C1:00.0", "0000:01:00.0", "0000:C2:00.0", "0000:02:00.0",
           "0000:81:00.0", "0000:41:00.0", "0000:82:00.0", "0000:42:00.0"]
_A3_BUS = ["0000:9D:00.0", "0000:9F:00.0", "0000:99:00.0", "0000:9B:00.0", "0000:95:00.0", "0000:97:00.0",
           "0000:91:00.0", "0000:93:00.0", "0000:8D:00.0", "0000:8F:00.0", "0000:89:00.0", "0000:8B:00.0",
           "0000:85:00.0", "0000:87:00.0", "0000:81:00.0", "0000:83:00.0"]
_DUO_BUS = ["0000:01:00.0", "0000:02:00.0", "0000:81:00.0", "0000:82:00.0"]

#: The modules `lspci -k` lists for the NPU function once the driver is loaded (23.0.rc3 capture in the
#: lspci-vvv_910b4 sample).
KERNEL_MODULES = (
    "drv_vascend, dbl_runenv_config, drv_devmm_host, drv_devmm_host_agent, ascend_event_sched_host, "
    "drv_devmng_host, drv_pcie_hdc_host, ascend_trs_sec_eh_agent, ascend_trs_sub_stars, ascend_queue, "
    "drv_davinci_intf_host, ts_agent, ascend_trs_pm_adapt, dbl_dev_identity, dbl_algorithm, drv_soft_fault, "
    "ascend_soc_platform, drv_dvpp_cmdlist, drv_pcie_host, drv_pcie_vnic_host, ascend_trs_shrid, "
    "drv_dp_proc_mng_host, ascend_xsmem, drv_virtmng_host"
)

#: pci.ids names of the host functions below (vendor 19e5), as `lspci` prints them.
HOST_DEVICE_NAMES = {
    "a120": "HiSilicon PCIe Root Port with Gen4", "a121": "HiSilicon PCI-PCI Bridge",
    "a122": "HiSilicon Embedded DMA Engine",
    "a221": "HNS GE/10GE/25GE Network Controller", "a222": "HNS GE/10GE/25GE RDMA Network Controller",
    "a226": "HNS GE/10GE/25GE/50GE/100GE RDMA Network Controller",
    "a230": "HiSilicon SAS 3.0 HBA", "a235": "HiSilicon AHCI HBA",
    "a238": "HiSilicon USB 3.0 Host Controller", "a239": "HiSilicon USB 2.0 2-port Host Controller",
    "a250": "HiSilicon ZIP Engine", "a251": "HiSilicon ZIP Engine(Virtual Function)",
    "a255": "HiSilicon SEC Engine", "a256": "HiSilicon SEC Engine(Virtual Function)",
    "a258": "HiSilicon HPRE Engine", "a259": "HiSilicon HPRE Engine(Virtual Function)",
    "a25a": "HiSilicon RDE Engine",
}
#: pci.ids class names (class and subclass), and the programming interfaces lspci -v names
CLASS_NAMES = {
    "0104": "RAID bus controller", "0106": "SATA controller", "0107": "Serial Attached SCSI controller",
    "0200": "Ethernet controller", "0604": "PCI bridge", "0880": "System peripheral",
    "0c03": "USB controller", "1000": "Network and computing encryption device",
    "1200": "Processing accelerators",
}
PROG_IF_NAMES = {"060400": "Normal decode", "010601": "AHCI 1.0", "0c0310": "OHCI", "0c0320": "EHCI",
                 "0c0330": "XHCI"}
#: Kunpeng accelerator engines (KAE): PF device -> (VF device, driver, most VFs the driver allows). The
#: VF counts are HZIP_VF_NUM / SEC_VF_NUM / HPRE_VF_NUM (63) of drivers/crypto/hisilicon.
ENGINES = {"a250": ("a251", "hisi_zip", 63), "a255": ("a256", "hisi_sec2", 63),
           "a258": ("a259", "hisi_hpre", 63)}


def _die(bus: int, numa: int) -> list[dict]:
    """The on-die functions of one Kunpeng 920 I/O die whose host buses start at `bus` (0x74 or 0xb4).

    Positions: the kunpengcompute/KAE README and docs/*/installation_guide.md `lspci | grep ZIP|SEC|HPRE|RDE`
    captures (rev 21: ZIP 75:00.0, SEC 76:00.0, RDE 78:01.0, HPRE 79:00.0; b5/b6/b8/b9 on the second die);
    their parents from sysfs paths in public VF pass-through scripts and the DPDK uadk guide
    (/sys/devices/pci0000:74/0000:74:00.0/0000:75:00.0, pci0000:74/0000:74:01.0/0000:76:00.0,
    pci0000:78/0000:78:00.0/0000:79:00.0, pci0000:b4/0000:b4:00.0/0000:b5:00.0); the rest of the die
    (PCI-PCI bridges 74/7c, SAS 74:02.0 + 74:04.0, AHCI 74:03.0, USB 7a:00-02, HNS3 behind 7c:00.0) from
    John Garry's full `lspci` of a Kunpeng 920 board on LKML (2019-12-13, "Re: [PATCH RFC 1/1] genirq:
    Make threaded handler use irq affinity for managed interrupt", Message-ID
    d4b89ecf-7ced-d5d6-fc02-6d4257580465@huawei.com), its lstopo (these functions on NUMA node 0 and 2)
    and dmesg (/devices/pci0000:7a/0000:7a:01.0/usb1, pcieport 0000:74:00.0 and 0000:7c:00.0); the DMA
    engine 7b:00.0 (System peripheral) and SAS 74:04.0 from a rev-21 listing in a public kernel note; the
    socket-0 NICs (a222/a221/a222/a221 at 7d:00.0-3) from a `dpdk-devbind.py -s` on CentOS 7 / Kunpeng,
    the socket-1 NICs (bd:00.0-1, a222) from an `lspci -Dnn` of an openEuler 22.03 SP3 Kunpeng server.
    Inferred, not captured: the USB programming interfaces (OHCI/EHCI by the ehci-pci line in dmesg,
    XHCI), the AHCI interface (the ahci driver's class), and the second die repeating the first one's
    SAS/AHCI/USB/DMA (the captures list b4:02.0-04.0, ba:00-02, bb:00.0).
    """
    def fn(b: int, dev: str, func: str, device: str, cls: str, driver: str | None,
           parent: str | None = None) -> dict:
        return {"bdf": f"0000:{b:02x}:{dev}.{func}", "device": device, "class": cls, "revision": "21",
                "parent": parent, "numa_node": numa, "driver": driver}

    a = bus
    b74, b78, b7c = f"0000:{a:02x}:00.0", f"0000:{a + 4:02x}:00.0", f"0000:{a + 8:02x}:00.0"
    return [
        fn(a, "00", "0", "a121", "060400", "pcieport"),
        fn(a, "01", "0", "a121", "060400", "pcieport"),
        fn(a, "02", "0", "a230", "010700", "hisi_sas_v3_hw"),
        fn(a, "03", "0", "a235", "010601", "ahci"),
        fn(a, "04", "0", "a230", "010700", "hisi_sas_v3_hw"),
        fn(a + 1, "00", "0", "a250", "120000", "hisi_zip", parent=b74),
        fn(a + 2, "00", "0", "a255", "100000", "hisi_sec2", parent=f"0000:{a:02x}:01.0"),
        fn(a + 4, "00", "0", "a121", "060400", "pcieport"),
        fn(a + 4, "01", "0", "a25a", "010400", None),
        fn(a + 5, "00", "0", "a258", "100000", "hisi_hpre", parent=b78),
        fn(a + 6, "00", "0", "a239", "0c0310", "ohci-pci"),
        fn(a + 6, "01", "0", "a239", "0c0320", "ehci-pci"),
        fn(a + 6, "02", "0", "a238", "0c0330", "xhci_hcd"),
        fn(a + 7, "00", "0", "a122", "088000", None),
        fn(a + 8, "00", "0", "a121", "060400", "pcieport"),
        *([fn(a + 9, "00", str(f), d, "020000", "hns3", parent=b7c)
           for f, d in enumerate(("a222", "a221", "a222", "a221"))] if bus == 0x74 else
          [fn(a + 9, "00", str(f), "a222", "020000", "hns3", parent=b7c) for f in range(2)]),
    ]


#: Kunpeng 920 (the host CPU of Atlas 800T A2): two I/O dies (socket 0 on NUMA node 0, socket 1 on 2).
KUNPENG_920 = [*_die(0x74, 0), *_die(0xB4, 2)]


def _kunpeng_920_new() -> list[dict]:
    """The new Kunpeng 920 (7285Z in the A3 capture of vllm-ascend#2666): only its three KAE engines are
    documented, rev 30, ZIP 09:00.0 behind 08:00.0 (openEuler's "鲲鹏环境下CCA使用指南": `lspci | grep
    HiSilicon | grep Engine` and /sys/devices/pci0000:08/0000:08:00.0/0000:09:00.0/sriov_numvfs), HPRE
    0a:00.0 and SEC 0d:00.0. Their bridges 08:01.0 and 08:04.0 are inferred from the first generation's
    one-bridge-per-engine layout; the rest of this die is not modelled (no capture)."""
    def fn(bdf: str, device: str, cls: str, driver: str, parent: str | None = None) -> dict:
        return {"bdf": bdf, "device": device, "class": cls, "revision": "30", "parent": parent,
                "numa_node": 0, "driver": driver}

    return [fn("0000:08:00.0", "a121", "060400", "pcieport"),
            fn("0000:08:01.0", "a121", "060400", "pcieport"),
            fn("0000:08:04.0", "a121", "060400", "pcieport"),
            fn("0000:09:00.0", "a250", "120000", "hisi_zip", "0000:08:00.0"),
            fn("0000:0a:00.0", "a258", "100000", "hisi_hpre", "0000:08:01.0"),
            fn("0000:0d:00.0", "a255", "100000", "hisi_sec2", "0000:08:04.0")]


KUNPENG_920_NEW = _kunpeng_920_new()

PROFILES: dict[str, dict] = {
    "atlas-800t-a2": {
        "description": "Atlas 800T A2 training server: 8x Ascend 910B3 (64 GB HBM, one chip per NPU), "
                       "Kunpeng 920 host, 8x 200GE RoCE device NICs",
        "family": "910b",
        "chip_name": "910B3",
        "m_chip_name": "Ascend 910B3",
        "npu_ids": list(range(8)),
        "chips_per_npu": 1,
        "bus_ids": _A2_BUS,
        "pci_device": "d802", "pci_subsys_device": "3003", "pci_revision": "20",
        "device_link": {"speed": 32.0, "width": 16},
        "root_port": {"device": "a120", "revision": "21", "speed": 16.0, "width": 16},
        "product_name": "IT21HMDC_Bin5", "board_id": "0x60",
        "hbm_total_mb": 65536, "hbm_idle_mb": (3340, 3420),
        "memory_total_mb": 0, "memory_idle_mb": (0, 0),
        "power_w": (86.0, 96.0), "second_chip_power": True,
        "temp_c": (35, 45),
        "has_device_nic": True,
        "firmware_version": "7.1.0.11.220",
        "host_functions": KUNPENG_920,
        # 4 x Kunpeng 920 5250: 192 CPUs in 8 NUMA nodes (sim/hw/numa.py cites the captures)
        "host_cpu": KUNPENG_920_4P,
    },
    "atlas-800t-a3": {
        "description": "Atlas 800T A3 (Ascend910_93) server: 8 NPUs x 2 chips = 16 devices, 64 GB HBM per "
                       "chip, npu-smi name 'Ascend910', Kunpeng 920 host",
        "family": "910_93",
        "chip_name": "Ascend910",
        "m_chip_name": "Ascend910",
        "npu_ids": list(range(8)),
        "chips_per_npu": 2,
        "bus_ids": _A3_BUS,
        "pci_device": "d803", "pci_subsys_device": "3005", "pci_revision": "20",
        "device_link": {"speed": 32.0, "width": 16},
        "root_port": {"device": "a120", "revision": "21", "speed": 16.0, "width": 16},
        "product_name": "IT22HMDC_A3", "board_id": "0xb0",
        "hbm_total_mb": 65536, "hbm_idle_mb": (3180, 3420),
        "memory_total_mb": 0, "memory_idle_mb": (0, 0),
        # A3 reports board power on chip 0 only; chip 1 prints '-' (vllm-ascend#2666 capture).
        "power_w": (176.0, 190.0), "second_chip_power": False,
        "temp_c": (35, 45),
        "has_device_nic": True,
        "firmware_version": "7.5.0.1.129",
        "host_functions": KUNPENG_920_NEW,
    },
    "atlas-300i-duo": {
        "description": "Atlas 300I Duo inference cards: 4 cards x 2 Ascend 310P3 chips (48 GB DDR per card), "
                       "no device NICs",
        "family": "310p",
        "chip_name": "310P3",
        "m_chip_name": "Ascend 310P3",
        "npu_ids": [1, 2, 3, 4],
        "chips_per_npu": 2,
        # Both chips of a Duo card share one Bus-Id in npu-smi (nputop fixture).
        "bus_ids": _DUO_BUS,
        "pci_device": "d500", "pci_subsys_device": "0100", "pci_revision": "23",
        "device_link": {"speed": 16.0, "width": 16},
        "root_port": {"device": "a120", "revision": "21", "speed": 16.0, "width": 16},
        "product_name": "Atlas 300I Duo", "board_id": "0x64",
        "hbm_total_mb": 0, "hbm_idle_mb": (0, 0),
        "memory_total_mb": 44280, "memory_idle_mb": (1800, 1900),
        "power_w": None, "second_chip_power": False,
        "temp_c": (35, 45),
        "has_device_nic": False,
        "firmware_version": "7.1.0.4.220",
        # The Duo goes into x86 or Kunpeng hosts alike: no host functions are modelled for it.
        "host_functions": [],
    },
}

#: name -> description (the `HARDWARE` of the host API)
HARDWARE: dict[str, str] = {name: p["description"] for name, p in PROFILES.items()}
DEFAULT_HARDWARE = "atlas-800t-a2"
