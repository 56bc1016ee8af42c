"""Every check on synthetic snapshots: passes on a healthy node, fails (or warns) on each fault,
including real captured samples; probe timeouts and parse errors are errors, never passes."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest
from checks_fakenode import (
    A2_TOPO,
    A3_TOPO,
    fake_host,
    real_topo_legend,
    render_topo,
    stand_ins,
    torch_import_output,
)

from ascend_ready.checks.parsers.npu_smi_topo import parse_npu_smi_topo
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import all_checks, select_checks
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import ProbeResult, Snapshot


def judge(host, profile="atlas-800t-a2", tier="full", select=()):
    prof = load_profile(profile) if isinstance(profile, str) else profile
    report = run_checks(
        Snapshot(hosts={host.name: host}), {host.name: prof}, select_checks(tier, select=select)
    )
    return {r.check_id: r for r in report.results}


def only(check_id, host, **kw):
    return judge(host, select=[check_id], **kw)[check_id]


DF_HEADER = "Filesystem 1024-blocks Used Available Capacity Mounted on\n"


@pytest.mark.parametrize("hardware", ["atlas-800t-a2", "atlas-800t-a3", "atlas-300i-duo"])
def test_healthy_node_passes_every_quick_check(hardware):
    results = judge(fake_host(hardware=hardware), profile=hardware, tier="quick")
    assert set(results) == {s.id for s in select_checks("quick")}
    bad = {cid: (r.status, r.message) for cid, r in results.items() if r.status not in ("pass", "skip")}
    assert bad == {}
    skipped = {cid for cid, r in results.items() if r.status == "skip"}
    fleet = {"fleet.hardware", "fleet.hccn", "fleet.os", "fleet.stack"}  # one host: nothing to compare
    assert fleet <= skipped
    skipped -= fleet
    if hardware == "atlas-300i-duo":  # no RoCE ports, no HBM
        assert skipped == {
            "hccl.conf",
            "hccl.ip",
            "hccl.link_up",
            "hccl.net_health",
            "hccl.tls",
            "npu.hbm_idle",
            "npu.hbm_usage",
            "npu.numa_affinity",
            "npu.topology",
        }
    elif hardware == "atlas-800t-a3":  # npu-smi prints no CPU affinity column on an A3
        assert skipped == {"npu.numa_affinity"}
    else:
        assert skipped == set()


def test_every_check_has_metadata_and_a_test_here():
    checks = all_checks()
    assert len(checks) >= 30
    for spec in checks.values():
        assert spec.probes and spec.title and spec.severity in ("critical", "major", "minor")
        assert spec.remediation is not None and spec.remediation.text
    tested = {name.split("__")[0] for name in globals() if name.startswith("test_")}
    for cid in checks:
        assert f"test_{cid.replace('.', '_')}" in tested, f"no test for {cid}"


# ---------------------------------------------------------------- fleet (more in test_check_fleet.py)


def _odd_one_out(check_id: str, **outputs: str):
    """Three simulated A2 hosts, node03 with `outputs`: the check's results by host."""
    hosts = {f"node0{i}": fake_host(f"node0{i}", index=i, outputs=outputs if i == 3 else None)
             for i in (1, 2, 3)}
    report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, load_profile("atlas-800t-a2")),
                        select_checks("quick", [check_id]))
    return {r.host: r for r in report.results}


def test_fleet_stack():
    r = _odd_one_out("fleet.stack", **{"driver-version": "Version=24.1.rc2\n"})
    assert [r[h].status for h in sorted(r)] == ["pass", "pass", "fail"]
    assert r["node03"].message.startswith("node03: driver is 24.1.rc2, the majority (2 of 3 nodes) has ")


def test_fleet_os():
    r = _odd_one_out("fleet.os", **{"kernel-headers": "kernel 4.19.90-24.4.v2101.ky10.aarch64\n"})
    assert r["node03"].status == "fail" and "kernel is 4.19.90-24.4.v2101.ky10.aarch64" in r["node03"].message


def test_fleet_hardware():
    r = _odd_one_out("fleet.hardware", **{"npu-smi-info": fake_host(hardware="atlas-800t-a3").probes[
        "npu-smi-info"].stdout})
    assert r["node03"].status == "fail"
    assert r["node03"].message.startswith("node03: npu_model is Ascend910, the majority (2 of 3 nodes) has")


def test_fleet_hccn():
    conf = fake_host().probes["hccn-conf"].stdout.replace("netmask_0=255.255.0.0", "netmask_0=255.255.255.0")
    r = _odd_one_out("fleet.hccn", **{"hccn-conf": conf})
    assert r["node03"].status == "fail"
    assert "hccn_netmask is 255.255.0.0/255.255.255.0, the majority" in r["node03"].message


# ---------------------------------------------------------------- NPU


def test_npu_count():
    r = only("npu.count", fake_host(faults=[("npu-missing", {"npu": 5})]))
    assert r.status == "fail"
    assert r.message == "npu-smi lists 7 NPUs, the Atlas 800T A2 has 8"
    assert "npu-smi lists NPU ids [0, 1, 2, 3, 4, 6, 7]" in r.evidence
    assert r.remediation.disruptive


def test_npu_health__alarm_fails_with_codes():
    r = only("npu.health", fake_host(faults=[("chip-health", {"npu": 3, "level": "Alarm"})]))
    assert r.status == "fail"
    assert r.message == "NPU 3 chip 0 (0000:02:00.0): Alarm, error codes A4025021 8C03A000 8C084E00"
    assert any("heart beat lost" in line for line in r.evidence)
    assert any("0000:02:00.0" in line and "|" in line for line in r.evidence)  # the table row


def test_npu_health__warning_is_a_warning():
    r = only("npu.health", fake_host(faults=[("chip-health", {"npu": 1, "level": "Warning"})]))
    assert r.status == "warn"
    assert "NPU 1 chip 0" in r.message and "Warning" in r.message and "8C03A000" in r.message


