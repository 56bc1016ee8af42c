"""Hardware profiles of the simulated servers: chips, PCI identities, bus layout and idle telemetry.

Pure data (stdlib only); `state.initial_state` turns one profile into a node's hardware state.
"""

from __future__ import annotations

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
    },
}

#: name -> description (the `HARDWARE` of the host API)
HARDWARE: dict[str, str] = {name: p["description"] for name, p in PROFILES.items()}
DEFAULT_HARDWARE = "atlas-800t-a2"
