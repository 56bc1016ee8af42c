"""Whose environment is judged: the training user and interpreter from the CLI, the inventory (the
provisioning contract's ascend_training_user / python_env_path / stack_id), the profile, the defaults;
and the probes that then run in that user's login shell with that interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from checks_fakenode import fake_host
from click.testing import CliRunner

from ascend_ready.checks.catalog import catalog
from ascend_ready.checks.cli import main
from ascend_ready.checks.preflight import profiles_for, training_env
from ascend_ready.checks.probes import build_script
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.snapshot import Snapshot, load_snapshot, save_snapshot
from ascend_ready.errors import ConfigError
from ascend_ready.fleet.inventory import load_inventory

STACK = "cann-8.2.RC1-torch-2.5.1"
A2 = load_profile("atlas-800t-a2")


@pytest.mark.parametrize(
    ("hostvars", "profile_changes", "cli", "want"),
    [
        ({}, {}, {}, ("root", "python3")),
        ({}, {"training_user": "svc", "python": "/opt/py/bin/python3"}, {}, ("svc", "/opt/py/bin/python3")),
        (
            {"ascend_training_user": "ascend", "stack_id": STACK},
            {},
            {},
            ("ascend", f"~ascend/venvs/ascend-{STACK}/bin/python"),
        ),
        (
            {"ascend_training_user": "ascend", "python_env_path": "/srv/venv/", "stack_id": STACK},
            {},
            {},
            ("ascend", "/srv/venv/bin/python"),
        ),
        (
            {"python_env_venv": "/a/venv", "python_env_path": "/b/venv"},
            {},
            {},
            ("root", "/a/venv/bin/python"),
        ),
        # The role's own user variable when the fleet-wide one is not set.
        (
            {"python_env_user": "trainer", "stack_id": "s1"},
            {},
            {},
            ("trainer", "~trainer/venvs/ascend-s1/bin/python"),
        ),
        # A named user and no stack id (stack pinned by components): the one venv the role made.
        ({"ascend_training_user": "ascend"}, {}, {}, ("ascend", "~ascend/venvs/ascend-*/bin/python")),
        ({}, {}, {"user": "ascend"}, ("ascend", "~ascend/venvs/ascend-*/bin/python")),
        # ... unless the profile names the interpreter.
        (
            {"ascend_training_user": "ascend"},
            {"python": "/opt/py/bin/python3"},
            {},
            ("ascend", "/opt/py/bin/python3"),
        ),
        # Inventory beats the profile, the CLI beats both; a recorded CLI choice beats the inventory.
        (
            {"ascend_training_user": "ascend", "stack_id": STACK},
            {"training_user": "svc", "python": "/opt/py/bin/python3"},
            {"user": "ops", "python": "/x/bin/python"},
            ("ops", "/x/bin/python"),
        ),
        (
            {
                "ascend_training_user": "ascend",
                "ascend_check_training_user": "ops",
                "ascend_check_python": "/y",
            },
            {},
            {},
            ("ops", "/y"),
        ),
    ],
)
def test_training_env_order(hostvars, profile_changes, cli, want):
    profile = A2.model_copy(update=profile_changes)
    assert training_env(hostvars, profile, **cli) == want


@pytest.mark.parametrize(
    ("hostvars", "cli", "text"),
    [
        ({"ascend_training_user": "a;reboot"}, {}, "is not a user name"),
        ({}, {"user": "-oProxyCommand"}, "is not a user name"),
        ({"ascend_training_user": "ascend", "stack_id": "x;rm -rf /"}, {}, "a path with ~ or a glob"),
        ({}, {"python": "~/venv/$(reboot)*/python"}, "a path with ~ or a glob"),
        ({"python_env_path": "{{ base }}/venv"}, {}, "is a Jinja template (not rendered here)"),
    ],
)
def test_training_env_rejects_what_the_node_shell_would_run(hostvars, cli, text):
    with pytest.raises(ConfigError) as exc:
        training_env(hostvars, A2, **cli)
    assert text in exc.value.message


def test_inventory_vars_pick_each_hosts_user_and_venv(tmp_path):
    inv = tmp_path / "hosts.ini"
    inv.write_text(
        "[ascend_nodes]\n"
        "node01\n"
        "node02 python_env_path=/data/venvs/train\n"
        "node03 ascend_training_user=other\n"
        "[legacy]\n"
        "old01\n"
        "[ascend_nodes:vars]\n"
        "ascend_training_user=ascend\n"
        f"stack_id={STACK}\n"
    )
    targets = load_inventory(inv)
    got = {n: (p.training_user, p.python) for n, p in profiles_for(targets, None).items()}
    assert got == {
        "node01": ("ascend", f"~ascend/venvs/ascend-{STACK}/bin/python"),
        "node02": ("ascend", "/data/venvs/train/bin/python"),
        "node03": ("other", f"~other/venvs/ascend-{STACK}/bin/python"),
        "old01": ("root", "python3"),
    }
    forced = profiles_for(targets, None, training_user="ops", python="/opt/bin/python")
    assert {(p.training_user, p.python) for p in forced.values()} == {("ops", "/opt/bin/python")}


def test_probes_run_the_venv_in_the_training_users_login_shell():
    profile = A2.model_copy(
        update={"training_user": "ascend", "python": f"~ascend/venvs/ascend-{STACK}/bin/python"}
    )
    probes = catalog(profile)
    packages = probes["python-packages"]
    assert packages.as_user and packages.shell.startswith(f"set -- ~ascend/venvs/ascend-{STACK}/bin/python; ")
    assert probes["torch-import"].shell.startswith(f"set -- ~ascend/venvs/ascend-{STACK}/bin/python; ")
    assert probes["user-limits"].as_user and probes["user-libs"].as_user
    script, _ = build_script([packages, probes["user-limits"], probes["user-libs"]], user="ascend")
    # One batch; each as_user probe is its own login shell of ascend (`su - ascend` as root), in the
    # background, under the batch's time limits.
    assert script.count("_as ascend ") == 3
    # as that user itself: its login shell from passwd ($SHELL is unset under runuser and cron: issue 25)
    assert 'su - "$1" -c "$2"' in script and '"${_ls:-${SHELL:-/bin/sh}}" -lc "$2"' in script
    assert '_ls=$(getent passwd "$1" 2>/dev/null | cut -d: -f7)' in script
    assert script.count("_p python-packages - 10000 _as ascend 'set -- ~ascend/venvs/") == 1
    # A plain path stays an argv (no shell in between).
    plain = catalog(A2.model_copy(update={"python": "/srv/venv/bin/python"}))["python-packages"]
    assert plain.argv[:2] == ("/srv/venv/bin/python", "-c") and plain.shell is None


def _run_interpreter_probe(pattern: str) -> subprocess.CompletedProcess:
    probe = catalog(A2.model_copy(update={"python": pattern}))["python-packages"]
    return subprocess.run(["sh", "-c", probe.shell], capture_output=True, text=True, timeout=30)


def _venv(root: Path, name: str) -> None:
    (root / name / "bin").mkdir(parents=True)
    (root / name / "bin" / "python").symlink_to(sys.executable)


def test_venv_glob_must_name_exactly_one_interpreter(tmp_path):
    pattern = f"{tmp_path}/venvs/ascend-*/bin/python"
    none = _run_interpreter_probe(pattern)
    assert none.returncode == 127 and "no interpreter" in none.stderr and "ascend-*" in none.stderr
    _venv(tmp_path / "venvs", "ascend-s1")
    one = _run_interpreter_probe(pattern)
    assert one.returncode == 0, one.stderr
    assert one.stdout.splitlines()[0] == "python " + sys.version.split()[0]
    _venv(tmp_path / "venvs", "ascend-s2")
    two = _run_interpreter_probe(pattern)
    assert two.returncode == 2 and "2 interpreters match" in two.stderr


def _limits_host(user: str):
    limits = f"user {user}\nnofile 1048576 1048576\nmemlock unlimited unlimited\n"
    return fake_host(outputs={"user-limits": limits})


def test_limits_judged_for_the_training_user_from_cli_or_inventory(tmp_path):
    runner = CliRunner()
    plain = tmp_path / "plain"
    save_snapshot(Snapshot(hosts={"node01": _limits_host("ascend")}), plain)

    def status(snap, *args):
        out = runner.invoke(
            main, ["--snapshot", str(snap), "--select", "os.nofile", "--format", "json", *args]
        )
        (result,) = json.loads(out.stdout)["results"]
        return result["status"], result["message"]

    assert status(plain) == ("fail", "limits were read as ascend, not the training user root")
    assert status(plain, "--training-user", "ascend") == ("pass", "")
    host = _limits_host("ascend")
    host.vars = {"ascend_training_user": "ascend"}
    inv = tmp_path / "inv"
    save_snapshot(Snapshot(hosts={"node01": host}), inv)
    assert status(inv) == ("pass", "")
    assert status(inv, "--training-user", "root")[0] == "fail"


def test_collect_records_the_cli_choice_and_runs_that_interpreter(tmp_path):
    runner = CliRunner()
    out = tmp_path / "snap"
    missing = str(tmp_path / "no-venv" / "bin" / "python")
    args = ["collect", "-o", str(out), "--select", "os.glibc", "--training-user", "root", "--python", missing]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    (host,) = load_snapshot(out).hosts.values()
    assert host.vars["ascend_check_training_user"] == "root" and host.vars["ascend_check_python"] == missing
    res = host.probes["python-packages"]
    assert res.command.startswith(f"{missing} -c ") and res.rc == 127
    judged = runner.invoke(main, ["--snapshot", str(out), "--select", "os.glibc", "--format", "json"])
    (r,) = json.loads(judged.stdout)["results"]
    assert r["status"] == "error" and missing in r["message"]
    assert "the training venv is missing" in r["message"]
