"""What the bundled trainers learn against a reference, on the tiny task: held-out accuracy curves over seeds.

    OMP_NUM_THREADS=1 .venv/bin/python bench/learning_parity.py --seeds 0 1 2 --out bench/results/learning

GRPO: `ascend-train grpo` (grpo.train: our config, callbacks, metrics) against plain TRL `GRPOTrainer` built
here from TRL's own API (a GRPOConfig written out field by field, TRL's default data loading, a bare
TrainerCallback for the evaluation) on the same model, data, reward functions, seed and step budget.
PPO: `ascend-train ppo` against `reference_ppo` below, a separate, loop-shaped implementation of TRL 1.12's
PPOTrainer maths (the same contract tests/training/test_ppo_math.py checks ours against: k1 KL penalty per
token with the score on the last token, missing-EOS penalty, GAE, whitened advantages, clipped surrogate,
0.5 x max-of-clipped value loss, value head on the policy's trunk), fed the same prompts step for step
(`prompt_order`). Every variant is scored by the same
held-out evaluation (training/evaluate.py: greedy decoding, numeric answer match) every `--eval-every` steps.

Writes curves.json, curves.png and summary.md under --out; the verdict per algorithm is whether our mean final
accuracy lies within the reference's range over the seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from ascend_ready.fleet.devices import setup_runtime
from ascend_ready.training import grpo, ppo
from ascend_ready.training.config import TrainConfig, load_config
from ascend_ready.training.data import load_prompts
from ascend_ready.training.evaluate import accuracy, generate
from ascend_ready.training.metrics import read_metrics
from ascend_ready.training.models import build_tiny_model, dtype_kwargs, load_tokenizer
from ascend_ready.training.rewards import answer_match, format_reward
from ascend_ready.training.trl_glue import trl_config


def eval_rows(cfg: TrainConfig) -> list[dict]:
    return load_prompts(cfg.data, cfg.seed).eval[: cfg.eval_max_examples]


def curve_from_metrics(out: Path) -> dict[int, float]:
    records = read_metrics(out / "metrics.jsonl")
    return {r["step"]: r["eval/accuracy"] for r in records if "eval/accuracy" in r}


def ours_grpo(cfg: TrainConfig, rt, out: Path) -> dict[int, float]:
    grpo.train(cfg, rt, out)
    return curve_from_metrics(out)


def ours_ppo(cfg: TrainConfig, rt, out: Path) -> dict[int, float]:
    ppo.train(cfg, rt, out)
    return curve_from_metrics(out)


def plain_trl_grpo(cfg: TrainConfig, rt, out: Path) -> dict[int, float]:
    """TRL's GRPOTrainer as its documentation shows it, on the same model files, rows, rewards and seed."""
    import datasets
    import trl
    from transformers import TrainerCallback

    model_path = build_tiny_model(out / "model", cfg.model.tiny, seed=cfg.seed)
    tokenizer = load_tokenizer(model_path)
    rows = load_prompts(cfg.data, cfg.seed)
    held_out = rows.eval[: cfg.eval_max_examples]
    g, gen, o = cfg.grpo, cfg.generation, cfg.optim
    # trl_config: only the field values older TRL spells differently (scale_rewards a bool before 0.22,
    # loss_type dapo -> bnpo before 0.20); on TRL 1.16 it passes every field through unchanged.
    args = trl_config(
        trl.GRPOConfig, output_dir=str(out / "trl"), max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size,
        learning_rate=o.learning_rate, weight_decay=o.weight_decay, lr_scheduler_type=o.lr_scheduler,
        warmup_steps=o.warmup_steps, max_grad_norm=o.max_grad_norm, seed=cfg.seed, data_seed=cfg.seed,
        num_generations=g.num_generations, beta=g.beta, epsilon=g.epsilon, loss_type=g.loss_type,
        scale_rewards=g.scale_rewards, num_iterations=g.num_iterations,
        max_completion_length=gen.max_completion_length, temperature=gen.temperature, top_p=gen.top_p,
        reward_weights=list(cfg.reward.weights), use_cpu=True, report_to="none", save_strategy="no",
        logging_steps=10, disable_tqdm=True, dataloader_num_workers=0,
    )
    curve: dict[int, float] = {}

    class HeldOut(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kw):
            curve[0] = accuracy(model, tokenizer, held_out, gen.max_completion_length)

        def on_step_end(self, args, state, control, model=None, **kw):
            if state.global_step % cfg.eval_every == 0 or state.global_step == cfg.max_steps:
                curve[state.global_step] = accuracy(model, tokenizer, held_out, gen.max_completion_length)

    trainer = trl.GRPOTrainer(
        model=str(model_path), reward_funcs=[answer_match, format_reward], args=args,
        train_dataset=datasets.Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]}
                                                  for r in rows.train]),
        processing_class=tokenizer, callbacks=[HeldOut()],
    )
    trainer.model.generation_config.pad_token_id = tokenizer.pad_token_id
    trainer.model.generation_config.eos_token_id = tokenizer.eos_token_id
    trainer.train()
    return curve


