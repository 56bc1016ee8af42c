"""SSH transport against an in-process paramiko server: host-key verification (reject unknown keys by
default, trust on first use only when asked), ~/.ssh/config and ProxyJump, and the CLI over SSH."""

from __future__ import annotations

import pytest
from checks_sshd import FakeSshd
from click.testing import CliRunner

from ascend_ready.checks.cli import main
from ascend_ready.checks.collect import collect_host
from ascend_ready.checks.probes import Probe
from ascend_ready.fleet.transport import FanoutOptions, Target

PROBES = [Probe("who", argv=("echo", "hello over ssh")), Probe("rc", shell="exit 4")]


@pytest.fixture
def sshd(tmp_path):
    with FakeSshd(tmp_path) as server:
        yield server


def target(sshd, **kw):
    base = dict(
        name="node", address="127.0.0.1", port=sshd.port, user=sshd.user, key_file=str(sshd.client_key_path)
    )
    base.update(kw)
    return Target(**base)


def options(tmp_path, **kw):
    # An empty ssh_config and our own known_hosts: the test must not depend on the user's ~/.ssh.
    (tmp_path / "ssh_config").touch()
    base = dict(
        known_hosts_file=str(tmp_path / "known_hosts"),
        ssh_config_file=str(tmp_path / "ssh_config"),
        connect_timeout_s=5,
        host_deadline_s=20,
    )
    base.update(kw)
    return FanoutOptions(**base)


def test_unknown_host_key_is_rejected_by_default(sshd, tmp_path):
    snap = collect_host(target(sshd), PROBES, options(tmp_path))
    assert not snap.reachable
    assert "not found in known_hosts" in snap.error and "--trust-on-first-use" in snap.error
    assert not (tmp_path / "known_hosts").exists()


def test_trust_on_first_use_records_the_key_then_verifies_it(sshd, tmp_path):
    snap = collect_host(target(sshd), PROBES, options(tmp_path, trust_on_first_use=True))
    assert snap.reachable, snap.error
    assert snap.probes["who"].stdout == "hello over ssh\n" and snap.probes["rc"].rc == 4
    assert (tmp_path / "known_hosts").read_text() == sshd.known_hosts_line()
    again = collect_host(target(sshd), PROBES, options(tmp_path))  # no flag: the recorded key is enough
    assert again.reachable and again.probes["who"].rc == 0


def test_a_changed_host_key_is_refused(sshd, tmp_path):
    import paramiko

    (tmp_path / "known_hosts").write_text(sshd.known_hosts_line(key=paramiko.ECDSAKey.generate()))
    snap = collect_host(target(sshd), PROBES, options(tmp_path, trust_on_first_use=True))
    assert not snap.reachable and "does not match known_hosts" in snap.error


def test_ssh_config_gives_hostname_port_user_and_key(sshd, tmp_path):
    (tmp_path / "known_hosts").write_text(sshd.known_hosts_line())
    opts = options(tmp_path)
    (tmp_path / "ssh_config").write_text(
        f"Host node7\n  HostName 127.0.0.1\n  Port {sshd.port}\n"
        f"  User {sshd.user}\n  IdentityFile {sshd.client_key_path}\n"
    )
    snap = collect_host(Target(name="node7", address="node7"), PROBES, opts)
    assert snap.reachable, snap.error
    assert snap.probes["who"].stdout == "hello over ssh\n"


def test_proxyjump_through_a_bastion(sshd, tmp_path):
    (tmp_path / "known_hosts").write_text(sshd.known_hosts_line())
    opts = options(tmp_path)
    # The bastion is the same test server; the target is reached through its direct-tcpip channel.
    (tmp_path / "ssh_config").write_text(
        f"Host bastion\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key_path}\n"
        f"Host inner\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key_path}\n  ProxyJump bastion\n"
    )
    snap = collect_host(Target(name="inner", address="inner"), PROBES, opts)
    assert snap.reachable, snap.error
    assert snap.probes["who"].stdout == "hello over ssh\n"
    assert ("127.0.0.1", sshd.port) in [f for s in sshd.servers for f in s.forwards] or len(sshd.servers) >= 2


