"""`ascend-train --engine verl` on two simulated nodes over real SSH (shared filesystem): the Ray cluster
comes up across the node namespaces from the launch spec, a Ray task on every node reports its hostname
and NPUs, and no Ray process is left on either node afterwards, after Ctrl-C, or when node02 cannot join.

verl's trainer itself needs accelerators (vllm, torch_npu): on these nodes the command stops after the
Ray cluster's check and says so (docs/verl.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sim_support import node_run, own_cluster, shared_venv_cluster, wait_for
from training_fakecheck import fakenode

from ascend_ready.checks.cluster.launchspec import spec_from_report
from ascend_ready.checks.cluster.ranktable import healthy_devices
from ascend_ready.checks.profile import TRAINING_CHECKS, load_profile
from ascend_ready.checks.report import Report
from ascend_ready.fleet.inventory import load_inventory

pytestmark = pytest.mark.sim

RUN_DIR, SUBNET = own_cluster("ray", 6)  # default /run/ascend-sim-pytest-ray, 10.251.200.192/27
BIN = Path(sys.executable).parent
#: a Ray process as `ps -eo pid,args` shows it on a node: the GCS, the raylet, Ray's Python daemons
RAY = re.compile(r"gcs_server|raylet|ray::|/ray/|ray\.util|ray\.scripts")
NPUS = load_profile("atlas-800t-a2").npu_count


@pytest.fixture(scope="module")
def cluster(sim_host):
    """2 A2 nodes with the shared filesystem (this checkout's .venv, with ray, and /shared)."""
    with shared_venv_cluster(RUN_DIR, SUBNET, 2, "a2-ubuntu2204", needs="ray") as c:
        yield c


def ray_processes(cluster, name: str) -> list[str]:
    ps = node_run(cluster, name, "ps", "-eo", "pid,args")
    assert ps.returncode == 0, ps.stderr
    return [ln for ln in ps.stdout.splitlines() if RAY.search(ln)]


@pytest.fixture(scope="module")
def spec_path(cluster, tmp_path_factory) -> Path:
    """The launch spec as ascend-check's writer makes it: a real report of the nodes (the checks that hold
    on bare nodes), each node's real route to the master, and the healthy devices of the node snapshots
    the simulator renders for an A2 (node02 with chip 7 alarmed: one NPU fewer)."""
    inventory = str(cluster.inventory_path)
    check = subprocess.run([str(BIN / "ascend-check"), "-i", inventory, "--select", "os.shm", "--format",
                            "json"], capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stderr
    master = cluster.node("node01").ip
    routes = {n: node_run(cluster, n, "ip", "-o", "route", "get", master).stdout
              for n in ("node01", "node02")}
    addrs = {"node01": node_run(cluster, "node01", "ip", "-o", "addr", "show", "to", master).stdout}
    devices = {"node01": healthy_devices(fakenode().fake_host("node01")),
               "node02": healthy_devices(fakenode().fake_host("node02", index=1,
                                                              faults=[("chip-health", {"npu": 7})]))}
    # bare simulated nodes: what the preflight could not judge there is waived, as the launch requires
    spec = spec_from_report(Report.model_validate_json(check.stdout), load_inventory(inventory),
                            master_addr=master, routes=routes, addrs=addrs, devices=devices,
                            waived=TRAINING_CHECKS)
    path = tmp_path_factory.mktemp("verl-ray") / "spec.json"
    path.write_text(spec.model_dump_json())
    return path


def verl_args(cluster, spec_path: Path, name: str, *extra: str) -> list[str]:
    out = cluster.run_dir / "shared" / name
    return ["grpo", "-c", "tiny", "--engine", "verl", "--launch-spec", str(spec_path), "-o", str(out),
            "--node-output-dir", f"/shared/{name}", *extra, "max_steps=2"]


def train(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ascend-train"), *args], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=timeout, check=False)


def test_the_ray_cluster_comes_up_on_both_nodes_and_leaves_no_ray_process(cluster, spec_path):
    started = time.monotonic()
    proc = train(*verl_args(cluster, spec_path, "up"))
    print(f"ray up, checked and down on 2 nodes: {time.monotonic() - started:.1f} s")
    # no vllm or torch_npu on these nodes: the trainer is not started, and the command says why
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "ray: 2 node(s) joined" in proc.stderr
    assert re.search(r"error: verl's trainer was not started: node01 lacks vllm, torch_npu; node02 lacks "
                     r"vllm, torch_npu .*The Ray cluster came up on 2 node\(s\)", proc.stderr), proc.stderr
    record = json.loads((cluster.run_dir / "shared" / "up" / "ray-cluster.json").read_text())
    seen = {r["node"]: (r["hostname"], r["ip"], len(r["npu_ids"]), r["npu_resource"])
            for r in record["nodes"]}
    assert seen == {"node01": ("node01", cluster.node("node01").ip, NPUS, NPUS),
                    "node02": ("node02", cluster.node("node02").ip, NPUS - 1, NPUS - 1)}
    assert "ray: stopped on node01, node02; no Ray process left" in proc.stderr
    assert ray_processes(cluster, "node01") == ray_processes(cluster, "node02") == []


def test_ctrl_c_while_a_node_joins_stops_ray_on_every_node(cluster, spec_path):
    run = subprocess.Popen([str(BIN / "ascend-train"), *verl_args(cluster, spec_path, "interrupted")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(run.stderr), daemon=True)
    reader.start()
    try:
        # while node02's `ray start` runs: the controller leaves it behind, and the teardown must end it
        wait_for(lambda: any("ray: head node01 up" in ln for ln in lines) or run.poll() is not None, 120,
                 "the head to start")
        run.send_signal(2)  # SIGINT, as Ctrl-C sends it
        rc = run.wait(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    reader.join(timeout=10)
    text = "".join(lines)
    assert rc == 130 and "error: interrupted" in text, text[-3000:]
    assert "ray: stopped on node01, node02; no Ray process left" in text
    assert ray_processes(cluster, "node01") == ray_processes(cluster, "node02") == []


def test_a_node_that_cannot_reach_the_head_is_named_within_the_bound(cluster, spec_path):
    head = cluster.node("node01").ip
    assert node_run(cluster, "node02", "ip", "route", "add", "blackhole", f"{head}/32").returncode == 0
    try:
        started = time.monotonic()
        proc = train(*verl_args(cluster, spec_path, "cut", "--join-timeout", "10"))
        took = time.monotonic() - started
        print(f"join failure reported after {took:.1f} s")
        assert proc.returncode == 1, proc.stderr[-3000:]
        # the GCS port is the job's slot's (6379 + slot, printed in its ports line): a slot an earlier
        # launch still holds moves it
        gcs = re.search(r"Ray GCS (\d+)", proc.stderr)
        assert gcs, proc.stderr[-3000:]
        joined = f"error: ray: node02 did not join {head}:{gcs.group(1)} within 10 s"
        assert f"{joined}: its `ray start` did not finish" in proc.stderr, proc.stderr[-3000:]
        assert "Failed to connect to GCS" in proc.stderr  # the node's own words
        assert took < 90  # start, the 10 s bound, the teardown: not Ray's own minutes of retrying
        assert ray_processes(cluster, "node01") == ray_processes(cluster, "node02") == []
    finally:
        node_run(cluster, "node02", "ip", "route", "del", "blackhole", f"{head}/32")