# ------------------------------------------------------------------------------------------ reference PPO

INVALID_LOGPROB = 1.0  # TRL's PPOTrainer fills pad slots' log-probs with this


def prompt_order(n_rows: int, step: int, batch_size: int, seed: int) -> list[int]:
    """The rows a one-rank run trains on at `step` (0-based): a pure function of (seed, step), one seeded
    shuffle per pass over the rows, the order `ascend-train ppo` uses: both sides see the same prompts."""
    epoch, offset = divmod(step, max(1, n_rows // batch_size))
    perm = torch.randperm(n_rows, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    return [perm[(offset * batch_size + i) % n_rows] for i in range(batch_size)]


def reference_ppo(cfg: TrainConfig, rt, out: Path, trace: list[float] | None = None,
                  temperature_eps: float = 1e-7) -> dict[int, float]:
    """TRL 1.12 PPOTrainer's update, written as one loop (no maths shared with training/ppo.py).

    `trace` collects each step's mean score. `temperature_eps` is what TRL adds to the temperature before
    dividing the logits by it; with 0, the same seed gives ours and this loop the same samples step for step
    (the lockstep test in tests/training/test_learning.py), so any difference in the maths shows.
    """
    from transformers import AutoModelForCausalLM

    p, gen = cfg.ppo, cfg.generation
    torch.manual_seed(cfg.seed)
    model_path = build_tiny_model(out / "model", cfg.model.tiny, seed=cfg.seed)
    tok = load_tokenizer(model_path)
    policy = AutoModelForCausalLM.from_pretrained(str(model_path), **dtype_kwargs(torch.float32))
    ref = AutoModelForCausalLM.from_pretrained(str(model_path), **dtype_kwargs(torch.float32)).eval()
    ref.requires_grad_(False)
    for m in (policy, ref):
        m.generation_config.pad_token_id = tok.pad_token_id
        m.generation_config.eos_token_id = tok.eos_token_id
    hidden = policy.config.hidden_size
    v_head = torch.nn.Linear(hidden, 1)
    torch.nn.init.normal_(v_head.weight, std=1 / (hidden + 1) ** 0.5)
    torch.nn.init.zeros_(v_head.bias)
    params = list(policy.parameters()) + list(v_head.parameters())
    opt = torch.optim.AdamW(params, lr=cfg.optim.learning_rate, weight_decay=cfg.optim.weight_decay)
    rows = load_prompts(cfg.data, cfg.seed)
    held_out = rows.eval[: cfg.eval_max_examples]
    curve = {0: accuracy(policy, tok, held_out, gen.max_completion_length)}
    for step in range(1, cfg.max_steps + 1):
        order = prompt_order(len(rows.train), step - 1, cfg.batch_size, cfg.seed)
        batch_rows = [rows.train[i] for i in order]
        prompts = [r["prompt"] for r in batch_rows]
        enc, resp, _ = generate(policy, tok, prompts, gen.max_completion_length, do_sample=True,
                                temperature=gen.temperature, top_p=gen.top_p)
        # truncate_response: everything after the first stop token (EOS, or a pad sampled mid-response) is pad
        stop = (resp == tok.eos_token_id) | (resp == tok.pad_token_id)
        length = resp.shape[1]
        first = torch.where(stop, torch.arange(length), length).min(1).values
        pos = torch.arange(length).unsqueeze(0)
        resp = resp.masked_fill(pos > first.unsqueeze(1), tok.pad_token_id)
        padding = pos > first.unsqueeze(1)  # True where no token of the response is
        contain_eos = (first < length) & (resp.gather(1, first.clamp(max=length - 1)[:, None])[:, 0]
                                          == tok.eos_token_id)
        texts = tok.batch_decode(resp, skip_special_tokens=True)
        answers = [r["answer"] for r in batch_rows]
        w = cfg.reward.weights or [1.0, 1.0]
        scores = torch.tensor([w[0] * a + w[1] * f for a, f in zip(
            answer_match(prompts, texts, answer=answers), format_reward(prompts, texts), strict=True)])
        if trace is not None:
            trace.append(scores.mean().item())
        if p.missing_eos_penalty is not None:
            scores[~contain_eos] -= p.missing_eos_penalty
        plen = enc["input_ids"].shape[1]
        ids = torch.cat([enc["input_ids"], resp], 1)
        att = torch.cat([enc["attention_mask"], (~padding).long()], 1)
        pids = (att.cumsum(1) - 1).clamp(min=0)

        def forward(model, ids=ids, att=att, pids=pids, values=False, plen=plen):
            o = model(input_ids=ids, attention_mask=att, position_ids=pids, output_hidden_states=values)
            logits = o.logits[:, plen - 1:-1] / (gen.temperature + temperature_eps)
            lp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, plen:, None])[..., 0]
            return lp, (v_head(o.hidden_states[-1])[:, plen - 1:-1, 0] if values else None)

        with torch.no_grad():
            logprobs, values = forward(policy, values=True)
            ref_logprobs, _ = forward(ref)
            logprobs = logprobs.masked_fill(padding, INVALID_LOGPROB)
            ref_logprobs = ref_logprobs.masked_fill(padding, INVALID_LOGPROB)
            values = values.masked_fill(padding, 0)
            kl = logprobs - ref_logprobs
            rewards = -p.kl_coef * kl
            last = first.clamp(max=length - 1)  # the index of the last real token
            rewards[torch.arange(len(scores)), last] += scores
            rewards = rewards.masked_fill(padding, 0)
            adv = torch.zeros_like(rewards)
            lastgaelam = torch.zeros(len(scores))
            for t in reversed(range(length)):
                nextv = values[:, t + 1] if t < length - 1 else torch.zeros(len(scores))
                delta = rewards[:, t] + p.gamma * nextv - values[:, t]
                lastgaelam = delta + p.gamma * p.lam * lastgaelam
                adv[:, t] = lastgaelam
            returns = adv + values
            valid = ~padding
            mean = adv[valid].mean()
            var = ((adv[valid] - mean) ** 2).mean()
            adv = ((adv - mean) * torch.rsqrt(var + 1e-8)).masked_fill(padding, 0)
        mb = cfg.batch_size // p.num_minibatches
        for _ in range(p.ppo_epochs):
            for idx in torch.randperm(cfg.batch_size).split(mb):
                new_lp, vpred = forward(policy, ids[idx], att[idx], pids[idx], values=True)
                new_lp = new_lp.masked_fill(padding[idx], INVALID_LOGPROB)
                v_ok = valid[idx]
                vclipped = values[idx] + torch.clamp(vpred - values[idx], -p.clip_range_value,
                                                     p.clip_range_value)
                vf = 0.5 * torch.max((vpred - returns[idx]) ** 2, (vclipped - returns[idx]) ** 2)[v_ok].mean()
                ratio = torch.exp(new_lp - logprobs[idx])
                clipped = torch.clamp(ratio, 1 - p.clip_range, 1 + p.clip_range)
                pg = torch.max(-adv[idx] * ratio, -adv[idx] * clipped)[v_ok].mean()
                loss = pg + p.vf_coef * vf
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, cfg.optim.max_grad_norm)
                opt.step()
        if step % cfg.eval_every == 0 or step == cfg.max_steps:
            curve[step] = accuracy(policy, tok, held_out, gen.max_completion_length)
    return curve


