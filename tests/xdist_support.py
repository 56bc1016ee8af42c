"""The suite across pytest-xdist workers (make test runs `-n 2 --dist loadgroup --no-loadscope-reorder`):
each worker's simulated clusters apart from the others', whole modules per worker, longest first.

Most of the suite's time is spent waiting on simulated nodes (SSH, ansible, a job's start), not computing:
one process used 0.63 of the 2 cores. Two workers overlap those waits. A module is one xdist group, so its
module-scoped cluster is built once; the modules that share the provisioned fleet are one group, so it is
provisioned once; the session cluster is brought up by each worker that runs a test needing it.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import MutableMapping
from pathlib import Path

import pytest

#: the fixture whose modules share one group (provisioning it costs minutes: tests/conftest.py)
SHARED_GROUPS = ("provisioned_fleet",)
#: the distance between two workers' subnets, in /24s: clear of provision_play's fleets (base + tag 1..9)
WORKER_SUBNET_STRIDE = 10


def worker_index(env: MutableMapping[str, str]) -> int | None:
    """The xdist worker's number (gw0 -> 0), or None outside xdist."""
    worker = env.get("PYTEST_XDIST_WORKER")
    if not worker:
        return None
    if not (worker.startswith("gw") and worker[2:].isdigit()):
        raise pytest.UsageError(f"PYTEST_XDIST_WORKER={worker!r} is not gwN")
    return int(worker[2:])


def isolate_worker(env: MutableMapping[str, str]) -> None:
    """Worker N > 0 gets `<run dir>-gwN` and the /24 N*10 above the session's for the session cluster and
    its own clusters, and the same for provision_play's fleets. Worker 0 keeps the defaults (so a plain
    run and worker 0 of another session take turns on the same lock, as two plain runs do)."""
    n = worker_index(env)
    if not n:
        return
    run_dir = env.get("ASCEND_SIM_TEST_RUN_DIR", "/run/ascend-sim-pytest")
    subnet = ipaddress.ip_network(env.get("ASCEND_SIM_TEST_SUBNET", "10.251.200.0/24"))
    if subnet.prefixlen != 24:
        raise pytest.UsageError(f"ASCEND_SIM_TEST_SUBNET={subnet} must be a /24 under xdist")
    shifted = ipaddress.ip_network((int(subnet.network_address) + n * WORKER_SUBNET_STRIDE * 256, 24))
    env["ASCEND_SIM_TEST_RUN_DIR"] = f"{run_dir}-gw{n}"
    env["ASCEND_SIM_TEST_SUBNET"] = str(shifted)
    prefix = env.get("ASCEND_SIM_PROVISION_RUN_PREFIX", "/run/ascend-sim-provision")
    base = int(env.get("ASCEND_SIM_PROVISION_SUBNET_BASE", "200"))
    env["ASCEND_SIM_PROVISION_RUN_PREFIX"] = f"{prefix}-gw{n}"
    env["ASCEND_SIM_PROVISION_SUBNET_BASE"] = str(base + n * WORKER_SUBNET_STRIDE)


def group_of(item: pytest.Item) -> str:
    """The item's xdist group: the shared fixture it uses, else its module's path."""
    for shared in SHARED_GROUPS:
        if shared in getattr(item, "fixturenames", ()):
            return shared
    return item.nodeid.split("::", 1)[0]


def read_durations(path: Path) -> dict[str, float]:
    """{module path: seconds} as scripts/test_durations.py wrote it; an absent file orders nothing."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {str(k): float(v) for k, v in data["modules"].items()}


def join_group(item: pytest.Item, name: str) -> None:
    """Give `item` the node id `<id>@<name>` by which xdist's loadgroup scheduler keeps a group on one
    worker. xdist 3.8 does this itself for an `xdist_group` mark, but by setting `Item._nodeid`, which
    pytest 9.2's structured node ids no longer read: the mark is silently ignored and every test is
    scheduled alone (pytest-dev/pytest-xdist#1386, open), so each worker built every module's cluster."""
    nodeid = f"{item.nodeid}@{name}"
    if hasattr(item, "_id"):  # pytest >= 9.2
        from _pytest.nodeid import NodeId  # pytest >= 9.2 only

        item._id = NodeId.parse(nodeid)
    else:
        item._nodeid = nodeid
    if item.nodeid != nodeid:
        raise pytest.UsageError(f"cannot set the xdist group of {item.nodeid}: pytest {pytest.__version__}")


def group_and_order(items: list[pytest.Item], durations: Path) -> list[pytest.Item]:
    """`items` put in their xdist group (join_group) and ordered group by group, the longest group first
    (its modules' recorded seconds summed; unrecorded modules count 0 and keep their order): xdist then
    hands the next group to whichever worker is free, which finishes close to the best split."""
    seconds = read_durations(durations)
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(group_of(item), []).append(item)
    for name, members in groups.items():
        for item in members:
            join_group(item, name)

    def weight(name: str) -> float:
        modules = {i.nodeid.split("::", 1)[0].split("@", 1)[0] for i in groups[name]}
        return sum(seconds.get(m, 0.0) for m in modules)

    ordered = sorted(groups, key=weight, reverse=True)  # stable: equal weights keep collection order
    return [item for name in ordered for item in groups[name]]
