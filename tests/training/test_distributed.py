"""Two CPU processes under torchrun (gloo) train PPO together: DDP replicas hold identical weights after each
step; FSDP2 full sharding (ZeRO-3) trains, checkpoints the gathered weights and resumes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
from ascend_ready.training.checkpoint import checkpoints, read_marker
from ascend_ready.training.metrics import read_metrics


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_ppo(out: Path, *overrides: str) -> subprocess.CompletedProcess:
    cli = Path(sys.executable).with_name("ascend-train")
    cmd = [str(cli), "ppo", "-c", "tiny", "-o", str(out), "--skip-preflight", "--nproc-per-node", "2",
           "--device", "cpu", "--master-port", str(free_port()), "save_every=1", "eval_max_examples=0",
           "launch.hccl.socket_ifname=lo", *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # Bounded: a wedged rendezvous or collective must fail the test, not hang the suite.
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_two_gloo_ranks_agree_on_weights(tmp_path):
    out = tmp_path / "run"
    proc = torchrun_ppo(out, "max_steps=2")
    assert "--nproc-per-node=2" in proc.stderr
    found = checkpoints(out / "checkpoints")
    assert [step for step, _ in found] == [1, 2]
    for _, path in found:
        marker = read_marker(path)
        assert marker["world_size"] == 2 and marker["sharded"] is False
        a, b = marker["param_checksums"]
        assert a == b
    # the weights moved: step 1 and step 2 differ
    assert read_marker(found[0][1])["param_checksums"][0] != read_marker(found[1][1])["param_checksums"][0]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["output_dir"] == str(out)


def test_fsdp_full_sharding_trains_and_resumes(tmp_path):
    out = tmp_path / "run"
    torchrun_ppo(out, "max_steps=1", "distributed.zero_stage=3")
    torchrun_ppo(out, "max_steps=2", "distributed.zero_stage=3", "--resume")
    found = checkpoints(out / "checkpoints")
    assert [step for step, _ in found] == [1, 2]
    assert all(read_marker(p)["sharded"] and read_marker(p)["world_size"] == 2 for _, p in found)
    steps = [r["step"] for r in read_metrics(out / "metrics.jsonl") if "loss/policy" in r]
    assert steps == [1, 2]
    # the final weights were gathered from both shards into one loadable model of the full size
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(out / "final"))
    built = AutoModelForCausalLM.from_pretrained(str(out / "tiny-model"))  # the unsharded start
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in built.parameters()) == 331136
