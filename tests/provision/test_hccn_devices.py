"""`ascend-matrix hccn-devices` (device NIC addresses from ranges) and the 4-node sample inventory,
checked with ansible-inventory and the roles' own argument specs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from click.testing import CliRunner

from ascend_ready.errors import ConfigError
from ascend_ready.provision.cli import main
from ascend_ready.provision.hccn import host_vars, plan_device_nics, render_host_vars, render_plan

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
SAMPLE4 = PLAYBOOKS / "inventory" / "sample4"
#: read by several roles, declared by none (playbooks/README.md)
FLEET_INPUTS = {"ascend_training_user"}


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def role_options() -> dict[str, tuple[str, dict]]:
    """Every public variable of every role: name -> (role, its argument spec)."""
    out = {}
    for spec_file in sorted(PLAYBOOKS.glob("roles/*/meta/argument_specs.yml")):
        specs = yaml.safe_load(spec_file.read_text())["argument_specs"]
        for name, spec in specs.get("main", {}).get("options", {}).items():
            out[name] = (spec_file.parts[-3], spec)
    return out


def validate(variables: dict) -> list[str]:
    """The roles' argument-spec errors for these variables (what validate_argument_spec would say)."""
    options = role_options()
    spec = {k: options[k][1] for k in variables if k in options}
    return ArgumentSpecValidator(spec).validate({k: variables[k] for k in spec}).error_messages


def test_device_d_of_node_i_gets_host_first_plus_i_in_device_ds_network():
    plan = plan_device_nics(["node01", "node02", "node03", "node04"], "192.168.{dev}.0/24")
    assert [n.address for n in plan["node03"]] == [f"192.168.{d}.12" for d in range(8)]
    assert {n.gateway for n in plan["node01"]} == {f"192.168.{d}.1" for d in range(8)}
    assert {n.netmask for nics in plan.values() for n in nics} == {"255.255.255.0"}
    addresses = [n.address for nics in plan.values() for n in nics]
    assert len(addresses) == len(set(addresses)) == 32
    # the shape the hccn role takes
    for values in host_vars(plan).values():
        assert validate(values) == []


def test_one_shared_network_numbers_the_devices_node_by_node():
    plan = plan_device_nics(["a", "b"], "10.20.0.0/16", gateway="10.20.255.254", first_host=100, devices=4,
                            netdetect=".2")
    assert [n.address for n in plan["b"]] == ["10.20.0.104", "10.20.0.105", "10.20.0.106", "10.20.0.107"]
    assert {n.gateway for n in plan["a"]} == {"10.20.255.254"}
    assert {n.netdetect for n in plan["a"]} == {"10.20.0.2"}
    assert {n.netmask for n in plan["a"]} == {"255.255.0.0"}


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    (["n1", "n2", "n1"], {}, "listed twice: n1"),
    ([], {}, "no nodes given"),
    (["n1", "n2", "n3", "n4", "n5", "n6"], {"device_net": "10.0.{dev}.0/28"}, "host number 15 does not fit"),
    (["n1"], {"device_net": "10.0.{dev}.0/24", "first_host": 1}, "which is the gateway of device 0"),
    (["n1"], {"device_net": "10.0.{dev}.0/24", "gateway": "10.9.9.1"}, "outside device 0's network"),
    (["n1"], {"device_net": "10.0.{dev}.1/24"}, "has host bits set"),
    (["n1"], {"device_net": "fd00:{dev}::/64"}, "IPv4"),
    (["n1"], {"device_net": "10.0.0.0/2{dev}", "devices": 2}, "overlap"),
    (["n1"], {"device_net": "10.0.{device}.0/24"}, "bad template"),
])
def test_overlaps_and_networks_too_small_are_refused(args, kwargs, message):
    kwargs = {"device_net": "192.168.{dev}.0/24", **kwargs}
    with pytest.raises(ConfigError, match=message):
        plan_device_nics(args, **kwargs)


def test_rendered_yaml_reads_back_as_the_plan():
    plan = plan_device_nics(["node01", "node02"], "192.168.{dev}.0/24", netdetect="192.168.{dev}.254")
    assert yaml.safe_load(render_plan(plan)) == host_vars(plan)
    assert yaml.safe_load(render_host_vars(plan["node02"], "note\nsecond line")) == host_vars(plan)["node02"]