def test_cli_over_ssh_exit_codes(sshd, tmp_path):
    runner = CliRunner()
    (tmp_path / "ssh_config").touch()
    args = [
        "--hosts",
        f"{sshd.user}@127.0.0.1:{sshd.port}",
        "--ssh-config",
        str(tmp_path / "ssh_config"),
        "--known-hosts",
        str(tmp_path / "known_hosts"),
        "--select",
        "os.numa_balancing",
        "--format",
        "json",
    ]
    inventory = tmp_path / "inv.ini"
    inventory.write_text(
        f"[ascend]\nn1 ansible_host=127.0.0.1 ansible_port={sshd.port} ansible_user={sshd.user} "
        f"ansible_ssh_private_key_file={sshd.client_key_path}\n"
    )
    inv_args = ["-i", str(inventory), *args[2:]]
    unknown = runner.invoke(main, inv_args)
    assert unknown.exit_code == 3, unknown.output
    assert "not found in known_hosts" in unknown.output
    trusted = runner.invoke(main, [*inv_args, "--trust-on-first-use"])
    assert trusted.exit_code in (0, 1), trusted.output  # the numa_balancing verdict of this machine
    import json

    report = json.loads(trusted.stdout)
    assert report["hosts"][0]["reachable"] and report["results"][0]["check_id"] == "os.numa_balancing"
    assert report["results"][0]["status"] in ("pass", "fail")
    assert report["results"][0]["evidence"][0].startswith("kernel.numa_balancing = ")


def test_a_hung_sshd_says_the_handshake_timed_out(tmp_path):
    """A SIGSTOPped sshd accepts the TCP connection and never answers; paramiko then says "No existing
    session". The report names the handshake, its time limit and what to check."""
    import time

    from checks_sshd import StoppedSshd

    with StoppedSshd(tmp_path) as sshd:
        started = time.monotonic()
        snap = collect_host(target(sshd), PROBES, options(tmp_path, connect_timeout_s=1.5))
        assert time.monotonic() - started < 5
    assert not snap.reachable
    assert f"SSH handshake with tester@127.0.0.1:{sshd.port} timed out after 1.5 s" in snap.error, snap.error
    assert "check sshd on the node" in snap.error and "No existing session" not in snap.error


def test_known_hosts_flag_beats_the_inventorys_user_known_hosts_file(sshd, tmp_path):
    """An inventory whose ansible_ssh_common_args set UserKnownHostsFile (as `ascend-sim inventory`
    does) used to win over --known-hosts, silently: the flag given for this run wins."""
    import json

    stale = tmp_path / "inventory_known_hosts"
    stale.write_text("")  # the inventory's file does not know this host
    good = tmp_path / "known_hosts"
    good.write_text(sshd.known_hosts_line())
    inventory = tmp_path / "inv.ini"
    inventory.write_text(
        f"[ascend]\nn1 ansible_host=127.0.0.1 ansible_port={sshd.port} ansible_user={sshd.user} "
        f"ansible_ssh_private_key_file={sshd.client_key_path} "
        f"ansible_ssh_common_args='-o UserKnownHostsFile={stale} -o StrictHostKeyChecking=yes'\n"
    )
    (tmp_path / "ssh_config").touch()
    base = ["-i", str(inventory), "--ssh-config", str(tmp_path / "ssh_config"),
            "--select", "os.numa_balancing", "--format", "json"]
    result = CliRunner().invoke(main, [*base, "--known-hosts", str(good)])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["hosts"][0]["reachable"]
    # without the flag the inventory's file is the one verified against (and it lacks the key)
    without = CliRunner().invoke(main, base)
    assert without.exit_code == 3 and "not found in known_hosts" in without.output


