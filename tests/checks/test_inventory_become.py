"""ansible_become: a non-root SSH user's probe batch runs through sudo; a sudo that wants a password
nobody gave (or refuses) is one per-host error saying what to do, and no probe runs.

The node side is the fake sshd (/bin/sh on this machine) with a stand-in for sudo(8) on its PATH: it
takes the options the wrapper uses and prints sudo 1.9's own messages for each policy (the wrapper's
outcomes were compared with sudo 1.9.13 for each of them).
"""

from __future__ import annotations

import json
import os
import pwd

import pytest
from checks_sshd import FakeSshd
from click.testing import CliRunner

from ascend_ready.checks.cli import main
from ascend_ready.checks.collect import collect_host
from ascend_ready.checks.probes import Probe
from ascend_ready.errors import ConfigError
from ascend_ready.fleet.inventory import load_inventory
from ascend_ready.fleet.transport import FanoutOptions, Target

#: sudo(8) for the policy in $FAKE_SUDO/policy: nopasswd, passwd (the password in $FAKE_SUDO/password,
#: a timestamp once given, as sudo caches it) or requiretty. Messages as sudo 1.9 prints them.
FAKE_SUDO = r"""#!/bin/sh
n= S= k= v= u=root
while [ $# -gt 0 ]; do
  case $1 in
    -n) n=1 ;; -S) S=1 ;; -k) k=1 ;; -v) v=1 ;; -H) ;;
    -p) shift ;; -u) shift; u=$1 ;;
    --) shift; break ;;
    -*) echo "sudo: invalid option -- '$1'" >&2; exit 1 ;;
    *) break ;;
  esac
  shift
done
echo "-u $u${n:+ -n}${S:+ -S}${k:+ -k}${v:+ -v} $*" >>"$FAKE_SUDO/log"
policy=$(cat "$FAKE_SUDO/policy")
if [ "$policy" = requiretty ]; then echo "sudo: sorry, you must have a tty to run sudo" >&2; exit 1; fi
if [ "$policy" = passwd ] && { [ -n "$k" ] || [ ! -f "$FAKE_SUDO/timestamp" ]; }; then
  if [ -n "$n" ]; then echo "sudo: a password is required" >&2; exit 1; fi
  IFS= read -r pw || { echo "sudo: no password was provided" >&2; exit 1; }
  if [ "$pw" != "$(cat "$FAKE_SUDO/password")" ]; then
    printf 'Sorry, try again.\nsudo: no password was provided\n' >&2
    echo "sudo: 1 incorrect password attempt" >&2; exit 1
  fi
  [ -n "$k" ] || : >"$FAKE_SUDO/timestamp"
fi
[ -z "$v" ] || exit 0
SUDO_USER=$(id -un); export SUDO_USER
exec "$@"
"""

#: whom the fake sudo records as SUDO_USER: the fake sshd's sessions run as this process's user
ME = pwd.getpwuid(os.getuid()).pw_name
PROBES = [Probe("who", shell='echo "sudo_user=${SUDO_USER:-none}"'), Probe("rc", shell="exit 4")]


@pytest.fixture
def sshd(tmp_path):
    with FakeSshd(tmp_path) as server:
        (tmp_path / "known_hosts").write_text(server.known_hosts_line())
        (tmp_path / "ssh_config").touch()
        yield server


@pytest.fixture
def sudo(tmp_path, monkeypatch):
    """Set the node's sudo policy with sudo(policy, password); sudo.calls() lists its invocations."""
    state = tmp_path / "sudo"
    (state / "bin").mkdir(parents=True)
    (state / "bin" / "sudo").write_text(FAKE_SUDO)
    (state / "bin" / "sudo").chmod(0o755)
    monkeypatch.setenv("FAKE_SUDO", str(state))
    monkeypatch.setenv("PATH", f"{state / 'bin'}:{os.environ['PATH']}")

    class Sudo:
        def __call__(self, policy: str, password: str = "") -> None:
            (state / "policy").write_text(policy)
            (state / "password").write_text(password)

        def calls(self) -> list[str]:
            log = state / "log"
            return log.read_text().splitlines() if log.exists() else []

    return Sudo()


def target(sshd, **kw) -> Target:
    base = dict(name="node07", address="127.0.0.1", port=sshd.port, user=sshd.user,
                key_file=str(sshd.client_key_path), become=True)
    return Target(**{**base, **kw})


def collect(sshd, tmp_path, t: Target):
    opts = FanoutOptions(known_hosts_file=str(tmp_path / "known_hosts"),
                         ssh_config_file=str(tmp_path / "ssh_config"), connect_timeout_s=5,
                         host_deadline_s=20)
    return collect_host(t, PROBES, opts)