def test_npu_health__real_910a_warning_sample(sample):
    host = fake_host(
        outputs={"npu-smi-info": sample("npu-smi-info_910a-warning_23.0.rc3_modelarts-notebook-log.txt")}
    )
    r = only("npu.health", host)
    assert r.status == "warn"
    assert r.message.startswith("NPU 1 chip 0 (0000:81:00.0): Warning")
    assert any("| 1     910A" in line for line in r.evidence)


def test_npu_health__real_alarm_detail_sample(sample):
    # The table still says OK, `-t health` already reports the alarm: the worse one counts.
    host = fake_host(
        outputs={
            "npu-smi-health.0.0": sample("npu-smi-info-t-health_alarm-multicode_mindcluster-faultdiag.txt")
        }
    )
    r = only("npu.health", host)
    assert r.status == "fail"
    assert "A4025021 8C03A000 8C084E00" in r.message


def test_npu_temperature():
    r = only("npu.temperature", fake_host(faults=[("hot-chip", {"npu": 6, "temp_c": 96})]))
    assert r.status == "fail"
    assert r.message == "NPU 6 chip 0 at 96 °C (expected 10-70 °C)"


def test_npu_hbm_idle__real_sample_with_hidden_users(sample):
    # vllm-ascend#362: four cards hold ~29.9 GB while npu-smi lists no process (another container).
    host = fake_host(outputs={"npu-smi-info": sample("npu-smi-info_910b2_23.0.7_vllm-ascend-362.txt")})
    r = only("npu.hbm_idle", host)
    assert r.status == "fail"
    assert r.message.count("HBM on an idle node") == 4
    assert "NPU 0 chip 0 uses 29954 MB HBM" in r.message
    assert "NPU 4" not in r.message  # 3347 MB is the driver's baseline


def test_npu_hbm_usage():
    r = only("npu.hbm_usage", fake_host(faults=[("stray-process", {"npu": 2, "memory_mb": 58000})]))
    assert r.status == "fail"
    assert r.message.startswith("NPU 2 chip 0 uses 9") and "(max 90 %)" in r.message


def test_npu_processes():
    r = only(
        "npu.processes", fake_host(faults=[("stray-process", {"npu": 0, "pid": 4242, "name": "python3"})])
    )
    assert r.status == "fail"
    assert r.message == "1 process(es) hold NPUs: pid 4242 python3 on NPU 0"


def test_npu_processes__real_sample(sample):
    host = fake_host(outputs={"npu-smi-info": sample("npu-smi-info_910b1-procs_25.5.1_go-cmdb-test.txt")})
    r = only("npu.processes", host)
    assert r.status == "fail" and "pid 3755936" in r.message


def test_npu_device_nodes():
    host = fake_host()
    ls = host.probes["dev-davinci"].stdout.replace("davinci3\n", "")
    r = only("npu.device_nodes", fake_host(outputs={"dev-davinci": ls}))
    assert r.status == "fail"
    assert r.message == "7 /dev/davinciN device node(s) but npu-smi lists 8 chip(s)"


def test_npu_pci_functions():
    lspci = fake_host().probes["lspci"].stdout
    missing = "".join(line + "\n" for line in lspci.splitlines() if not line.startswith("0000:81:00.0"))
    r = only("npu.pci_functions", fake_host(outputs={"lspci": missing}))
    assert r.status == "fail"
    assert r.message == "lspci shows 7 NPU function(s), the Atlas 800T A2 has 8"


def _topo_like(path, change=None, affinity=True):
    """`npu-smi info -t topo` rendered from a real capture's matrix, with some pairs' link changed."""
    real = parse_npu_smi_topo(path.read_text())
    change = change or {}

    def link(a, b):
        return change.get((a, b)) or change.get((b, a)) or real.link(a, b)

    return render_topo(real.devices, link, real.cpu_affinity if affinity else None, real_topo_legend(path))


def test_topology_renderer_reproduces_the_real_captures():
    # The A2 capture byte for byte (its prompt line aside); the A3 one but for the TAB its paste expanded.
    assert _topo_like(A2_TOPO) == A2_TOPO.read_text().split("\n", 1)[1]
    a3 = _topo_like(A3_TOPO, affinity=False)
    assert a3.replace("\t   ", " " * 11, 1) == A3_TOPO.read_text()


def test_npu_topology():
    assert only("npu.topology", fake_host()).status == "pass"  # the real A2 capture: every pair HCCS
    pix = _topo_like(A2_TOPO, {("NPU2", "NPU5"): "PIX", ("NPU2", "NPU6"): "SYS"})
    r = only("npu.topology", fake_host(outputs={"npu-smi-topo": pix}))
    assert r.status == "fail"
    assert r.message == (
        "2 chip pair(s) without the expected link: "
        "NPU2-NPU5 PIX, should be HCCS; NPU2-NPU6 SYS, should be HCCS"
    )
    assert any(line.startswith("NPU2 ") and "PIX" in line for line in r.evidence)
    assert r.remediation.command == "npu-smi info -t topo"


def _nodes(*cpulists: str) -> str:
    return "".join(f"/sys/devices/system/node/node{n}/cpulist:{c}\n" for n, c in enumerate(cpulists))


