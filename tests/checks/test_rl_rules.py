"""Issue 28: vLLM-Ascend's RL launch rules (checks/rl_rules.yml) and the sleep-mode facts diagnose reads.
Log lines are the producers' own format strings filled in: verl 0.9.1 vllm_async_server.py
`logger.info(f"enable_sleep_mode: {...}")`, vLLM's executor `"It took %.6f seconds to fall asleep."` and the
worker's `"Sleep mode freed %.2f GiB memory, %.2f GiB memory is still in use."`."""

from __future__ import annotations

import pytest

from ascend_ready.checks import rl_rules
from ascend_ready.errors import ConfigError

SERVER = "(AsyncvLLMServer pid=8812) INFO 12-02 05:41:07 [vllm_async_server.py:299] "
VERL_SLEEPING = (f"{SERVER}enable_sleep_mode: True\n"
                 "(WorkerDict pid=8790) INFO 12-02 05:41:31 [executor_base.py:212] It took 1.254310 seconds "
                 "to fall asleep.\n")
VLLM_ASCEND_SLEEP = ("(EngineCore_DP0 pid=4411) INFO 12-02 05:42:10 [worker.py:181] Sleep mode freed 52.31 "
                     "GiB memory, 3.02 GiB memory is still in use.\n")
VERL_AWAKE = f"{SERVER}enable_sleep_mode: False\n"


def test_every_rule_cites_its_sources():
    data = rl_rules.rules()
    for rule in data["rules"]:
        assert rule["sources"] and all(s in data["sources"] for s in rule["sources"]), rule["id"]
    urls = " ".join(data["sources"].values())
    for ref in ("vllm-ascend/issues/13706", "vllm-ascend/pull/13748", "open-instruct/pull/1781",
                "ms-swift/issues/6636"):
        assert ref in urls


def test_whether_a_run_sleeps_its_rollout():
    assert rl_rules.sleeps_rollout("verl") is True  # verl 0.9.1 RolloutConfig.enable_sleep_mode = True
    assert rl_rules.sleeps_rollout("verl", enable_sleep_mode=False) is False
    assert rl_rules.sleeps_rollout("trl") is False
    assert rl_rules.log_sleeps_rollout(VERL_SLEEPING) is True
    assert rl_rules.log_sleeps_rollout(VLLM_ASCEND_SLEEP) is True
    assert rl_rules.log_sleeps_rollout(VERL_AWAKE + VLLM_ASCEND_SLEEP) is False
    assert rl_rules.log_sleeps_rollout("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB") is None


def test_the_oom_advice_differs_for_a_sleeping_rollout():
    sleeping, awake = rl_rules.oom_advice(True), rl_rules.oom_advice(False)
    assert "do NOT turn on expandable_segments" in sleeping and "gpu_memory_utilization" in sleeping
    assert "expandable_segments:True" in awake and "expandable_segments:True" not in sleeping
    assert rl_rules.oom_advice(None) == awake  # a log that does not say: the generic advice


IPS = {"node01": "10.0.0.11", "node02": "10.0.0.12"}
GOOD = {"node01": {"VLLM_HOST_IP": "10.0.0.11"}, "node02": {"VLLM_HOST_IP": "10.0.0.12"}}


def test_a_clean_environment_passes():
    assert rl_rules.lint_env({"VLLM_ASCEND_ENABLE_NZ": "0"}, GOOD, IPS, sleeps=True) == []


@pytest.mark.parametrize(("common", "per_node", "words"), [
    ({"VLLM_ASCEND_ENABLE_NZ": "1"}, GOOD,
     "every node: VLLM_ASCEND_ENABLE_NZ=1: the rollout sleeps, so it must be 0"),
    ({"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:256,expandable_segments:True"}, GOOD,
     "every node: PYTORCH_NPU_ALLOC_CONF=max_split_size_mb:256,expandable_segments:True: the rollout sleeps"),
    ({"VLLM_HOST_IP": "10.0.0.11"}, GOOD,
     "every node: VLLM_HOST_IP=10.0.0.11 is one node's address broadcast"),
    ({}, {"node01": {"VLLM_HOST_IP": "10.0.0.11"}, "node02": {"VLLM_HOST_IP": "10.0.0.11"}},
     "node02: VLLM_HOST_IP=10.0.0.11 is not this node's address 10.0.0.12"),
])
def test_each_broken_rule_is_named(common, per_node, words):
    found = rl_rules.lint_env(common, per_node, IPS, sleeps=True)
    assert any(words in line for line in found), found
    assert all("https://" in line for line in found)  # each names its source


def test_sleep_rules_do_not_apply_to_an_awake_rollout():
    env = {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}
    assert rl_rules.lint_env(env, GOOD, IPS, sleeps=False) == []


def test_verl_launch_refuses_a_broadcast_host_ip_and_sets_nz_off():
    from ascend_ready.training import ray_cluster, verl_glue
    from ascend_ready.training.config import load_config

    nodes = [ray_cluster.RayNode(name=n, ip=ip, nic="eth0", devices=(0, 1)) for n, ip in IPS.items()]
    cluster = ray_cluster.RayCluster(nodes=nodes)
    verl_glue._lint_rl_env(load_config("tiny"), cluster)
    assert cluster.env["VLLM_ASCEND_ENABLE_NZ"] == "0"
    assert cluster.node_env(nodes[1])["VLLM_HOST_IP"] == "10.0.0.12"
    bad = load_config("tiny", ["launch.hccl.extra_env.VLLM_HOST_IP=10.0.0.11"])
    with pytest.raises(ConfigError, match=r"VLLM_HOST_IP=10\.0\.0\.11 is one node.s address broadcast"):
        verl_glue._lint_rl_env(bad, ray_cluster.RayCluster(nodes=nodes))
