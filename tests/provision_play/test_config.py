"""The README's ansible-playbook commands work from the repository root and from playbooks/: one
ansible.cfg (the root's is a link to playbooks/ansible.cfg) whose roles and plugin paths resolve from both.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from .conftest import BIN, PLAYBOOKS, REPO


def _ansible(cwd, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["ANSIBLE_NOCOLOR"] = "1"
    return subprocess.run([str(BIN / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_root_ansible_cfg_is_the_playbooks_one():
    assert (REPO / "ansible.cfg").resolve() == (PLAYBOOKS / "ansible.cfg").resolve()


@pytest.mark.parametrize(("cwd", "prefix"), [(REPO, "playbooks/"), (PLAYBOOKS, "")],
                         ids=["root", "playbooks"])
def test_site_yml_loads_its_roles_and_plugins_from_either_directory(cwd, prefix):
    # --list-tasks loads every role (roles_path) and templates the task names; --syntax-check the rest.
    for extra in ("--syntax-check", "--list-tasks"):
        proc = _ansible(cwd, "ansible-playbook", "-i", f"{prefix}inventory/sample/hosts.ini",
                        f"{prefix}site.yml", extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "npu_driver : Show the driver plan" in proc.stdout
    config = _ansible(cwd, "ansible-config", "dump", "--only-changed").stdout
    assert f"{cwd / 'ansible.cfg'}" in config
    for key, path in (("DEFAULT_ROLES_PATH", "roles"), ("DEFAULT_LOOKUP_PLUGIN_PATH", "plugins/lookup"),
                      ("DEFAULT_FILTER_PLUGIN_PATH", "plugins/filter")):
        line = next(x for x in config.splitlines() if x.startswith(key))
        assert f"'{PLAYBOOKS / path}'" in line, line
    # and the plugins themselves are found (a lookup that templates through the matrix)
    msg = ("{{ lookup('ascend_stack', stack='cann-8.2.RC1-torch-2.5.1', product='910b', arch='aarch64')"
           ".packages.driver }} {{ '8.2.RC1' | ascend_version_lt('8.5.0') }}")
    proc = _ansible(cwd, "ansible", "localhost", "-i", "localhost,", "-c", "local", "-m", "debug", "-a",
                    json.dumps({"msg": msg}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Ascend-hdk-910b-npu-driver_25.0.rc1.1_linux-aarch64.run True" in proc.stdout
