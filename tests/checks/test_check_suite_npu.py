"""The NPU checks on synthetic snapshots and real captured samples: count, health, temperature, HBM,
processes, device nodes, PCI functions, topology and NUMA affinity."""

from __future__ import annotations

from checks_fakenode import (
    A2_TOPO,
    A3_TOPO,
    fake_host,
    only,
    real_topo_legend,
    render_topo,
)

from ascend_ready.checks.parsers.npu_smi_topo import parse_npu_smi_topo

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
