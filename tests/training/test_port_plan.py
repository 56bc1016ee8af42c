"""Issue 28: the port and role plan. Listening sockets parsed from real `ss -tlnp` and /proc/net/tcp captures
(tests/training/real_sockets: this controller's own, with a python3 listening on 6379, 29500 and [::]:60001,
and an sshd-like listener on 2024 whose process the capturing user could not see), the plan's arithmetic,
the claims that keep two jobs apart, and the launch spec that carries the plan."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ascend_ready.checks.cluster.launchspec import LaunchSpec, LaunchSpecHost, load_launch_spec
from ascend_ready.checks.cluster.port_plan import (
    MAX_SLOTS,
    PortClaims,
    held_ports,
    make_plan,
    read_listeners,
    refuse_held,
)
from ascend_ready.checks.parsers.sockets import parse_listeners
from ascend_ready.errors import ConfigError, ParseError, TrainingError
from ascend_ready.training import job_ports, slurm_launch

REAL = Path(__file__).parent / "real_sockets"
SS = (REAL / "ss-tlnp_iproute2-6.1.txt").read_text()
PROC = ("/proc/net/tcp\n" + (REAL / "proc-net-tcp_linux.txt").read_text()
        + (REAL / "proc-net-tcp6_linux.txt").read_text())
DEVICES = {"node01": list(range(8)), "node02": list(range(8))}


def test_ss_and_proc_net_tcp_give_the_same_ports_and_ss_names_the_process():
    ss, proc = parse_listeners(SS), parse_listeners(PROC)
    ports = [2024, 6379, 29500, 60001]
    assert sorted(s.port for s in ss.sockets) == sorted(s.port for s in proc.sockets) == ports
    assert ss.holding(29500)[0].processes == ("python3 (pid 25376)",)
    assert ss.holding(60001)[0].address == "*" and proc.holding(60001)[0].address == "::"
    assert "may not see" in ss.holding(2024)[0].holder()
    assert proc.holding(6379)[0].address == "127.0.0.1" and "uid 0" in proc.holding(6379)[0].holder()
    # the established connection of the capture (state 01) is not a listener
    assert len(proc.sockets) == 4


@pytest.mark.parametrize(("edit", "line_no"), [
    (lambda t: t.replace("State  Recv-Q", "Stat   Recv-Q"), 1),  # not ss's header
    (lambda t: t.replace("0.0.0.0:29500", "0.0.0.0"), 4),  # the port cut off
    (lambda t: t.replace('users:(("python3",pid=25376,fd=3))', "users:(garbled)"), 4),
    (lambda t: "", None),  # nothing read is never "all free"
])
def test_garbled_ss_output_is_refused_naming_the_line(edit, line_no):
    with pytest.raises(ParseError) as exc:
        parse_listeners(edit(SS))
    assert exc.value.line_no == line_no


def test_a_cut_proc_table_is_refused():
    lines = PROC.splitlines(keepends=True)
    i = next(n for n, line in enumerate(lines) if ":733C " in line)
    lines[i] = lines[i][:lines[i].index(" 0A ") + 3] + "\n"  # the line cut after its state
    cut = "".join(lines)
    with pytest.raises(ParseError, match="not a line of /proc/net/tcp"):
        parse_listeners(cut)


def test_a_probe_that_printed_nothing_refuses_the_launch():
    with pytest.raises(TrainingError, match="node02: the listening ports could not be read"):
        read_listeners({"node01": (0, SS), "node02": (127, "")})


def test_slots_are_disjoint_for_every_port_and_slot_0_is_each_tools_default():
    plans = [make_plan(s, f"j{s}", ["actor_rollout_ref", "critic"], DEVICES, ray=True)
             for s in range(MAX_SLOTS)]
    zero = plans[0]
    assert zero.rendezvous_port == 29500 and zero.roles[0].hccl_if_base_port == 60000
    assert zero.npu_socket_port_range == "16666-16681" and zero.ray.gcs == 6379
    seen: dict[int, int] = {}
    for plan in plans:
        for port in plan.host_ports():
            assert port <= 65535 and seen.setdefault(port, plan.slot) == plan.slot, port
    ranges = [p.npu_socket_port_range for p in plans]
    assert len(set(ranges)) == len(ranges)
    # each device's host port is its role's base + the device id, per node
    assert zero.devices["node02"]["critic"]["7"] == zero.roles[1].hccl_if_base_port + 7 == 60039
    env = zero.env()  # verl's workers share one environment: every role's block, as a host port range
    assert env["HCCL_HOST_SOCKET_PORT_RANGE"] == "60000-60031,60032-60063"
    assert env["HCCL_IF_BASE_PORT"] == "60000" and env["HCCL_NPU_SOCKET_PORT_RANGE"] == "16666-16681"
    assert "--min-worker-port=20100" in zero.ray.start_flags(head=False)
    assert "--dashboard-port=20000" in zero.ray.start_flags(head=True)


def test_a_base_port_near_65535_is_refused_with_the_arithmetic():
    with pytest.raises(ConfigError) as exc:
        make_plan(0, "j", ["train"], {"node01": list(range(16))}, extra_env={"HCCL_IF_BASE_PORT": "65510"})
    assert ("HCCL_IF_BASE_PORT 65510 = 65510: 1 role(s) x 32 HCCL ports end at 65510 + 1 x 32 - 1 = 65541, "
            "and device 15's port is 65510 + 15 = 65525; a port is at most 65535") in str(exc.value)
    assert "at most 65504" in exc.value.hint
    with pytest.raises(ConfigError, match=r"65530: CANN takes HCCL_IF_BASE_PORT in \[1024, 65520\]"):
        make_plan(0, "j", ["train"], DEVICES, extra_env={"HCCL_IF_BASE_PORT": "65530"})
    # a slot moves the base: 65400 fits slot 0, not slot 1 (65400 + 128)
    make_plan(0, "j", ["train"], DEVICES, extra_env={"HCCL_IF_BASE_PORT": "65400"})
    with pytest.raises(ConfigError, match=r"HCCL_IF_BASE_PORT 65400 \+ slot 1 x 128 = 65528"):
        make_plan(1, "j", ["train"], DEVICES, extra_env={"HCCL_IF_BASE_PORT": "65400"})


def test_a_held_port_refuses_naming_node_port_and_process():
    plan = make_plan(0, "j", ["train"], DEVICES)
    # node01 as /proc/net/tcp shows it (no ss), its 29500 listener edited away; node02 as ss shows it
    listeners = {"node01": parse_listeners(PROC.replace(":733C ", ":0000 ")), "node02": parse_listeners(SS)}
    assert held_ports(plan, listeners) == [
        "node01: port 60001 (train's HCCL host port (HCCL_IF_BASE_PORT 60000 + 1)) is held by a process of "
        "uid 0 (socket inode 36389; ss is not installed to name it) on ::",
        "node02: port 29500 (the rendezvous port (MASTER_PORT)) is held by python3 (pid 25376) on 0.0.0.0",
        "node02: port 60001 (train's HCCL host port (HCCL_IF_BASE_PORT 60000 + 1)) is held by python3 (pid "
        "25376) on *"]
    with pytest.raises(TrainingError, match="nothing was started"):
        refuse_held(plan, listeners)
    # a base the user moved clear of them: free
    moved = make_plan(0, "j", ["train"], DEVICES, extra_env={"HCCL_IF_BASE_PORT": "55000"},
                      rendezvous_port=29600, pinned_rendezvous=True)
    assert held_ports(moved, listeners) == []


def test_two_jobs_on_shared_nodes_claim_disjoint_slots_and_release_them(tmp_path):
    claims = PortClaims(tmp_path)

    def make(job):
        return lambda slot: make_plan(slot, job, ["train"], DEVICES)

    a = claims.claim("job-a", DEVICES, make("job-a"), {})
    b = claims.claim("job-b", ["node02", "node03"], make("job-b"), {})
    c = claims.claim("job-c", ["node07"], make("job-c"), {})  # no node in common: slot 0 again
    assert (a.slot, b.slot, c.slot) == (0, 1, 0)
    assert not set(a.host_ports()) & set(b.host_ports())
    claims.release("job-a")
    assert claims.claim("job-d", ["node01"], make("job-d"), {}).slot == 0
    # a claim whose process is gone is stale: ignored and removed
    stale = json.loads((tmp_path / "job-b.json").read_text()) | {"pid": 2 ** 22 + 12345}
    (tmp_path / "job-b.json").write_text(json.dumps(stale))
    assert claims.claim("job-e", ["node02"], make("job-e"), {}).slot == 0  # job-d is on node01 only
    assert not (tmp_path / "job-b.json").exists()


def test_the_slot_a_claim_finds_held_by_a_stranger_is_refused_not_skipped(tmp_path):
    with pytest.raises(TrainingError, match=r"node02: port 29500 .* python3 \(pid 25376\)"):
        PortClaims(tmp_path).claim("j", DEVICES, lambda s: make_plan(s, "j", ["train"], DEVICES),
                                   {"node02": parse_listeners(SS)})
    assert not list(tmp_path.glob("*.json"))


def test_the_job_spec_carries_the_plan_and_an_older_spec_still_reads(tmp_path):
    hosts = {"node01": LaunchSpecHost(address="10.0.0.1", verdict="pass", devices=[0, 1])}
    old = LaunchSpec(schema_version=2, hosts=hosts)
    path = tmp_path / "v2.json"
    path.write_text(old.model_dump_json())
    assert "ports" not in json.loads(path.read_text()) or json.loads(path.read_text())["ports"] is None
    assert load_launch_spec(path).ports is None  # its digest (made without `ports`) still holds
    plan = make_plan(1, "grpo-x", ["train"], {"node01": [0, 1]})
    written = job_ports.write_job_spec(old, hosts, plan, tmp_path / "logs")
    spec = load_launch_spec(written)
    assert spec.schema_version == 4 and spec.ports == plan and spec.master_port == 29501


def test_roles_follow_the_engine_and_the_algorithm():
    from ascend_ready.training.config import load_config

    cfg = load_config("tiny")
    assert job_ports.roles_for("trl", "grpo", cfg) == ["train"]
    assert job_ports.roles_for("verl", "grpo", cfg) == ["actor_rollout_ref"]
    assert job_ports.roles_for("verl", "ppo", cfg) == ["actor_rollout_ref", "critic"]


def test_a_slurm_step_exports_its_jobs_hccl_ports_on_every_node():
    alloc = slurm_launch.Allocation("4242", ("n1", "n2"))
    env = slurm_launch._port_env(alloc, {})
    cmd = slurm_launch.node_command(alloc, "10.0.0.1", ["ascend-train", "grpo"], env)
    slot = 4242 % MAX_SLOTS
    i = cmd.index("env")
    assert cmd[i + 1:i + 4] == [f"HCCL_IF_BASE_PORT={60000 + 128 * slot}",
                                f"HCCL_NPU_SOCKET_PORT_RANGE={16666 + 16 * slot}-{16666 + 16 * slot + 15}",
                                "ascend-train"]
    assert os.path.basename(cmd[0]) == "srun"


def test_the_job_spec_records_npu_asd_config_and_a_version_3_spec_still_reads(tmp_path):
    from ascend_ready.checks.cluster.launchspec import asd_setting

    hosts = {"node01": LaunchSpecHost(address="10.0.0.1", verdict="pass", devices=[0, 1])}
    old = LaunchSpec(schema_version=3, hosts=hosts)
    (tmp_path / "v3.json").write_text(old.model_dump_json())
    assert load_launch_spec(tmp_path / "v3.json").asd is None  # its digest (made without `asd`) still holds
    plan = make_plan(1, "grpo-x", ["train"], {"node01": [0, 1]})
    on = asd_setting({"NPU_ASD_CONFIG": "enable:true,with_checksum:true,cooldown:5"}, "auto", "npu")
    assert (on.enabled, on.with_checksum, on.precision, on.warning) == (True, True, "bf16", None)
    spec = load_launch_spec(job_ports.write_job_spec(old, hosts, plan, tmp_path / "logs", asd=on))
    assert spec.schema_version == 4 and spec.asd == on


def test_a_bf16_or_fp32_job_without_npu_asd_config_is_warned_and_a_cpu_job_is_not():
    from ascend_ready.checks.cluster.launchspec import asd_setting

    off = asd_setting({}, "bf16", "npu")
    assert off.npu_asd_config is None and not off.enabled
    assert off.warning.startswith("this bf16 job runs without torch_npu's silent-data-corruption detection: "
                                  "NPU_ASD_CONFIG is not set; set it in the job's environment")
    disabled = asd_setting({"NPU_ASD_CONFIG": "enable:false"}, "fp32")
    assert "does not enable it ('enable:false')" in disabled.warning
    assert asd_setting({}, "auto", "cpu").warning is None  # no torch_npu in the job: nothing to enable
    assert "with_checksum checks BF16 matmuls only" in asd_setting(
        {"NPU_ASD_CONFIG": "enable:true,with_checksum:true"}, "fp32").warning
    assert "cannot read 'with_checksum'" in asd_setting({"NPU_ASD_CONFIG": "enable:true,with_checksum"},
                                                         "bf16").warning
