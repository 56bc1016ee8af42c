"""Kernel knobs on a node behave like the kernel's files, and no write reaches the host kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.sim

THP = "/sys/kernel/mm/transparent_hugepage"
HOST_FILES = ["/proc/sys/kernel/numa_balancing", f"{THP}/enabled", f"{THP}/defrag", "/proc/sys/vm/swappiness",
              "/proc/sys/net/ipv4/ip_forward", "/proc/sys/vm/max_map_count"]


@pytest.fixture
def host_values():
    before = {p: Path(p).read_text() for p in HOST_FILES if Path(p).exists()}
    yield before
    assert {p: Path(p).read_text() for p in before} == before, "a node's write reached the host kernel"


def test_thp_and_numa_knobs_have_kernel_semantics(sim_cluster, remote, host_values):
    node = "node03"
    # node01's value is whatever earlier tests of the shared cluster left; it must not move with node03's
    node01_enabled = remote("node01", f"cat {THP}/enabled").out
    try:
        # node03 is CentOS 7.6: its 3.10 kernel has only three defrag modes
        r = remote(node, f"cat {THP}/enabled {THP}/defrag /proc/sys/kernel/numa_balancing")
        assert r.out == "[always] madvise never\n[always] madvise never\n1\n"
        r = remote(node, f"echo never > {THP}/enabled && echo madvise > {THP}/defrag && "
                         f"sysctl -w kernel.numa_balancing=0 && cat {THP}/enabled {THP}/defrag && "
                         "sysctl -n kernel.numa_balancing")
        assert r.rc == 0, r.err
        assert r.out == "kernel.numa_balancing = 0\nalways madvise [never]\nalways [madvise] never\n0\n"
        r = remote(node, f"echo defer > {THP}/defrag")
        assert r.rc != 0 and "Invalid argument" in r.err
        r = remote("node01", f"echo defer > {THP}/defrag && cat {THP}/defrag")  # a newer kernel has it
        assert r.out == "always [defer] defer+madvise madvise never\n"
        r = remote(node, f"echo sometimes > {THP}/enabled")
        assert r.rc != 0 and "Invalid argument" in r.err
        r = remote(node, "sysctl -w kernel.numa_balancing=9")
        assert r.rc != 0 and "Invalid argument" in r.err
        r = remote(node, f"cat {THP}/enabled; sysctl -n kernel.numa_balancing")
        assert r.out == "always madvise [never]\n0\n"  # failed writes changed nothing
        r = remote(node, f"echo always > {THP}/enabled", user="ascend")
        assert r.rc != 0 and "Permission denied" in r.err  # as on a real host: root only
        # the host side can read what the node set (simdir knobs.json)
        knobs = (sim_cluster.node(node).simdir(sim_cluster.run_dir) / "knobs.json").read_text()
        assert '"thp_enabled": "never"' in knobs
        # another node keeps its own values
        assert remote("node01", f"cat {THP}/enabled").out == node01_enabled
    finally:
        remote(node, f"echo always > {THP}/enabled; echo always > {THP}/defrag; "
                     "sysctl -qw kernel.numa_balancing=1")
        remote("node01", f"echo madvise > {THP}/defrag")


def test_proc_sys_is_read_only_except_the_nodes_own_net(remote, host_values):
    r = remote("node01", "sysctl -w vm.swappiness=1")
    assert r.rc != 0
    r = remote("node01", "echo 3 > /proc/sys/vm/drop_caches; echo 99999 > /proc/sys/kernel/pid_max; "
                         "echo x > /sys/kernel/mm/transparent_hugepage/khugepaged/defrag; echo done")
    assert r.out == "done\n"
    assert r.err.count("Read-only file system") == 3
    r = remote("node01", "sysctl -w net.ipv4.ip_forward=1 && sysctl -n net.ipv4.ip_forward; "
                         "sysctl -qw net.ipv4.ip_forward=0")
    assert (r.rc, r.out) == (0, "net.ipv4.ip_forward = 1\n1\n")  # its own netns; the host's stays
