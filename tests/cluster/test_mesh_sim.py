"""The device-NIC ping mesh run for real over SSH: how each ping is judged (on outputs the simulator's
hccn_tool renders), then the whole mesh on a 4-node simulated A2 cluster with its device NICs addressed
as the fleet's hccn role does, healthy and with one fault of each kind injected through `ascend-sim fault`.
The same cluster carries the fleet.* checks (a node on another CANN, one with another TLS switch) and the
rank table `ascend-check --rank-table` writes, with the devices the mesh named left out by --exclude."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sim_support import cluster_up, own_cluster

from ascend_ready.checks.cluster.mesh import Ping
from ascend_ready.checks.cluster.mesh_run import judge_ping, mesh, run_mesh
from ascend_ready.checks.preflight import profiles_for
from ascend_ready.checks.snapshot import HostSnapshot, ProbeResult
from ascend_ready.fleet.inventory import load_inventory
from ascend_ready.fleet.transport import FanoutOptions, Target
from ascend_ready.sim import hw
from ascend_ready.sim.hw.state import NodeView
from ascend_ready.sim.render import hccn

RUN_DIR, SUBNET = own_cluster("mesh", 6)  # default /run/ascend-sim-pytest-mesh, 10.251.206.0/24
PING = Ping(0, "node01", "node02")
TARGET = "192.168.0.12"


def rendered(address: str = TARGET, *, pkt: int = 3) -> str:
    """What the simulator's hccn_tool prints for device 0 of a lone node pinging `address`."""
    view = NodeView(hw.initial_state("atlas-800t-a2", node_index=1, node_name="node01"),
                    runtime={"0": {"address": ["192.168.0.11", 0], "netmask": ["255.255.255.0", 0]}})
    return hccn.run(view, ["-i", "0", "-ping", "-g", "address", address, "pkt", str(pkt)]).text


def judged(result: ProbeResult | None, *, reachable: bool = True):
    snap = HostSnapshot(name="node01", reachable=reachable, error=None if reachable else "connection refused",
                        probes={} if result is None else {"mesh-ping-0": result})
    return judge_ping(PING, TARGET, snap, "mesh-ping-0")


def ping_result(stdout: str, rc: int = 0, **fields) -> ProbeResult:
    return ProbeResult(command=f"hccn_tool -i 0 -ping -g address {TARGET} pkt 3", rc=rc, stdout=stdout,
                       timeout_s=12.0, **fields)


def test_a_complete_reply_passes_and_names_the_pair():
    out = judged(ping_result(rendered()))
    assert out.ok
    assert out.evidence == ("node01 device 0 -> node02 192.168.0.12: "
                            "3 packets transmitted, 3 received, 0.00% packet loss")


def test_partial_loss_fails():
    text = rendered().replace("recv seq=1,time=0.034000ms\nrecv seq=2,time=0.040000ms\n", "").replace(
        "3 received, 0.00%", "1 received, 66.67%")
    out = judged(ping_result(text))
    assert not out.ok and out.evidence.endswith("3 packets transmitted, 1 received, 66.67% packet loss")


@pytest.mark.parametrize(("result", "says"), [
    (ping_result("device 0 PING 192.168.0.12\nrecv seq=0,time=1.418000ms\n", timed_out=True, rc=124),
     "timed out after 12 s; output: 'device 0 PING 192.168.0.12\\nrecv seq=0,time=1.418000ms'"),
    (ping_result("hccn_tool: dsmi_get_device_ip_address failed\n", rc=1), "unreadable output"),
    (ping_result("", rc=-1, not_run="host deadline of 20 s"), "not run: host deadline"),
    (ping_result(rendered("192.168.0.13")), "pinging 192.168.0.13"),
    (None, "no result"),
])
def test_a_ping_that_was_not_read_to_the_end_is_a_failure_with_its_output(result, says):
    out = judged(result)
    assert not out.ok
    assert says in out.evidence


def test_an_unreachable_pinging_node_is_a_failure():
    out = judged(None, reachable=False)
    assert not out.ok and "node01 unreachable: connection refused" in out.evidence