def test_npu_numa_affinity():
    # The simulated Kunpeng 920 host: 8 nodes of 24 CPUs, each NPU's affinity (the real capture's) in one.
    r = only("npu.numa_affinity", fake_host())
    assert r.status == "pass" and "NPU0: CPU Affinity 144-167 -> NUMA node(s) [6]" in r.evidence
    # A BIOS that splits the host at CPU 150: NPU0 and NPU2 (144-167) straddle two nodes.
    r = only("npu.numa_affinity", fake_host(outputs={"numa-nodes": _nodes("0-149", "150-191")}))
    assert r.status == "warn"
    assert r.message.startswith("NPU0: CPU Affinity 144-167 spans NUMA nodes [0, 1], so a rank bound to it")
    # Nodes covering CPUs 0-95 only: the affinities 96-167 are in none of them.
    r = only("npu.numa_affinity", fake_host(outputs={"numa-nodes": _nodes("0-47", "48-95")}))
    assert r.status == "warn" and "NPU0: CPU Affinity 144-167 lies outside every NUMA node" in r.message
    # One node: nothing to run across.
    assert only("npu.numa_affinity", fake_host(outputs={"numa-nodes": _nodes("0-191")})).status == "pass"
    r = only("npu.numa_affinity", fake_host(outputs={"numa-nodes": "node0: 0-23\n"}))
    assert r.status == "error" and "numa-nodes" in r.message


def test_npu_topology__a3_dies_over_sio_npus_over_the_switch():
    a3 = fake_host(hardware="atlas-800t-a3")
    assert only("npu.topology", a3, profile="atlas-800t-a3").status == "pass"
    text = a3.probes["npu-smi-topo"].stdout
    real = parse_npu_smi_topo(text)
    broken = render_topo(
        real.devices,
        lambda a, b: "HCCS_SW" if {a, b} == {"Phy-ID4", "Phy-ID5"} else real.link(a, b),
        None,
        real_topo_legend(),
    )
    r = only(
        "npu.topology",
        fake_host(hardware="atlas-800t-a3", outputs={"npu-smi-topo": broken}),
        profile="atlas-800t-a3",
    )
    assert r.status == "fail" and r.message.endswith("Phy-ID4-Phy-ID5 HCCS_SW, should be SIO")


def test_npu_topology__a_containers_partial_view_is_not_a_whole_node():
    # The real A3 capture from a container shows two of sixteen chips: not the node the profile expects.
    r = only(
        "npu.topology",
        fake_host(hardware="atlas-800t-a3", outputs={"npu-smi-topo": A3_TOPO.read_text()}),
        profile="atlas-800t-a3",
    )
    assert r.status == "fail"
    assert r.message == "`npu-smi info -t topo` lists 2 chip(s), the Atlas 800T A3 has 16"


# ---------------------------------------------------------------- PCIe


def test_pcie_link_width():
    r = only("pcie.link_width", fake_host(faults=[("pcie-width", {"npu": 2, "width": 8})]))
    assert r.status == "fail"
    assert r.message == "0000:c2:00.0 (NPU 2) trains at x8, should be x16"
    assert "/sys/bus/pci/devices/0000:c2:00.0/current_link_width:8" in r.evidence


def test_pcie_link_width__lspci_fallback_when_sysfs_has_no_link_attributes():
    host = fake_host(faults=[("pcie-width", {"npu": 2, "width": 8})], outputs={"sysfs-pci-link": ""})
    r = only("pcie.link_width", host)
    assert r.status == "fail"
    assert r.message == "0000:c2:00.0 (NPU 2) trains at x8, should be x16"
    assert any("LnkSta:" in line and "Width x8" in line for line in r.evidence)


def test_pcie_link_speed():
    r = only("pcie.link_speed", fake_host(faults=[("pcie-speed", {"npu": 5, "speed": 8.0})]))
    assert r.status == "fail"
    assert r.message == (
        "0000:41:00.0 (NPU 5) trains at 8 GT/s, should be 16 GT/s "
        "(device max 32 GT/s behind 0000:40:00.0 (max 16 GT/s))"
    )


def test_pcie_link_speed__downgraded_sample_behind_gen4_port_passes(sample):
    # The kata doc's 910B4 at 01:00.0: LnkCap 32GT/s, LnkSta 16GT/s "(downgraded)". Behind a Gen4
    # root port (16 GT/s) that is the slot's speed, so it is healthy.
    port = fake_host().probes["lspci-vvv"].stdout.split("\n\n")[0]  # 0000:00:00.0, the Gen4 root port
    assert port.startswith("0000:00:00.0") and "LnkCap" in port
    vvv = port + "\n\n" + sample("lspci-vvv_910b4-d802_link-downgraded_kata-npu-passthrough-doc.txt")
    host = fake_host(
        outputs={
            "sysfs-pci-link": "",
            "lspci-vvv": vvv,
            "npu-smi-info": "garbage",
            "pci-topology": "0000:01:00.0 0000:00:00.0\n",
        }
    )
    r = only("pcie.link_speed", host)
    assert r.status == "pass", r.message
    # Without knowing the upstream port, the device's own 32 GT/s is what the slot must give.
    host = fake_host(outputs={"sysfs-pci-link": "", "lspci-vvv": vvv, "pci-topology": ""})
    r = only("pcie.link_speed", host)
    assert (
        r.status == "fail"
        and r.message == "0000:01:00.0 (NPU 1) trains at 16 GT/s, should be 32 GT/s (device max 32 GT/s)"
    )


def test_pcie_aer():
    dmesg = fake_host().probes["dmesg"].stdout + (
        "[ 4242.000001] pcieport 0000:40:00.0: AER: Corrected error received: 0000:41:00.0\n"
        "[ 4242.000002] devdrv_device_driver 0000:41:00.0: PCIe Bus Error: severity=Corrected, type=Physical "
        "Layer, (Receiver ID)\n"
    )
    r = only("pcie.aer", fake_host(outputs={"dmesg": dmesg}))
    assert r.status == "warn"
    assert r.message == "2 AER/PCIe bus error line(s) in dmesg (corrected) for 0000:41:00.0"
    assert only("pcie.aer", fake_host()).status == "pass"
    # The sysfs counters (kernels with AER statistics) warn too.
    sysfs = fake_host().probes["sysfs-pci-link"].stdout + (
        "/sys/bus/pci/devices/0000:c1:00.0/aer_dev_correctable:RxErr 3\n"
        "/sys/bus/pci/devices/0000:c1:00.0/aer_dev_correctable:TOTAL_ERR_COR 3\n"
        "/sys/bus/pci/devices/0000:c1:00.0/aer_dev_fatal:TOTAL_ERR_FATAL 0\n"
    )
    r = only("pcie.aer", fake_host(outputs={"sysfs-pci-link": sysfs}))
    assert r.status == "warn" and r.message == "0000:c1:00.0 AER counters aer_dev_correctable 3"


