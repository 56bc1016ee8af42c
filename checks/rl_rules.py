"""The launch rules of a colocated RL job on vLLM-Ascend whose rollout sleeps (data: rl_rules.yml, each rule
with its sources), and the sleep-mode facts diagnose needs.

* `sleeps_rollout(engine, enable_sleep_mode)`: whether a run's rollout sleeps (verl's does by default).
* `log_sleeps_rollout(text)`: the same read from a run's log (True / False / None: the log does not say).
* `oom_advice(sleeps)`: the NPU-OOM fix for that run (never expandable_segments while the rollout sleeps).
* `lint_env(common, per_node, node_ips, sleeps)`: the job's environment judged before launch: one line per
  violation, naming the variable, the value, the node and the rule's source.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = ["lint_env", "log_sleeps_rollout", "oom_advice", "rules", "sleeps_rollout"]

RULES_PATH = Path(__file__).with_name("rl_rules.yml")


@functools.cache
def rules() -> dict[str, Any]:
    return yaml.safe_load(RULES_PATH.read_text())


def _rule(rule_id: str) -> dict[str, Any]:
    return next(r for r in rules()["rules"] if r["id"] == rule_id)


def _cite(rule: Mapping[str, Any]) -> str:
    src = rules()["sources"]
    return ", ".join(src[s] for s in rule["sources"])


def sleeps_rollout(engine: str, enable_sleep_mode: bool | None = None) -> bool:
    """Whether the run's rollout sleeps between rollouts: verl's vLLM rollout does unless
    rollout.enable_sleep_mode is False (verl 0.9.1's default is True); the trl engine runs no vLLM."""
    if engine not in rules()["sleeping_engines"]:
        return False
    return True if enable_sleep_mode is None else bool(enable_sleep_mode)


def log_sleeps_rollout(text: str) -> bool | None:
    """From a run's log: True when it shows a sleeping rollout, False when it shows sleep mode off, None
    when it says neither (then the advice must not assume)."""
    markers = rules()["log_markers"]
    if any(re.search(m["pattern"], text) for m in markers["awake"]):
        return False
    if any(re.search(m["pattern"], text) for m in markers["sleeping"]):
        return True
    return None


def oom_advice(sleeps: bool | None) -> str:
    """diagnose's fix for an NPU out-of-memory: a sleeping rollout never gets expandable_segments."""
    advice = rules()["oom_advice"]
    return " ".join(advice["sleeping"].split()) if sleeps else " ".join(advice["awake"].split())


def lint_env(common: Mapping[str, str], per_node: Mapping[str, Mapping[str, str]],
             node_ips: Mapping[str, str | None], *, sleeps: bool) -> list[str]:
    """The job's environment against the rules. `common`: what every node gets (a Ray runtime_env, the
    config's launch.hccl.extra_env); `per_node`: node -> what that node alone gets; `node_ips`: node -> its
    address. Only a sleeping rollout is judged by the sleep rules; VLLM_HOST_IP always."""
    out = []
    if sleeps:
        nz = _rule("nz-off")
        for where, env in [("every node", common), *per_node.items()]:
            value = env.get(nz["variable"])
            if value is not None and str(value).strip() != nz["want"]:
                out.append(f"{where}: {nz['variable']}={value}: the rollout sleeps, so it must be "
                           f"{nz['want']} ({' '.join(nz['why'].split()[:12])}...; {_cite(nz)})")
        ex = _rule("no-expandable-segments")
        for where, env in [("every node", common), *per_node.items()]:
            value = str(env.get(ex["variable"], ""))
            if re.search(r"expandable_segments\s*:\s*True", value):
                out.append(f"{where}: {ex['variable']}={value}: the rollout sleeps, and sleep mode frees "
                           f"nothing with expandable segments ({_cite(ex)})")
    ip = _rule("host-ip-per-node")
    var = ip["variable"]
    if var in common and len(node_ips) > 1:
        out.append(f"every node: {var}={common[var]} is one node's address broadcast to all "
                   f"{len(node_ips)} nodes; each node needs its own ({_cite(ip)})")
    for node, env in per_node.items():
        if var in env and node_ips.get(node) and env[var] != node_ips[node]:
            out.append(f"{node}: {var}={env[var]} is not this node's address {node_ips[node]} ({_cite(ip)})")
    seen: dict[str, str] = {}
    for node, env in per_node.items():
        if var in env and env[var] in seen:
            out.append(f"{node}: {var}={env[var]} is also {seen[env[var]]}'s ({_cite(ip)})")
        seen.setdefault(env.get(var, ""), node)
    return out


def rl_env(node_ip: str, *, sleeps: bool) -> dict[str, str]:
    """What the launch sets on one node for the rollout: its own VLLM_HOST_IP, and NZ off while it sleeps."""
    env = {"VLLM_HOST_IP": node_ip}
    if sleeps:
        env[_rule("nz-off")["variable"]] = _rule("nz-off")["want"]
    return env
