"""`ascend-train` on bad input: each one is refused with an `error:` line and a `hint:`, the documented exit
code (2 bad config or usage, 1 a refused preflight, 3 a node SSH cannot reach), no traceback, and before the
preflight runs or the run directory is made. Also: the HCCL/gloo NIC is the one routed to the master."""

from __future__ import annotations

from collections import namedtuple

import pytest
from click.testing import CliRunner

from ascend_ready.training import launch
from ascend_ready.training.cli import main

CLOSED = "127.0.0.1:1"  # nothing listens: refused at once


def train(tmp_path, check, *args: str):
    """`ascend-train grpo -c tiny -o RUN` with a preflight that records being run (tmp_path/argv.txt)."""
    return CliRunner().invoke(main, ["grpo", "-c", "tiny", "-o", str(tmp_path / "run"),
                                     "--preflight-command", str(check), *args, "max_steps=1"])


def refused(result, code: int, *texts: str) -> str:
    err = result.stderr
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit), result.output
    assert "error: " in err and "\nhint: " in err, err
    for text in texts:
        assert text in err, (text, err)
    assert result.stdout == ""
    return err


def untouched(tmp_path):
    """Neither the preflight nor the run directory happened."""
    assert not (tmp_path / "argv.txt").exists(), "the preflight ran"
    assert not (tmp_path / "run").exists(), "the run directory was made"


def test_a_malformed_override(tmp_path, passing_check):
    refused(train(tmp_path, passing_check, "reward.weights=[1.0,"), 2,
            "error: override 'reward.weights=[1.0,': the value is not valid YAML (expected the node content, "
            "but found '<stream end>' at line 1, column 6)", "e.g. 'reward.weights=[1.0, 0.5]'")
    untouched(tmp_path)


def test_a_binary_config_file(tmp_path, passing_check):
    config = tmp_path / "config.yaml"
    config.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe")
    result = CliRunner().invoke(main, ["grpo", "-c", str(config), "-o", str(tmp_path / "run"),
                                       "--preflight-command", str(passing_check)])
    refused(result, 2, f"{config}: not a YAML text file (byte 8 is not UTF-8)", "bundled name such as tiny")
    untouched(tmp_path)


def test_an_unwritable_output_dir_is_refused_before_the_preflight(tmp_path, passing_check):
    (tmp_path / "file").write_text("")
    result = CliRunner().invoke(main, ["grpo", "-c", "tiny", "-o", str(tmp_path / "file" / "run"),
                                       "--preflight-command", str(passing_check)])
    refused(result, 2, f"--output-dir {tmp_path / 'file' / 'run'}: {tmp_path / 'file'} is not a directory")
    untouched(tmp_path)


@pytest.mark.parametrize(("override", "text"), [
    ("model.path=/nonexistent/Qwen2.5-7B", "model.path: /nonexistent/Qwen2.5-7B is not a local model"),
    ("model.reward_model_path=/nonexistent/rm", "model.reward_model_path: /nonexistent/rm is not a local"),
])
def test_model_paths_are_checked_before_the_preflight_and_run_dir(tmp_path, passing_check, override, text):
    args = ["model.tiny=null", override] if override.startswith("model.path") else [override]
    refused(train(tmp_path, passing_check, *args), 2, text, "nothing is fetched at run time")
    untouched(tmp_path)


@pytest.mark.parametrize(("content", "text"), [
    (None, "data.path: data file not found: {path}"),
    (b"\xff\xfe{}", "data.path: {path} is not UTF-8 text (byte 0)"),
    (b'{"prompt": "1+1=", "answer": "2"\n', "data.path: {path}:1: not valid JSON"),
])
def test_data_paths_are_checked_before_the_preflight_and_the_run_dir(tmp_path, passing_check, content, text):
    path = tmp_path / "prompts.jsonl"
    if content is not None:
        path.write_bytes(content)
    refused(train(tmp_path, passing_check, "data.source=jsonl", f"data.path={path}"), 2,
            text.format(path=path), "one JSON object per line")
    untouched(tmp_path)


@pytest.mark.parametrize("content", [None, b"\xff\xfe[npu]\nnode01\n"])
def test_an_unreadable_inventory_is_a_config_error_not_a_failed_preflight(tmp_path, passing_check, content):
    inventory = tmp_path / "hosts.ini"
    if content is not None:
        inventory.write_bytes(content)
    for extra in ((), ("--node-rank", "0")):  # the multi-node launch and this node's share of a job
        refused(train(tmp_path, passing_check, "-i", str(inventory), *extra), 2, str(inventory),
                "hint: give -i an Ansible inventory")
        untouched(tmp_path)


def test_a_bad_hosts_entry_is_a_usage_error(tmp_path, passing_check):
    refused(train(tmp_path, passing_check, "--hosts", "root@:99999"), 2,
            "--hosts: no host name in 'root@:99999'")
    untouched(tmp_path)