# ---------------------------------------------------------------- HCCL


def test_hccl_link_up():
    r = only("hccl.link_up", fake_host(faults=[("link-down", {"device": 4})]))
    assert r.status == "fail"
    assert r.message == "device 4 link DOWN"
    assert r.evidence == ["[device 4] link status: DOWN"]


def test_hccl_net_health():
    r = only("hccl.net_health", fake_host(faults=[("net-health-fault", {"device": 1})]))
    assert r.status == "fail" and r.message.startswith("device 1 net health")


def test_hccl_net_health__real_socket_failed_sample(sample):
    host = fake_host(
        outputs={
            "hccn-net-health.0": sample("hccn_tool-net_health-g_socket-failed_mindcluster-faultdiag.txt")
        }
    )
    r = only("hccl.net_health", host)
    assert r.status == "fail" and r.message == "device 0 net health 'Socket failed'"


def test_hccl_ip():
    r = only("hccl.ip", fake_host(faults=[("device-ip-missing", {"device": 3})]))
    assert r.status == "fail" and r.message == "device 3 has no IP"
    r = only("hccl.ip", fake_host(faults=[("device-ip-duplicate", {"device": 1, "same_as": 0})]))
    assert r.status == "fail"
    assert "device 0 shares" in r.message and "device 1 shares" in r.message


def test_hccl_conf__real_ip_sample(sample):
    # hccn_tool -ip -g of a real 8-NPU node, with a matching hccn.conf: consistent.
    blocks = sample("hccn_tool-ip-g-loop_8npu_mindcluster-faultdiag-worker9.txt").strip().split("\n\n")
    outputs, conf = {}, []
    for block in blocks:
        cmd, ip, mask = block.splitlines()
        dev = cmd.split()[2]
        outputs[f"hccn-ip.{dev}"] = f"{ip}\n{mask}\n"
        addr = ip.split(":")[1]
        conf += [
            f"address_{dev}={addr}",
            f"netmask_{dev}=255.255.0.0",
            f"gateway_{dev}={'.'.join(addr.split('.')[:2])}.0.1",
        ]
    good = "\n".join(conf) + "\n"
    assert only("hccl.conf", fake_host(outputs={**outputs, "hccn-conf": good})).status == "pass"
    bad = good.replace("gateway_2=192.3.0.1", "gateway_2=10.9.0.1").replace(
        "address_5=192.2.8.198", "address_5=192.2.8.199"
    )
    r = only("hccl.conf", fake_host(outputs={**outputs, "hccn-conf": bad}))
    assert r.status == "fail"
    assert r.message == (
        "device 2 gateway 10.9.0.1 is outside 192.3.103.252/255.255.0.0; "
        "device 5 runs 192.2.8.198, hccn.conf says 192.2.8.199"
    )


def test_hccl_conf__missing_file():
    missing = ProbeResult(
        command="cat /etc/hccn.conf", rc=1, stderr="cat: /etc/hccn.conf: No such file or directory\n"
    )
    r = only("hccl.conf", fake_host(outputs={"hccn-conf": missing}))
    assert r.status == "fail" and r.message == "/etc/hccn.conf does not exist"


def test_hccl_tls():
    r = only("hccl.tls", fake_host(faults=[("tls-mismatch", {"device": 6, "enable": 1})]))
    assert r.status == "fail"
    assert r.message == "TLS is off on 7 device(s) but on on device 6"


def test_hccl_gateway_ping():
    assert only("hccl.gateway_ping", fake_host()).status == "pass"
    lost = "device 1 PING 192.2.0.1\n1 packets transmitted, 0 received, 100.00% packet loss\n"
    r = only("hccl.gateway_ping", fake_host(outputs={"hccn-ping.1": lost}))
    assert r.status == "fail" and r.message == "device 1: 100 % loss to 192.2.0.1"
    # A device whose ping never printed is not a reachable gateway: an error naming the command.
    r = only("hccl.gateway_ping", fake_host(drop=("hccn-ping.5",)))
    assert r.status == "error"
    assert r.message.startswith('device 5: no output of `g=$(sed -n "s/^gateway_5=//p" /etc/hccn.conf)')


# ---------------------------------------------------------------- OS


def test_os_thp():
    r = only("os.thp", fake_host(outputs={"thp-defrag": "always defer defer+madvise [madvise] never\n"}))
    assert r.status == "fail" and r.message == "THP defrag is madvise, should be never"


def test_os_numa_balancing():
    r = only("os.numa_balancing", fake_host(outputs={"sysctl": "kernel.numa_balancing = 1\n"}))
    assert r.status == "fail" and r.message == "kernel.numa_balancing is 1, should be 0"


def test_os_nofile():
    r = only(
        "os.nofile",
        fake_host(outputs={"user-limits": "user root\nnofile 65536 1024\nmemlock unlimited unlimited\n"}),
    )
    assert r.status == "fail" and r.message == "nofile is 1024 (soft) / 65536 (hard), should be >= 1048576"


def test_os_memlock():
    r = only(
        "os.memlock",
        fake_host(outputs={"user-limits": "user root\nnofile 1048576 1048576\nmemlock 65536 65536\n"}),
    )
    assert r.status == "fail" and r.message == "memlock is 65536 (soft) / 65536 (hard), should be unlimited"
    wrong_user = fake_host(
        outputs={"user-limits": "user ascend\nnofile 1048576 1048576\nmemlock unlimited unlimited\n"}
    )
    assert only("os.memlock", wrong_user).status == "fail"