def test_duplicated_and_missing_ips_are_reported_before_pinging():
    ips = {"node01": {0: "192.168.0.11", 1: "192.168.1.11"}, "node02": {0: "192.168.0.11"}}
    # Every pair has a left-out end, so nothing is pinged (those addresses would not answer: TEST-NET-1).
    targets = [Target("node01", address="192.0.2.1"), Target("node02", address="192.0.2.2")]
    result = run_mesh(targets, FanoutOptions(), ips, [0, 1])
    assert [str(d) for d in result.duplicates] == [
        "device IP 192.168.0.11 is held by node01 device 0, node02 device 0"]
    assert (result.pings, result.round_wall_s) == (0, [])
    assert set(result.culprits) == {("node01", 0), ("node02", 0), ("node02", 1)}
    assert result.culprits[("node02", 1)] == ["no device IP on device 1 (hccn_tool -i 1 -ip -g)"]


# ---------------------------------------------------------------- on a simulated cluster


@pytest.fixture(scope="module")
def cluster(sim_host):
    """4 A2 nodes (run dir RUN_DIR): hccn_tool where the driver puts it, device d of node i at
    192.168.d.(10+i)/24 behind 192.168.d.1 (sim/harness/fleet.py device_nics, what the hccn role sets)."""
    from ascend_ready.sim.harness.fleet import address_device_nics

    with cluster_up(RUN_DIR, SUBNET, 4, "a2-ubuntu2204") as c:
        address_device_nics(c)
        for node in c.nodes:  # npu-smi where the driver package puts it (sim/packages/run_driver.sh)
            _install(node, "npu-smi", "/usr/local/sbin/npu-smi")
        yield c


def _install(node, tool: str, where: str) -> None:
    import os
    import shutil

    from ascend_ready.sim import cluster as sim

    shutil.copy(sim.NODE_TOOLS / tool, f"/proc/{node.pid}/root{where}")
    os.chmod(f"/proc/{node.pid}/root{where}", 0o755)


def _ascend_check(c, *args: str):
    from ascend_ready.checks.cli import main

    return CliRunner().invoke(main, ["-i", str(c.inventory_path), "--ssh-config", str(c.ssh_config),
                                     "--known-hosts", str(c.known_hosts), *args])


def _mesh(c):
    options = FanoutOptions(ssh_config_file=str(c.ssh_config), known_hosts_file=str(c.known_hosts))
    targets = load_inventory(str(c.inventory_path))
    return mesh(targets, options, profiles_for(targets, None), round_timeout_s=20)


def _fault(*argv: str) -> None:
    from ascend_ready.sim import cli

    result = CliRunner().invoke(cli.main, ["fault", *argv])
    assert result.exit_code == 0, result.output


