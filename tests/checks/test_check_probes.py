"""The probe batch: one POSIX sh script per host, framed output, per-probe timeouts, the host deadline,
and the snapshot round trip."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time

import pytest

from ascend_ready.checks.catalog import catalog, plan
from ascend_ready.checks.collect import collect, collect_host
from ascend_ready.checks.probes import Probe, build_script, parse_stream
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.snapshot import HostSnapshot, ProbeResult, Snapshot, load_snapshot, save_snapshot
from ascend_ready.errors import ConfigError
from ascend_ready.fleet.transport import LOCAL, FanoutOptions, Target


def run_local(probes, **kw):
    return collect_host(Target(name="here", address=LOCAL), probes, FanoutOptions(**kw))


def test_script_is_posix_sh():
    script, _nonce = build_script(plan(load_profile(), set(catalog(load_profile()))))
    for shell in ("dash", "sh"):
        if shutil.which(shell):
            subprocess.run([shell, "-n"], input=script.encode(), check=True)


def test_outputs_rc_and_stderr_come_back_per_probe():
    snap = run_local(
        [
            Probe("hello", argv=("echo", "hello world")),
            Probe("fails", shell="echo to-err >&2; echo partial; exit 3"),
            Probe("quoted", argv=("printf", "%s|", "a b", "$HOME", "'q'")),
        ]
    )
    assert snap.reachable and snap.error is None
    assert snap.probes["hello"].stdout == "hello world\n" and snap.probes["hello"].rc == 0
    fails = snap.probes["fails"]
    assert (fails.rc, fails.stdout, fails.stderr, fails.timed_out) == (3, "partial\n", "to-err\n", False)
    # argv is shlex-quoted: nothing expands on the remote side
    assert snap.probes["quoted"].stdout == "a b|$HOME|'q'|"
    assert snap.probes["quoted"].command == shlex.join(["printf", "%s|", "a b", "$HOME", "'q'"])


def test_a_hanging_probe_times_out_alone():
    started = time.monotonic()
    snap = run_local([Probe("hang", argv=("sleep", "30"), timeout_s=1), Probe("after", argv=("echo", "ok"))])
    assert time.monotonic() - started < 5
    hang = snap.probes["hang"]
    assert hang.timed_out and hang.rc == 124 and hang.timeout_s == 1 and hang.command == "sleep 30"
    assert 0.9 <= hang.duration_s < 3
    assert snap.probes["after"].stdout == "ok\n"


def test_a_timed_out_probe_loses_its_whole_process_tree(tmp_path):
    # The hung command is a child of the probe's shell: stopping only the shell would leave it
    # running, writing into the next probe's frame.
    pidfile = tmp_path / "child.pid"
    probe = Probe("tree", shell=f"sleep 30 & echo $! > {pidfile}; wait; echo never", timeout_s=1)
    snap = run_local([probe, Probe("after", argv=("echo", "ok"))])
    tree = snap.probes["tree"]
    assert tree.timed_out and tree.rc == 124 and "never" not in tree.stdout
    assert snap.probes["after"].stdout == "ok\n"
    child = int(pidfile.read_text())
    for _ in range(50):  # the kill is sent; reaping by init may lag a moment
        try:
            with open(f"/proc/{child}/stat") as f:
                state = f.read().rsplit(") ", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the probe's child {child} survived its timeout")


def test_a_probe_ignoring_term_is_killed_two_seconds_later():
    snap = run_local([Probe("stubborn", shell="trap '' TERM; sleep 30", timeout_s=1)])
    stubborn = snap.probes["stubborn"]
    assert stubborn.timed_out and stubborn.rc == 137
    assert 2.5 <= stubborn.duration_s < 6


def test_without_proc_uptime_each_probe_runs_under_timeout():
    """A node whose /proc/uptime cannot be read has no clock for the watchdog: `timeout` takes over."""
    probes = [Probe("hang", argv=("sleep", "30"), timeout_s=1), Probe("after", argv=("echo", "ok"))]
    script, nonce = build_script(probes)
    assert script.count("/proc/uptime") == 1
    script = script.replace("/proc/uptime", "/nonexistent/uptime")
    started = time.monotonic()
    out = subprocess.run(["/bin/sh", "-s"], input=script.encode(), capture_output=True, timeout=20).stdout
    assert time.monotonic() - started < 5
    stream = parse_stream(out, nonce, probes)
    assert stream.complete
    assert stream.results["hang"].rc == 124 and stream.results["hang"].timed_out
    assert stream.results["after"].stdout == "ok\n"


def test_the_watchdog_does_not_outlive_the_batch():
    # A batch of quick probes ends at once: the channel must not wait for the watchdog's next tick,
    # and a watchdog that missed its TERM (sent as it starts) must not hold the output open. The race
    # showed about once in 15 runs, so 40 of them.
    probes = [Probe("quick", argv=("true",))]
    for _ in range(40):
        script, nonce = build_script(probes)
        started = time.monotonic()
        proc = subprocess.run(["/bin/sh", "-s"], input=script.encode(), capture_output=True, timeout=20)
        assert time.monotonic() - started < 1.0
        assert parse_stream(proc.stdout, nonce, probes).results["quick"].rc == 0


def test_fake_markers_in_output_cannot_break_framing():
    # Markers carry a nonce that is random per run: a probe printing marker-shaped lines (another
    # nonce, a bare END, a frame of its own) is read as plain data.
    fake = "0123456789abcdef01234567"
    probes = [
        Probe(
            "evil", shell=f"printf '{fake} E evil\\n\\n{fake} O evil 0 1\\n{fake} END\\nEND\\n'; echo x >&2"
        ),
        Probe("next", argv=("echo", "fine")),
    ]
    script, nonce = build_script(probes)
    assert nonce != fake and len(nonce) == 24
    out = subprocess.run(["/bin/sh", "-s"], input=script.encode(), capture_output=True).stdout
    stream = parse_stream(out, nonce, probes)
    assert stream.complete
    assert stream.results["evil"].stdout == f"{fake} E evil\n\n{fake} O evil 0 1\n{fake} END\nEND\n"
    assert stream.results["evil"].stderr == "x\n"
    assert stream.results["next"].stdout == "fine\n"


def test_output_without_trailing_newline_and_binary_bytes():
    probes = [Probe("raw", shell="printf 'no-newline'"), Probe("bin", shell="printf '\\001\\377\\n'")]
    snap = run_local(probes)
    assert snap.probes["raw"].stdout == "no-newline"
    assert snap.probes["bin"].stdout == "\x01\ufffd\n"


def test_stream_demux_byte_by_byte_and_ignores_banners():
    probes = [Probe("a", argv=("printf", "x\ny")), Probe("b", shell="printf 'é\\n' >&2")]
    script, nonce = build_script(probes)
    out = (
        b"Welcome to node01\n"
        + subprocess.run(["/bin/sh", "-s"], input=script.encode(), capture_output=True).stdout
    )
    from ascend_ready.checks.probes import new_stream

    stream = new_stream(nonce, probes)
    for i in range(len(out)):
        stream.feed(out[i : i + 1])
    assert stream.complete
    assert stream.results["a"].stdout == "x\ny" and stream.results["b"].stderr == "é\n"
    assert bytes(stream.garbage) == b"Welcome to node01\n"


def test_foreach_probes_run_per_key_with_quoted_keys(tmp_path):
    listing = tmp_path / "npu-smi-l.out"
    listing.write_text("NPU ID : 0\nChip Count : 2\n\nNPU ID : 5\nChip Count : 1\n")
    probes = [
        Probe("npu-smi-l", shell=f"cat {listing}"),
        Probe("per-chip", shell='echo "npu $1 chip $2"', foreach="npu-chip", needs=("npu-smi-l",)),
    ]
    snap = run_local(probes)
    got = {k: v.stdout for k, v in snap.probes.items() if k.startswith("per-chip")}
    assert got == {
        "per-chip.0.0": "npu 0 chip 0\n",
        "per-chip.0.1": "npu 0 chip 1\n",
        "per-chip.5.0": "npu 5 chip 0\n",
    }
    assert snap.probes["per-chip.5.0"].command == 'echo "npu 5 chip 0"'
    argv = [
        Probe("npu-smi-l", shell=f"cat {listing}"),
        Probe("health", argv=("echo", "-i", "{1}", "-c", "{2}"), foreach="npu-chip", needs=("npu-smi-l",)),
    ]
    snap = run_local(argv)
    assert snap.probes["health.0.1"].stdout == "-i 0 -c 1\n"
    assert snap.probes["health.0.1"].command == "echo -i 0 -c 1"


def test_background_probes_overlap_the_serial_ones():
    probes = [
        Probe("slow1", argv=("sleep", "1"), background=True),
        Probe("slow2", argv=("sleep", "1"), background=True),
        Probe("serial", argv=("sleep", "1")),
    ]
    started = time.monotonic()
    snap = run_local(probes)
    assert time.monotonic() - started < 2.5
    assert {k: v.rc for k, v in snap.probes.items()} == {"slow1": 0, "slow2": 0, "serial": 0}


def test_host_deadline_keeps_finished_probes_and_marks_the_rest():
    probes = [
        Probe("first", argv=("echo", "done")),
        Probe("stuck", argv=("sleep", "20"), timeout_s=15),
        Probe("never", argv=("echo", "x")),
    ]
    started = time.monotonic()
    snap = run_local(probes, host_deadline_s=1.5)
    assert time.monotonic() - started < 4
    assert snap.reachable and "host deadline of 1.5 s" in snap.error
    assert snap.probes["first"].stdout == "done\n"
    stuck, never = snap.probes["stuck"], snap.probes["never"]
    # The one that was running was stopped by the deadline; the one after it never started.
    assert stuck.timed_out and stuck.rc == -1 and "host deadline" in stuck.stderr and stuck.not_run is None
    assert never.not_run == "host deadline of 1.5 s" and not never.timed_out and never.rc == -1


def test_probe_validation():
    with pytest.raises(ValueError, match="exactly one of argv or shell"):
        Probe("x")
    with pytest.raises(ValueError, match="lowercase"):
        Probe("Bad.Id", argv=("true",))
    with pytest.raises(ValueError, match="not in the batch"):
        build_script([Probe("a", argv=("true",), needs=("b",))])


def test_collect_runs_hosts_in_parallel_and_reports_progress():
    seen = []
    targets = [Target(name=f"h{i}", address=LOCAL) for i in range(4)]
    started = time.monotonic()
    snaps = collect(
        targets,
        lambda t: ([Probe("nap", argv=("sleep", "1"))], "root"),
        FanoutOptions(concurrency=4),
        progress=lambda h: seen.append(h.name),
    )
    assert time.monotonic() - started < 2.5
    assert [s.name for s in snaps] == ["h0", "h1", "h2", "h3"] and sorted(seen) == ["h0", "h1", "h2", "h3"]


def test_unreachable_host_is_reported_not_raised():
    snap = collect_host(
        Target(name="gone", address="127.0.0.1", port=1),
        [Probe("x", argv=("true",))],
        FanoutOptions(connect_timeout_s=2, host_deadline_s=3),
    )
    assert not snap.reachable
    assert "127.0.0.1:1" in snap.error and snap.probes == {}


# ---------------------------------------------------------------- snapshot


def test_snapshot_round_trip(tmp_path):
    snap = Snapshot(
        tool_version="0.1.0",
        hosts={
            "n1": HostSnapshot(
                name="n1",
                address="10.0.0.1",
                groups=["train"],
                vars={"ascend_check_profile": "atlas-800t-a3"},
                probes={
                    "npu-smi-info": ProbeResult(
                        command="npu-smi info", rc=0, stdout="table\n", duration_s=0.1
                    ),
                    "hccn-link.3": ProbeResult(command="hccn_tool -i 3 -link -g", rc=1, stderr="boom\n"),
                    "npu-smi-l": ProbeResult(command="npu-smi info -l", rc=124, timed_out=True, timeout_s=10),
                },
            )
        },
    )
    snap.hosts["n2"] = HostSnapshot(name="n2", reachable=False, error="connection refused")
    save_snapshot(snap, tmp_path / "snap")
    assert (tmp_path / "snap" / "n1" / "hccn-link.3.err").read_text() == "boom\n"
    assert not (tmp_path / "snap" / "n1" / "npu-smi-info.err").exists()
    meta = json.loads((tmp_path / "snap" / "n1" / "npu-smi-l.meta.json").read_text())
    assert meta == {
        "command": "npu-smi info -l",
        "rc": 124,
        "duration_s": 0.0,
        "timed_out": True,
        "timeout_s": 10.0,
    }
    assert load_snapshot(tmp_path / "snap") == snap


def test_snapshot_errors_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"no manifest\.json"):
        load_snapshot(tmp_path)
    (tmp_path / "manifest.json").write_text('{"schema_version": 99}')
    with pytest.raises(ConfigError, match="unsupported snapshot schema_version 99"):
        load_snapshot(tmp_path)
    (tmp_path / "manifest.json").write_text(
        '{"schema_version": 1, "hosts": {"n1": {"name": "n1", "probes": {"x": {"command": "c", "rc": 0}}}}}'
    )
    with pytest.raises(ConfigError, match=r"x\.out is missing"):
        load_snapshot(tmp_path)
    with pytest.raises(ConfigError, match="cannot be used as a file name"):
        save_snapshot(Snapshot(hosts={"../etc": HostSnapshot(name="../etc")}), tmp_path / "s")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_as_user_probes_need_root_or_that_user():
    """A login-shell probe runs as the training user: the batch's own user directly, any user as root
    (`su -`), and otherwise fails with rc 125 saying why (never someone else's environment)."""
    probe = Probe("who", shell="id -un", as_user=True)

    def run(user: str, as_nobody: bool) -> ProbeResult:
        script, nonce = build_script([probe], user=user)
        prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if as_nobody else []
        out = subprocess.run(
            [*prefix, "/bin/sh", "-s"], input=script.encode(), capture_output=True, timeout=30, cwd="/"
        ).stdout
        stream = parse_stream(out, nonce, [probe])
        assert stream.complete
        return stream.results["who"]

    assert run("root", as_nobody=False).stdout == "root\n"
    nobody = run("root", as_nobody=True)
    assert nobody.rc == 125 and "need root or user 'root'" in nobody.stderr


# ---------------------------------------------------------------- a hung vendor tool (issue 9)


def fake_node(tmp_path, monkeypatch, *, hccn: str = "answer", npu_smi_delay_s: float = 0.0):
    """This machine as an A2 node: `npu-smi`, `hccn_tool` and `lspci` on PATH print what the
    simulator renders for a healthy node (checks_fakenode), `/dev/davinciN` become files of a temp
    dir. `hccn="hang"` makes every hccn_tool call hang, as a wedged device-NIC driver does."""
    from checks_fakenode import fake_host

    from ascend_ready.checks.probes import FOREACH

    host = fake_host()
    outputs, bin_dir, dev = tmp_path / "outputs", tmp_path / "bin", tmp_path / "dev"
    for d in (outputs, bin_dir, dev):
        d.mkdir()
    for pid, res in host.probes.items():
        (outputs / pid).write_text(res.stdout)
    devices = sorted({pid.split(".")[1] for pid in host.probes if pid.startswith("hccn-link.")})
    for d in devices:
        (dev / f"davinci{d}").touch()
    delay = f"sleep {npu_smi_delay_s}\n" if npu_smi_delay_s else ""
    tools = {
        "npu-smi": f"""{delay}case "$*" in
  "info") exec cat {outputs}/npu-smi-info ;;
  "info -l") exec cat {outputs}/npu-smi-l ;;
  "info -t health -i "*) exec cat "{outputs}/npu-smi-health.$5.$7" ;;
esac
exit 2""",
        "hccn_tool": "exec sleep 60" if hccn == "hang" else f"""case "$3" in
  -link) exec cat "{outputs}/hccn-link.$2" ;;
  -net_health) exec cat "{outputs}/hccn-net-health.$2" ;;
  -ip) exec cat "{outputs}/hccn-ip.$2" ;;
  -tls) exec cat "{outputs}/hccn-tls.$2" ;;
esac
exit 2""",
        "lspci": f"""case "$*" in
  "-D -nn") exec cat {outputs}/lspci ;;
  *-vvv*) exec cat {outputs}/lspci-vvv ;;
esac
exit 2""",
    }
    for name, body in tools.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body + "\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    listing = f'for _d in {dev}/davinci[0-9]*; do echo "${{_d##*/davinci}}"; done'
    monkeypatch.setitem(FOREACH, "davinci", listing)
    return devices


#: Probes of the checks that read npu-smi, hccn_tool, lspci and the cheap OS facts.
HUNG_TOOL_PROBES = {
    "thp-enabled", "thp-defrag", "disk-free", "shm", "sysctl", "lspci", "lspci-vvv", "npu-smi-info",
    "npu-smi-health", "hccn-link", "hccn-net-health", "hccn-ip", "hccn-tls", "hccn-conf",
}


def test_a_hung_tool_is_not_called_again_and_starves_nothing(tmp_path, monkeypatch):
    """One hanging `hccn_tool -i N ...` used to take the host deadline (8 devices x 4 probes x the
    time limit), and then THP, df and lspci reported "timed out, the tool hangs". Now the first
    hccn_tool call times out, the rest of that tool's probes are not run, saying why, and everything
    else has its output."""
    devices = fake_node(tmp_path, monkeypatch, hccn="hang")
    probes = plan(load_profile(), HUNG_TOOL_PROBES)
    started = time.monotonic()
    snap = run_local(probes, probe_timeout_s=1, host_deadline_s=12)
    assert time.monotonic() - started < 6  # one time limit (and the TERM), not 32 of them
    assert snap.error is None, snap.error  # the batch finished, nothing was cut by the deadline
    for pid in ("thp-enabled", "thp-defrag", "disk-free", "shm", "sysctl", "lspci", "lspci-vvv",
                "npu-smi-info", f"npu-smi-health.{devices[-1]}.0"):
        res = snap.probes[pid]
        assert res.rc == 0 and res.stdout and not res.timed_out and res.not_run is None, (pid, res)
    hccn = {pid: r for pid, r in snap.probes.items() if pid.startswith("hccn-") and pid != "hccn-conf"}
    hung = [pid for pid, r in hccn.items() if r.timed_out]
    assert len(hung) == 1 and snap.probes[hung[0]].rc == 124, hung
    skipped = {pid: r for pid, r in hccn.items() if pid not in hung}
    # the hung call's own loop names its remaining devices; the later loops are skipped whole
    reason = "`hccn_tool` timed out earlier in this batch"
    assert skipped and all(r.not_run == reason for r in skipped.values())
    assert all(r.rc == -1 and not r.timed_out for r in skipped.values())
    assert snap.probes["hccn-link.1"].command == "hccn_tool -i 1 -link -g"
    assert snap.probes["hccn-net-health"].not_run  # its loop never started
    assert snap.probes["hccn-conf"].rc == 0 or snap.probes["hccn-conf"].not_run is None  # `cat`: not the tool


def test_a_hung_tool_errors_only_the_checks_that_read_it(tmp_path, monkeypatch):
    from ascend_ready.checks.preflight import PreflightOptions, judge_snapshot
    from ascend_ready.checks.snapshot import Snapshot

    fake_node(tmp_path, monkeypatch, hccn="hang")
    options = PreflightOptions(select=["os.thp", "os.disk_free", "npu.pci_functions", "hccl.link_up",
                                       "hccl.net_health"])
    probes = plan(load_profile(), {p for spec in options.checks() for p in spec.probes})
    host = run_local(probes, probe_timeout_s=1, host_deadline_s=12)
    from checks_fakenode import fake_host

    # This machine's /dev has no davinciN: the node's listing as the simulator renders it.
    host.probes["dev-davinci"] = fake_host().probes["dev-davinci"]
    report = judge_snapshot(Snapshot(hosts={host.name: host}), options)
    status = {r.check_id: r for r in report.results}
    for cid in ("os.thp", "os.disk_free", "npu.pci_functions"):
        assert status[cid].status != "error" and "timed out" not in status[cid].message, status[cid]
    assert status["hccl.link_up"].status == "error" and "hccn_tool" in status["hccl.link_up"].message
    net = status["hccl.net_health"]
    assert net.status == "error" and "not run: `hccn_tool` timed out earlier in this batch" in net.message


def test_each_tools_loops_get_a_share_of_the_deadline(tmp_path, monkeypatch):
    """A slow (not hung) npu-smi cannot spend the whole host deadline on its per-chip loop: its loops
    get half of what is left when they start, and the hccn_tool loops after them still run."""
    fake_node(tmp_path, monkeypatch, npu_smi_delay_s=0.5)
    probes = plan(load_profile(), {"npu-smi-health", "hccn-link", "hccn-ip"})
    snap = run_local(probes, probe_timeout_s=5, host_deadline_s=4)
    health = {pid: r for pid, r in snap.probes.items() if pid.startswith("npu-smi-health.")}
    ran = [r for r in health.values() if r.not_run is None]
    cut = [r for r in health.values() if r.not_run]
    assert ran and cut, health
    assert all(r.not_run.startswith("the per-device calls of `npu-smi` used up their share of the host "
                                    "deadline") for r in cut)
    hccn = {pid: r for pid, r in snap.probes.items() if pid.startswith("hccn-")}
    assert len(hccn) == 16 and all(r.rc == 0 and r.not_run is None for r in hccn.values()), hccn


def test_cheap_probes_run_before_tools_and_loops():
    from ascend_ready.checks.probes import batch_order, probe_tools

    probes = plan(load_profile(), set(catalog(load_profile())))
    order = [p.id for p in batch_order(probes)]
    tools = probe_tools(probes)
    kinds = [
        "background" if p.background else "loop" if p.foreach else "tool" if tools[p.id] else "cheap"
        for p in batch_order(probes)
    ]
    rank = ["background", "cheap", "tool", "loop"].index
    assert kinds == sorted(kinds, key=rank), list(zip(order, kinds, strict=True))
    assert tools["hccn-ping"] == "hccn_tool" and tools["npu-smi-health"] == "npu-smi"
    assert tools["thp-enabled"] == tools["disk-free"] == tools["dmesg"] == ""
    assert order.index("npu-smi-l") < order.index("npu-smi-health")


def test_the_batch_output_leaves_in_a_few_writes_and_ends_at_once():
    """sshd sends one SSH packet per read of the batch's pipe and each packet costs the controller
    CPU: 40 probes used to leave in ~100 writes. The output now leaves once per tick (50 ms, growing)
    and the last of it as soon as the batch ends."""
    probes = [Probe(f"p{i}", argv=("echo", f"line {i}")) for i in range(40)]
    probes.append(Probe("slow", shell="sleep 0.3; echo done"))
    script, nonce = build_script(probes)
    started = time.monotonic()
    proc = subprocess.Popen(["/bin/sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stdin.write(script.encode())
    proc.stdin.close()
    chunks = []
    while data := os.read(proc.stdout.fileno(), 1 << 20):
        chunks.append(data)
    proc.wait()
    assert time.monotonic() - started < 1.0  # no tick left to sleep out after END
    assert len(chunks) <= 8, [len(c) for c in chunks]
    stream = parse_stream(b"".join(chunks), nonce, probes)
    assert stream.complete and stream.results["p39"].stdout == "line 39\n"
    assert stream.results["slow"].stdout == "done\n"
