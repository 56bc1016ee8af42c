"""Shared test fixtures: the real vendor-output samples from ../shared/ascend-samples."""

from __future__ import annotations

import ipaddress
import os
import signal
from pathlib import Path

import pytest
from sample_support import REPO, SAMPLES_DIR, read_sample
from xdist_support import group_and_order, isolate_worker

# Under pytest-xdist (make test: -n 2) each worker gets simulated clusters of its own: run dirs and subnets
# are set here, before sim_support and tests/provision_play/conftest.py read them at import.
isolate_worker(os.environ)

# A suite started in the background (`nohup make test &`, a CI step without job control) inherits SIGINT
# ignored, and an ignored signal stays ignored across exec: the launchers it starts would never see the
# Ctrl-C the interruption tests send (test_multinode_sim, test_verl_ray_sim, test_transport_edges). A handled
# one is reset to the default at exec, so the children get what a terminal gives them.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Each test module is one xdist group (module- and session-scoped clusters stay on one worker), the
    modules sharing the provisioned fleet one group together, the groups ordered longest first
    (tests/durations.json) so that the two workers finish together."""
    if "PYTEST_XDIST_WORKER" in os.environ:  # a plain run keeps its collection order
        items[:] = group_and_order(items, REPO / "tests" / "durations.json")


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    if not SAMPLES_DIR.is_dir():
        pytest.fail(f"samples not found at {SAMPLES_DIR}; set ASCEND_SAMPLES_DIR")
    return SAMPLES_DIR


@pytest.fixture(scope="session", autouse=True)
def _port_claims(tmp_path_factory):
    """The port claims (checks/cluster/port_claims.py, port_plan.PortClaims) of this test session in
    directories of its own: the nodes' (a launch to `local` or to a simulated node claims there, never in
    this machine's /var/tmp, which other sessions share) and the controller's (never ~/.local/state: an
    xdist worker's live job on its own cluster's `node01` would move the other worker's plans to another
    slot, as it would for one controller's two jobs on one node)."""
    from ascend_ready.checks.cluster.port_claims import NODE_CLAIMS_DIR_ENV

    patch = pytest.MonkeyPatch()
    patch.setenv(NODE_CLAIMS_DIR_ENV, str(tmp_path_factory.mktemp("node-port-claims") / "claims"))
    patch.setenv("ASCEND_READY_STATE_DIR", str(tmp_path_factory.mktemp("controller-state")))
    yield
    patch.undo()


@pytest.fixture
def sample():
    """`sample(name)` -> the sample's output text (header stripped)."""
    return read_sample


# -- the simulated cluster (ascend-sim), shared by every test folder --------------------------------------

#: the mixed 4-node cluster of the acceptance tests: Ubuntu, Kylin, CentOS (Python 3.6 only), openEuler/A3
SIM_PROFILES = "a2-ubuntu2204,a2-kylinv10,a2-centos76,a3-openeuler2203"
#: kept apart from a user's own cluster (/run/ascend-sim, 10.251.0.0/24)
SIM_RUN_DIR = os.environ.get("ASCEND_SIM_TEST_RUN_DIR", "/run/ascend-sim-pytest")
SIM_SUBNET_24 = os.environ.get("ASCEND_SIM_TEST_SUBNET", "10.251.200.0/24")
#: the session cluster takes the lower half of the session's /24: the upper half holds the modules' own
#: clusters (sim_support.own_cluster's slots 4-6), which may come up before it (xdist runs the provisioned
#: fleet's group first), and a subnet that already routes one of them is refused (sim/net.py check_free)
SIM_SUBNET = str(next(ipaddress.ip_network(SIM_SUBNET_24).subnets(new_prefix=25)))


def sim_preconditions() -> str | None:
    """Why the simulated cluster cannot run here, or None."""
    import shutil

    if os.geteuid() != 0:
        return "the simulated cluster needs root"
    if not shutil.which("debootstrap") or not shutil.which("nsenter"):
        return "system packages missing: run scripts/system-deps.sh"
    return None


@pytest.fixture(scope="session")
def sim_host() -> None:
    """Skips the test where this machine cannot run the simulated cluster (not root, tools missing)."""
    reason = sim_preconditions()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def sim_cluster(sim_host):
    """A running 4-node cluster (profiles SIM_PROFILES) for the whole session, torn down at its end.

    Yields `ascend_ready.sim.cluster.Cluster`; ASCEND_SIM_RUN_DIR points at it meanwhile, so `ascend-sim`
    commands started by tests see it too.
    """
    import fcntl

    from ascend_ready.sim import cluster as sim

    patch = pytest.MonkeyPatch()
    patch.setenv("ASCEND_SIM_RUN_DIR", SIM_RUN_DIR)
    patch.setenv("ASCEND_SIM_SUBNET", SIM_SUBNET)
    # Two pytest sessions on one machine take turns: the second waits rather than tearing down the first's.
    with open(f"{SIM_RUN_DIR}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # the session's tests drive the simulator's own plumbing (the shared checkout among it): lent here
        # only; a job on a provisioned cluster runs in the node's venv (sim.cluster.lend_checkout)
        patch.setenv("ASCEND_SIM_LEND_CHECKOUT", "1")
        try:
            sim.down()  # leftovers of an interrupted session
            yield sim.up(4, SIM_PROFILES)
        finally:
            sim.down()
            patch.undo()


@pytest.fixture(scope="session")
def sim_ssh(sim_cluster):
    """`sim_ssh(node_name, user="root")` -> a connected paramiko client that trusts only known_hosts."""
    import paramiko

    clients = []

    def connect(name: str, user: str = "root") -> paramiko.SSHClient:
        node = sim_cluster.node(name)
        client = paramiko.SSHClient()
        client.load_host_keys(str(sim_cluster.known_hosts))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(node.ip, username=user, key_filename=str(sim_cluster.key_path),
                       look_for_keys=False, allow_agent=False, timeout=10)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


@pytest.fixture(scope="session")
def provisioned_fleet(sim_host):
    """(cluster, provisioned inventory): 4 A2 nodes provisioned once per session by site.yml with their
    training venv, judged by the profile it recorded on each node (check_profile), shared by the modules
    that need provisioned nodes (tests/checks/test_slurm_sim.py, tests/training/test_multinode_sim.py):
    provisioning costs minutes, so they share it, and each leaves the nodes as it found them (faults
    cleared, no process, Slurm's daemons stopped). ASCEND_SIM_RUN_DIR points at it only inside those
    modules (sim_support.sim_run_dir), never for the session."""
    from sim_support import FLEET_NODES, own_cluster, provisioned_cluster

    prior = os.environ.get("ASCEND_SIM_RUN_DIR")
    run_dir, subnet = own_cluster("fleet", 4)  # default /run/ascend-sim-pytest-fleet, 10.251.200.128/27
    with provisioned_cluster(run_dir, subnet, len(FLEET_NODES), "a2-ubuntu2204",
                             check_profile=True) as (c, inventory):
        patch = pytest.MonkeyPatch()
        if prior is None:
            patch.delenv("ASCEND_SIM_RUN_DIR", raising=False)
        else:
            patch.setenv("ASCEND_SIM_RUN_DIR", prior)
        try:
            yield c, inventory
        finally:
            patch.undo()  # back to this cluster's, for its teardown