@pytest.mark.sim
def test_a_healthy_cluster_passes_every_ping_in_three_rounds(cluster):
    result = _mesh(cluster)
    assert result.ok, result.lines()
    assert (result.rounds, result.pings, result.retests) == (3, 4 * 3 // 2 * 8, 0)
    assert len(result.round_wall_s) == 3 and all(w < 20 for w in result.round_wall_s)


@pytest.mark.sim
def test_the_launch_spec_and_rank_table_option_write_the_same_table_of_a_healthy_cluster(cluster, tmp_path):
    import json

    spec_file, table_file = tmp_path / "spec.json", tmp_path / "hccl.json"
    result = _ascend_check(cluster, "--select", "hccl.ip", "--select", "npu.health", "--format", "json",
                           "--launch-spec", str(spec_file), "--rank-table", str(table_file))
    assert result.exit_code == 0, result.output
    table = json.loads(table_file.read_text())
    assert json.loads(spec_file.read_text())["rank_table"] == table
    assert [(s["server_id"], len(s["device"])) for s in table["server_list"]] == [
        ("node01", 8), ("node02", 8), ("node03", 8), ("node04", 8)]
    assert table["server_list"][2]["device"][5] == {"device_id": "5", "device_ip": "192.168.5.13",
                                                    "rank_id": "21"}


def _node_sh(c, name: str, script: str, stdin: str = "") -> None:
    from ascend_ready.sim import cluster as sim

    sim.node_exec(c.node(name), ["sh", "-c", script], input=stdin, text=True, check=True, capture_output=True)


@pytest.fixture
def drifted(cluster):
    """CANN 8.2.RC1 installed on every node but node03 (8.0.0), as the toolkit installer leaves it (its
    ascend_toolkit_install.info: sim/packages/versionfiles.py, from the real files of shared/ascend-samples),
    and node04's device NICs switched to TLS on the way an operator does (`hccn_tool -i N -tls -s enable 1`);
    both undone afterwards."""
    import platform

    from ascend_ready.sim.packages.versionfiles import toolkit_install_info

    arch, root = platform.machine(), "/usr/local/Ascend/ascend-toolkit"
    for node in cluster.nodes:
        version = "8.0.0" if node.name == "node03" else "8.2.RC1"
        where = f"{root}/{version}/{arch}-linux"
        _node_sh(cluster, node.name, f"mkdir -p {where} && cat > {where}/ascend_toolkit_install.info && "
                 f"ln -sfn {version} {root}/latest", toolkit_install_info(version, arch, where))
    tls = "for d in 0 1 2 3 4 5 6 7; do hccn_tool -i $d -tls -s enable {}; done"
    _node_sh(cluster, "node04", tls.format(1))
    try:
        yield
    finally:
        _node_sh(cluster, "node04", tls.format(0))
        for node in cluster.nodes:
            _node_sh(cluster, node.name, f"rm -rf {root}")


@pytest.mark.sim
def test_fleet_names_the_node_on_another_cann_and_the_node_with_another_tls_switch(cluster, drifted):
    import json

    result = _ascend_check(cluster, "--select", "fleet.*", "--format", "json")
    assert result.exit_code == 1, result.output
    results = json.loads(result.stdout)["results"]
    status = {(r["host"], r["check_id"]): (r["status"], r["message"]) for r in results}
    assert status[("node03", "fleet.stack")] == (
        "fail", "node03: cann is 8.0.0, the majority (3 of 4 nodes) has 8.2.RC1")
    assert status[("node04", "fleet.hccn")] == ("fail", "node04: tls is 1, the majority (3 of 4 nodes) has 0")
    odd = {("node03", "fleet.stack"), ("node04", "fleet.hccn")}
    assert {k: v for k, v in status.items() if v[0] != "pass"}.keys() == odd, status
    assert len(status) == 4 * 4


@pytest.fixture(scope="module")
def faulty(cluster):
    """One fault of each kind, each on its own plane, injected with `ascend-sim fault` while the nodes
    run; the mesh run once over all of them."""
    pids = [n.pid for n in cluster.nodes]
    _fault("node03", "link-down", "--param", "device=5")
    _fault("node02", "plane-cut", "--param", "plane=3", "--param", "peer=node04")
    _fault("node01", "packet-loss", "--param", "device=6", "--param", "loss_pct=66.67")
    _fault("node02", "device-ip-duplicate", "--param", "device=1", "--param", "peer=node04")
    try:
        yield _mesh(cluster)
    finally:
        for node in cluster.nodes:
            _fault(node.name, "--clear")
    assert [n.pid for n in cluster.nodes] == pids and all(n.alive() for n in cluster.nodes)


@pytest.mark.sim
def test_a_device_whose_link_is_down_is_isolated_to_that_device(faulty):
    assert ("node03", 5) in faulty.culprits
    assert any("100.00% packet loss" in e for e in faulty.culprits[("node03", 5)])
    assert not any(plane == 5 for (_a, _b, plane) in faulty.bad_links)


@pytest.mark.sim
def test_a_device_ip_on_two_nodes_is_named_and_left_out(faulty):
    assert [str(d) for d in faulty.duplicates] == [
        "device IP 192.168.1.14 is held by node02 device 1, node04 device 1"]
    assert {("node02", 1), ("node04", 1)} <= set(faulty.culprits)


@pytest.mark.sim
def test_a_plane_cut_between_two_nodes_is_a_bad_link(faulty):
    assert list(faulty.bad_links) == [("node02", "node04", 3)]
    assert not any(plane == 3 for (_n, plane) in faulty.culprits)


@pytest.mark.sim
def test_partial_loss_is_reported_with_its_summary(faulty):
    evidence = faulty.culprits[("node01", 6)]
    assert any(e.endswith("3 packets transmitted, 1 received, 66.67% packet loss") for e in evidence)
    assert set(faulty.culprits) == {("node03", 5), ("node02", 1), ("node04", 1), ("node01", 6)}
    assert not faulty.unresolved and not faulty.transient


@pytest.fixture(scope="module")
def checked(faulty, cluster, tmp_path_factory):
    """`ascend-check --tier full --select hccl.mesh` over the faults, once, also writing the rank table
    and host list with the devices the mesh named left out: (result, rank table file, hostfile)."""
    out = tmp_path_factory.mktemp("ranktable")
    table_file, hosts_file = out / "hccl.json", out / "hostfile"
    result = _ascend_check(cluster, "--tier", "full", "--select", "hccl.mesh", "--format", "json",
                           "--rank-table", str(table_file), "--hostfile", str(hosts_file),
                           "--exclude", "node03:5", "--exclude", "node04:1", "--exclude", "node01:6")
    return result, table_file, hosts_file


@pytest.mark.sim
def test_ascend_check_runs_the_mesh_as_hccl_mesh_and_names_each_culprit(checked):
    import json

    result = checked[0]
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    by_host = {r["host"]: r for r in report["results"] if r["check_id"] == "hccl.mesh"}
    assert set(by_host) == {"node01", "node02", "node03", "node04"}
    assert all(r["status"] == "fail" for r in by_host.values())
    message = {host: r["message"] for host, r in by_host.items()}
    assert "device 5:" in message["node03"] and "100.00% packet loss" in message["node03"]
    assert "device 3 cannot reach node04 device 3" in message["node02"]
    assert "device 1:" in message["node04"] and "is held by node02 device 1" in message["node04"]


@pytest.mark.sim
def test_the_rank_table_leaves_out_the_devices_the_mesh_named_when_excluded(checked, cluster):
    import json

    result, table_file, hosts_file = checked  # hccl.mesh failed (exit 1); the table is written all the same
    table = json.loads(table_file.read_text())
    devices = {s["server_id"]: [int(d["device_id"]) for d in s["device"]] for s in table["server_list"]}
    assert devices == {"node01": [0, 1, 2, 3, 4, 5, 7], "node02": [0, 1, 2, 3, 4, 5, 6, 7],
                       "node03": [0, 1, 2, 3, 4, 6, 7], "node04": [0, 2, 3, 4, 5, 6, 7]}
    ranks = [int(d["rank_id"]) for s in table["server_list"] for d in s["device"]]
    assert ranks == list(range(29)) and table["version"] == "1.0" and table["server_count"] == "4"
    node02 = {d["device_id"]: d["device_ip"] for d in table["server_list"][1]["device"]}
    assert node02["1"] == "192.168.1.14"  # the duplicate's other holder, now unique in the table
    ips = {n.name: n.ip for n in cluster.nodes}
    assert hosts_file.read_text() == "".join(
        f"{ips[n]} slots={len(devices[n])}\n" for n in ("node01", "node02", "node03", "node04"))
    assert "rank table keeps hosts whose checks failed: node01 (hccl.mesh)" in result.stderr
    assert f"rank table: {table_file} (29 device(s) on 4 host(s))" in result.stderr


@pytest.mark.sim
def test_a_rank_table_with_a_device_ip_on_two_nodes_is_refused_naming_both(faulty, cluster, tmp_path):
    table_file = tmp_path / "hccl.json"
    result = _ascend_check(cluster, "--select", "os.glibc", "--rank-table", str(table_file))
    assert result.exit_code == 2, result.output
    assert "device IP 192.168.1.14 of node04 device 1 is also node02 device 1's" in result.stderr
    assert "--exclude node04:1" in result.stderr
    assert not table_file.exists()