def test_os_driver_user():
    r = only("os.driver_user", fake_host(outputs={"accounts": "root:x:0:0:root:/root:/bin/bash\n"}))
    assert r.status == "fail" and r.message == "user HwHiAiUser and group HwHiAiUser missing"


def test_os_glibc():
    r = only("os.glibc", fake_host(outputs={"glibc": "glibc 2.17\n"}))
    assert r.status == "fail"
    assert r.message.startswith("glibc is 2.17: torch ") and "needs glibc 2.28" in r.message
    assert "numpy" not in r.message  # manylinux2014 (2.17) is fine


def test_os_kernel_headers():
    r = only("os.kernel_headers", fake_host(outputs={"kernel-headers": "kernel 5.15.0-91-generic\n"}))
    assert r.status == "fail" and r.message == "no kernel headers for the running kernel 5.15.0-91-generic"


def test_os_disk_free():
    df = DF_HEADER + "/dev/sda1 104857600 94371840 10485760 90% /\n"
    r = only("os.disk_free", fake_host(outputs={"disk-free": df}))
    assert r.status == "fail" and r.message == "10.0 GB free under / (/), need 100 GB"


def test_os_shm():
    df = "Filesystem 1024-blocks Used Available Capacity Mounted on\ntmpfs 65536 0 65536 0% /dev/shm\n"
    r = only("os.shm", fake_host(outputs={"shm": df}))
    assert r.status == "fail" and r.message == "/dev/shm is 0.1 GB, need 8 GB"


def test_os_clock_sync():
    r = only("os.clock_sync", fake_host(outputs={"clock": "NTPSynchronized=no\n"}))
    assert r.status == "fail" and r.message == "the clock is not synchronized"
    chrony = "Reference ID    : 0A000001 (10.0.0.1)\nLeap status     : Normal\n"
    assert only("os.clock_sync", fake_host(outputs={"clock": chrony})).status == "pass"
    none = "no time sync tool answered (timedatectl, chronyc, ntpstat)\n"
    assert only("os.clock_sync", fake_host(outputs={"clock": none})).status == "fail"


def test_os_reboot_pending(tmp_path):
    # the marker's probe output as its own shell prints it (tests/checks/test_reboot_pending.py)
    from test_reboot_pending import judge, probe_output

    assert judge(probe_output(tmp_path, present=True)).status == "fail"
    assert judge(probe_output(tmp_path, present=False)).status == "pass"


# ---------------------------------------------------------------- versions


def test_versions_installed():
    none = ProbeResult(command="...", rc=1, stderr="no ascend_toolkit_install.info\n")
    r = only("versions.installed", fake_host(outputs={"toolkit-version": none, "cann-components": ""}))
    assert r.status == "fail" and r.message == "not installed: cann, ops, nnal"


def test_versions_stack():
    host = fake_host()
    drift = host.probes["driver-version"].stdout.replace("Version=25.5.1", "Version=23.0.6")
    r = only("versions.stack", fake_host(outputs={"driver-version": drift}))
    assert r.status == "fail"
    assert r.message.startswith("driver is 23.0.6, should be 25.5.1")


def test_versions_stack__torch_mismatch_like_the_real_sample():
    # mind-cluster fixture: torch 1.11.0 next to torch-npu 2.1.0.post8 (a broken pair).
    text = fake_host().probes["python-packages"].stdout
    text = text.replace("dist torch 2.9.0 ", "dist torch 1.11.0 ")
    r = only("versions.stack", fake_host(outputs={"python-packages": text}))
    assert r.status == "fail" and "torch" in r.message and "1.11.0" in r.message


def test_versions_set_env():
    r = only("versions.set_env", fake_host(outputs={"set-env": "/usr/local/Ascend/nnal/atb/set_env.sh\n"}))
    assert r.status == "fail"
    # The toolkit is installed in the cann/ layout (CANN 8.5): its set_env.sh is the one to source.
    assert r.message == "no cann/set_env.sh under /usr/local/Ascend"
    none = ProbeResult(command="...", rc=1, stderr="no ascend_toolkit_install.info\n")
    r = only("versions.set_env", fake_host(outputs={"set-env": "", "toolkit-version": none}))
    assert r.status == "fail"
    assert r.message == "no ascend-toolkit/set_env.sh or cann/set_env.sh under /usr/local/Ascend"


def test_versions_user_libs():
    libs = (
        "LD_LIBRARY_PATH=\nlib libascendcl.so -\nlib libhccl.so -\nlib libascend_hal.so /x/libascend_hal.so\n"
    )
    r = only("versions.user_libs", fake_host(outputs={"user-libs": libs}))
    assert r.status == "fail"
    assert r.message == "root's LD_LIBRARY_PATH does not find libascendcl.so, libhccl.so"


def _training_env_probe(*python_args: str, pythonpath: str | None = None) -> str:
    """What the training-env probe really prints, run by this interpreter with `python_args`."""
    from ascend_ready.checks.resources.versions import _TRAINING_ENV

    env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    argv = [sys.executable, *python_args, "-c", _TRAINING_ENV]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout


def test_versions_training_env(tmp_path):
    from ascend_ready import __version__

    r = only("versions.training_env", fake_host())
    assert r.status == "pass", r.message
    # -S: no site-packages, as in a venv python_env built without ascend-ready (issue 18)
    r = only("versions.training_env", fake_host(outputs={"training-env": _training_env_probe("-S")}))
    assert r.status == "fail"
    assert "cannot import ascend_ready, torch, torch_npu, transformers, trl" in r.message
    assert "ascend_ready: cannot import (ModuleNotFoundError: No module named 'ascend_ready')" in r.evidence
    # another version of ascend-ready in the venv: refused naming both
    (tmp_path / "ascend_ready").mkdir()
    (tmp_path / "ascend_ready" / "__init__.py").write_text('__version__ = "0.0.9"\n')
    stand_ins(tmp_path / "stand-ins")
    text = _training_env_probe(pythonpath=f"{tmp_path}:{tmp_path / 'stand-ins'}")
    r = only("versions.training_env", fake_host(outputs={"training-env": text}))
    assert r.status == "fail" and f"has ascend-ready 0.0.9, this controller {__version__}" in r.message
    # no interpreter at all (the probe's shell says so): not judged, never a pass
    missing = ProbeResult(command="sh", rc=127, stdout="",
                          stderr="ascend-check: no interpreter /home/ascend/venvs/x/bin/python\n")
    assert only("versions.training_env", fake_host(outputs={"training-env": missing})).status == "error"


def test_versions_training_env_judges_the_training_set_of_the_torch_line(tmp_path):
    """The venv's torch says which training set applies (provision/training_sets.yml): this checkout's
    transformers/TRL under a torch 2.1.0 are not the set of that line, and the check names each."""
    from ascend_ready.provision import training_sets

    info = tmp_path / "torch-2.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.1.0\n")
    stand_ins(tmp_path / "stand-ins")  # torch_npu, as on a node
    text = _training_env_probe(pythonpath=f"{tmp_path}:{tmp_path / 'stand-ins'}")
    assert "dist torch 2.1.0" in text.splitlines()
    r = only("versions.training_env", fake_host(outputs={"training-env": text}))
    want = training_sets.set_for("2.1.0").packages
    assert r.status == "fail"
    assert f"trl {metadata.version('trl')} (the set holds {want['trl']})" in r.message
    assert r.message.endswith("provision/training_sets.yml")
    # the probe without dist lines (an older ascend-check's): judged as before, versions not
    assert only("versions.training_env", fake_host(outputs={"training-env": "\n".join(
        line for line in text.splitlines() if not line.startswith("dist "))})).status == "pass"


def test_versions_torch_npu_import():
    # The probe's own code run against the simulator's stand-in torch_npu, which counts /dev/davinciN.
    assert only("versions.torch_npu_import", fake_host()).status == "pass"
    r = only("versions.torch_npu_import", fake_host(outputs={"torch-import": torch_import_output(7)}))
    assert r.status == "fail" and r.message == "torch_npu sees 7 device(s), npu-smi lists 8"
    r = only("versions.torch_npu_import", fake_host(outputs={"torch-import": torch_import_output(0)}))
    assert r.status == "fail" and r.message == "torch.npu.is_available() is False in python3"


# ---------------------------------------------------------------- could not judge


def test_hung_npu_smi_is_an_error_naming_the_command():
    hung = ProbeResult(command="npu-smi info", rc=124, timed_out=True, timeout_s=10, duration_s=10)
    results = judge(fake_host(outputs={"npu-smi-info": hung}), select=["npu.*"])
    for cid in ("npu.count", "npu.health", "npu.temperature", "npu.processes"):
        assert results[cid].status == "error"
        assert results[cid].message.startswith("`npu-smi info` timed out after 10 s")


def test_garbled_output_is_an_error_never_a_pass():
    r = only("npu.count", fake_host(outputs={"npu-smi-info": "+----+\n| hello |\n"}))
    assert r.status == "error" and r.message.startswith("cannot parse npu-smi-info")


def test_missing_probe_is_an_error():
    r = only("os.thp", fake_host(drop=("thp-enabled",)))
    assert r.status == "error" and "no output of probe 'thp-enabled'" in r.message


def test_group_override_changes_a_threshold():
    prof = load_profile().model_copy(update={"overrides": {"small": {"min_disk_free_gb": 1}}})
    df = DF_HEADER + "/dev/sda1 104857600 94371840 10485760 90% /\n"
    host = fake_host(outputs={"disk-free": df})
    assert only("os.disk_free", host, profile=prof).status == "fail"
    assert only("os.disk_free", host, profile=prof.for_groups(["small"])).status == "pass"


# ---------------------------------------------------------------- the device-NIC mesh (live: tests/cluster)


def test_hccl_mesh():
    from ascend_ready.checks.cluster.mesh import PingOutcome, isolate, rounds
    from ascend_ready.checks.cluster.mesh_run import MeshRun, record

    def fabric(pings):  # node02's device 4 answers nobody
        return {p: PingOutcome("node02" not in (p.src, p.dst) or p.plane != 4, f"{p.src}->{p.dst}: loss")
                for p in pings}

    hosts = {f"node0{i}": fake_host(f"node0{i}", index=i) for i in (1, 2, 3)}
    result = isolate(rounds(list(hosts), range(8)), fabric)
    record(MeshRun(**vars(result)), list(hosts.values()))
    report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, load_profile("atlas-800t-a2")),
                        select_checks("full", ["hccl.mesh"]))
    status = {r.host: (r.status, r.message) for r in report.results}
    assert status["node01"] == ("pass", "") and status["node03"] == ("pass", "")
    assert status["node02"][0] == "fail" and status["node02"][1].startswith("device 4: ")
    # A host whose mesh record is missing (the mesh did not run for it) is an error, never a pass.
    del hosts["node03"].probes["hccl-mesh"]
    report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, load_profile("atlas-800t-a2")),
                        select_checks("full", ["hccl.mesh"]))
    assert {r.host: r.status for r in report.results}["node03"] == "error"
    # One host: nothing to ping between.
    one = {"node01": hosts["node01"]}
    report = run_checks(Snapshot(hosts=one), {"node01": load_profile("atlas-800t-a2")},
                        select_checks("full", ["hccl.mesh"]))
    assert report.results[0].status == "skip"


# ---------------------------------------------------------------- collective (tests/cluster/test_collective*)


