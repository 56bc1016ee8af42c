"""The node-side tools as a node runs them: shell wrappers + `python3 -m ascend_ready.sim.node.tool`, on a
temp simdir (ASCEND_SIM_ROOT) and root (ASCEND_SIM_FSROOT): cache, stale generation, hang, exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ascend_ready.sim import cluster as sim_cluster
from ascend_ready.sim import hw

BIN = Path(sim_cluster.__file__).parent / "node" / "bin"
#: the package laid out as the nodes see it (common/ entries and sim/ in one ascend_ready directory)
LIB = sim_cluster.link_package(Path(tempfile.mkdtemp(prefix="ascend-sim-lib-")))


@pytest.fixture
def env_of():
    def make(node, python: str = sys.executable) -> dict:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ASCEND_SIM_ROOT": str(node.sim),
                "ASCEND_SIM_FSROOT": str(node.root), "ASCEND_SIM_PYTHON": python, "ASCEND_SIM_LIB": str(LIB)}
    return make


def sh(env: dict, tool: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / tool), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_wrappers_are_posix_sh():
    for name in ("_wrapper.sh", "dmesg"):
        assert (BIN / name).read_text().startswith("#!/bin/sh\n")
        subprocess.run(["sh", "-n", str(BIN / name)], check=True)
    for name in ("npu-smi", "hccn_tool", "lspci", "chronyc"):
        assert os.readlink(BIN / name) == "_wrapper.sh"


def test_cache_fast_path_and_stale_generation(make_node, a2_state, env_of):
    node = make_node(a2_state)
    env = env_of(node)
    first = sh(env, "npu-smi", "info")
    assert first.returncode == 0 and "| npu-smi 23.0.7 " in first.stdout
    cached = {p.name for p in (node.sim / "render").iterdir()}
    key = "1#Version=23.0.7#Version=7.1.0.11.220#"
    assert {key + "npu-smi#info", key + "_warm", key + "hccn_tool#-i#7#-link#-g",
            key + "npu-smi#info#-t#board#-i#3#-c#0"} <= cached
    assert not any("#-ip#-g" in name for name in cached)   # unset IPs fail: failures are never cached
    # fast path: no interpreter needed any more, also for calls prewarmed by the first one
    broken = dict(env, ASCEND_SIM_PYTHON="/bin/false")
    assert sh(broken, "npu-smi", "info").stdout == first.stdout
    assert sh(broken, "hccn_tool", "-i", "7", "-link", "-g").stdout == "link status: UP\n"
    # a new generation (fault) makes the cache stale: the wrapper must not serve it
    node.write(hw.inject_fault(node.state, "chip-health", npu=0, level="Alarm"))
    assert sh(broken, "npu-smi", "info").returncode != 0
    fresh = sh(env, "npu-smi", "info")
    assert "| 0     910B3               | Alarm  " in fresh.stdout
    assert {p.name.split("#")[0] for p in (node.sim / "render").iterdir()} == {"2"}


def test_driver_change_invalidates_cache(make_node, a2_state, env_of):
    node = make_node(a2_state)
    env = env_of(node)
    assert "Version: 23.0.7" in sh(env, "npu-smi", "info").stdout
    (node.root / "usr/local/Ascend/driver/version.info").write_text("Version=24.1.rc2\n")
    assert "Version: 24.1.rc2" in sh(env, "npu-smi", "info").stdout


def test_setter_drops_cache_and_persists(make_node, a2_state, env_of):
    node = make_node(a2_state)
    env = env_of(node)
    assert sh(env, "hccn_tool", "-i", "0", "-tls", "-g").stdout.startswith("dev_id:0, tls switch[0]")
    assert sh(env, "hccn_tool", "-i", "0", "-tls", "-s", "enable", "1").returncode == 0
    assert sh(env, "hccn_tool", "-i", "0", "-tls", "-g").stdout.startswith("dev_id:0, tls switch[1]")
    set_ip = sh(env, "hccn_tool", "-i", "2", "-ip", "-s", "address", "10.0.0.2", "netmask", "255.255.255.0")
    assert set_ip.returncode == 0
    assert (node.root / "etc/hccn.conf").read_text() == "address_2=10.0.0.2\nnetmask_2=255.255.255.0\n"
    assert '"address": [\n   "10.0.0.2",\n   1\n  ]' in (node.sim / "runtime/hccn.json").read_text()


def test_errors_exit_nonzero(make_node, a2_state, env_of):
    node = make_node(a2_state)
    env = env_of(node)
    bad_card = sh(env, "npu-smi", "info", "-t", "board", "-i", "42")
    assert (bad_card.returncode, bad_card.stdout) == (1, "Invalid card id.\n")
    assert sh(env, "npu-smi", "info", "-t", "fans", "-i", "0").stdout.startswith("Usage: npu-smi info")
    bad_dev = sh(env, "hccn_tool", "-i", "8", "-link", "-g")
    assert bad_dev.returncode == 1 and bad_dev.stdout.startswith("Invalid device id: 8\n")
    assert sh(env, "hccn_tool", "-i", "0", "-bogus", "-g").returncode == 1
    bad_opt = sh(env, "lspci", "-x")
    assert bad_opt.returncode == 2 and bad_opt.stdout.startswith("lspci: invalid option -- 'x'\n")
    # failures are never cached
    assert not any("42" in p.name or "-x" in p.name for p in (node.sim / "render").iterdir())


def test_npu_smi_hang_needs_a_timeout(make_node, a2_state, env_of):
    node = make_node(hw.inject_fault(a2_state, "npu-smi-hang"))
    env = env_of(node)
    with pytest.raises(subprocess.TimeoutExpired):
        sh(env, "npu-smi", "info", timeout=1.0)
    assert sh(env, "hccn_tool", "-i", "0", "-link", "-g").stdout == "link status: UP\n"
    node.write(hw.clear_faults(node.state))
    assert sh(env, "npu-smi", "info", "-l", timeout=10).returncode == 0


def test_dmesg_and_lspci(make_node, a2_state, env_of):
    env = env_of(make_node(a2_state))
    assert "pci 0000:c1:00.0: [19e5:d802] type 00 class 0x120000" in sh(env, "dmesg").stdout
    listing = sh(env, "lspci", "-d", "19e5:d802").stdout.splitlines()
    assert len(listing) == 8 and all("Device d802 (rev 20)" in line for line in listing)
    assert sh(env, "lspci", "-n", "-s", "c1:00.0").stdout == "c1:00.0 1200: 19e5:d802 (rev 20)\n"


def test_chronyc_tracking_follows_the_state_and_is_cached_per_poll(make_node, a2_state, env_of):
    node = make_node(a2_state)
    env = env_of(node)

    def period_now() -> int:
        return int(float(Path("/proc/uptime").read_text().split()[0])) // 64

    before = period_now()  # the call may cross a poll boundary: its period is one of before/after
    out = sh(env, "chronyc", "-n", "tracking")
    after = period_now()
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert [line[:18] for line in lines] == [f"{label:<15} : " for label in (
        "Reference ID", "Stratum", "Ref time (UTC)", "System time", "Last offset", "RMS offset", "Frequency",
        "Residual freq", "Skew", "Root delay", "Root dispersion", "Update interval", "Leap status")]
    assert lines[0] == "Reference ID    : 0A000001 (10.0.0.1)"
    assert lines[-1] == "Leap status     : Normal"
    ref = time.strptime(lines[2][18:], "%a %b %d %H:%M:%S %Y")
    assert abs(time.mktime(ref) - time.mktime(time.gmtime())) < 130
    # The report only moves on when chronyd polls (every 64 s since boot): one cache entry per poll,
    # which the wrapper serves without the interpreter.
    cached = [p.name for p in (node.sim / "render").iterdir() if "chronyc" in p.name]
    assert len(cached) == 1 and any(cached[0].endswith(f"#chronyc#-n#tracking#@{period}")
                                    for period in {before, after}), cached
    period = int(cached[0].rsplit("@", 1)[1])
    served = sh(dict(env, ASCEND_SIM_PYTHON="/bin/false"), "chronyc", "-n", "tracking")
    if period_now() == period:  # still that poll after the call: the wrapper served the cached report
        assert served.stdout == out.stdout
    node.write(hw.inject_fault(node.state, "clock-unsynced"))
    assert sh(env, "chronyc", "tracking").stdout.splitlines()[-1] == "Leap status     : Not synchronised"
    bad = sh(env, "chronyc", "sources")
    assert (bad.returncode, bad.stdout) == (1, "Unrecognized command\n")


def test_cached_short_outputs_come_back_byte_for_byte(make_node, a2_state, env_of):
    """hccn_tool and chronyc renders are printed with shell builtins: a last line without a newline,
    blank lines, backslashes and leading blanks must survive."""
    node = make_node(a2_state)
    env = env_of(node)
    first = sh(env, "hccn_tool", "-i", "0", "-link", "-g").stdout
    key = next(p for p in (node.sim / "render").iterdir() if p.name.endswith("#hccn_tool#-i#0#-link#-g"))
    tricky = "  lead\\n \\t\n\nback\\slash\t\nno newline"
    key.write_text(tricky)
    served = subprocess.run([str(BIN / "hccn_tool"), "-i", "0", "-link", "-g"],
                            env=dict(env, ASCEND_SIM_PYTHON="/bin/false"), capture_output=True, check=False)
    assert (served.returncode, served.stdout) == (0, tricky.encode())
    assert first == "link status: UP\n"


@pytest.mark.parametrize("python", [f"/root/.pyenv/versions/{v}/bin/python3" for v in ("3.11.7", "3.12.1")])
def test_tool_runs_on_a_bare_stdlib_interpreter(make_node, a2_state, env_of, python):
    """Nodes run the tools with a private interpreter without site-packages (-S): stdlib only."""
    if not Path(python).exists():
        pytest.skip(f"{python} not installed")
    env = env_of(make_node(a2_state), python=python)
    result = sh(env, "npu-smi", "info", "-t", "board", "-i", "0")
    assert result.returncode == 0, result.stderr
    assert "\tPCI Device ID                  : 0xD802\n" in result.stdout


def test_fast_path_cost(make_node, a2_state, env_of):
    """The preflight calls these tools ~50 times per node: the cached path must stay a few ms."""
    env = env_of(make_node(a2_state))
    sh(env, "hccn_tool", "-i", "0", "-link", "-g")
    sh(env, "npu-smi", "info")
    n = 20
    start = time.perf_counter()
    for _ in range(n):
        sh(env, "hccn_tool", "-i", "0", "-link", "-g")
        sh(env, "npu-smi", "info")
    per_call = (time.perf_counter() - start) / (2 * n)
    assert per_call < 0.05, f"fast path {per_call * 1000:.1f} ms per call"
