"""The tiny GRPO job through verl on a lent GPU machine: `ascend-train grpo -c tiny --engine verl`'s
overrides, run by verl's own trainer for two steps. Not run in CI (verl's training needs an accelerator).

    python bench/verl_tiny_device.py --out "$OUT"        # on the device machine, repository root

It needs, already installed in the interpreter that runs it: a CUDA torch, ray, vllm and verl (the device
machine reaches no package index, so carry a prepared environment). What is missing is reported in
$OUT/verl_tiny.json with "status": "missing", never guessed around; exit 0 on a finished run, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

NEEDS = ("torch", "ray", "vllm", "verl", "hydra", "pandas", "pyarrow")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/verl-tiny-device", help="where the run and verl_tiny.json go")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=480, help="seconds for verl's trainer")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"steps": args.steps}
    missing = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        result.update(status="missing", missing=missing,
                      hint="carry a venv with a CUDA torch, ray, vllm and `pip install --no-deps verl`")
        return _finish(out, result)
    import torch

    if not torch.cuda.is_available():
        result.update(status="missing", missing=["a visible CUDA device"])
        return _finish(out, result)
    from ascend_ready.training import verl_glue, verl_overrides
    from ascend_ready.training.config import load_config
    from ascend_ready.training.memory_plan import plan_for_config

    cfg = load_config("tiny", ["launch.device=cuda", f"max_steps={args.steps}", "eval_every=0"])
    hbm_gb = torch.cuda.get_device_properties(0).total_memory / 1e9
    plan, _, _ = plan_for_config(cfg, "grpo", engine="verl", hbm_gb=hbm_gb)
    run = out / "run"
    config_name, *overrides = verl_glue.prepare("grpo", cfg, run, plan=plan)
    verl_glue.ensure_tiny_model(cfg, run)
    # a one-GPU machine: small vLLM share, eager mode (no graph capture for a 2-layer model)
    extra = ["actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
             "actor_rollout_ref.rollout.enforce_eager=True", "trainer.val_before_train=False",
             "trainer.save_freq=-1"]
    replaced = {e.split("=", 1)[0] for e in extra}
    overrides = [o for o in overrides if o.split("=", 1)[0] not in replaced] + extra
    verl_overrides.validate_overrides(overrides)
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", config_name, *overrides]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        rc, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, log = 124, (exc.stdout or "") + (exc.stderr or "") if isinstance(exc.stdout, str) else ""
    (out / "verl_tiny.log").write_text(log)
    result.update(status="ok" if rc == 0 else "failed", rc=rc, wall_s=round(time.monotonic() - start, 1),
                  device=torch.cuda.get_device_name(0), log_tail=log[-3000:],
                  step_lines=[line for line in log.splitlines() if "step:" in line][-args.steps:])
    return _finish(out, result)


def _finish(out: Path, result: dict) -> int:
    (out / "verl_tiny.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "log_tail"}, indent=2))
    return 0 if result.get("status") == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