def test_ssh_config_user_known_hosts_file_is_used(sshd, tmp_path):
    known = tmp_path / "config_known_hosts"
    known.write_text(sshd.known_hosts_line())
    (tmp_path / "ssh_config").write_text(
        f"Host node7\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key_path}\n  UserKnownHostsFile {known}\n"
    )
    opts = options(tmp_path, known_hosts_file=None)
    snap = collect_host(Target(name="node7", address="node7"), PROBES, opts)
    assert snap.reachable, snap.error


def test_the_transport_raises_the_packages_host_unreachable(sshd, tmp_path):
    """One exception hierarchy (ascend_ready.errors): the transport raises HostUnreachable, whose
    class carries exit code 3, and the fan-out records it in the host's snapshot."""
    import time

    from ascend_ready.errors import ExitCode, HostUnreachable, RemoteError
    from ascend_ready.fleet.transport import _connect

    with pytest.raises(HostUnreachable) as caught:
        _connect(target(sshd), options(tmp_path), time.monotonic() + 10)
    assert isinstance(caught.value, RemoteError) and caught.value.exit_code == ExitCode.UNREACHABLE == 3
    assert caught.value.hint == "add it with ssh-keyscan, or pass --trust-on-first-use"


def test_paramiko_is_imported_without_invoke_until_a_match_exec_needs_it():
    import subprocess
    import sys

    code = (
        "import sys; from ascend_ready.fleet.transport import _import_paramiko; p = _import_paramiko(); "
        "print(type(sys.modules['invoke']).__name__); "
        "cfg = p.SSHConfig.from_text('Host *\\n  Match exec \"true\"\\n  User bob\\n'); "
        "print(cfg.lookup('x')['user'], type(sys.modules['invoke']).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["_Deferred", "bob", "module"]


# ---------------------------------------------------------------- keys the node refuses (issue 25)


def _encrypted_key(tmp_path, name="id_locked"):
    """A passphrase-protected OpenSSH key as ssh-keygen writes it."""
    import subprocess

    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f", str(path)], check=True)
    return path


def test_a_passphrase_protected_key_with_no_agent_names_the_key_and_the_agent(sshd, tmp_path, monkeypatch):
    import shutil

    if not shutil.which("ssh-keygen"):
        pytest.skip("ssh-keygen is not installed")
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    (tmp_path / "known_hosts").write_text(sshd.known_hosts_line())
    key = _encrypted_key(tmp_path)
    snap = collect_host(target(sshd, key_file=str(key)), PROBES, options(tmp_path))
    assert not snap.reachable
    assert f"the key {key} is passphrase-protected and no ssh-agent holds it" in snap.error
    assert f"ssh-add {key}" in snap.error and "TypeError" not in snap.error
    # through the CLI: a message and exit 3, no traceback
    inventory = tmp_path / "inv.ini"
    inventory.write_text(f"[ascend]\nn1 ansible_host=127.0.0.1 ansible_port={sshd.port} "
                         f"ansible_user={sshd.user} ansible_ssh_private_key_file={key}\n")
    result = CliRunner().invoke(main, ["-i", str(inventory), "--known-hosts", str(tmp_path / "known_hosts"),
                                       "--ssh-config", str(tmp_path / "ssh_config"), "--select", "os.glibc"])
    assert result.exit_code == 3, result.output
    assert "passphrase-protected" in result.output and "Traceback" not in result.output


def test_a_key_the_node_refuses_names_the_user_host_keys_and_a_fix(sshd, tmp_path, monkeypatch):
    import paramiko

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    (tmp_path / "known_hosts").write_text(sshd.known_hosts_line())
    other = tmp_path / "id_other"
    paramiko.ECDSAKey.generate().write_private_key_file(str(other))
    snap = collect_host(target(sshd, key_file=str(other)), PROBES, options(tmp_path))
    assert not snap.reachable
    assert f"tester@127.0.0.1:{sshd.port}: authentication as tester failed" in snap.error
    assert f"tried: {other}; no ssh-agent" in snap.error
    assert "authorized_keys" in snap.error