def _collective(check_id: str, rec) -> dict[str, str]:
    from collective_support import snapshots

    hosts = snapshots(rec)
    report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, load_profile("atlas-800t-a2")),
                        select_checks("full", [check_id]))
    return {r.host: r.status for r in report.results}


def test_npu_matmul():
    from collective_support import captured, even, scaled

    assert set(_collective("npu.matmul", even(captured())).values()) == {"pass"}
    slow = _collective("npu.matmul", scaled(even(captured()), 0.3, host="node02", kind="matmul"))
    assert slow == {"node01": "pass", "node02": "fail", "node03": "pass"}


def test_hccl_allreduce():
    from collective_support import captured, even, scaled

    assert set(_collective("hccl.allreduce", even(captured())).values()) == {"pass"}
    slow = _collective("hccl.allreduce", scaled(even(captured()), 0.2, host="node01", group="pair:"))
    assert slow == {"node01": "fail", "node02": "pass", "node03": "pass"}


# ---------------------------------------------------------------- the clock's offset (issue 25)

#: chronyc tracking of a real node (zabbix-tooling/zabbix-agent-extensions#39), its System time line
CHRONY_REAL = (
    "Reference ID    : 1.2.3.4 (a.b.c)\nStratum         : 3\nRef time (UTC)  : Fri Feb  3 15:00:29 2012\n"
    "System time     : 0.000001501 seconds slow of NTP time\nLast offset     : -0.000001632 seconds\n"
    "RMS offset      : 0.000002360 seconds\nFrequency       : 331.898 ppm fast\n"
)
#: timedatectl timesync-status as systemd's timedatectl.c prints it (print_ntp_status_info: labels right-
#: aligned to "Root distance", Offset a signed format_timespan)
TIMESYNC = (
    "       Server: 91.189.91.157 (ntp.ubuntu.com)\nPoll interval: 34min 8s (min: 32s; max 34min 8s)\n"
    "         Leap: normal\n      Version: 4\n      Stratum: 2\n    Reference: 11FD1CFB\n"
    "    Precision: 1us (-25)\nRoot distance: 25.482ms (max: 5s)\n       Offset: {offset}\n"
    "        Delay: 22.837ms\n       Jitter: 1.386ms\n Packet count: 3186\n    Frequency: -19.227ppm\n"
)


def test_os_clock_sync_reads_the_offset():
    from ascend_ready.sim.render import chrony

    ok = only("os.clock_sync", fake_host(outputs={"clock-offset": CHRONY_REAL}))
    assert ok.status == "pass" and "System time     : 0.000001501 seconds slow" in "\n".join(ok.evidence)
    # the simulator's chronyc with the clock-offset fault: 612 s fast, still synchronised
    fast = chrony.tracking(True, now=0.0, offset_s=612.0)
    bad = only("os.clock_sync", fake_host(outputs={"clock-offset": fast, "clock": "NTPSynchronized=yes\n"}))
    assert bad.status == "fail"
    assert bad.message == ("the clock is 612.000 s fast of NTP time (chronyc), more than the profile's 1 s")
    slow = only("os.clock_sync", fake_host(outputs={"clock-offset": TIMESYNC.format(offset="-10min 12.5s")}))
    assert slow.status == "fail" and "612.500 s slow of NTP time (timedatectl)" in slow.message
    near = only("os.clock_sync", fake_host(outputs={"clock-offset": TIMESYNC.format(offset="+1.466ms")}))
    assert near.status == "pass"
    none = "no offset source answered (chronyc tracking, timedatectl timesync-status)\n"
    unread = only("os.clock_sync", fake_host(outputs={"clock-offset": none}))
    assert unread.status == "warn" and "offset was not read" in unread.message
    garbled = only("os.clock_sync", fake_host(outputs={"clock-offset": TIMESYNC.format(offset="soon")}))
    assert garbled.status == "error"


# ---------------------------------------------------------------- performance against the SKU (issue 29)

PERF = ("npu.flops", "npu.hbm_bandwidth", "npu.h2d_bandwidth", "npu.d2h_bandwidth", "npu.p2p_bandwidth")
#: each performance fault of the simulator, and the one check it must fail
PERF_FAULTS = {
    "npu.flops": ("npu-throttle", {"npu": 1, "factor": 0.6}, "device 1"),
    "npu.hbm_bandwidth": ("hbm-degraded", {"npu": 2, "factor": 0.5}, "device 2"),
    "npu.h2d_bandwidth": ("pcie-width", {"npu": 3, "width": 8}, "device 3"),
    "npu.d2h_bandwidth": ("pcie-width", {"npu": 3, "width": 8}, "device 3"),
    "npu.p2p_bandwidth": ("hccs-link-down", {"device": 0, "other": 5}, "device 0 -> 5"),
}


def _perf(host, profile="atlas-800t-a2"):
    return {cid: r for cid, r in judge(host, profile=profile, select=list(PERF)).items() if cid in PERF}


@pytest.mark.parametrize("hardware", ["atlas-800t-a2", "atlas-800t-a3", "atlas-300i-duo"])
def test_perf_checks_pass_a_healthy_node_with_measured_expected_floor_and_source(hardware):
    results = _perf(fake_host(hardware=hardware), profile=hardware)
    want = {c: "pass" for c in PERF}
    if hardware == "atlas-300i-duo":
        want["npu.p2p_bandwidth"] = "skip"  # no HCCS between inference cards
    assert {c: r.status for c, r in results.items()} == want, {c: r.message for c, r in results.items()}
    lines = "\n".join(results["npu.h2d_bandwidth"].evidence)
    assert "measured" in lines and "expected" in lines and "floor" in lines and "source:" in lines


