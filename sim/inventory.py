"""The access files of a running simulated cluster: an Ansible inventory (INI) and an OpenSSH config.

Both pin the run dir's known_hosts with strict checking, so a node with a wrong host key is refused.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ascend_ready.sim.cluster import Cluster

GROUP = "ascend_nodes"
#: The preflight's hardware profile per node: the simulator's hardware models carry the names of
#: ascend-check's bundled profiles (checks/profiles/*.yml), so each node's is `ascend_check_profile=<name>`,
#: the variable the product reads for any inventory (it never needs to know about the simulator).
PROFILE_VAR = "ascend_check_profile"


def hardware_group(hardware: str) -> str:
    """`ascend_sim_atlas_800t_a2`: the group of the nodes of one hardware model."""
    return "ascend_sim_" + hardware.replace("-", "_")


def ssh_options(cluster: Cluster) -> list[str]:
    """`-o` options every SSH client of the cluster needs (OpenSSH syntax)."""
    return ["-o", f"UserKnownHostsFile={cluster.known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "IdentitiesOnly=yes", "-o", "GlobalKnownHostsFile=/dev/null"]


def ini(cluster: Cluster) -> str:
    """The inventory. The profile is a group variable of one group per hardware model, written before
    [ascend_nodes]: an operator's own `ascend_check_profile` in group_vars/ascend_nodes.yml (a relaxed
    profile for this machine) or in host_vars/ (where harness/fleet.py's --host-bound-profile puts it)
    still wins over it."""
    lines = ["# Ansible inventory of the simulated Ascend cluster (written by ascend-sim; do not edit)"]
    for hardware in dict.fromkeys(n.hardware for n in cluster.nodes):
        group = hardware_group(hardware)
        lines += [f"[{group}]", *(n.name for n in cluster.nodes if n.hardware == hardware), "",
                  f"[{group}:vars]", f"{PROFILE_VAR}={hardware}", ""]
    lines.append(f"[{GROUP}]")
    for n in cluster.nodes:
        lines.append(f"{n.name} ansible_host={n.ip} ascend_sim_profile={n.profile} "
                     f"ascend_sim_hardware={n.hardware} ascend_sim_os={n.os}")
    lines += ["", f"[{GROUP}:vars]",
              "ansible_user=root",
              f"ansible_ssh_private_key_file={cluster.key_path}",
              f"ansible_ssh_common_args={shlex.join(ssh_options(cluster))!r}",
              f"ascend_sim_sudo_user={_sudo_user()}",
              ""]
    return "\n".join(lines)


def ssh_config(cluster: Cluster) -> str:
    """An ssh_config (`ssh -F <run-dir>/ssh_config node01`)."""
    out = ["# OpenSSH client config of the simulated Ascend cluster (written by ascend-sim)"]
    for n in cluster.nodes:
        out += [f"Host {n.name} {n.ip}",
                f"  HostName {n.ip}",
                "  User root",
                f"  IdentityFile {cluster.key_path}",
                "  IdentitiesOnly yes",
                f"  UserKnownHostsFile {cluster.known_hosts}",
                "  GlobalKnownHostsFile /dev/null",
                "  StrictHostKeyChecking yes",
                "  HostKeyAlias " + n.name,
                ""]
    return "\n".join(out)


def _sudo_user() -> str:
    from ascend_ready.sim.base import SUDO_USER

    return SUDO_USER
