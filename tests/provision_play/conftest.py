"""Fixtures of the real ansible-playbook runs: a simulated cluster per module, a package source built
from the matrix, an inventory directory, and a `play()` that runs site.yml and reads the recap.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from ascend_ready.sim.harness import fleet as fleet_harness

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
BIN = Path(sys.executable).parent
# Each fleet gets <prefix>-<tag> and 10.251.<base + tag>.0/24; a second session running these tests on
# the same machine sets both so the two never share a cluster (sim_host's ASCEND_SIM_TEST_RUN_DIR does
# the same for the other sim tests).
RUN_DIR_PREFIX = os.environ.get("ASCEND_SIM_PROVISION_RUN_PREFIX", "/run/ascend-sim-provision")
SUBNET_BASE = int(os.environ.get("ASCEND_SIM_PROVISION_SUBNET_BASE", "200"))
#: the stack every test fleet gets: legacy CANN layout, manylinux2014 wheels (fits CentOS 7.6's glibc)
STACK = "cann-8.2.RC1-torch-2.5.1"


#: the inventory and node preparation that the demo and bench use too
sim_fleet = fleet_harness
_RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)")


@dataclass
class PlayResult:
    rc: int
    output: str
    recap: dict[str, dict[str, int]] = field(default_factory=dict)

    def changed(self, host: str) -> int:
        return self.recap[host]["changed"]

    def failed(self, host: str) -> bool:
        return self.recap[host]["failed"] > 0 or self.recap[host]["unreachable"] > 0


def parse_recap(output: str) -> dict[str, dict[str, int]]:
    recap = {}
    tail = output.split("PLAY RECAP", 1)[-1]
    for line in tail.splitlines():
        m = _RECAP.match(line.strip())
        if m:
            recap[m.group(1)] = dict(zip(("ok", "changed", "unreachable", "failed", "skipped"),
                                         map(int, m.groups()[1:]), strict=True))
    return recap


class Fleet:
    """A running simulated cluster plus the inventory and package source the plays use."""

    def __init__(self, cluster, workdir: Path, packages: Path):
        self.cluster = cluster
        self.workdir = workdir
        self.packages = packages
        self.inventory = workdir / "inventory"

    # -- nodes, from the host side ------------------------------------------------------------------
    def root(self, node: str) -> Path:
        """The node's / as the host sees it."""
        return Path(f"/proc/{self.cluster.node(node).pid}/root")

    def read(self, node: str, path: str) -> str:
        return (self.root(node) / path.lstrip("/")).read_text()

    def sh(self, node: str, cmd: str, check: bool = True) -> str:
        from ascend_ready.sim import cluster as sim

        proc = sim.node_exec(self.cluster.node(node), ["sh", "-c", cmd], capture_output=True, text=True,
                             timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"{node}: {cmd!r} exited {proc.returncode}: {proc.stderr}")
        return proc.stdout

    def sim(self, *args: str) -> None:
        env = {**os.environ, "ASCEND_SIM_RUN_DIR": str(self.cluster.run_dir)}
        subprocess.run([str(BIN / "ascend-sim"), *args], check=True, env=env, capture_output=True, timeout=60)

    # -- inventory ---------------------------------------------------------------------------------
    def write_inventory(self, group_vars: dict, host_vars: dict[str, dict] | None = None,
                        extra_hosts: str = "") -> None:
        shutil.rmtree(self.inventory, ignore_errors=True)
        (self.inventory / "group_vars").mkdir(parents=True)
        (self.inventory / "host_vars").mkdir()
        text = self.cluster.inventory_path.read_text()
        if extra_hosts:
            text = text.replace("\n\n[ascend_nodes:vars]", f"\n{extra_hosts}\n\n[ascend_nodes:vars]", 1)
        (self.inventory / "hosts.ini").write_text(text)
        (self.inventory / "group_vars" / "ascend_nodes.yml").write_text(yaml.safe_dump(group_vars))
        for host, values in (host_vars or {}).items():
            (self.inventory / "host_vars" / f"{host}.yml").write_text(yaml.safe_dump(values))

    def play(self, *args: str, playbook: str = "site.yml", timeout: float = 600) -> PlayResult:
        env = {**os.environ, "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
               "ANSIBLE_FORCE_COLOR": "0", "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
        cmd = [str(BIN / "ansible-playbook"), "-i", str(self.inventory / "hosts.ini"), playbook, *args]
        proc = subprocess.run(cmd, cwd=PLAYBOOKS, env=env, capture_output=True, text=True, timeout=timeout)
        output = proc.stdout + proc.stderr
        return PlayResult(proc.returncode, output, parse_recap(output))


@pytest.fixture(scope="module")
def fleet_factory(sim_host, tmp_path_factory):
    """`fleet_factory(profiles, tag)` -> a Fleet on its own run dir and subnet, torn down with the module."""
    from ascend_ready.sim import cluster as sim

    started = []
    patch = pytest.MonkeyPatch()
    try:
        sim_fleet.net_tools_deb()
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot download net-tools from Debian: {exc.stderr!r}")

    def make(profiles: str, tag: int, stacks: tuple[str, ...] = (STACK,)) -> Fleet:
        patch.setenv("ASCEND_SIM_RUN_DIR", f"{RUN_DIR_PREFIX}-{tag}")
        patch.setenv("ASCEND_SIM_SUBNET", f"10.251.{SUBNET_BASE + tag}.0/24")
        sim.down()
        count = len(profiles.split(","))
        cluster = sim.up(count, profiles)
        started.append(cluster)
        workdir = tmp_path_factory.mktemp(f"provision-{tag}")
        packages = workdir / "packages"
        subprocess.run([sys.executable, "-m", "ascend_ready.sim.harness.build_packages", str(packages),
                        *[a for s in stacks for a in ("--stack", s)], "--arch", os.uname().machine],
                       check=True, capture_output=True)
        fleet = Fleet(cluster, workdir, packages)
        # ifconfig, which a bare node lacks and the driver installer demands; os_prereqs installs it from
        # a mirror (its own test), which these tests do not depend on.
        sim_fleet.preinstall_net_tools(cluster.run_dir)
        return fleet

    yield make
    for cluster in started:
        patch.setenv("ASCEND_SIM_RUN_DIR", str(cluster.run_dir))
        sim.down()
    patch.undo()
