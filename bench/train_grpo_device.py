"""GPU/NPU: tokens/s and MFU of our GRPO vs plain TRL GRPOTrainer on a Qwen2.5-0.5B-architecture model with
random weights (nothing downloaded). One prepared run: python bench/train_grpo_device.py --peak-tflops 989

MFU counts 2N FLOPs per token at rollout and 6N per trained token (N = parameters), over the peak bf16 dense
TFLOPs of one device (H100/H200 SXM: 989; Ascend 910B: 313 (vendor figure, check your SKU)).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from ascend_ready.runtime import require, setup_runtime
from ascend_ready.training import grpo
from ascend_ready.training.config import load_config
from ascend_ready.training.models import build_tiny_tokenizer, set_generation_ids

QWEN25_05B = dict(
    hidden_size=896,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    intermediate_size=4864,
    vocab_size=151936,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
)


def build_model(directory: Path) -> Path:
    transformers = require("transformers")
    tok = build_tiny_tokenizer()
    cfg = transformers.Qwen2Config(**QWEN25_05B, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    set_generation_ids(model, tok)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


def run(label: str, train, steps: int, n_params: int, peak: float) -> dict:
    t0 = time.perf_counter()
    trainer = train()
    wall = time.perf_counter() - t0
    tokens = trainer.state.num_input_tokens_seen
    # Approximation: every token (prompt or completion) costs one forward at rollout and a training pass.
    flops = 8 * n_params * tokens
    return {
        "label": label,
        "s_per_step": wall / steps,
        "tokens_per_s": tokens / wall,
        "mfu": flops / wall / (peak * 1e12),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--completion-length", type=int, default=256)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = build_model(Path(tmp) / "qwen2.5-0.5b-random")
        over = [
            f"max_steps={args.steps}",
            f"save_every={args.steps}",
            "eval_every=0",
            "eval_max_examples=0",
            "model.tiny=null",
            f"model.path={path}",
            "precision=auto",
            "launch.device=auto",
            "batch_size=16",
            f"generation.max_completion_length={args.completion_length}",
        ]
        cfg = load_config("tiny", over)
        rt = setup_runtime("auto", "auto")

        def plain():
            trainer, _, _ = grpo.build_trainer(cfg, rt, Path(tmp) / "plain")
            trainer.train()
            return trainer

        def ours():
            holder = {}

            class Keep(require("transformers").TrainerCallback):
                def on_train_end(self, args, state, control, **kw):
                    holder["state"] = state

            grpo.train(cfg, rt, Path(tmp) / "ours", extra_callbacks=[Keep()])
            return type("T", (), {"state": holder["state"]})

        transformers = require("transformers")
        n_params = transformers.AutoModelForCausalLM.from_pretrained(str(path)).num_parameters()
        results = [
            run("plain_trl", plain, args.steps, n_params, args.peak_tflops),
            run("ours", ours, args.steps, n_params, args.peak_tflops),
        ]
    print(
        json.dumps(
            {
                "device": rt.device_type,
                "params": n_params,
                "results": results,
                "ours_over_trl_s_per_step": results[1]["s_per_step"] / results[0]["s_per_step"],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
