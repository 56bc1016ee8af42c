"""What a simulated cluster shares as a real one does: the checkout and its venv at the same path on every
node (read-only) and a writable /shared, and a node that can be made a straggler (a CPU quota, a slow
port)."""

from __future__ import annotations

import importlib.metadata
import uuid

import pytest
from click.testing import CliRunner

from ascend_ready.errors import SimError
from ascend_ready.sim import cgroup, cli
from ascend_ready.sim import cluster as sim

pytestmark = pytest.mark.sim

#: CPU seconds of pure Python a node burns to show its quota (the lent interpreter: every profile has it)
BURN = ("import time\nc, w = time.process_time(), time.monotonic()\n"
        "while time.process_time() - c < 0.2: pass\nprint(time.monotonic() - w)")


def _fault(*argv: str) -> None:
    result = CliRunner().invoke(cli.main, ["fault", *argv])
    assert result.exit_code == 0, result.output


def test_every_node_runs_the_checkouts_venv_at_the_same_path(sim_cluster, remote):
    checkout = sim.shared_checkout()[0]
    want = importlib.metadata.version("torch")
    # node01 is Ubuntu; node03 is CentOS 7.6, whose own python3 is hidden (it has 3.6 only)
    for node in ("node01", "node03"):
        got = remote(node, f"{checkout}/.venv/bin/python -c 'import torch; print(torch.__version__)'",
                     timeout=120)
        assert (got.rc, got.out.strip()) == (0, want), got.err


def test_shared_is_one_writable_folder_and_the_checkout_is_read_only(sim_cluster, remote):
    name = f"run-{uuid.uuid4().hex[:8]}"
    assert remote("node01", f"echo step-1 > {sim.SHARED_DIR}/{name}").rc == 0
    assert remote("node04", f"cat {sim.SHARED_DIR}/{name}").out == "step-1\n"
    assert (sim_cluster.run_dir / "shared" / name).read_text() == "step-1\n"
    denied = remote("node02", f"touch {sim.shared_checkout()[0]}/{name}")
    assert denied.rc != 0 and "Read-only file system" in denied.err


def test_a_throttled_node_runs_everything_under_its_quota_until_cleared(sim_cluster, remote):
    try:
        cgroup._hierarchy()
    except SimError as exc:
        pytest.skip(exc.message)
    _fault("node02", "cpu-throttle", "--param", "pct=10")
    try:
        group = cgroup.group_name(sim_cluster.run_dir)
        assert f"/{group}/node02" in remote("node02", "cat /proc/self/cgroup").out  # an SSH login
        entered = sim.node_exec(sim_cluster.node("node02"), ["cat", "/proc/self/cgroup"],
                                capture_output=True, text=True)
        assert f"/{group}/node02" in entered.stdout  # a command entered from the host (ascend-sim exec)
        # 0.2 CPU s at 10 ms per 100 ms period cannot take less than ~1.9 s, however idle the host is.
        slow = remote("node02", f"/opt/ascend-sim/bin/python3 -c '{BURN}'", timeout=120)
        assert float(slow.out) >= 1.5, slow
    finally:
        _fault("node02", "--clear")
    assert group not in remote("node02", "cat /proc/self/cgroup").out
    assert cgroup.group_of(sim_cluster.node("node02").dir(sim_cluster.run_dir)) is None


#: node02's side: send N bytes to the first client, then read N back and say so (one byte)
SERVE = ("import socket\ns = socket.create_server(('0.0.0.0', 47017))\nc, _ = s.accept()\nn = {n}\n"
         "c.sendall(bytes(n))\ngot = 0\nwhile got < n: got += len(c.recv(65536))\nc.sendall(b'k')\n")
#: node01's side: how long N bytes took from node02, then to node02 (connecting until it listens)
FETCH = ("import socket, time\nend = time.monotonic() + 30\nwhile True:\n"
         "    try: c = socket.create_connection(('{ip}', 47017), timeout=30); break\n"
         "    except OSError:\n        if time.monotonic() > end: raise\n        time.sleep(0.05)\n"
         "n, got, t0 = {n}, 0, time.monotonic()\nwhile got < n: got += len(c.recv(65536))\n"
         "t1 = time.monotonic()\nc.sendall(bytes(n))\nc.recv(1)\nprint(t1 - t0, time.monotonic() - t1)\n")


def test_a_slow_port_caps_what_the_node_sends_and_receives_until_cleared(sim_cluster, remote):
    node02 = sim_cluster.node("node02")
    _fault("node02", "nic-slow", "--param", "mbit=20")
    try:
        assert sim_cluster.net.shaped(node02.pid) == "20Mbit"
        n = 1_000_000  # 0.4 s each way at 20 Mbit/s, whatever else the host runs: a rate cap is a floor
        py = "/opt/ascend-sim/bin/python3"
        server = remote("node02", f"nohup {py} -c \"{SERVE.format(n=n)}\" >/dev/null 2>&1 &")
        assert server.rc == 0, server
        timed = remote("node01", f"{py} -c \"{FETCH.format(ip=node02.ip, n=n)}\"", timeout=120)
        assert timed.rc == 0, timed
        down, up = map(float, timed.out.split())
        assert down >= 0.3 and up >= 0.3, timed.out  # node02 sending, node02 receiving
    finally:
        _fault("node02", "--clear")
    assert sim_cluster.net.shaped(node02.pid) is None
    tc = sim.node_exec(node02, ["tc", "qdisc", "show", "dev", "eth0"], capture_output=True, text=True)
    assert "tbf" not in tc.stdout


def test_a_slow_port_refuses_a_rate_it_cannot_set(sim_cluster):
    result = CliRunner().invoke(cli.main, ["fault", "node02", "nic-slow", "--param", "mbit=0"])
    assert result.exit_code == 2 and "mbit must be in (0, 100000]" in result.output, result.output
    assert sim_cluster.net.shaped(sim_cluster.node("node02").pid) is None
