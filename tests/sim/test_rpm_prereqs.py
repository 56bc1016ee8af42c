"""The harness's stand-in for `dnf install` on simulated RHEL-family nodes (sim/harness/rpm_prereqs.py): it
covers every RPM os_prereqs asks for there, and what it records is what the role's own rpm query (run
against the simulator's real rpm stand-in) reads as installed, so the role finds nothing missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from ascend_ready.sim import profiles
from ascend_ready.sim.harness import rpm_prereqs
from ascend_ready.sim.harness.fleet import DEBIAN_FAMILY_OS

REPO = Path(__file__).resolve().parents[2]
RPM = REPO / "sim/osfiles/rhel-tools/rpm"
KERNEL = "6.1.0-28-amd64"


def _rhel_os_ids() -> set[str]:
    return {profiles.get(n).os.name for n in profiles.names()} - set(DEBIAN_FAMILY_OS)


def test_every_rhel_family_profile_gets_each_rpm_of_its_role_list_from_the_mirror():
    assert _rhel_os_ids() == set(rpm_prereqs.VARS_FILE)
    mirror = set(rpm_prereqs.mirror_packages())
    for os_id in rpm_prereqs.VARS_FILE:
        names = rpm_prereqs.rpm_names(os_id, KERNEL)
        assert "gcc-c++" in names and any(n.startswith("kernel-devel") for n in names), (os_id, names)
        debs = {rpm_prereqs._debian_name(n, KERNEL) for n in names}
        assert debs - {f"linux-headers-{KERNEL}"} <= mirror, (os_id, debs - mirror)


def test_the_recorded_view_answers_the_role_query_installed(tmp_path):
    for os_id, vars_file in rpm_prereqs.VARS_FILE.items():
        role = yaml.safe_load((rpm_prereqs.ROLE_VARS / vars_file).read_text())
        names = rpm_prereqs.rpm_names(os_id, KERNEL)
        wanted = {n: rpm_prereqs._debian_name(n, KERNEL) for n in names}
        versions = {"make": "4.3-4.1", "dkms": "3.0.10-8+deb12u1", "gcc": "4:12.2.0-3", "g++": "4:12.2.0-3",
                    "pciutils": "1:3.9.0-4", "net-tools": "2.10-0.1+deb12u2", "python3-dev": "3.11.2-1+b1",
                    "libelf-dev": "0.188-2.1"}
        db = tmp_path / f"{os_id}.rpmdb"
        view = (REPO / "sim/osfiles" / os_id / "root/var/lib/rpm/ascend-sim-installed").read_text()
        lines = rpm_prereqs.rpm_view_lines(wanted, versions, KERNEL, view)
        db.write_text(view + "".join(lines))
        # a second run adds nothing
        assert rpm_prereqs.rpm_view_lines(wanted, versions, KERNEL, db.read_text()) == []
        query = role["_os_prereqs_query"][1:]  # after "rpm": -q --queryformat FORMAT
        out = subprocess.run(["sh", str(RPM), *query, *names], capture_output=True, text=True,
                             env={"ASCEND_SIM_RPMDB": str(db), "PATH": "/usr/bin:/bin"})
        assert out.returncode == 0, (os_id, out.stdout)
        found = {line.split()[0] for line in out.stdout.splitlines() if line.endswith(" installed")}
        assert set(names) <= found, (os_id, set(names) - found)
        assert "gcc 12.2.0 3 " in db.read_text()  # the epoch is dropped, as rpm's VERSION has none
