"""The memory plan against published figures, and `ascend-train plan` refusing what does not fit."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ascend_ready.errors import TrainingError
from ascend_ready.training import memory_plan as mp
from ascend_ready.training.cli import main
from ascend_ready.training.config import load_config

GIB = 1024**3


def within(value: float, published: float, pct: float = 10.0) -> bool:
    return abs(value - published) <= published * pct / 100


def test_zero_paper_figure_1_7_5b_model_on_64_devices():
    # Rajbhandari et al. 2020, Figure 1: Ψ = 7.5B, N_d = 64, K = 12: baseline 120 GB, P_os 31.4 GB,
    # P_os+g 16.6 GB, P_os+g+p 1.9 GB per device.
    figures = {0: 120, 1: 31.4, 2: 16.6, 3: 1.9}
    for stage, published_gb in figures.items():
        assert within(mp.zero_bytes_per_device(7.5e9, stage, 64) / 1e9, published_gb, 2), stage


def test_deepspeed_zero3_estimator_t5_3b_on_8_gpus():
    # DeepSpeed memory docs (docs/code-docs/source/memory.rst), estimate_zero3_model_states_mem_needs_all_live
    # for t5-3b on 1 node x 8 GPUs: "2851M total params, 32M largest layer params", offload none: 6.10GB
    # per GPU (GiB). DeepSpeed keeps fp32 gradient partitions (18 bytes/param) and gathers the largest
    # layer in 16-bit, with one prefetched (4 bytes/param of it).
    states = mp.model_state_bytes(2851e6, stage=3, shard=8, fp32_grads=True)
    per_gpu = sum(states.values()) + 2 * 2 * 32e6
    assert within(per_gpu / GIB, 6.10, 10)
    assert abs(per_gpu / GIB - 6.10) < 0.02


def test_vllm_paper_kv_cache_opt_13b_800_kb_per_token():
    # Kwon et al. 2023 (PagedAttention), §3: "2 (key and value vectors) x 5120 (hidden state size) x 40
    # (number of layers) x 2 (bytes per FP16) = 800 KB" per token for OPT-13B.
    opt13b = mp.ModelShape.from_hf_config({"hidden_size": 5120, "num_hidden_layers": 40,
                                           "num_attention_heads": 40, "vocab_size": 50272,
                                           "model_type": "opt", "hidden_act": "relu"}, name="opt-13b")
    assert opt13b.kv_bytes_per_token(2) == 819_200
    # Llama-2-7B (32 layers, 32 KV heads of 128): 0.5 MiB per token in fp16.
    llama = mp.ModelShape.from_hf_config({"hidden_size": 4096, "num_hidden_layers": 32,
                                          "num_attention_heads": 32, "vocab_size": 32000})
    assert llama.kv_bytes_per_token(2) == 512 * 1024
    assert llama.kv_bytes_per_token(2, tp=8) == 64 * 1024


def test_korthikanti_activation_formula_for_a_gpt_layer():
    # Korthikanti et al. 2022 eq. 2 and 5: sbh(34 + 5as/h), and sbh(34/t + 5as/(ht)) with TP+SP.
    gpt = mp.ModelShape(name="gpt", hidden_size=12288, num_layers=96, num_heads=96, num_kv_heads=96,
                        head_dim=128, intermediate_size=4 * 12288, vocab_size=51200, tied_embeddings=True,
                        gated_mlp=False)
    s, b, h, a = 2048, 1, 12288, 96
    assert gpt.activation_bytes_per_layer(s, b, flash=False) == s * b * h * (34 + 5 * a * s / h)
    assert gpt.activation_bytes_per_layer(s, b, tp=8, flash=False) == pytest.approx(
        s * b * h * (34 / 8 + 5 * a * s / (h * 8)))
    assert gpt.activation_bytes_per_layer(s, b, flash=True) == 34 * s * b * h


def test_parameter_counts_from_config_json_match_the_model_cards():
    qwen7b = mp.load_model_shape(mp.BUNDLED_MODEL_DIR / "model-qwen2.5-7b.json")
    assert within(qwen7b.total_params() / 1e9, 7.61, 1)
    moe = mp.load_model_shape(mp.BUNDLED_MODEL_DIR / "model-qwen3-235b-a22b.json")
    assert (moe.hidden_size, moe.num_layers, moe.num_heads, moe.num_kv_heads) == (4096, 94, 64, 4)
    assert (moe.num_experts, moe.experts_per_token, moe.moe_intermediate_size, moe.vocab_size) == (
        128, 8, 1536, 151936)
    assert within(moe.total_params() / 1e9, 235, 1)
    assert within(moe.active_params() / 1e9, 22, 2)
    assert within(mp.load_model_shape(mp.BUNDLED_MODEL_DIR / "model-qwen3-8b.json").total_params() / 1e9,
                  8.2, 1)


def test_235b_on_one_a2_node_is_refused_naming_the_phase_and_the_fleet_that_fits():
    cfg = load_config("grpo-qwen3-235b-a22b-a2")
    plan, model, work = mp.plan_for_config(cfg, "grpo", engine="verl", nodes=1)
    assert plan.device.hbm_mb == 65536 and plan.device.max_used_pct == 90
    assert not plan.fits and plan.layout.world == 8  # the config's 128-device layout, fitted to one node
    with pytest.raises(TrainingError) as exc:
        mp.check_plan(plan, model, work)
    assert "memory plan refused: Qwen3-235B-A22B needs" in exc.value.message
    assert "per device in the actor_update phase" in exc.value.message
    assert "smallest fleet that fits: 8 node(s)" in exc.value.hint
    # the bundled config's fleet (16 nodes, MindSpeed-RL's 128 NPUs) and its Megatron layout fit
    plan16, _, _ = mp.plan_for_config(cfg, "grpo", engine="verl")
    assert plan16.layout.nodes == 16 and plan16.fits
    assert (plan16.layout.strategy, plan16.layout.tp, plan16.layout.pp, plan16.layout.ep) == ("megatron", 4,
                                                                                              8, 8)
    assert (plan16.layout.rollout_tp, plan16.layout.rollout_ep) == (4, 32)


def test_bundled_7b_configs_fit_one_a2_node():
    for name, algo in [("grpo-qwen2.5-7b-a2", "grpo"), ("ppo-qwen3-lora", "ppo"), ("sft-qwen2.5-7b", "sft")]:
        plan, _, _ = mp.plan_for_config(load_config(name), algo)
        assert plan.fits, (name, mp.plan_as_dict(plan))


def test_offload_and_sharding_lower_the_model_states():
    model = mp.load_model_shape(mp.BUNDLED_MODEL_DIR / "model-qwen2.5-7b.json")
    device = mp.Device(name="A2", hbm_mb=65536, idle_baseline_mb=3400, devices_per_node=8)
    work = mp.Workload(algorithm="sft", micro_batch=1, seq_len=1024)
    layouts = [mp.Layout(nodes=1, devices_per_node=8, zero_stage=s, offload=o)
               for s, o in [(0, False), (2, False), (3, False), (3, True)]]
    peaks = [mp.plan_memory(model, layout, work, device).peak_bytes for layout in layouts]
    assert peaks == sorted(peaks, reverse=True)


def test_plan_cli_table_json_and_refusal():
    runner = CliRunner()
    ok = runner.invoke(main, ["plan", "-c", "grpo-qwen2.5-7b-a2"])
    assert ok.exit_code == 0, ok.output
    assert "fits: yes" in ok.stdout and "actor_optimizer" in ok.stdout
    refused = runner.invoke(main, ["plan", "-c", "grpo-qwen3-235b-a22b-a2", "--engine", "verl",
                                   "--nodes", "1", "--format", "json"])
    assert refused.exit_code == 1
    data = json.loads(refused.stdout)
    assert data["fits"] is False and data["smallest_fleet"]["layout"]["nodes"] == 8
    assert data["binding_phase"] == "actor_update"
    assert "error: memory plan refused" in refused.stderr and "in the actor_update phase" in refused.stderr
    assert "hint: smallest fleet that fits: 8 node(s)" in refused.stderr
    accepted = runner.invoke(main, ["plan", "-c", "grpo-qwen3-235b-a22b-a2", "--engine", "verl"])
    assert accepted.exit_code == 0, accepted.output
    assert "tp=4 pp=8 ep=8" in accepted.stdout and "fits: yes" in accepted.stdout


def test_launch_is_refused_before_any_node_is_touched(tmp_path):
    never = tmp_path / "ascend-check"  # does not exist: the preflight must not even be tried
    result = CliRunner().invoke(main, ["grpo", "-c", "grpo-qwen3-235b-a22b-a2", "--nnodes", "1",
                                       "--preflight-command", str(never), "-o", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert "memory plan refused" in result.stderr
    assert not (tmp_path / "run").exists()