def _one_fault(check_id):
    kind, params, subject = PERF_FAULTS[check_id]
    results = _perf(fake_host(faults=[(kind, params)]))
    bad = {c: r.status for c, r in results.items() if r.status != "pass"}
    # pcie-width slows both copy directions: it fails exactly h2d and d2h
    both = {"npu.h2d_bandwidth", "npu.d2h_bandwidth"}
    assert bad == ({c: "fail" for c in both} if check_id in both else {check_id: "fail"})
    r = results[check_id]
    assert subject in r.message and "floor" in r.message and "the absolute floor binds" in r.message
    return r


def test_npu_flops():
    r = _one_fault("npu.flops")
    assert "below its floor 266.1 TFLOPS (0.85 x 313 expected for 910B3)" in r.message


def test_npu_hbm_bandwidth():
    _one_fault("npu.hbm_bandwidth")


def test_npu_h2d_bandwidth():
    r = _one_fault("npu.h2d_bandwidth")
    assert "below its floor 22 GB/s" in r.message  # a x8 link halves the copy: ~12.4 of ~24.9 GB/s


def test_npu_d2h_bandwidth():
    _one_fault("npu.d2h_bandwidth")


def test_npu_p2p_bandwidth():
    r = _one_fault("npu.p2p_bandwidth")
    assert "device 5 -> 0" in r.message  # both directions of the downed link


def test_perf_a_uniformly_slow_fleet_fails_on_the_floor_and_one_slow_device_warns():
    from ascend_ready.checks.registry import select_checks as sel

    slow = [fake_host(f"node0{i}", index=i, faults=[("npu-throttle", {"npu": "all", "factor": 0.6})])
            for i in range(1, 3)]
    prof = load_profile("atlas-800t-a2")
    report = run_checks(Snapshot(hosts={h.name: h for h in slow}), {h.name: prof for h in slow},
                        sel("full", select=["npu.flops"]))
    assert {r.host: r.status for r in report.results} == {"node01": "fail", "node02": "fail"}
    # above the floor but more than 10 % under the fleet median: a warning naming the fleet as what binds
    # (on an A3: its measured FLOPS sit 14 % above the floor, room for a band between floor and fleet)
    a3 = load_profile("atlas-800t-a3")
    hosts = [fake_host("node01", "atlas-800t-a3", index=1),
             fake_host("node02", "atlas-800t-a3", index=2,
                       faults=[("npu-throttle", {"npu": 2, "factor": 0.87})])]
    report = run_checks(Snapshot(hosts={h.name: h for h in hosts}), {h.name: a3 for h in hosts},
                        sel("full", select=["npu.flops"]))
    by_host = {r.host: r for r in report.results}
    assert by_host["node01"].status == "pass"
    assert by_host["node02"].status == "warn" and "device 4/5" in by_host["node02"].message
    assert "the fleet median binds" in by_host["node02"].message


def test_perf_checks_say_ascend_dmi_is_missing():
    host = fake_host(outputs={"ascend-dmi-d2d.0": ProbeResult(
        command="ascend-dmi --bw -t d2d -d 0 -q", rc=127, stderr="sh: ascend-dmi: not found\n")})
    r = _perf(host)["npu.hbm_bandwidth"]
    assert r.status == "error" and "ascend-dmi is not installed" in r.message


def test_perf_verdicts_carry_measured_expected_floor_and_source_into_json_and_html():
    from ascend_ready.checks.html_report import render_html

    host = fake_host(faults=[("pcie-width", {"npu": 3, "width": 8})])
    report = run_checks(Snapshot(hosts={host.name: host}), {host.name: load_profile("atlas-800t-a2")},
                        select_checks("full", select=["npu.h2d_bandwidth"]))
    text = report.model_dump_json()
    html = render_html(report)
    for shown in (text, html):
        assert "device 3: measured 12.41 GB/s, expected 31.5 GB/s (39 % of it)" in shown
        assert "floor 22 GB/s (0.7 x 31.5 expected for 910B3; source: Atlas 800T A2" in shown
        assert "fail (both the absolute floor and the fleet median bind)" in shown


def test_npu_matmul__a_uniformly_slow_npu_fleet_fails_on_the_skus_floor():
    """No profile floor (the bundled A2 profile leaves it to sku_perf.yml): 0.85 x 313 TFLOPS on a 910B3."""
    import dataclasses

    from collective_support import captured, even, snapshots

    rec = even(captured())
    healthy = dataclasses.replace(rec, device="npu", measurements=[
        dataclasses.replace(m, value=300.0) if m.kind == "matmul" else m for m in rec.measurements])
    slow = dataclasses.replace(healthy, measurements=[  # 40 % slow, every device alike: no straggler
        dataclasses.replace(m, value=180.0) if m.kind == "matmul" else m for m in healthy.measurements])
    prof = load_profile("atlas-800t-a2")
    assert prof.matmul_min_tflops is None
    for record, want in ((healthy, "pass"), (slow, "fail")):
        hosts = snapshots(record)
        for name, snap in hosts.items():  # each host's npu-smi table names its chips (910B3)
            snap.probes["npu-smi-info"] = fake_host(name).probes["npu-smi-info"]
        report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, prof),
                            select_checks("full", ["npu.matmul"]))
        assert {r.status for r in report.results} == {want}, [r.message for r in report.results]
    assert "below the profile's 266.1" in report.results[0].message


# ---------------------------------------------------------------- silent data corruption (test_sdc.py)


def test_npu_sdc():
    from checks_fakenode import SDC_DATA

    ok = only("npu.sdc", fake_host())  # a clean CPU run on an A2 host: right bits, its NPUs not exercised
    assert ok.status == "warn" and ok.message.startswith("it ran on cpu, not on the 8 NPU(s) npu-smi lists")
    flipped = (SDC_DATA / "cpu-2ranks-device1-bit3.txt").read_text()
    bad = only("npu.sdc", fake_host(outputs={"npu-sdc": flipped}))
    assert bad.status == "fail" and bad.message.startswith("cpu:1 (cpu) matmul-exact fp32")
