"""What a simulated cluster shares as a real one does: the checkout and its venv at the same path on every
node (read-only) and a writable /shared, and a node that can be made a straggler (a CPU quota)."""

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