def test_cli_prints_yaml_and_writes_host_vars(tmp_path):
    r = run("hccn-devices", "--nodes", "node[01:02],gpu9", "--device-net", "192.168.{dev}.0/24",
            "--devices", "2")
    assert r.exit_code == 0, r.output
    data = yaml.safe_load(r.output)
    assert list(data) == ["node01", "node02", "gpu9"]
    assert data["gpu9"]["hccn_devices"][1] == {"id": 1, "address": "192.168.1.12", "netmask": "255.255.255.0",
                                              "gateway": "192.168.1.1"}
    out = tmp_path / "host_vars"
    r = run("hccn-devices", "--nodes", "node[01:02]", "--device-net", "192.168.{dev}.0/24", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["node01.yml", "node02.yml"]
    # regenerating replaces our own files, but never a file with the operator's other variables
    again = run("hccn-devices", "--nodes", "node01", "--device-net", "192.168.{dev}.0/24", "-o", str(out))
    assert again.exit_code == 0, again.output
    (out / "node02.yml").write_text("ansible_host: 10.0.0.2\n")
    r = run("hccn-devices", "--nodes", "node[01:02]", "--device-net", "192.168.{dev}.0/24", "-o", str(out))
    assert r.exit_code == 2 and "holds other variables (ansible_host)" in r.output and "hint:" in r.output
    assert (out / "node02.yml").read_text() == "ansible_host: 10.0.0.2\n"


def test_cli_usage_errors_exit_2():
    r = run("hccn-devices", "--device-net", "192.168.{dev}.0/24")
    assert r.exit_code == 2 and "error: give --nodes or -i INVENTORY" in r.output
    r = run("hccn-devices", "--nodes", "n[1:300]", "--device-net", "192.168.{dev}.0/24")
    assert r.exit_code == 2 and "does not fit 192.168.0.0/24" in r.output


# ---------------------------------------------------------------- the sample inventory


def test_sample4_host_vars_are_what_the_generator_writes(tmp_path):
    """The command in hosts.ini's header regenerates host_vars/ byte for byte (nodes from the inventory)."""
    out = tmp_path / "host_vars"
    r = run("hccn-devices", "-i", str(SAMPLE4 / "hosts.ini"), "--device-net", "192.168.{dev}.0/24",
            "--first-host", "11", "-o", str(out))
    assert r.exit_code == 0, r.output
    for path in sorted((SAMPLE4 / "host_vars").iterdir()):
        assert (out / path.name).read_text() == path.read_text(), path.name
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in (SAMPLE4 / "host_vars").iterdir())


def test_sample4_passes_ansible_inventory_and_the_roles_argument_specs():
    ansible_inventory = Path(sys.executable).with_name("ansible-inventory")
    result = subprocess.run([str(ansible_inventory), "-i", str(SAMPLE4 / "hosts.ini"), "--list"],
                            capture_output=True, text=True, cwd=PLAYBOOKS, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "[WARNING]" not in result.stderr, result.stderr
    inventory = json.loads(result.stdout)
    hosts = inventory["ascend_nodes"]["hosts"]
    assert hosts == ["node01", "node02", "node03", "node04"]
    options = role_options()
    for host in hosts:
        variables = inventory["_meta"]["hostvars"][host]
        assert validate(variables) == [], host
        assert len(variables["hccn_devices"]) == 8
        # every variable the sample sets is a role's public variable, a fleet-wide input (README) or an
        # Ansible connection variable
        unknown = [k for k in variables
                   if k not in options and k not in FLEET_INPUTS and not k.startswith("ansible_")]
        assert unknown == [], unknown
    addresses = [d["address"] for h in hosts for d in inventory["_meta"]["hostvars"][h]["hccn_devices"]]
    assert len(set(addresses)) == 32


def test_sample4_syntax_checks_with_site_yml():
    playbook = Path(sys.executable).with_name("ansible-playbook")
    result = subprocess.run([str(playbook), "-i", str(SAMPLE4 / "hosts.ini"), "site.yml", "--syntax-check"],
                            capture_output=True, text=True, cwd=PLAYBOOKS, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
