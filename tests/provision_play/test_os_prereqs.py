"""An Ubuntu node provisioned end to end, nothing preinstalled: os_prereqs for real from a local apt
mirror served over HTTP by the controller (the nodes reach nothing else; packages with their
dependencies from Debian, plus stand-ins for the headers of the kernels the nodes report, see
ascend_ready.sim.harness.apt_mirror), then the whole site.yml with a CANN 8.5 stack (the new layout).
"""

from __future__ import annotations

import pytest
from sim_support import served_apt_mirror

from .conftest import STACK, sim_fleet

# each play here is a minute or more on 2 cores: make test-e2e (tests/README.md says who runs it, when)
pytestmark = [pytest.mark.sim, pytest.mark.e2e]

WANTED = ("make", "dkms", "gcc", "g++", "pciutils", "net-tools", "python3-venv")
STACK_85 = "cann-8.5.0-torch-2.9.0"


@pytest.fixture(scope="module")
def mirrored(fleet_factory, tmp_path_factory):
    fleet = fleet_factory("a2-ubuntu2204", 2, stacks=(STACK, STACK_85))
    with served_apt_mirror(fleet.cluster, tmp_path_factory.mktemp("apt") / "repo") as repo:
        group = sim_fleet.group_vars(fleet.packages, STACK, run_dir=fleet.cluster.run_dir,
                                     os_prereqs_repo=repo)
        fleet.write_inventory(group)
        fleet.group_vars = group
        yield fleet


def test_ubuntu_node_gets_its_prerequisites_from_the_mirror(mirrored):
    fleet = mirrored
    kernel = fleet.sh("node01", "uname -r").strip()
    fleet.sh("node01", "dpkg -r net-tools >/dev/null")  # as bare as a fresh node
    first = fleet.play("--tags", "os_prereqs")
    assert first.rc == 0, first.output[-4000:]
    assert first.changed("node01") >= 2  # the mirror's source list and the packages
    status = fleet.sh("node01", "dpkg-query -W -f='${Package} ${db:Status-Status}\\n' "
                                + " ".join(WANTED) + f" linux-headers-{kernel}")
    wanted = (*WANTED, f"linux-headers-{kernel}")
    assert sorted(status.split("\n")[:-1]) == sorted(f"{p} installed" for p in wanted)
    found = fleet.sh("node01", "for c in ifconfig gcc dkms make lspci; do command -v $c; done")
    assert found.count("\n") == 5
    assert fleet.read("node01", "/etc/apt/sources.list.d/ascend-ready.list").startswith("deb [trusted=yes] http://")
    second = fleet.play("--tags", "os_prereqs")
    assert second.rc == 0 and second.changed("node01") == 0
    assert "Refresh the package index" not in second.output.split("TASK [os_prereqs : Record")[1]


def test_whole_site_with_the_cann_85_layout(mirrored):
    fleet = mirrored
    fleet.write_inventory({**fleet.group_vars, "stack_id": STACK_85},
                          sim_fleet.host_vars([vars(n) for n in fleet.cluster.nodes]))
    first = fleet.play()
    assert first.rc == 0, first.output[-4000:]
    # The mirror gave the node its kernel headers: the validate play judged them (not skipped).
    assert "os.kernel_headers" not in fleet.group_vars["validate_skip"]
    assert "ascend-check: every check passed on node01" in first.output
    assert fleet.sh("node01", "readlink /usr/local/Ascend/cann").strip() == "cann-8.5.0"
    ops = fleet.read("node01", "/usr/local/Ascend/cann/x86_64-linux/ascend_ops_install.info")
    assert "package_name=Ascend-cann-910b-ops" in ops and "version=8.5.0" in ops
    assert ". /usr/local/Ascend/cann/set_env.sh" in fleet.read("node01", "/home/ascend/.bashrc")
    assert "Version=25.5.1" in fleet.read("node01", "/usr/local/Ascend/driver/version.info")
    again = fleet.play()
    assert again.rc == 0 and again.changed("node01") == 0
