"""Inventories only Ansible reads (vaulted variables, inventory plugins, scripts, directories): read
through `ansible-inventory --list` into the same Targets; plain INI stays with the fast reader."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascend_ready.checks.cli import main
from ascend_ready.errors import ConfigError
from ascend_ready.fleet import inventory
from ascend_ready.fleet.inventory import load_inventory

REPO = Path(__file__).resolve().parents[2]
SAMPLE4 = REPO / "playbooks" / "inventory" / "sample4"
VAULT = Path(sys.executable).with_name("ansible-vault")


def encrypt_string(password_file: Path, name: str, value: str) -> str:
    """`NAME: !vault |` and its ciphertext, as `ansible-vault encrypt_string` prints them."""
    done = subprocess.run([str(VAULT), "encrypt_string", "--vault-password-file", str(password_file),
                           value, "--name", name], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.startswith(f"{name}: !vault |"), done.stdout
    return done.stdout


@pytest.fixture(autouse=True)
def _no_vault_password_from_the_environment(monkeypatch):
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)


@pytest.fixture(scope="module")
def vaulted(tmp_path_factory):
    """A YAML inventory whose become password is an encrypt_string value, and its password file."""
    tmp_path = tmp_path_factory.mktemp("vaulted")
    password = tmp_path / "vault-pass"
    password.write_text("correct horse\n")
    secret = encrypt_string(password, "vault_become_password", "s3cret sudo")
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    ascend_nodes:\n      hosts:\n"
        "        node01: {ansible_host: 10.0.0.1}\n        node02: {ansible_host: 10.0.0.2}\n"
        "      vars:\n        ansible_user: ascend\n        ansible_become: true\n"
        "        ansible_become_password: '{{ vault_become_password }}'\n"
        + textwrap.indent(secret, " " * 8)
    )
    return tmp_path / "hosts.yml", password


def test_a_vaulted_become_password_is_decrypted_with_the_password_file(vaulted):
    path, password = vaulted
    n1, n2 = load_inventory(path, vault_password_file=str(password))
    assert (n1.name, n1.address, n1.user, n1.become, n1.become_user) == ("node01", "10.0.0.1", "ascend", True,
                                                                         "root")
    assert n2.become_password == "s3cret sudo"
    # the secret stays out of the variables a snapshot records, and out of repr()
    assert "vault_become_password" not in n1.vars and "s3cret" not in repr(n1)


def test_a_vaulted_variable_without_a_password_says_what_to_do(vaulted, monkeypatch):
    path, password = vaulted
    with pytest.raises(ConfigError) as err:
        load_inventory(path)
    assert err.value.message == (
        f"inventory {path} holds vaulted variables (node01/vault_become_password): pass "
        "--vault-password-file FILE or set ANSIBLE_VAULT_PASSWORD_FILE"
    )
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(password))
    assert load_inventory(path)[0].become_password == "s3cret sudo"


def test_the_cli_takes_vault_password_file_and_exits_2_without_it(vaulted, monkeypatch):
    path, password = vaulted
    r = CliRunner().invoke(main, ["-i", str(path), "--select", "os.thp"])
    assert r.exit_code == 2, r.output
    assert "holds vaulted variables (node01/vault_become_password)" in r.output
    assert "Traceback" not in r.output
    # with the password the inventory reads (the run then fails to connect: nothing listens there)
    called = []
    monkeypatch.setattr("ascend_ready.checks.cli._collect_with_progress",
                        lambda targets, options, specs: called.append(targets) or (_ for _ in ()).throw(
                            ConfigError("stop here")))
    r = CliRunner().invoke(main, ["-i", str(path), "--vault-password-file", str(password),
                                  "--select", "os.thp"])
    assert r.exit_code == 2 and "stop here" in r.output, r.output
    assert [t.become_password for t in called[0]] == ["s3cret sudo", "s3cret sudo"]


def test_a_vault_encrypted_group_vars_file(tmp_path):
    password = tmp_path / "pw"
    password.write_text("pw\n")
    (tmp_path / "hosts.ini").write_text("[ascend_nodes]\nnode01 ansible_host=10.0.0.1\n")
    (tmp_path / "group_vars").mkdir()
    secret = tmp_path / "group_vars" / "ascend_nodes.yml"
    secret.write_text("ascend_training_user: ascend\nansible_become_password: pw2\n")
    subprocess.run([str(VAULT), "encrypt", "--vault-password-file", str(password), str(secret)],
                   capture_output=True, check=True, timeout=120)
    assert secret.read_text().startswith("$ANSIBLE_VAULT;")
    with pytest.raises(ConfigError, match=r"holds vaulted variables \(.*group_vars/ascend_nodes\.yml\)"):
        load_inventory(tmp_path / "hosts.ini")
    (node,) = load_inventory(tmp_path / "hosts.ini", vault_password_file=str(password))
    assert node.vars["ascend_training_user"] == "ascend" and node.become_password == "pw2"


def test_the_generator_plugin_that_ansible_core_ships(tmp_path):
    (tmp_path / "rack.yml").write_text(textwrap.dedent("""\
        plugin: ansible.builtin.generator
        hosts:
          name: "{{ rack }}-node{{ n }}"
          parents:
            - name: "{{ rack }}"
              vars:
                ascend_check_profile: atlas-800t-a2
            - name: ascend_nodes
        layers:
          rack: [r1, r2]
          n: ["01", "02"]
        """))
    targets = {t.name: t for t in load_inventory(tmp_path / "rack.yml")}
    assert sorted(targets) == ["r1-node01", "r1-node02", "r2-node01", "r2-node02"]
    r2 = targets["r2-node02"]
    assert set(r2.groups) == {"r2", "ascend_nodes"} and r2.vars["ascend_check_profile"] == "atlas-800t-a2"
    assert r2.address == "r2-node02"


def test_a_directory_of_ini_and_yaml_and_a_script(tmp_path):
    inv = tmp_path / "inventory"
    inv.mkdir()
    # no .ini: Ansible skips *.ini files in an inventory directory (INVENTORY_IGNORE_EXTS)
    (inv / "01-rack1").write_text("[rack1]\nnode01 ansible_host=10.0.0.1\n[ascend_nodes:children]\nrack1\n")
    (inv / "02-rack2.yml").write_text("all:\n  children:\n    rack2:\n      hosts:\n"
                                      "        node02: {ansible_host: 10.0.0.2, ansible_port: 2222}\n")
    script = inv / "03-cmdb.sh"
    script.write_text('#!/bin/sh\nprintf \'{"rack3": {"hosts": ["node03"]}, "_meta": {"hostvars": '
                      '{"node03": {"ansible_host": "10.0.0.3", "ansible_user": "ops"}}}}\'\n')
    script.chmod(0o755)
    (inv / "group_vars").mkdir()
    (inv / "group_vars" / "all.yml").write_text("ansible_user: root\nstack_id: s1\n")
    targets = {t.name: t for t in load_inventory(inv)}
    assert sorted(targets) == ["node01", "node02", "node03"]
    assert targets["node01"].groups == ["ascend_nodes", "rack1"]
    assert (targets["node02"].port, targets["node02"].user) == (2222, "root")
    assert (targets["node03"].address, targets["node03"].user) == ("10.0.0.3", "ops")
    assert {t.vars["stack_id"] for t in targets.values()} == {"s1"}
    # the script alone is read the same way
    (node3,) = load_inventory(script)
    assert node3.address == "10.0.0.3"


def test_what_ansible_cannot_parse_is_an_error_not_an_empty_inventory(tmp_path):
    (tmp_path / "broken.yml").write_text("plugin: ansible.builtin.generator\nhosts: 3\n")
    with pytest.raises(ConfigError, match="ansible-inventory could not read inventory") as err:
        load_inventory(tmp_path / "broken.yml")
    assert "ansible-inventory -i" in err.value.hint


def test_plain_ini_and_the_sample_never_start_ansible(monkeypatch):
    """The fast reader covers the sample inventory (hosts.ini, group_vars, host_vars with hccn_devices)."""
    def no_ansible(*args, **kwargs):
        raise AssertionError("ansible-inventory was started for a plain INI inventory")

    monkeypatch.setattr(inventory, "_ansible_inventory", no_ansible)
    targets = load_inventory(SAMPLE4 / "hosts.ini")
    assert [t.name for t in targets] == ["node01", "node02", "node03", "node04"]
    assert all(t.user == "root" and not t.become for t in targets)
    assert "'address': '192.168.7.14'" in targets[3].vars["hccn_devices"]


def test_the_sample_reads_the_same_through_ansible_inventory(monkeypatch):
    """The fast reader and ansible-core agree on the sample (the other reader, for the same files)."""
    fast = load_inventory(SAMPLE4 / "hosts.ini")
    slow = inventory._ansible_inventory(SAMPLE4 / "hosts.ini", None)
    key = lambda t: (t.name, t.address, t.user, t.port, t.groups, t.become)  # noqa: E731
    assert [key(t) for t in slow] == [key(t) for t in fast]
    assert slow[0].vars["stack_id"] == fast[0].vars["stack_id"]


def test_a_plain_ini_run_keeps_its_budget():
    """Reading the sample in a fresh interpreter: no ansible import, well under a second."""
    code = ("import sys, time; t = time.perf_counter()\n"
            "from ascend_ready.fleet.inventory import load_inventory\n"
            f"assert len(load_inventory({str(SAMPLE4 / 'hosts.ini')!r})) == 4\n"
            "print(time.perf_counter() - t, sorted(m for m in sys.modules if m.split('.')[0] == 'ansible'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    elapsed, modules = out.stdout.split(maxsplit=1)
    assert modules.strip() == "[]" and float(elapsed) < 1.0, out.stdout
