"""The Ray cluster for --engine verl: commands per node, a bounded join wait naming the node that did
not join, and a teardown that leaves no Ray process (also on Ctrl-C)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import pytest

from ascend_ready.checks.cluster.launchspec import LaunchSpecHost
from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.fleet.command import CommandResult
from ascend_ready.training import ray_cluster as rc

#: the Ray processes `ps -eo pid,args` showed on a simulated node running a Ray head (ray 2.60.0), cut short
HEAD_PROCESSES = """\
7 /work/main/.venv/lib/python3.11/site-packages/ray/core/src/ray/gcs/gcs_server --log_dir=/tmp/ray/s
39 /work/main/.venv/bin/python -u /work/main/.venv/lib/python3.11/site-packages/ray/autoscaler/_private/moni
40 /work/main/.venv/bin/python -m ray.util.client.server --address=10.79.0.171:6379 --host=10.79.0.171
41 /work/main/.venv/bin/python /work/main/.venv/lib/python3.11/site-packages/ray/dashboard/dashboard.py
71 /work/main/.venv/bin/python -u /work/main/.venv/lib/python3.11/site-packages/ray/_private/log_monitor.py
72 /work/main/.venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet --raylet_socket_name=/tmp
96 ray::DashboardAgent
99 ray::RuntimeEnvAgent
"""


class FakeNodes:
    """Nodes that run `ray start/stop` against one shared, simulated cluster state."""

    def __init__(self, ips: dict[str, str], never_joins: tuple[str, ...] = (), fails: tuple[str, ...] = (),
                 hangs: tuple[str, ...] = (), interrupt_on: str | None = None, sticky: tuple[str, ...] = ()):
        self.ips, self.never_joins, self.fails, self.hangs = ips, never_joins, fails, hangs
        self.sticky = sticky  # nodes where `ray stop` leaves processes behind
        self.interrupt_on = interrupt_on
        self.running: set[str] = set()
        self.calls: list[tuple[str, str, float]] = []

    def __call__(self, node: str, command: str, timeout_s: float) -> CommandResult:
        self.calls.append((node, command, timeout_s))
        if self.interrupt_on and self.interrupt_on in command:
            raise KeyboardInterrupt
        if "scripts stop" in command:  # then the leftover check (pgrep) in the same script
            if node not in self.sticky:
                self.running.discard(node)
            return CommandResult(0, HEAD_PROCESSES if node in self.running else "", "")
        if "scripts start" in command:
            if node in self.fails:
                return CommandResult(1, "", "ConnectionError: could not reach the GCS\n")
            self.running.add(node)
            if node in self.hangs:  # as over SSH: the short command gave up, the node's own `timeout` ends it
                return CommandResult(124, "", "rpc_client.h:153: Failed to connect to GCS at address "
                                              "10.0.0.1:6379 within 5 s.\n", True)
            return CommandResult(0, "Ray runtime started.\n", "")
        if "ray.nodes()" in command and "where" not in command:
            alive = [self.ips[n] for n in sorted(self.running) if n not in self.never_joins]
            return CommandResult(0, json.dumps(alive) + "\n", "")
        raise AssertionError(command)


def spec_hosts(n: int) -> dict[str, LaunchSpecHost]:
    """Hosts of a spec whose preflight judged every check training needs (the launch refuses others)."""
    from ascend_ready.checks.profile import TRAINING_CHECKS

    return {f"node0{i}": LaunchSpecHost(address=f"node0{i}", verdict="pass", devices=list(range(8)),
                                        nic="enp189s0f0", ip=f"10.0.0.{i}",
                                        judged_checks=list(TRAINING_CHECKS))
            for i in range(1, n + 1)}


def script_of(command: str) -> str:
    argv = shlex.split(command)
    assert argv[:2] == ["/bin/sh", "-c"], argv
    return argv[2]


def test_head_and_workers_start_on_the_spec_nic_with_npus_as_a_resource():
    hosts = spec_hosts(2)
    hosts["node02"] = hosts["node02"].model_copy(update={"devices": [0, 1, 2, 4, 5, 6, 7]})
    cluster = rc.cluster_from_spec(hosts, python={"node01": "/opt/venv/bin/python"}, num_cpus=1)
    head, worker = (script_of(cluster.start_command(n)) for n in cluster.nodes)
    assert "start --head --port=6379 --include-dashboard=false" in head
    assert "--node-ip-address=10.0.0.1" in head and "--num-cpus=1" in head
    assert "start --address=10.0.0.1:6379" in worker and "--node-ip-address=10.0.0.2" in worker
    assert "'--resources={\"NPU\": 8}'" in head and "'--resources={\"NPU\": 7}'" in worker
    assert "ASCEND_RT_VISIBLE_DEVICES=0,1,2,4,5,6,7; export" in worker
    assert head.splitlines()[-1].startswith("exec timeout -k 5 90 /opt/venv/bin/python -m ray.scripts")
    assert "VIRTUAL_ENV=/opt/venv; export VIRTUAL_ENV" in head and "VIRTUAL_ENV" not in worker  # python3
    for script in (head, worker):
        assert "HCCL_SOCKET_IFNAME=enp189s0f0; export" in script
        assert "GLOO_SOCKET_IFNAME=enp189s0f0; export" in script
        assert "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1; export" in script
        assert "--num-gpus=0" in script


def test_a_training_user_starts_ray_through_sudo():
    cluster = rc.cluster_from_spec(spec_hosts(1), run_as={"node01": "train"}, login_users={"node01": "ops"})
    argv = shlex.split(cluster.start_command(cluster.head))
    assert argv[:6] == ["sudo", "-n", "-H", "-u", "train", "--"] and argv[6:8] == ["/bin/sh", "-c"]


def test_the_start_script_runs_on_sh_with_the_values_quoted(tmp_path):
    # a fake interpreter that prints its argv: the script's quoting is what /bin/sh makes of it
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"; echo \"HCCL=$HCCL_SOCKET_IFNAME\"\n")
    fake.chmod(0o755)
    hosts = spec_hosts(1)
    hosts["node01"] = hosts["node01"].model_copy(update={"nic": "eth0;touch pwned"})
    cluster = rc.cluster_from_spec(hosts, python={"node01": str(fake)})
    run = subprocess.run(["/bin/sh", "-c", script_of(cluster.start_command(cluster.head))], cwd=tmp_path,
                         capture_output=True, text=True, timeout=30, check=False)
    assert run.returncode == 0, run.stderr
    assert '--resources={"NPU": 8}' in run.stdout.splitlines()
    assert "HCCL=eth0;touch pwned" in run.stdout and not (tmp_path / "pwned").exists()


def test_cluster_starts_waits_for_every_node_and_tears_down_clean():
    hosts = spec_hosts(3)
    fake = FakeNodes({n: h.ip for n, h in hosts.items()})
    cluster = rc.cluster_from_spec(hosts)
    assert rc.start(cluster, fake, log=lambda m: None) == ["node01", "node02", "node03"]
    assert fake.calls[0][0] == "node01"  # the head first
    assert rc.stop(cluster, fake, log=lambda m: None) == {}
    assert fake.running == set()


def test_a_node_that_does_not_join_is_named_and_the_cluster_is_torn_down():
    hosts = spec_hosts(3)
    fake = FakeNodes({n: h.ip for n, h in hosts.items()}, never_joins=("node03",))
    with pytest.raises(TrainingError) as exc:
        rc.start(rc.cluster_from_spec(hosts), fake, join_timeout_s=10, log=lambda m: None)
    assert "node03 did not join 10.0.0.1:6379 within 10 s" in exc.value.message
    status = next(c for c in fake.calls if "ray.nodes()" in c[1])
    waited = float(re.search(r"time\.monotonic\(\) \+ ([\d.e+-]+)", status[1]).group(1))
    assert 9 < waited <= 10 and status[2] <= 10 + 70  # one bounded wait on the head
    assert fake.running == set()  # no Ray process left anywhere


def test_a_worker_whose_start_hangs_is_named_within_the_bound_and_stopped_too():
    hosts = spec_hosts(2)
    fake = FakeNodes({n: h.ip for n, h in hosts.items()}, hangs=("node02",))
    with pytest.raises(TrainingError) as exc:
        rc.start(rc.cluster_from_spec(hosts), fake, join_timeout_s=15, log=lambda m: None)
    assert re.search(r"node02 did not join 10\.0\.0\.1:6379 within 15 s: its `ray start` did not finish "
                     r"\(.*Failed to connect to GCS", exc.value.message)
    start = next(c for c in fake.calls if c[0] == "node02" and "scripts start" in c[1])
    assert "exec timeout -k 5 15 " in start[1]  # the node's own bound
    assert start[2] <= 15 + 10
    assert fake.running == set()  # the node that hung is stopped as well


def test_a_failing_ray_start_is_named_and_what_started_is_stopped():
    hosts = spec_hosts(2)
    fake = FakeNodes({n: h.ip for n, h in hosts.items()}, fails=("node02",))
    with pytest.raises(TrainingError, match=r"ray start failed on node02 .*could not reach the GCS"):
        rc.start(rc.cluster_from_spec(hosts), fake, log=lambda m: None)
    assert fake.running == set()


def test_ctrl_c_while_waiting_for_the_join_stops_every_node():
    hosts = spec_hosts(2)
    fake = FakeNodes({n: h.ip for n, h in hosts.items()}, interrupt_on="ray.nodes()")
    with pytest.raises(KeyboardInterrupt):
        rc.start(rc.cluster_from_spec(hosts), fake, log=lambda m: None)
    assert fake.running == set()
    assert [c[0] for c in fake.calls if "scripts stop" in c[1]] == ["node02", "node01"]  # workers first


def test_leftover_ray_processes_are_reported_and_an_unreadable_node_is_never_clean():
    cluster = rc.cluster_from_spec(spec_hosts(3))
    fake = FakeNodes({n: h.ip for n, h in spec_hosts(3).items()}, sticky=("node01",))
    fake.running = {"node01", "node02", "node03"}
    messages = []

    def run(node, command, timeout_s):
        if node == "node03":
            return CommandResult(127, "", "sh: 1: pgrep: not found\n")
        return fake(node, command, timeout_s)

    left = rc.stop(cluster, run, log=messages.append)
    assert len(left["node01"]) == 8 and "node02" not in left
    assert left["node03"][0].startswith("could not check (exit 127)")
    assert "processes left after teardown" in messages[-1]
    head_stop = script_of(next(c[1] for c in fake.calls if c[0] == "node01"))
    assert f"pkill -KILL -f '[a]{rc.PROBE_MARK[1:]}'" in head_stop  # an interrupted check's driver too


def test_the_leftover_pattern_finds_every_ray_process_but_not_the_shell_that_runs_it():
    pattern = re.compile(rc.RAY_PROCESS_PATTERN)
    assert all(pattern.search(line) for line in HEAD_PROCESSES.splitlines())
    assert not pattern.search(f"/bin/sh -c {rc.RayCluster.LEFTOVER_COMMAND}")
    assert not pattern.search("sshd: root@notty") and not pattern.search("tail -f /var/log/syslog")


def test_the_check_names_a_node_without_its_npus():
    cluster = rc.cluster_from_spec(spec_hosts(2))
    rows = [{"ip": "10.0.0.1", "hostname": "node01", "npu_resource": 8, "npu_ids": list(range(8))},
            {"ip": "10.0.0.2", "hostname": "node02", "npu_resource": 4, "npu_ids": [0, 1, 2, 3]}]
    with pytest.raises(TrainingError, match=r"node02: Ray has 4 NPU\(s\) \[0, 1, 2, 3\], the launch spec 8"):
        rc.check(cluster, lambda node, cmd, t: CommandResult(0, json.dumps(rows) + "\n", ""))
    with pytest.raises(TrainingError, match="did not answer"):
        rc.check(cluster, lambda node, cmd, t: CommandResult(
            1, "", "ray.exceptions.GetTimeoutError: Get timed out\n"))
    rows[1] = {**rows[1], "npu_resource": 8, "npu_ids": list(range(8))}
    found = rc.check(cluster, lambda node, cmd, t: CommandResult(0, json.dumps(rows), ""))
    assert [r["node"] for r in found] == ["node01", "node02"]


def test_a_spec_host_without_the_nic_ip_is_refused():
    hosts = spec_hosts(1)
    hosts["node01"] = hosts["node01"].model_copy(update={"ip": None})
    with pytest.raises(ConfigError, match="node01: the launch spec has no IP"):
        rc.cluster_from_spec(hosts)


def test_dry_run_prints_each_nodes_ray_command_and_the_driver_without_touching_a_node(tmp_path):
    pytest.importorskip("hydra", reason="needs the [verl] extra")
    pytest.importorskip("pandas", reason="needs the [verl] extra")
    from click.testing import CliRunner

    from ascend_ready.checks.cluster.launchspec import LaunchSpec
    from ascend_ready.training import verl_glue
    from ascend_ready.training.cli import main

    try:
        verl_glue.verl_dir()
    except ConfigError:
        pytest.skip("verl is not installed (pip install --no-deps verl==0.9.1)")
    hosts = spec_hosts(2)
    hosts["node02"] = hosts["node02"].model_copy(update={"devices": [0, 1, 2, 3, 4, 5, 6],
                                                         "python": "/opt/venv/bin/python"})
    spec = tmp_path / "spec.json"
    spec.write_text(LaunchSpec(hosts=hosts, master_addr="10.0.0.1").model_dump_json())
    result = CliRunner().invoke(main, ["grpo", "-c", "tiny", "--engine", "verl", "--launch-spec", str(spec),
                                       "-o", str(tmp_path / "run"), "--dry-run", "max_steps=2"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "ray cluster: 2 node(s), head node01 at 10.0.0.1:6379" in out
    assert "== node01: head, NIC enp189s0f0 10.0.0.1, 8 NPU(s)" in out
    assert "== node02: worker, NIC enp189s0f0 10.0.0.2, 7 NPU(s)" in out
    assert "/opt/venv/bin/python -m ray.scripts.scripts start --address=10.0.0.1:6379" in out
    driver = out.split("== verl's trainer: the driver on node01, RAY_ADDRESS=10.0.0.1:6379\n", 1)[1]
    assert "RAY_ADDRESS=10.0.0.1:6379; export RAY_ADDRESS" in driver
    assert "-m verl.trainer.main_ppo --config-name=ppo_trainer algorithm.adv_estimator=grpo" in driver
    assert "trainer.nnodes=2 trainer.n_gpus_per_node=7" in driver  # the spec's fleet, its smallest node
    assert f"data.train_files={tmp_path / 'run'}/verl-data/train.parquet" in driver


def test_a_node_without_the_controllers_ray_is_refused_before_anything_starts():
    from importlib.metadata import version

    from ascend_ready.training.verl_glue import _refuse_without_ray

    pytest.importorskip("ray", reason="needs the [verl] extra")

    here = version("ray")
    python = {"node01": "/opt/v/bin/python", "node02": "/opt/v/bin/python", "node03": "/usr/bin/python3"}
    _refuse_without_ray({"node01": (here, []), "node02": (here, ["vllm"])}, python)  # the trainer's problem
    with pytest.raises(ConfigError) as exc:
        _refuse_without_ray({"node01": (here, []), "node02": ("2.9.0", []), "node03": (None, [])}, python)
    assert f"node02: ray 2.9.0, not {here}; node03: no ray in /usr/bin/python3" in exc.value.message
    assert f"pip install 'ray=={here}'" in exc.value.hint


def test_a_fleet_verl_does_not_support_is_refused_from_the_specs_fingerprints():
    """The launch spec's fingerprints, as the preflight writes them (launchspec.fingerprint_hosts:
    "(not installed)" for what is absent), go through the engine gate before Ray starts."""
    from ascend_ready.errors import MatrixError
    from ascend_ready.provision.engines import check_engine_fleet
    from ascend_ready.provision.matrix import load_matrix
    from ascend_ready.provision.resolver import resolve
    from ascend_ready.training.verl_glue import _versions

    want = resolve(load_matrix(), engine="verl")
    good = {"driver": "24.1.rc3", "cann": want.cann, "torch": want.torch, "torch_npu": want.torch_npu}
    fleet = {"node01": good, "node02": {**good, "torch_npu": "(not installed)"},
             "node03": {**good, "torch": "1.11.0"}}
    assert check_engine_fleet("verl", {"node01": _versions(good)})
    with pytest.raises(MatrixError) as exc:
        check_engine_fleet("verl", {n: _versions(fp) for n, fp in fleet.items()})
    assert "node02: torch_npu not read" in exc.value.message
    assert f"node03: CANN {want.cann}, torch 1.11.0" in exc.value.message
    assert "node01" not in exc.value.message
