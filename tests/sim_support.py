"""Helpers of the tests that drive simulated nodes: wait for an event instead of sleeping, and own cluster
run dirs and subnets derived from the session's (so two sessions on one machine never share a cluster).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, what: str, *, interval: float = 0.05,
             ignore: tuple[type[BaseException], ...] = ()) -> T:
    """Poll `predicate` until it returns something truthy (returned); fail naming `what` after `timeout` s.

    Exceptions of the `ignore` types count as "not yet" (a node whose sshd is restarting refuses SSH).
    Timeouts are generous bounds for a loaded machine, not expected durations.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = predicate()
        except ignore as exc:
            value, last = None, exc
        else:
            last = value
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what} (last seen: {last!r})")
        time.sleep(interval)


#: the session's cluster (tests/conftest.py reads the same variables with the same defaults)
_SESSION_RUN_DIR = os.environ.get("ASCEND_SIM_TEST_RUN_DIR", "/run/ascend-sim-pytest")
_SESSION_SUBNET = ipaddress.ip_network(os.environ.get("ASCEND_SIM_TEST_SUBNET", "10.251.200.0/24"))


def own_cluster(suffix: str, slot: int) -> tuple[str, str]:
    """(run dir, subnet) of a test's own cluster: `<session run dir>-<suffix>` and the /27 number `slot`
    (4, 5 or 6) of the session's /24, above the session cluster's own addresses (host .1, nodes .11 on, hub
    .254), so sessions given different /24s never share a subnet. A /27 holds up to 19 nodes. Slot 4 is the
    shared provisioned fleet's (provisioned_fleet, up for the whole session); modules' own clusters take
    5 and 6, one at a time."""
    if slot not in (4, 5, 6):
        raise ValueError("slots 4, 5 and 6 (.128/27, .160/27, .192/27) are the ones clear of the session "
                         "cluster")
    subnet = ipaddress.ip_network((int(_SESSION_SUBNET.network_address) + slot * 32, 27))
    return f"{_SESSION_RUN_DIR}-{suffix}", str(subnet)


