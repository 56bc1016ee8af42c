"""SSH transport against an in-process paramiko server: host-key verification (reject unknown keys by
default, trust on first use only when asked), ~/.ssh/config and ProxyJump, and the CLI over SSH."""

from __future__ import annotations

import pytest
from checks_sshd import FakeSshd
from click.testing import CliRunner

from ascend_ready.checks.cli import main
from ascend_ready.checks.probes import Probe
from ascend_ready.checks.transport import FanoutOptions, Target, collect_host

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