def test_the_batch_runs_through_sudo_n_for_a_nopasswd_user(sshd, sudo, tmp_path):
    sudo("nopasswd")
    snap = collect(sshd, tmp_path, target(sshd))
    assert snap.reachable, snap.error
    assert snap.probes["who"].stdout == f"sudo_user={ME}\n" and snap.probes["rc"].rc == 4
    assert sudo.calls() == ["-u root -n true", "-u root -n /bin/sh -s"]


def test_without_become_or_as_the_become_user_no_sudo_runs(sshd, sudo, tmp_path):
    sudo("nopasswd")
    assert collect(sshd, tmp_path, target(sshd, become=False)).probes["who"].stdout == "sudo_user=none\n"
    same = collect(sshd, tmp_path, target(sshd, become_user=sshd.user))
    assert same.probes["who"].stdout == "sudo_user=none\n" and sudo.calls() == []


def test_a_sudo_that_asks_for_a_password_is_a_host_error_saying_what_to_do(sshd, sudo, tmp_path):
    sudo("passwd", "pw")
    snap = collect(sshd, tmp_path, target(sshd))
    assert not snap.reachable and snap.probes == {}  # no partial probe
    assert snap.error.startswith(
        f"node07: sudo -u root as {sshd.user} failed: sudo: a password is required; no probe ran (hint: ")
    assert "NOPASSWD" in snap.error and "ansible_become_password" in snap.error
    assert "--ask-become-pass" in snap.error


def test_the_become_password_goes_to_sudo_on_stdin_never_on_a_command_line(sshd, sudo, tmp_path):
    sudo("passwd", "pa ss'word")
    snap = collect(sshd, tmp_path, target(sshd, become_password="pa ss'word"))
    assert snap.reachable, snap.error
    assert snap.probes["who"].stdout == f"sudo_user={ME}\n" and snap.probes["rc"].rc == 4
    calls = sudo.calls()
    assert calls == ["-u root -n true", "-u root -S -v ", "-u root -S -k /bin/sh -s"]
    assert not any("word" in c for c in calls)


@pytest.mark.parametrize(("policy", "password", "message", "hint"), [
    ("passwd", "wrong", "Sorry, try again. sudo: no password was provided sudo: 1 incorrect password attempt",
     "fix ansible_become_password"),
    ("requiretty", None, "sudo: sorry, you must have a tty to run sudo", "Defaults requiretty"),
])
def test_a_refused_sudo_names_its_message(sshd, sudo, tmp_path, policy, password, message, hint):
    sudo(policy, "right")
    snap = collect(sshd, tmp_path, target(sshd, become_password=password))
    assert not snap.reachable and snap.probes == {}
    assert f"failed: {message}; no probe ran" in snap.error and hint in snap.error


def test_inventory_become_variables(tmp_path):
    (tmp_path / "hosts.ini").write_text(
        "[ascend_nodes]\nnode01 ansible_become=yes\nnode02 ansible_become=true ansible_become_user=ops "
        "ansible_become_pass=x\nnode03\n[ascend_nodes:vars]\nansible_user=ascend\n")
    n1, n2, n3 = load_inventory(tmp_path / "hosts.ini")
    assert (n1.become, n1.become_user, n1.become_password) == (True, "root", None)
    assert (n2.become, n2.become_user, n2.become_password) == (True, "ops", "x")
    assert not n3.become and n3.user == "ascend"
    (tmp_path / "hosts.ini").write_text("[g]\nn ansible_become=true ansible_become_method=su\n")
    with pytest.raises(ConfigError, match="ansible_become_method=su: ascend-check only becomes with sudo"):
        load_inventory(tmp_path / "hosts.ini")
    (tmp_path / "hosts.ini").write_text("[g]\nn ansible_become=maybe\n")
    with pytest.raises(ConfigError, match="ansible_become='maybe' is not a boolean"):
        load_inventory(tmp_path / "hosts.ini")


def test_cli_asks_for_the_become_password_once(sshd, sudo, tmp_path):
    sudo("passwd", "pw")
    inventory = tmp_path / "inv.ini"
    inventory.write_text(
        f"[ascend]\nn1 ansible_host=127.0.0.1 ansible_port={sshd.port} ansible_user={sshd.user} "
        f"ansible_ssh_private_key_file={sshd.client_key_path} ansible_become=true\n")
    args = ["-i", str(inventory), "--ssh-config", str(tmp_path / "ssh_config"), "--known-hosts",
            str(tmp_path / "known_hosts"), "--select", "os.numa_balancing", "--format", "json"]
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code == 3 and "sudo: a password is required" in refused.output, refused.output
    asked = CliRunner().invoke(main, [*args, "-K"], input="pw\n")
    assert asked.exit_code in (0, 1), asked.output  # this machine's numa_balancing verdict
    report = json.loads(asked.stdout[asked.stdout.index("{"):])
    assert report["hosts"][0]["reachable"] and report["results"][0]["status"] in ("pass", "fail")
