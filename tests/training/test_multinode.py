"""The multi-node launcher without a cluster: the launch spec from a real ascend-check report and real
`ip route` captures, each host's command and environment (dry run), quoting proved on /bin/sh, the node
guard's teardown of real processes, and a whole job on two local "nodes" where one fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from training_fakecheck import (
    ADDRS,
    MASTER,
    ROUTES,
    healthy,
    launch_spec,
    link_down,
    printed_report,
    spec_file,
    train,
)

from ascend_ready.checks.cluster.launchspec import (
    LaunchSpec,
    LaunchSpecRefused,
    spec_from_report,
)
from ascend_ready.checks.cluster.ranktable import healthy_devices
from ascend_ready.checks.report import Report
from ascend_ready.errors import ConfigError
from ascend_ready.fleet import job, node_guard
from ascend_ready.fleet import plan as fleet_plan
from ascend_ready.fleet import sessions as fleet_sessions
from ascend_ready.fleet.transport import Target
from ascend_ready.training import multinode, numa
from ascend_ready.training.config import load_config

CAPTURES = Path(__file__).parent / "multinode_captures"
TOPO = Path(__file__).parents[1] / "parsers" / "real" / \
    "npu-smi-info-t-topo_910b3-8npu-hccs-prompt_24.1.rc1_ms-swift-doc.txt"
def targets(*names: str) -> list[Target]:
    return [Target(name=n, address=f"10.251.199.{11 + i}", user="root", key_file="/k",
                   known_hosts_file="/kh") for i, n in enumerate(names)]


@pytest.fixture
def healthy_spec(tmp_path) -> LaunchSpec:
    hosts = [healthy("node01"), healthy("node02", index=1)]
    return launch_spec(tmp_path, *hosts, targets=targets("node01", "node02"),
                       devices={h.name: healthy_devices(h) for h in hosts})


# ----------------------------------------------------------------------------- the launch spec


def test_spec_from_a_passing_report_takes_each_nodes_route_to_the_master(healthy_spec):
    a, b = healthy_spec.hosts["node01"], healthy_spec.hosts["node02"]
    assert a.verdict == b.verdict == "pass" and healthy_spec.checked
    # the master's own route is local (lo): its NIC is the one holding the address
    assert (a.nic, a.ip, b.nic, b.ip) == ("eth0", MASTER, "eth0", "10.251.199.12")
    assert a.devices == list(range(8)) and (a.ssh_user, a.ssh_key_file) == ("root", "/k")
    assert list(healthy_spec.usable()) == ["node01", "node02"]


def test_failed_hosts_and_devices_are_left_out(tmp_path):
    sick = healthy("node02", index=1)
    chip = link_down("node02", 1)
    report = printed_report(tmp_path, healthy("node01"), chip)
    spec = spec_from_report(report, targets("node01", "node02"), master_addr=MASTER, routes=ROUTES,
                            addrs=ADDRS)
    assert spec.hosts["node02"].verdict == "fail" and "hccl.link_up" in spec.hosts["node02"].failed_checks
    assert list(spec.usable()) == ["node01"]
    from training_fakecheck import fakenode

    degraded = fakenode().fake_host("node03", index=2, faults=[("chip-health", {"npu": 5})])
    ok, excluded = healthy_devices(degraded)
    assert 5 not in ok and list(excluded) == ["5"] and "health" in excluded["5"]
    assert healthy_devices(sick)[0] == list(range(8))


def test_a_bare_node_report_starts_nothing():
    report = Report.model_validate_json((CAPTURES / "ascend-check-bare-sim-nodes.json").read_text())
    spec = spec_from_report(report, targets("node01", "node02"), master_addr=MASTER, routes=ROUTES,
                            addrs=ADDRS)
    assert {h.verdict for h in spec.hosts.values()} == {"fail"}
    with pytest.raises(LaunchSpecRefused, match="no host of the launch spec passed"):
        spec.usable()


# ----------------------------------------------------------------------------- CLI: dry run, refusals


def test_dry_run_prints_each_hosts_exact_command_and_environment(tmp_path, healthy_spec, no_ssh):
    out = tmp_path / "run"
    # --no-numa-bind: a binding is read from the nodes' topology, in a dry run too (test_launch_also.py)
    result = train("--launch-spec", str(spec_file(tmp_path, healthy_spec)), "-o", str(out), "--dry-run",
                   "--python", "/opt/venv/bin/python", "--no-numa-bind")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "2 node(s) x 1 process(es); master 10.251.199.11:29500" in text
    node01, node02 = text.split("== node01")[1].split("== node02")
    assert "node rank 0, ssh root@10.251.199.11" in node01 and "node rank 1, ssh root@10.251.199.12" in node02
    for part, ip in ((node01, MASTER), (node02, "10.251.199.12")):
        assert f"HCCL_IF_IP={ip}" in part and "HCCL_SOCKET_IFNAME=eth0" in part
        assert "GLOO_SOCKET_IFNAME=eth0" in part
        assert "HCCL_CONNECT_TIMEOUT=1800" in part and "HCCL_EXEC_TIMEOUT=3600" in part
        assert "ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in part and "VIRTUAL_ENV=/opt/venv" in part
        assert "numa: local rank 0 (no NPU): not bound: turned off (--no-numa-bind)" in part
    assert "--node-rank=1" in node02 and "--nnodes=2" in node02 and "--master-addr=10.251.199.11" in node02
    assert "/opt/venv/bin/python -m torch.distributed.run" in node02.replace("'", "")
    assert not out.exists()  # a dry run writes nothing


def test_a_stale_spec_is_refused_before_any_ssh_and_writes_nothing(tmp_path, healthy_spec, no_ssh):
    stale = healthy_spec.model_copy(update={"created_at": datetime.now(UTC) - timedelta(hours=2)})
    out = tmp_path / "run"
    result = train("--launch-spec", str(spec_file(tmp_path, stale)), "-o", str(out))
    assert result.exit_code == 1
    assert "error: the launch spec was made 7200 s ago and was valid for 3600 s" in result.stderr
    assert "hint: run the preflight again" in result.stderr and not out.exists()


def test_a_failed_host_is_not_started(tmp_path, no_ssh):
    report = printed_report(tmp_path, healthy("node01"), link_down("node02", 1))
    spec = spec_from_report(report, targets("node01", "node02"), master_addr=MASTER, routes=ROUTES,
                            addrs=ADDRS)
    result = train("--launch-spec", str(spec_file(tmp_path, spec)), "-o", str(tmp_path / "r"), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "1 node(s) x 1 process(es)" in result.stdout and "== node02" not in result.stdout
    assert "not started: node02 (fail: hccl.link_up" in result.stdout


def test_dry_run_and_profile_need_the_multinode_launcher(tmp_path):
    result = train("-o", str(tmp_path / "r"), "--skip-preflight", "--dry-run")
    assert result.exit_code == 2 and "--dry-run needs the multi-node launcher" in result.stderr
    with pytest.raises(ConfigError, match="is not A:B"):
        multinode.parse_profile_steps("5:3")
    assert multinode.parse_profile_steps("2:4") == (2, 4)


# ----------------------------------------------------------------------------- quoting


HOSTILE = "x; touch {pwn}/semicolon $(touch {pwn}/subst) `touch {pwn}/tick`\ntouch {pwn}/newline"


def recorder(tmp_path: Path) -> Path:
    """A stand-in `python` for the node: records its argv and environment instead of starting anything."""
    fake = tmp_path / "venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ), 'cwd': os.getcwd()}}, "
                    f"open({str(tmp_path / 'record.json')!r}, 'w'))\n")
    fake.chmod(0o755)
    return fake


def test_nothing_in_a_config_value_runs_on_the_node(tmp_path, healthy_spec):
    pwn = tmp_path / "pwned"
    pwn.mkdir()
    evil = HOSTILE.format(pwn=pwn)
    cfg = load_config("tiny", [f"launch.hccl.extra_env={json.dumps({'HCCL_BUFFSIZE': evil})}",
                               f"data.prompt_template={json.dumps(evil + ' {question}')}"])
    out = tmp_path / f"run; touch {pwn}/dir $(touch {pwn}/dir2)"
    opts = multinode.LaunchOptions(python=str(recorder(tmp_path)), set_env=str(tmp_path / "no;set_env"))
    plan = multinode.plan_job("grpo", cfg, healthy_spec, healthy_spec.usable(),
                              {t.name: t for t in targets("node01", "node02")}, out, opts)
    host = plan.hosts[1]
    subprocess.run(["/bin/sh", "-c", fleet_plan.remote_command(host, plan)], check=True, timeout=30)
    assert list(pwn.iterdir()) == []  # not one of the commands in the values ran
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["env"]["HCCL_BUFFSIZE"] == evil  # the value arrived as it was, newline included
    assert record["cwd"] == str(out)
    assert record["argv"][:4] == ["-u", "-m", fleet_plan.GUARD_MODULE, "--job"]
    assert record["argv"][record["argv"].index("--") + 1:] == host.torchrun
    with pytest.raises(ConfigError, match="are not shell names"):
        bad = load_config("tiny", ['launch.hccl.extra_env={"X;touch /tmp/x": "1"}'])
        p = multinode.plan_job("grpo", bad, healthy_spec, healthy_spec.usable(),
                               {t.name: t for t in targets("node01", "node02")}, out, opts)
        fleet_plan.remote_command(p.hosts[0], p)


# ----------------------------------------------------------------------------- the node guard


AGENT = """import subprocess, sys, time
# as torchrun does: the worker in a session of its own
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print("agent up", flush=True)
time.sleep(600)
"""


def guard(job: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ascend_ready.fleet.node_guard", "--job", job,
                             "--grace", "2", *extra, "--", sys.executable, "-c", AGENT],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for_pids(job: str, n: int) -> None:
    from sim_support import wait_for

    wait_for(lambda: len(node_guard.job_pids(job)) >= n, 30, f"{n} processes of job {job}")


@pytest.mark.parametrize("how", ["stop", "eof", "silence", "sigterm"])
def test_guard_leaves_no_process_of_the_job(how):
    job = f"t-{how}-{os.getpid()}"
    p = guard(job, "--heartbeat-timeout", "1.5" if how == "silence" else "60")
    wait_for_pids(job, 2)  # the agent and its detached worker
    if how == "stop":
        p.stdin.write(b"hb\nstop\n")
        p.stdin.flush()
    elif how == "eof":
        p.stdin.close()
        p.stdin = None  # communicate() must not flush it
    elif how == "sigterm":
        p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)  # before communicate(), which closes stdin: an EOF of its own
    _, err = p.communicate(timeout=30)
    assert p.returncode == node_guard.STOPPED_RC
    assert node_guard.job_pids(job) == []
    assert f"@@guard clean no process of job {job} is left" in err.decode()
    reason = {"stop": "the controller stopped the job", "eof": "connection closed",
              "silence": "no heartbeat from the controller for 1.5 s", "sigterm": "got signal 15"}[how]
    assert reason in err.decode()


# ----------------------------------------------------------------------------- a job on two local nodes


def local_plan(tmp_path: Path, spec: LaunchSpec, commands: dict[str, str]) -> fleet_plan.JobPlan:
    cfg = load_config("tiny")
    plan = multinode.plan_job("grpo", cfg, spec, spec.usable(),
                              {"node01": Target("node01", "local"), "node02": Target("node02", "local")},
                              tmp_path / "run", multinode.LaunchOptions(python=sys.executable))
    for h in plan.hosts:  # stand-ins for torchrun, in the guard as the real one runs
        h.torchrun = [sys.executable, "-u", "-c", commands[h.name]]
    return plan


def commands(plan: fleet_plan.JobPlan) -> dict[str, str]:
    return {h.name: fleet_plan.remote_command(h, plan) for h in plan.hosts}


def test_a_failing_node_stops_the_job_everywhere_and_is_named(tmp_path, healthy_spec):
    killed = (CAPTURES / "torchrun-worker-sigkilled.txt").read_text()
    lost = (CAPTURES / "torchrun-gloo-peer-lost.txt").read_text()
    plan = local_plan(tmp_path, healthy_spec, {
        # node01 reports the lost peer a moment after node02 failed, then keeps running until stopped
        "node01": f"import sys, time\ntime.sleep(1.5)\nsys.stdout.write({lost!r})\ntime.sleep(600)\n",
        "node02": f"import sys, time\ntime.sleep(1)\nsys.stdout.write({killed!r})\nsys.exit(1)\n",
    })
    sessions = {h.name: fleet_sessions.LocalSession(h.name) for h in plan.hosts}
    lines: list[str] = []
    started = time.monotonic()
    result = job.run_job(commands(plan), sessions, plan.log_dir, echo=lines.append)
    assert time.monotonic() - started < job.STOP_WAIT_S
    assert not result.ok
    cause = job.root_cause(result.nodes)
    assert cause.name == "node02" and cause.error == "Signal 9 (SIGKILL) received by PID 14026"
    by = {o.name: o for o in result.nodes}
    assert by["node01"].stopped_by_us and by["node01"].rc == node_guard.STOPPED_RC
    assert all(node_guard.job_pids(fleet_plan.job_marker(plan, h)) == [] for h in plan.hosts)
    assert any(ln.startswith("[node02] ") and "ChildFailedError" in ln for ln in lines)
    assert "[node01] guard: clean no process of job" in "\n".join(lines)
    log = (plan.log_dir / "node02.log").read_text()
    assert "Signal 9 (SIGKILL) received by PID 14026" in log


def test_a_node_that_stops_answering_is_lost_and_the_rest_stopped(tmp_path, healthy_spec, monkeypatch):
    monkeypatch.setattr(job, "LOST_AFTER_S", 1.5)
    monkeypatch.setattr(job, "HEARTBEAT_S", 0.3)  # the live node acknowledges well within that
    sleeping = {n: "import time; time.sleep(600)" for n in ("node01", "node02")}
    plan = local_plan(tmp_path, healthy_spec, sleeping)
    sessions = {h.name: fleet_sessions.LocalSession(h.name) for h in plan.hosts}
    started: dict[str, fleet_sessions.LocalRemote] = {}
    real_start = fleet_sessions.LocalSession.start

    def start(self, command):
        started[self.name] = real_start(self, command)
        if self.name == "node02":  # frozen as a node whose network went away: its guard never answers
            threading.Timer(1.0, os.kill, (started[self.name].proc.pid, signal.SIGSTOP)).start()
        return started[self.name]

    monkeypatch.setattr(fleet_sessions.LocalSession, "start", start)
    result = job.run_job(commands(plan), sessions, plan.log_dir, echo=lambda _line: None)
    by = {o.name: o for o in result.nodes}
    assert by["node02"].lost.startswith("no answer for 1.5 s"), result
    assert job.root_cause(result.nodes).name == "node02", result
    assert by["node01"].stopped_by_us and by["node01"].rc == node_guard.STOPPED_RC
    # back on the network, node02's guard finds its controller gone and stops its own job
    os.kill(started["node02"].proc.pid, signal.SIGCONT)
    started["node02"].proc.wait(timeout=30)
    assert all(node_guard.job_pids(fleet_plan.job_marker(plan, h)) == [] for h in plan.hosts)


def test_a_clean_job_ends_with_every_node(tmp_path, healthy_spec):
    plan = local_plan(tmp_path, healthy_spec, {"node01": "print('one')", "node02": "print('two')"})
    sessions = {h.name: fleet_sessions.LocalSession(h.name) for h in plan.hosts}
    lines: list[str] = []
    result = job.run_job(commands(plan), sessions, plan.log_dir, echo=lines.append)
    assert result.ok and "[node01] one" in lines and "[node02] two" in lines


def test_first_error_and_cause_on_real_torchrun_output():
    killed = (CAPTURES / "torchrun-worker-sigkilled.txt").read_text().splitlines()
    lost = (CAPTURES / "torchrun-gloo-peer-lost.txt").read_text().splitlines()
    assert job.first_error(killed) == "Signal 9 (SIGKILL) received by PID 14026"
    assert job.first_error(lost).startswith("[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party")
    # the node that lost its peer failed first here, and is still not the cause
    early = job.NodeOutcome("node01", 1, None, job.first_error(lost), False, 1.0, None)
    late = job.NodeOutcome("node02", 1, None, job.first_error(killed), False, 2.0, None)
    assert job.root_cause([early, late]).name == "node02"


def test_a_job_that_fails_alike_on_every_node_says_so(tmp_path, healthy_spec):
    """Every node lacks the same module (a node venv without ascend_ready): no node is the cause."""
    code = "import ascend_ready_not_installed_here"
    plan = local_plan(tmp_path, healthy_spec, {"node01": code, "node02": code})
    sessions = {h.name: fleet_sessions.LocalSession(h.name) for h in plan.hosts}
    result = job.run_job(commands(plan), sessions, plan.log_dir, echo=lambda line: None)
    assert not result.ok
    assert job.same_failure(result.nodes) == \
        "ModuleNotFoundError: No module named 'ascend_ready_not_installed_here'"
    one = job.NodeOutcome("node01", 1, None, "[rank0]: ValueError: x", False, 1.0, None)
    other = job.NodeOutcome("node02", 1, None, "[rank1]: ValueError: y", False, 2.0, None)
    assert job.same_failure([one, other]) is None and job.same_failure([one]) is None
    stopped_alike = job.NodeOutcome("node02", 1, None, "[rank1]: ValueError: x", True, 2.0, None)
    assert job.same_failure([one, stopped_alike]) == "ValueError: x"


# ----------------------------------------------------------------------------- NUMA


#: `grep -H . /sys/devices/system/node/node*/cpulist` as a 192-core, four-node Kunpeng 920 host lays its
#: NUMA nodes out (written here, 48 CPUs a node: no capture of it was at hand)
KUNPENG_NODES = "\n".join(f"/sys/devices/system/node/node{n}/cpulist:{48 * n}-{48 * n + 47}"
                          for n in range(4))


def test_each_rank_binds_to_its_npus_numa_node():
    topo = TOPO.read_text()
    bindings = numa.rank_bindings([0, 2, 4, 6], 4, topo, KUNPENG_NODES)
    # affinity 144-167 (NPU0), 96-119 (NPU2), 0-23 (NPU4), 48-71 (NPU6) on four 48-CPU nodes
    assert [b.node for b in bindings] == [3, 2, 0, 1]
    assert bindings[0].describe() == ("local rank 0 (NPU 0): NUMA node 3, CPUs 144-167 "
                                      "(numactl --cpunodebind=3 --membind=3)")
    assert numa.encode(bindings) == "3,2,0,1"
    flat = numa.rank_bindings([0], 1, topo, "/sys/devices/system/node/node0/cpulist:0-191")
    assert flat[0].node is None and "1 NUMA node(s)" in flat[0].reason
    assert "not available" in numa.rank_bindings([0], 1, None, KUNPENG_NODES)[0].reason


def test_the_worker_wrapper_binds_with_numactl_or_says_why_not(monkeypatch):
    monkeypatch.setattr(numa.shutil, "which", lambda _: "/usr/bin/numactl")
    argv, line = numa.worker_argv(["grpo"], {"LOCAL_RANK": "1", "RANK": "5", numa.NUMA_ENV: "3,0"})
    assert argv[:3] == ["/usr/bin/numactl", "--cpunodebind=0", "--membind=0"]
    assert argv[-4:] == ["-u", "-m", numa.CLI_MODULE, "grpo"]
    assert line == "numa: rank 5 (local 1): numactl --cpunodebind=0 --membind=0"
    argv, line = numa.worker_argv(["grpo"], {"LOCAL_RANK": "0", numa.NUMA_ENV: "-"})
    assert argv[0] == sys.executable and "not bound" in line