def test_unreachable_hosts_are_named_with_the_reason(tmp_path):
    # the preflight (the real ascend-check) cannot reach the host: training is refused, exit 1
    result = CliRunner().invoke(main, ["grpo", "-c", "tiny", "-o", str(tmp_path / "run"), "--hosts", CLOSED])
    refused(result, 1, "preflight failed (hosts unreachable); refusing to train",
            "  - 127.0.0.1: unreachable: root@127.0.0.1:1: Unable to connect to port 1 on 127.0.0.1")
    # without the preflight, the launcher's own SSH connection: exit 3, nothing started
    result = CliRunner().invoke(main, ["grpo", "-c", "tiny", "-o", str(tmp_path / "run"), "--hosts", CLOSED,
                                       "--skip-preflight", "--connect-timeout", "2"])
    refused(result, 3, "cannot reach root@127.0.0.1:1: Unable to connect to port 1 on 127.0.0.1; "
            "nothing was started")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("content", "text"), [
    (None, "cannot read {path}: No such file or directory"),
    (b'{"step": 1, "reward/mean": 0.5}\n{"step": 2, "rew\n', "{path}:2: not a JSON record"),
    (b"\x1f\x8b\x08\x00", "{path} is not text (byte 1 is not UTF-8)"),
    (b'{"reward/mean": 0.5}\n', "{path}:1: not a metrics record (no integer 'step')"),
])
def test_plot_on_a_missing_or_garbled_metrics_file(tmp_path, content, text):
    metrics = tmp_path / "metrics.jsonl"
    if content is not None:
        metrics.write_bytes(content)
    result = CliRunner().invoke(main, ["plot", str(tmp_path)])
    refused(result, 2, text.format(path=metrics), "hint: give the output dir of an ascend-train run")
    assert not (tmp_path / "metrics.png").exists()


# ------------------------------------------------------------------ the HCCL/gloo NIC: routed to the master

# Captured with iproute2 6.1 in a network namespace holding a Kubernetes CNI bridge, a Docker network
# bridge and the cluster NIC (`ip link add cni0 type bridge`, `... br-1a2b3c type bridge`, eth0 a veth):
ROUTE_PEER = "10.251.199.12 dev eth0 src 10.251.199.11 uid 0 \\    cache \n"  # ip -o route get 10.251.199.12
ROUTE_SELF = "local 10.251.199.11 dev lo src 10.251.199.11 uid 0 \\    cache <local> \n"
ADDR_SELF = ("5: eth0    inet 10.251.199.11/24 scope global eth0\\       valid_lft forever "
             "preferred_lft forever\n")  # ip -o addr show to 10.251.199.11
ADDR_ALL = (  # ip -o -4 addr
    "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
    "2: cni0    inet 10.244.0.1/24 scope global cni0\\       valid_lft forever preferred_lft forever\n"
    "3: br-1a2b3c    inet 172.18.0.1/16 scope global br-1a2b3c\\       valid_lft forever preferred_lft "
    "forever\n"
    "5: eth0    inet 10.251.199.11/24 scope global eth0\\       valid_lft forever preferred_lft forever\n"
)


def fake_ip(route: str | None, addr: str | None = None):
    calls = []

    def ip(*args):
        calls.append(args)
        return route if args[0] == "route" else addr

    ip.calls = calls
    return ip


def fake_nics(monkeypatch, names: tuple[str, ...]) -> None:
    """psutil sees `names` as up NICs with an IPv4 address each."""
    import psutil

    Stat, Addr, Family = namedtuple("Stat", "isup"), namedtuple("Addr", "family"), namedtuple("F", "name")
    monkeypatch.setattr(psutil, "net_if_stats", lambda: {n: Stat(True) for n in names})
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: {n: [Addr(Family("AF_INET"))] for n in names})


@pytest.fixture
def bridged_nics(monkeypatch):
    """psutil sees the captured node's NICs: by name, cni0 and br-1a2b3c come before eth0."""
    fake_nics(monkeypatch, ("lo", "cni0", "br-1a2b3c", "eth0"))


def test_the_nic_is_the_one_routed_to_the_master_not_the_first_by_name(monkeypatch, bridged_nics):
    ip = fake_ip(ROUTE_PEER)
    assert launch.route_nic("10.251.199.12", ip=ip) == "eth0"
    assert ip.calls == [("route", "get", "10.251.199.12")]
    # on the master itself its address routes through lo: the NIC holding it
    assert launch.route_nic("10.251.199.11", ip=fake_ip(ROUTE_SELF, ADDR_SELF)) == "eth0"
    assert launch.route_nic("10.251.199.11", ip=fake_ip(ROUTE_SELF, ADDR_ALL)) == "eth0"
    # the launcher's default: HCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME from the route
    monkeypatch.setattr(launch, "_ip", fake_ip(ROUTE_PEER))
    cfg = launch.LaunchConfig(nnodes=2, master_addr="10.251.199.12")
    env = launch.hccl_env(cfg, environ={})
    assert env["HCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth0"
    # one node (a loopback master) or no route: the first NIC that is no bridge or container network
    assert launch.route_nic("127.0.0.1", ip=fake_ip(ROUTE_PEER)) is None
    monkeypatch.setattr(launch, "_ip", fake_ip(None))  # `ip route get` failed (e.g. network unreachable)
    assert launch.detect_host_nic("10.251.199.12") == launch.detect_host_nic() == "eth0"


def test_a_garbled_route_fails_closed_naming_the_line():
    from ascend_ready.errors import ParseError

    with pytest.raises(ParseError, match="no `dev NIC`"):
        launch.route_nic("10.251.199.12", ip=fake_ip("10.251.199.12 via 10.251.199.1 uid 0\n"))


def test_the_launch_spec_takes_the_routed_nic_too():
    from ascend_ready.checks.parsers.ip_route import nic_toward, parse_ip_addr, parse_ip_route_get

    assert nic_toward("10.251.199.12", parse_ip_route_get(ROUTE_PEER), None) == ("eth0", "10.251.199.11")
    assert nic_toward("10.251.199.11", parse_ip_route_get(ROUTE_SELF), parse_ip_addr(ADDR_ALL)) == (
        "eth0", "10.251.199.11")
    no_eth0 = parse_ip_addr(ADDR_ALL.split("5:")[0])
    assert nic_toward("10.251.199.11", parse_ip_route_get(ROUTE_SELF), no_eth0) is None