@contextlib.contextmanager
def cluster_up(run_dir: str, subnet: str, count: int, profiles: str) -> Iterator[object]:
    """A cluster of its own for a test module: `count` nodes of `profiles` in `run_dir`/`subnet` (see
    own_cluster), torn down afterwards; another session using the same run dir waits its turn."""
    from ascend_ready.sim import cluster as sim

    patch = pytest.MonkeyPatch()
    patch.setenv("ASCEND_SIM_RUN_DIR", run_dir)
    with open(f"{run_dir}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            sim.down()  # leftovers of an interrupted run
            yield sim.up(count, profiles, subnet=subnet)
        finally:
            sim.down()
            patch.undo()


@contextlib.contextmanager
def shared_venv_cluster(run_dir: str, subnet: str, count: int, profiles: str,
                        needs: str = "torch") -> Iterator[object]:
    """cluster_up for tests that run this checkout's .venv inside the nodes (lent to them on request,
    ASCEND_SIM_LEND_CHECKOUT=1: a real rack runs the venv python_env built, as `make demo` does): skipped,
    saying so, where node02 cannot import `needs` from it."""
    import sys

    from ascend_ready.sim import cluster as sim

    patch = pytest.MonkeyPatch()
    patch.setenv("ASCEND_SIM_LEND_CHECKOUT", "1")
    with contextlib.ExitStack() as stack:
        stack.callback(patch.undo)
        c = stack.enter_context(cluster_up(run_dir, subnet, count, profiles))
        probe = sim.node_exec(c.node("node02"), [sys.executable, "-c", f"import {needs}"],
                              capture_output=True)
        if probe.returncode != 0:
            pytest.skip(f"the simulated nodes cannot import {needs} from this checkout's .venv "
                        "(no shared filesystem, or the extra that installs it is missing)")
        yield c


#: the stack the training clusters are provisioned with (its torch line's training set, provision/
#: training_sets.yml, goes into the venv; the simulator relabels this machine's CPU torch as its torch:
#: docs/design/simulator.md)
TRAINING_STACK = "cann-8.2.RC1-torch-2.6.0"
#: the interpreter of the training venv python_env builds on each node of a provisioned_cluster
NODE_PYTHON = f"/home/ascend/venvs/ascend-{TRAINING_STACK}/bin/python"


@contextlib.contextmanager
def provisioned_cluster(run_dir: str, subnet: str, count: int, profiles: str,
                        stack: str = TRAINING_STACK, *, os_prereqs: bool = False,
                        check_profile: bool = False) -> Iterator[tuple[object, object]]:
    """cluster_up, then playbooks/site.yml as `make demo` runs it, with the training environment: each
    node's venv `~ascend/venvs/ascend-<stack>` holds ascend-ready and what the job imports, and the
    controller's checkout is not lent, as on a real rack. Yields (cluster, the provisioned inventory:
    stack_id and ascend_training_user set, so ascend-train and ascend-check use that venv).
    `os_prereqs`: play 2's os_prereqs too, from an apt mirror served to the nodes (served_apt_mirror: apt
    nodes only), as `make demo` does, so the nodes get the kernel headers; `check_profile`: the inventory
    names fleet.host_bound_profile as ascend_check_profile (the nodes' limits and disk are this host's)."""
    import subprocess
    import sys
    from pathlib import Path

    from ascend_ready.sim.harness import fleet
    from ascend_ready.sim.harness.build_packages import build

    playbooks = Path(__file__).resolve().parents[1] / "playbooks"
    # never lent the checkout (the session cluster lends it, for the whole session: sim_cluster): the job
    # and node-local ascend-check must run the venv python_env builds, as on a real rack
    lend = pytest.MonkeyPatch()
    lend.setenv("ASCEND_SIM_LEND_CHECKOUT", "0")
    with contextlib.ExitStack() as resources:
        try:
            c = resources.enter_context(cluster_up(run_dir, subnet, count, profiles))
        finally:
            lend.undo()
        work = c.run_dir / "provision"
        packages = build(work / "packages", [stack], os.uname().machine, training=True)
        fleet.preinstall_net_tools(c.run_dir)
        mirror = served_apt_mirror(c, work / "apt") if os_prereqs else contextlib.nullcontext(None)
        with mirror as repo:
            spec = fleet.host_bound_profile(work / "sim-profile.yml") if check_profile else None
            inventory = fleet.write_inventory(c.run_dir, work / "inventory", packages, stack, training=True,
                                              os_prereqs_repo=repo, check_profile=spec)
            # reboots on, as on a real rack: the nodes load what they were given and owe no reboot
            # (os.reboot_pending is judged on them); a simulated reboot costs a few seconds
            reboot_on(inventory)
            bindir = Path(sys.executable).parent
            env = {**os.environ, "ANSIBLE_CONFIG": str(playbooks / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                   "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
            skip = [] if os_prereqs else ["--skip-tags", "os_prereqs"]
            play = subprocess.run([str(bindir / "ansible-playbook"), "-i", str(inventory), "site.yml", *skip],
                                  cwd=playbooks, env=env, capture_output=True, text=True, timeout=1800,
                                  check=False)
        if play.returncode != 0:
            pytest.fail(f"provisioning the training cluster failed (rc {play.returncode}):\n"
                        f"{(play.stdout + play.stderr)[-4000:]}")
        yield c, inventory


#: the shared provisioned fleet's nodes (provisioned_fleet): four, so that the drain breaker is shown under
#: real slurmd on three of four failing at once (issue 30); the training modules take subsets (FleetView)
FLEET_NODES = ("node01", "node02", "node03", "node04")


@contextlib.contextmanager
def sim_run_dir(run_dir) -> Iterator[None]:
    """ASCEND_SIM_RUN_DIR at `run_dir` for a block: `ascend-sim` commands and sim.faults see that cluster."""
    patch = pytest.MonkeyPatch()
    patch.setenv("ASCEND_SIM_RUN_DIR", str(run_dir))
    try:
        yield
    finally:
        patch.undo()


class FleetView:
    """Some nodes of a shared cluster, as a module's own cluster would be: `inventory_path` lists only them
    (a copy of the simulator's inventory without the others); everything else is the cluster's."""

    def __init__(self, cluster, names: tuple[str, ...], out) -> None:
        from pathlib import Path

        self._cluster = cluster
        self.names = names
        self.inventory_path = Path(out) / "inventory.ini"
        self.inventory_path.parent.mkdir(parents=True, exist_ok=True)
        self.inventory_path.write_text(subset_inventory(cluster.inventory_path.read_text(), names))

    def __getattr__(self, name: str):
        return getattr(self._cluster, name)


def subset_inventory(text: str, names: tuple[str, ...]) -> str:
    """The simulator's inventory (sim/inventory.py ini) without the hosts not in `names`: their lines in
    every group go (a host line is its name, alone or with its variables); groups and group vars stay."""
    hosts = {ln.split()[0] for ln in text.splitlines() if " ansible_host=" in ln}
    if not set(names) <= hosts:
        raise ValueError(f"{sorted(set(names) - hosts)} not in the inventory ({sorted(hosts)})")
    kept = [ln for ln in text.splitlines() if not (ln.split() and ln.split()[0] in hosts - set(names))]
    return "\n".join(kept) + "\n"


def subset_provisioned_inventory(inventory, names: tuple[str, ...], out):
    """A copy of a provisioned inventory directory (hosts.ini, group_vars/, host_vars/) that names only
    `names`; returns its hosts.ini."""
    import shutil
    from pathlib import Path

    src, dst = Path(inventory).parent, Path(out)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    (dst / "hosts.ini").write_text(subset_inventory((src / "hosts.ini").read_text(), names))
    for extra in (dst / "host_vars").glob("*.yml"):
        if extra.stem not in names:
            extra.unlink()
    return dst / "hosts.ini"


def reboot_on(inventory) -> None:
    """Turn the reboot handler on in a simulated fleet's inventory (sim.harness.fleet turns it off)."""
    from pathlib import Path

    import yaml

    path = Path(inventory).parent / "group_vars" / "ascend_nodes.yml"
    values = yaml.safe_load(path.read_text())
    values.update(ascend_common_reboot=True, ascend_common_reboot_timeout=300)
    path.write_text(yaml.safe_dump(values))


@contextlib.contextmanager
def served_apt_mirror(cluster, out) -> Iterator[str]:
    """sim.harness.apt_mirror's repository built in `out` and served over HTTP on the cluster's host
    address (the nodes reach nothing else): yields the apt source line for os_prereqs_repo; skips the
    test, saying why, where the Debian packages cannot be downloaded."""
    import socket
    import subprocess
    import sys

    from ascend_ready.sim.harness import apt_mirror

    try:
        apt_mirror.build(out)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot download the Debian packages for the mirror: {exc.stderr!r}")
    host_ip = cluster.net.host_ip
    with socket.socket() as s:
        s.bind((host_ip, 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", host_ip,
                               "--directory", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: socket.create_connection((host_ip, port), timeout=0.5).close() or True, 30,
                 f"the mirror's HTTP server on {host_ip}:{port}", interval=0.1, ignore=(OSError,))
        yield f"[trusted=yes] http://{host_ip}:{port}/ ./"
    finally:
        server.terminate()
        server.wait(timeout=10)


def node_run(cluster, name: str, *argv: str, timeout: float = 30):
    """`argv` on node `name` of `cluster`, its output captured as text."""
    from ascend_ready.sim import cluster as sim

    return sim.node_exec(cluster.node(name), list(argv), capture_output=True, text=True, timeout=timeout)
