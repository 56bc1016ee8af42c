"""The PCIe and HCCL checks on synthetic snapshots and real captured samples: link width and speed, AER,
the device NICs (link, health, IP, hccn.conf, TLS, gateway) and the device-NIC mesh."""

from __future__ import annotations

from checks_fakenode import (
    fake_host,
    only,
)

from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import ProbeResult, Snapshot

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