VARIANTS = {
    "grpo": {"ours": ours_grpo, "reference": plain_trl_grpo},
    "ppo": {"ours": ours_ppo, "reference": reference_ppo},
}
LABELS = {("grpo", "ours"): "ascend-train grpo", ("grpo", "reference"): "plain TRL GRPOTrainer",
          ("ppo", "ours"): "ascend-train ppo", ("ppo", "reference"): "reference PPO (TRL 1.12 maths)"}


def _last3(curve: dict[int, float]) -> float:
    """Mean of the last three evaluations: less at the mercy of one greedy pass than the final point."""
    steps = sorted(curve)[-3:]
    return statistics.mean(curve[s] for s in steps)


def summarise(results: dict) -> tuple[str, dict]:
    """Markdown table of final accuracy (mean, min-max, std over seeds) and the verdict per algorithm."""
    lines = ["| trainer | final held-out accuracy: mean | min-max | std | per seed | last 3 evals |",
             "|---|---|---|---|---|---|"]
    verdict = {}
    for algo, sides in results.items():
        finals = {side: [c[max(c)] for c in curves.values()] for side, curves in sides.items()}
        for side, vals in finals.items():
            std = statistics.pstdev(vals) if len(vals) > 1 else 0.0
            late = [_last3(c) for c in sides[side].values()]
            lines.append(f"| {LABELS[algo, side]} | {statistics.mean(vals):.3f} | "
                         f"{min(vals):.3f}-{max(vals):.3f} | {std:.3f} | "
                         f"{', '.join(f'{v:.3f}' for v in vals)} | {statistics.mean(late):.3f} "
                         f"({', '.join(f'{v:.3f}' for v in late)}) |")
        if {"ours", "reference"} <= set(finals):
            ours, ref = statistics.mean(finals["ours"]), finals["reference"]
            verdict[algo] = {"gap": ours - statistics.mean(ref), "within": min(ref) <= ours <= max(ref)}
    lines.append("")
    lines += [f"- {algo}: ours - reference = {v['gap']:+.3f}; our mean "
              f"{'lies' if v['within'] else 'does NOT lie'} within the reference's range over the seeds"
              for algo, v in verdict.items()]
    return "\n".join(lines) + "\n", verdict


