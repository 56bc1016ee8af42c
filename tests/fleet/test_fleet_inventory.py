"""Ansible inventories (INI, YAML, the one `ascend-sim inventory` writes), --hosts and --limit."""

from __future__ import annotations

import pytest

from ascend_ready.errors import ConfigError
from ascend_ready.fleet.inventory import expand_range, limit_targets, load_inventory, parse_hosts

# What `ascend-sim inventory` prints (sim/inventory.py); long lines folded for the linter.
SIM_INI = """# Ansible inventory of the simulated Ascend cluster (written by ascend-sim; do not edit)
[ascend_sim_atlas_800t_a2]
node01

[ascend_sim_atlas_800t_a2:vars]
ascend_check_profile=atlas-800t-a2

[ascend_sim_atlas_800t_a3]
node04

[ascend_sim_atlas_800t_a3:vars]
ascend_check_profile=atlas-800t-a3

[ascend_nodes]
node01 ansible_host=10.251.0.11 ascend_sim_profile=a2-ubuntu2204 ascend_sim_hardware=atlas-800t-a2 \
ascend_sim_os=ubuntu2204
node04 ansible_host=10.251.0.14 ascend_sim_profile=a3-openeuler2203 ascend_sim_hardware=atlas-800t-a3 \
ascend_sim_os=openeuler2203

[ascend_nodes:vars]
ansible_user=root
ansible_ssh_private_key_file=/run/ascend-sim/ssh/id_ed25519
ansible_ssh_common_args='-o UserKnownHostsFile=/run/ascend-sim/known_hosts -o StrictHostKeyChecking=yes \
-o IdentitiesOnly=yes -o GlobalKnownHostsFile=/dev/null'
ascend_sim_sudo_user=ascend
""".replace("\\\n", "")


def test_sim_inventory(tmp_path):
    path = tmp_path / "inventory.ini"
    path.write_text(SIM_INI)
    n1, n4 = load_inventory(path)
    assert (n1.name, n1.address, n1.user, n1.port) == ("node01", "10.251.0.11", "root", None)
    assert n1.key_file == "/run/ascend-sim/ssh/id_ed25519"
    assert n1.known_hosts_file == "/run/ascend-sim/known_hosts"
    assert n1.groups == ["ascend_sim_atlas_800t_a2", "ascend_nodes"]
    assert n4.vars["ascend_sim_hardware"] == "atlas-800t-a3" and "ansible_user" not in n4.vars
    # the bundled profile each node is judged by, in the variable any inventory may set
    profiles = (n1.vars["ascend_check_profile"], n4.vars["ascend_check_profile"])
    assert profiles == ("atlas-800t-a2", "atlas-800t-a3")


def test_ini_groups_children_ranges_and_precedence(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("""
lonely ansible_host=192.0.2.1
[train]
gpu[01:03] ansible_port=2222
special ansible_user=ops ansible_ssh_common_args="-J bastion.example:2200"

[train:vars]
ansible_user=trainer
ascend_check_profile=atlas-800t-a2

[rack1:children]
train

[rack1:vars]
ascend_check_profile=atlas-800t-a3
ansible_port=22
""")
    targets = {t.name: t for t in load_inventory(path)}
    assert list(targets) == ["lonely", "gpu01", "gpu02", "gpu03", "special"]
    assert targets["lonely"].groups == ["ungrouped"]
    g2 = targets["gpu02"]
    assert g2.groups == ["rack1", "train"]
    # host var > child group var > parent group var
    assert (g2.port, g2.user, g2.vars["ascend_check_profile"]) == (2222, "trainer", "atlas-800t-a2")
    assert targets["special"].port == 22 and targets["special"].user == "ops"
    assert targets["special"].proxy_jump == "bastion.example:2200"


def test_yaml_inventory(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text("""
all:
  vars:
    ansible_user: root
  children:
    a2:
      hosts:
        n[1:2]:
          ansible_host: 10.0.0.1
      vars:
        ansible_ssh_common_args: -o ProxyJump=jump@gw:2022 -oUserKnownHostsFile=/tmp/kh
    a3:
      hosts:
        big:
""")
    targets = {t.name: t for t in load_inventory(path)}
    assert set(targets) == {"n1", "n2", "big"}
    assert targets["n1"].proxy_jump == "jump@gw:2022" and targets["n1"].known_hosts_file == "/tmp/kh"
    assert (
        targets["big"].user == "root" and targets["big"].address == "big" and targets["big"].groups == ["a3"]
    )


def test_bad_inventories(tmp_path):
    path = tmp_path / "bad.ini"
    path.write_text("[train\nx\n")
    with pytest.raises(ConfigError, match=r"bad\.ini:1: bad section header"):
        load_inventory(path)
    path.write_text("[g]\nh ansible_port=ssh\n")
    with pytest.raises(ConfigError, match="ansible_port 'ssh' is not a number"):
        load_inventory(path)
    yml = tmp_path / "bad.yml"
    yml.write_text("all:\n  hostz: {}\n")
    with pytest.raises(ConfigError, match="unknown key"):
        load_inventory(yml)


def test_hosts_option_and_ranges():
    ts = parse_hosts("a, root@b:2200,c[1:2]")
    assert [(t.name, t.user, t.port) for t in ts] == [
        ("a", None, None),
        ("b", "root", 2200),
        ("c1", None, None),
        ("c2", None, None),
    ]
    assert expand_range("n[08:10:2]") == ["n08", "n10"] and expand_range("r[a:c]") == ["ra", "rb", "rc"]
    with pytest.raises(ConfigError):
        parse_hosts(" , ")


def test_limit(tmp_path):
    path = tmp_path / "inv.ini"
    path.write_text(SIM_INI + "\n[a3]\nnode04\n")
    targets = load_inventory(path)
    assert [t.name for t in limit_targets(targets, "a3")] == ["node04"]
    assert [t.name for t in limit_targets(targets, "ascend_nodes:!node04")] == ["node01"]
    assert [t.name for t in limit_targets(targets, "node0*,&a3")] == ["node04"]
    with pytest.raises(ConfigError, match="matches no host"):
        limit_targets(targets, "nothing")


def test_group_vars_and_host_vars_beside_the_inventory_apply(tmp_path):
    (tmp_path / "hosts.ini").write_text("[ascend_nodes]\nnode01 ansible_host=10.0.0.1\n"
                                        "node02 ansible_host=10.0.0.2\n"
                                        "[ascend_nodes:vars]\nascend_training_user=root\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "ascend_nodes.yml").write_text("ascend_training_user: ascend\nstack_id: s1\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "node02.yml").write_text("stack_id: s2\n")
    targets = {t.name: t for t in load_inventory(tmp_path / "hosts.ini")}
    assert targets["node01"].vars["ascend_training_user"] == "ascend"
    assert targets["node01"].vars["stack_id"] == "s1"
    assert targets["node02"].vars["stack_id"] == "s2"


def test_group_vars_that_are_not_a_mapping_are_a_config_error(tmp_path):
    (tmp_path / "hosts.ini").write_text("[g]\nnode01\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "g.yml").write_text("- a list\n")
    with pytest.raises(ConfigError, match="not a mapping"):
        load_inventory(tmp_path / "hosts.ini")