def plot(results: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    for ax, (algo, sides) in zip(axes[0], results.items(), strict=True):
        for side, colour in (("reference", "tab:gray"), ("ours", "tab:blue")):
            curves = sides.get(side)
            if not curves:
                continue
            steps = sorted(set.intersection(*(set(c) for c in curves.values())))
            per_step = [[c[s] for c in curves.values()] for s in steps]
            mean = [statistics.mean(v) for v in per_step]
            ax.fill_between(steps, [min(v) for v in per_step], [max(v) for v in per_step], color=colour,
                            alpha=0.2)
            ax.plot(steps, mean, color=colour, marker=".", label=f"{LABELS[algo, side]} (mean, min-max)")
        ax.set_title(f"{algo.upper()}: held-out accuracy, {len(next(iter(sides.values())))} seeds")
        ax.set_xlabel("step")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--algos", nargs="+", default=["grpo", "ppo"], choices=sorted(VARIANTS))
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--ppo-config", default="tiny", help="the PPO runs' config (default: the same)")
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--out", type=Path, default=Path("bench/results/learning"))
    ap.add_argument("--from-json", type=Path, help="summarise and plot a curves.json again, training nothing")
    ap.add_argument("overrides", nargs="*", help="config overrides for every run, e.g. max_steps=100")
    args = ap.parse_args()
    if args.from_json:
        raw = json.loads(args.from_json.read_text())["results"]
        results = {algo: {side: {int(seed): {int(k): v for k, v in c.items()} for seed, c in curves.items()}
                          for side, curves in sides.items()} for algo, sides in raw.items()}
        table, verdict = summarise(results)
        plot(results, args.from_json.with_name("curves.png"))
        args.from_json.with_name("summary.md").write_text(table)
        print(table)
        return
    torch.set_num_threads(1)
    rt = setup_runtime("cpu", "fp32")
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict = {algo: {"ours": {}, "reference": {}} for algo in args.algos}
    timing: dict = {}
    for seed in args.seeds:
        for algo in args.algos:
            name = args.config if algo == "grpo" else args.ppo_config
            cfg = load_config(name, [*args.overrides, f"seed={seed}", f"eval_every={args.eval_every}",
                                     f"save_every={10**6}"])
            for side, run in VARIANTS[algo].items():
                out = args.out / "runs" / f"{algo}-{side}-seed{seed}"
                t0 = time.perf_counter()
                curve = run(cfg, rt, out)
                timing[f"{algo}/{side}/{seed}"] = round(time.perf_counter() - t0, 1)
                results[algo][side][seed] = curve
                print(f"{algo} {side} seed {seed}: {curve[max(curve)]:.3f} after {max(curve)} steps "
                      f"({timing[f'{algo}/{side}/{seed}']} s): {curve}", flush=True)
                (args.out / "curves.json").write_text(json.dumps({"results": results, "seconds": timing},
                                                                 indent=1))
    table, verdict = summarise(results)
    plot(results, args.out / "curves.png")
    (args.out / "summary.md").write_text(table)
    print(table)
    print(json.dumps(verdict))


if __name__ == "__main__":
    main()
