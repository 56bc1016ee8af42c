"""PPO for language models, implemented here because TRL removed its PPOTrainer after 1.12.

Launch (the CLI gates every form on a passing `ascend-check` first):
    ascend-train ppo --config tiny --output-dir runs/ppo-tiny                   # one device / CPU
    ascend-train ppo --config ppo-qwen3-lora --nproc-per-node 8                 # one Atlas 800T A2
    ascend-train ppo --config ppo-qwen3-lora --nnodes 2 --nproc-per-node 8 \\
        --node-rank 0 --master-addr 10.0.0.1                                     # run on each node

Per step: sample completions from the actor; a completion ends at its first EOS or its first pad (a pad the
model sampled mid-response ends it too; everything after the end is masked and replaced by pad, and the text
is scored without it); score them with the shared reward functions; reward per token = -kl_coef * KL
estimate, plus the score on the last valid token; GAE over the critic's values; whiten advantages; then
`ppo_epochs` passes over minibatches of the clipped surrogate plus the clipped value loss. Pad slots are
filled (log-probs with INVALID_LOGPROB, as TRL does; values and advantages with 0), never multiplied by a 0
mask, so nothing sampled or computed there can turn the loss or a metric into NaN.

KL to the reference (`ppo.kl_estimator`), with r = pi_ref / pi on the sampled token: `k1` = log pi -
log pi_ref (the default: the per-token penalty of Ziegler et al. and Ouyang et al.) or `k3` = (r - 1) - log r
(Schulman, "Approximating KL divergence": unbiased too, never negative, lower variance). The same estimator
gives the `kl` metric.

Differences from Ouyang et al. 2022 / Ziegler et al. 2019: no pretraining-mix (PPO-ptx) term; a fixed KL
coefficient (no adaptive controller); an optional k3 KL estimator; the score comes from reward functions
on the decoded text, not a learned reward model; an unfinished completion can be penalised
(`missing_eos_penalty`, as in TRL); the value head sits on the policy's own trunk by default
(`ppo.critic: shared`, as TRL's classic PPOTrainer did) or on a separate copy of the backbone (`separate`),
trained jointly with `vf_coef`; advantages are whitened per rank. Scale-out: DDP, or with
`distributed.zero_stage: 3` PyTorch FSDP2 full sharding (ZeRO-3 semantics, optional host offload).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.runtime import OOM_HINT, Runtime, barrier, is_oom, require
from ascend_ready.training.checkpoint import (
    latest_checkpoint,
    read_marker,
    rng_state,
    save_staged,
    set_rng_state,
)
from ascend_ready.training.config import TrainConfig
from ascend_ready.training.data import load_prompts
from ascend_ready.training.evaluate import accuracy, generate
from ascend_ready.training.metrics import PLOT_FILE, MetricsLogger, plot_metrics
from ascend_ready.training.models import (
    dtype_kwargs,
    load_causal_lm,
    load_tokenizer,
    model_dir,
    peft_config,
    set_generation_ids,
    torch_dtype,
)
from ascend_ready.training.rewards import build_reward_funcs, total_reward
from ascend_ready.training.sniff import sniff_model
from ascend_ready.training.throughput import Tracker
from ascend_ready.training.trl_glue import CHECKPOINT_DIR, FINAL_DIR

torch = require("torch")
nn = torch.nn

# ---------------------------------------------------------------------------------------------------------
# The maths: pure functions of tensors, unit-tested against hand-computed values.
# ---------------------------------------------------------------------------------------------------------


#: What every log-prob in a pad slot is set to before a ratio is taken (TRL's PPOTrainer uses the same value):
#: policy, rollout and reference then agree there, so the ratio is exactly 1 and the KL exactly 0, whatever
#: the forward pass produced in that slot (-inf, or a log-ratio whose exp overflows).
INVALID_LOGPROB = 1.0


def _pads(mask):
    return ~mask.bool()


def masked_mean(x, mask, dim=None):
    """Mean over the valid entries. Pad entries are selected away, never multiplied by 0 (0 * inf = NaN)."""
    valid = mask.bool()
    total = torch.where(valid, x, torch.zeros((), dtype=x.dtype, device=x.device))
    count = valid.sum() if dim is None else valid.sum(dim)
    return (total.sum() if dim is None else total.sum(dim)) / count.clamp(min=1).to(x.dtype)


def masked_var(x, mask):
    """Population variance over the valid entries."""
    mean = masked_mean(x, mask)
    return masked_mean((x - mean) ** 2, mask)


def masked_whiten(x, mask, shift_mean: bool = True, eps: float = 1e-8):
    """(x - mean) / std over the valid entries; padding becomes zero."""
    mean, var = masked_mean(x, mask), masked_var(x, mask)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out.masked_fill(_pads(mask), 0.0)


def first_true_indices(bools):
    """Index of the first True in each row, the row length where there is none."""
    length = bools.shape[-1]
    positions = torch.arange(length, device=bools.device)
    return torch.where(bools, positions, length).min(-1).values


def completion_mask(completion_ids, eos_token_id: int, pad_token_id: int | None = None):
    """1 for every token up to and including the first EOS or pad, whichever comes first; also whether each
    row ended with an EOS (False: cut at the length limit, or by a pad the model sampled mid-response).

    The pad that ends a response stays in it, like an EOS: it is the action that ended the episode, so it
    gets the score (and the missing-EOS penalty) and the policy learns not to emit it. generate() fills the
    rest of a finished row with pads; those come after the EOS and are masked with everything else.
    """
    is_eos = completion_ids == eos_token_id
    stop = is_eos if pad_token_id is None else is_eos | (completion_ids == pad_token_id)
    length = completion_ids.shape[1]
    end = first_true_indices(stop)
    positions = torch.arange(length, device=completion_ids.device)
    terminated = (end < length) & is_eos.gather(1, end.clamp(max=length - 1).unsqueeze(1)).squeeze(1)
    return (positions <= end.unsqueeze(1)).long(), terminated


def end_responses(completion_ids, mask, tokenizer):
    """The completions with every token after the end replaced by pad, and their texts (what gets scored)."""
    ids = completion_ids.masked_fill(_pads(mask), tokenizer.pad_token_id)
    return ids, tokenizer.batch_decode(ids, skip_special_tokens=True)


def kl_per_token(logprobs, ref_logprobs, mask, estimator: str = "k1"):
    """Per-token estimate of KL(pi || pi_ref) from tokens sampled by pi, 0 on padding.

    With log r = log pi_ref - log pi (Schulman, "Approximating KL divergence"): k1 = -log r, unbiased but
    negative on some tokens; k3 = (r - 1) - log r, also unbiased, never negative, lower variance.
    """
    pads = _pads(mask)
    log_r = ref_logprobs.masked_fill(pads, INVALID_LOGPROB) - logprobs.masked_fill(pads, INVALID_LOGPROB)
    if estimator == "k1":
        kl = -log_r
    elif estimator == "k3":
        kl = torch.expm1(log_r) - log_r
    else:
        raise ValueError(f"unknown KL estimator {estimator!r} (k1 or k3)")
    return kl.masked_fill(pads, 0.0)


def kl_penalized_rewards(scores, logprobs, ref_logprobs, mask, kl_coef: float, kl_estimator: str = "k1"):
    """Per-token reward -kl_coef * KL estimate on valid tokens, plus the score on the last one."""
    rewards = -kl_coef * kl_per_token(logprobs, ref_logprobs, mask, kl_estimator)
    last = (mask.sum(1) - 1).clamp(min=0)
    rewards[torch.arange(len(scores)), last] += scores.to(rewards.dtype)
    return rewards


def gae(rewards, values, mask, gamma: float, lam: float):
    """GAE; the value after the last valid token is 0. Returns (advantages, returns)."""
    pads = _pads(mask)
    values, rewards = values.masked_fill(pads, 0.0), rewards.masked_fill(pads, 0.0)
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros_like(rewards[:, 0])
    steps = rewards.shape[1]
    for t in reversed(range(steps)):
        next_value = values[:, t + 1] if t + 1 < steps else torch.zeros_like(last_gae)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last_gae = delta + gamma * lam * last_gae
        advantages[:, t] = last_gae
    advantages = advantages.masked_fill(pads, 0.0)
    return advantages, (advantages + values).masked_fill(pads, 0.0)


def policy_loss(logprobs, old_logprobs, advantages, mask, clip: float):
    """Clipped surrogate, token mean. Returns (loss, clip fraction, approx KL old->new).

    Pad slots are filled before the ratio is taken, so no inf is ever computed there: selecting it away
    afterwards would still leave a NaN gradient (0 * inf) behind the exp.
    """
    pads = _pads(mask)
    log_ratio = logprobs.masked_fill(pads, INVALID_LOGPROB) - old_logprobs.masked_fill(pads, INVALID_LOGPROB)
    advantages = advantages.masked_fill(pads, 0.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
    loss = masked_mean(torch.maximum(unclipped, clipped), mask)
    clipfrac = masked_mean((clipped > unclipped).float(), mask)
    approx_kl = 0.5 * masked_mean(log_ratio**2, mask)
    return loss, clipfrac, approx_kl


def value_loss(values, old_values, returns, mask, clip: float):
    """0.5 * max of squared errors of the raw and the clipped value. Returns (loss, clip fraction)."""
    pads = _pads(mask)
    values, old_values, returns = (v.masked_fill(pads, 0.0) for v in (values, old_values, returns))
    clipped_values = old_values + torch.clamp(values - old_values, -clip, clip)
    err, err_clipped = (values - returns) ** 2, (clipped_values - returns) ** 2
    loss = 0.5 * masked_mean(torch.maximum(err, err_clipped), mask)
    return loss, masked_mean((err_clipped > err).float(), mask)


def entropy_from_logits(logits):
    """Per-token entropy; a forbidden token (logit -inf, p = 0) adds 0, not 0 * -inf."""
    logp = torch.log_softmax(logits.float(), -1)
    p = logp.exp()
    return -(p * logp.masked_fill(p == 0, 0.0)).sum(-1)


# ---------------------------------------------------------------------------------------------------------
# The models.
# ---------------------------------------------------------------------------------------------------------


class ActorCritic(nn.Module):
    """Policy plus value head, one module so a single DDP wrapper all-reduces every gradient in one pass.

    `critic_backbone=None` puts the value head on the policy's own last hidden state (shared trunk, as TRL's
    classic AutoModelForCausalLMWithValueHead did): one forward gives logits and values. Otherwise the critic
    is a separate copy of the backbone (OpenRLHF/verl style): no interference, twice the compute and memory.
    """

    def __init__(self, actor, critic_backbone=None):
        super().__init__()
        self.actor, self.critic_backbone = actor, critic_backbone
        hidden = actor.config.hidden_size
        self.v_head = nn.Linear(hidden, 1, dtype=next(actor.parameters()).dtype)
        nn.init.normal_(self.v_head.weight, std=1.0 / math.sqrt(hidden + 1))
        nn.init.zeros_(self.v_head.bias)

    def forward(self, input_ids, attention_mask, position_ids):
        shared = self.critic_backbone is None
        out = self.actor(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=False,
            output_hidden_states=shared,
        )
        if shared:
            hidden = out.hidden_states[-1]
        else:
            hidden = self.critic_backbone(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
            ).last_hidden_state
        return out.logits, self.v_head(hidden).squeeze(-1).float()


def token_logprobs(logits, input_ids, prompt_len: int, temperature: float):
    """Log-probabilities of the completion tokens (those after the prompt) under `logits`."""
    logits = logits[:, prompt_len - 1 : -1].float() / temperature
    targets = input_ids[:, prompt_len:]
    return torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def build_models(cfg: TrainConfig, rt: Runtime, path: Path, tokenizer):
    """(actor_critic, reference or None). With LoRA the reference is the actor with its adapters disabled."""
    transformers = require("transformers")
    lora = peft_config(cfg.model.lora)
    actor = load_causal_lm(path, rt, tokenizer, cfg.model.gradient_checkpointing)
    backbone = None
    if cfg.ppo.critic == "separate":
        backbone = transformers.AutoModel.from_pretrained(str(path), **dtype_kwargs(torch_dtype(rt)))
        if cfg.model.gradient_checkpointing:
            backbone.gradient_checkpointing_enable()
    if lora is not None:
        peft = require("peft")
        actor = peft.get_peft_model(actor, lora)
        if backbone is not None:
            backbone = peft.get_peft_model(backbone, peft_config(cfg.model.lora, "FEATURE_EXTRACTION"))
    reference = None
    if lora is None and cfg.ppo.kl_coef > 0:
        reference = load_causal_lm(path, rt, tokenizer).to(rt.device).eval().requires_grad_(False)
    return ActorCritic(actor, backbone).to(rt.device), reference


def reference_logprobs(policy, reference, batch, prompt_len, temperature):
    forward = dict(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        use_cache=False,
    )
    if reference is not None:
        return token_logprobs(reference(**forward).logits, batch["input_ids"], prompt_len, temperature)
    with policy.actor.disable_adapter():
        return token_logprobs(policy.actor(**forward).logits, batch["input_ids"], prompt_len, temperature)


def shard(policy, reference, rt: Runtime, offload: bool):
    """ZeRO-3 semantics with PyTorch FSDP2: every decoder layer and each model are sharded across ranks;
    `offload` keeps parameters and optimiser state on the host.

    Each model is its own FSDP root (never nested under the actor-critic) because `generate` and the
    reference pass call the actor's forward directly; the value head is a root of its own for the same reason.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    mesh = init_device_mesh(rt.device_type, (rt.world_size,))
    # On a CPU-only job the parameters already live on the host; FSDP's offload policy needs a device.
    offload = offload and rt.device_type != "cpu"
    kw = {"mesh": mesh, **({"offload_policy": CPUOffloadPolicy()} if offload else {})}

    def shard_model(model) -> None:
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        layer_types = set(getattr(base, "_no_split_modules", None) or [])
        for module in base.modules():
            if type(module).__name__ in layer_types:
                fully_shard(module, **kw)
        fully_shard(base, **kw)

    shard_model(policy.actor)
    if policy.critic_backbone is not None:
        shard_model(policy.critic_backbone)
    fully_shard(policy.v_head, **kw)
    if reference is not None:
        shard_model(reference)


# ---------------------------------------------------------------------------------------------------------
# Checkpoints: trainable weights, optimiser, scheduler, every rank's RNG, step and config.
# ---------------------------------------------------------------------------------------------------------


def _state_options(**kw):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # Full (unsharded) tensors gathered to rank 0 on the host: one layout for DDP, FSDP and a single device.
    return StateDictOptions(full_state_dict=True, cpu_offload=True, **kw)


def full_state(module, trainable_only: bool) -> dict:
    """The module's full state dict on rank 0 (empty on other ranks under FSDP). Collective: call on all."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    state = get_model_state_dict(module, options=_state_options())
    if trainable_only:
        names = {n for n, p in module.named_parameters() if p.requires_grad}
        state = {k: v for k, v in state.items() if k in names}
    return state


def checksum(state: dict) -> float:
    """Cheap position-weighted fingerprint of a state dict; data-parallel replicas must agree exactly."""
    with torch.no_grad():
        return float(sum((v.double() * (1 + i % 7)).sum() for i, (_, v) in enumerate(sorted(state.items()))))


def save_model(actor, directory: Path, rt: Runtime) -> None:
    """Weights, or the LoRA adapter, in Hugging Face layout. Collective under FSDP."""
    state = full_state(actor, trainable_only=False)
    if rt.is_main:
        actor.save_pretrained(directory, state_dict=state)


def save_checkpoint(
    root: Path, step: int, cfg: TrainConfig, rt: Runtime, policy, optimizer, scheduler, sharded: bool
) -> None:
    """Rank 0 writes; all ranks send RNG state and, under DDP, a weight checksum (desync stops the run)."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    weights = full_state(policy, trainable_only=True)
    optim_state = get_optimizer_state_dict(policy, optimizer, options=_state_options())
    actor_state = full_state(policy.actor, trainable_only=False)
    # Under FSDP the gathered copy exists on rank 0 only, so only DDP replicas can be compared.
    local = {n: q.detach() for n, q in policy.named_parameters() if q.requires_grad}
    mine = {"rng": rng_state(), "checksum": None if sharded else checksum(local)}
    gathered = [mine]
    if rt.distributed:
        gathered = [None] * rt.world_size
        torch.distributed.all_gather_object(gathered, mine)
    checksums = (
        [g["checksum"] for g in gathered] if not sharded else [checksum(weights)] if rt.is_main else []
    )
    if len(set(checksums)) > 1:
        raise TrainingError(
            f"data-parallel ranks hold different weights at step {step}: {checksums}",
            hint="a rank skipped an update; check for rank-dependent control flow or HCCL errors",
        )
    if rt.is_main:

        def write(d: Path) -> None:
            torch.save(
                {
                    "trainable": weights,
                    "optimizer": optim_state,
                    "scheduler": scheduler.state_dict(),
                    "rng": [g["rng"] for g in gathered],
                    "step": step,
                },
                d / "state.pt",
            )
            policy.actor.save_pretrained(d / "actor", state_dict=actor_state)  # usable on its own

        extra = {"world_size": rt.world_size, "sharded": sharded, "param_checksums": checksums}
        save_staged(root, step, "ppo", cfg.model_dump(mode="json"), write, cfg.keep_checkpoints, extra=extra)
    barrier(rt)


def load_checkpoint(path: Path, rt: Runtime, policy, optimizer, scheduler) -> int:
    """Every rank reads the full state and keeps its part (its shard under FSDP)."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    state = torch.load(path / "state.pt", map_location="cpu", weights_only=False)
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    if set(state["trainable"]) != trainable:
        raise ConfigError(
            f"checkpoint {path} does not match the model "
            f"(missing {sorted(trainable - set(state['trainable']))[:3]}, "
            f"unexpected {sorted(set(state['trainable']) - trainable)[:3]})",
            hint="resume with the config the run was started with",
        )
    set_model_state_dict(policy, state["trainable"], options=_state_options(strict=False))
    set_optimizer_state_dict(policy, optimizer, state["optimizer"], options=_state_options())
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"][rt.rank] if rt.rank < len(state["rng"]) else state["rng"][0])
    return int(state["step"])


# ---------------------------------------------------------------------------------------------------------
# The training loop.
# ---------------------------------------------------------------------------------------------------------


def batch_rows(rows: list[dict], step: int, rt: Runtime, batch_size: int, seed: int) -> list[dict]:
    """This rank's prompts for `step`: a pure function of (seed, step), so a resumed run sees the same."""
    per_step = batch_size * rt.world_size
    epoch_len = max(1, len(rows) // per_step)
    epoch, offset = divmod(step, epoch_len)
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    start = offset * per_step + rt.rank * batch_size
    return [rows[order[(start + i) % len(rows)]] for i in range(batch_size)]


def scheduler_for(cfg: TrainConfig, optimizer):
    transformers = require("transformers")
    return transformers.get_scheduler(
        cfg.optim.lr_scheduler,
        optimizer,
        num_warmup_steps=cfg.optim.warmup_steps,
        num_training_steps=cfg.max_steps,
    )


def reduce_mean(metrics: dict[str, float], rt: Runtime) -> dict[str, float]:
    if not rt.distributed:
        return metrics
    keys = sorted(metrics)
    t = torch.tensor([metrics[k] for k in keys], dtype=torch.float64, device=rt.device)
    torch.distributed.all_reduce(t)
    return {k: v / rt.world_size for k, v in zip(keys, t.tolist(), strict=True)}


def train(cfg: TrainConfig, rt: Runtime, output_dir: Path, resume: bool = False) -> dict:
    p, gen = cfg.ppo, cfg.generation
    sharded = cfg.distributed.zero_stage == 3 and rt.distributed
    if cfg.distributed.zero_stage == 2:
        raise ConfigError("ppo: distributed.zero_stage must be 0 (DDP) or 3 (FSDP full sharding)")
    if cfg.batch_size % p.num_minibatches:
        raise ConfigError(
            f"batch_size {cfg.batch_size} is not divisible by ppo.num_minibatches {p.num_minibatches}"
        )
    torch.manual_seed(cfg.seed + rt.rank)
    path = model_dir(cfg, output_dir, rt)
    tokenizer = load_tokenizer(path)
    prompts = load_prompts(cfg.data, cfg.seed)
    reward_funcs, reward_weights = build_reward_funcs(cfg)
    policy, reference = build_models(cfg, rt, path, tokenizer)
    set_generation_ids(policy.actor, tokenizer)
    if sharded:  # before the optimiser: FSDP swaps the parameters for sharded ones
        shard(policy, reference, rt, cfg.distributed.offload)
    critic_lr = p.critic_learning_rate or cfg.optim.learning_rate
    actor_params = [q for q in policy.actor.parameters() if q.requires_grad]
    critic_params = [
        q for n, q in policy.named_parameters() if q.requires_grad and not n.startswith("actor.")
    ]
    optimizer = torch.optim.AdamW(
        [{"params": actor_params, "lr": cfg.optim.learning_rate}, {"params": critic_params, "lr": critic_lr}],
        weight_decay=cfg.optim.weight_decay,
    )
    scheduler = scheduler_for(cfg, optimizer)
    # FSDP reduce-scatters gradients itself; DDP all-reduces them; a single process needs neither.
    ddp = torch.nn.parallel.DistributedDataParallel(policy) if rt.distributed and not sharded else policy

    ckpt_root = output_dir / CHECKPOINT_DIR
    step = 0
    if resume:
        ckpt = latest_checkpoint(ckpt_root)
        if ckpt is None:
            raise ConfigError(f"--resume: no committed checkpoint under {ckpt_root}", hint="drop --resume")
        step = load_checkpoint(ckpt, rt, policy, optimizer, scheduler)
        if step != read_marker(ckpt)["step"]:
            raise ConfigError(f"{ckpt}: state step {step} disagrees with its marker")
    logger = MetricsLogger(
        output_dir, enabled=rt.is_main, resume_step=step if resume else None, max_steps=cfg.max_steps
    )
    eval_rows = prompts.eval[: cfg.eval_max_examples]
    throughput = Tracker("ppo", rt.device_type, rt.world_size, gen.max_prompt_length,
                         gen.max_completion_length)

    def evaluate() -> None:
        if eval_rows:
            acc = accuracy(policy.actor, tokenizer, eval_rows, gen.max_completion_length)
            logger.log(step, {"eval/accuracy": acc})

    if not resume:
        evaluate()
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    try:
        while step < cfg.max_steps:
            t0 = time.perf_counter()
            rows = batch_rows(prompts.train, step, rt, cfg.batch_size, cfg.seed)
            # --- rollout -------------------------------------------------------------------------------
            policy.eval()
            enc, completion_ids, _ = generate(
                policy.actor,
                tokenizer,
                [r["prompt"] for r in rows],
                gen.max_completion_length,
                do_sample=True,
                temperature=gen.temperature,
                top_p=gen.top_p,
                max_prompt_length=gen.max_prompt_length,
            )
            t_gen = time.perf_counter() - t0
            mask, terminated = completion_mask(completion_ids, eos, pad)
            # Scored, and fed back, without whatever was sampled after the end (a pad mid-response).
            completion_ids, texts = end_responses(completion_ids, mask, tokenizer)
            prompt_len = enc["input_ids"].shape[1]
            attention = torch.cat([enc["attention_mask"], mask], 1)
            batch = {
                "input_ids": torch.cat([enc["input_ids"], completion_ids], 1),
                "attention_mask": attention,
                "position_ids": (attention.cumsum(1) - 1).clamp(min=0),
            }
            columns = {k: [r.get(k) for r in rows] for k in rows[0] if k != "prompt"}
            scores = torch.tensor(
                total_reward(reward_funcs, reward_weights, [r["prompt"] for r in rows], texts, columns),
                dtype=torch.float32,
                device=rt.device,
            )
            raw_scores = scores.clone()
            if p.missing_eos_penalty is not None:
                scores = scores - p.missing_eos_penalty * (~terminated).float()
            with torch.no_grad():
                logits, values = policy(**batch)
                old_logprobs = token_logprobs(logits, batch["input_ids"], prompt_len, gen.temperature)
                old_values = values[:, prompt_len - 1 : -1]
                ref_logprobs = (
                    reference_logprobs(policy, reference, batch, prompt_len, gen.temperature)
                    if p.kl_coef > 0
                    else old_logprobs
                )
                kl = kl_per_token(old_logprobs, ref_logprobs, mask, p.kl_estimator)
                rewards = kl_penalized_rewards(
                    scores, old_logprobs, ref_logprobs, mask, p.kl_coef, p.kl_estimator
                )
                advantages, returns = gae(rewards, old_values, mask, p.gamma, p.lam)
                if p.whiten_advantages:
                    advantages = masked_whiten(advantages, mask)
            # --- optimisation: ppo_epochs passes over shuffled minibatches --------------------------------
            policy.train()
            stats: dict[str, list[float]] = {k: [] for k in ("pg", "vf", "clip", "vclip", "akl", "ent")}
            mb_size = cfg.batch_size // p.num_minibatches
            for _ in range(p.ppo_epochs):
                for idx in torch.randperm(cfg.batch_size).split(mb_size):
                    mb = {k: v[idx] for k, v in batch.items()}
                    logits, values = ddp(**mb)
                    logprobs = token_logprobs(logits, mb["input_ids"], prompt_len, gen.temperature)
                    pg, clipfrac, approx_kl = policy_loss(
                        logprobs, old_logprobs[idx], advantages[idx], mask[idx], p.clip_range
                    )
                    vf, vclip = value_loss(
                        values[:, prompt_len - 1 : -1],
                        old_values[idx],
                        returns[idx],
                        mask[idx],
                        p.clip_range_value,
                    )
                    loss = pg + p.vf_coef * vf
                    if not torch.isfinite(loss):
                        last = latest_checkpoint(ckpt_root)
                        raise TrainingError(
                            f"loss became {loss.item()} at step {step + 1}; stopped before the update",
                            hint=f"last good checkpoint: {last or 'none yet'}; lower optim.learning_rate, "
                            "then restart with --resume",
                        )
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.optim.max_grad_norm)
                    optimizer.step()
                    with torch.no_grad():
                        tempered = logits[:, prompt_len - 1 : -1].float() / gen.temperature
                        entropy = masked_mean(entropy_from_logits(tempered), mask[idx])
                    for k, v in zip(stats, (pg, vf, clipfrac, vclip, approx_kl, entropy), strict=True):
                        stats[k].append(v.item())
            scheduler.step()
            step += 1
            # --- bookkeeping --------------------------------------------------------------------------
            elapsed = time.perf_counter() - t0
            n_tokens = float(mask.sum())
            kl_seq = kl.sum(1).mean()
            metrics = {
                "reward/mean": raw_scores.mean().item(),
                "reward/std": raw_scores.std(unbiased=False).item(),
                "kl": kl_seq.item(),
                "loss/policy": sum(stats["pg"]) / len(stats["pg"]),
                "loss/value": sum(stats["vf"]) / len(stats["vf"]),
                "policy/clipfrac": sum(stats["clip"]) / len(stats["clip"]),
                "value/clipfrac": sum(stats["vclip"]) / len(stats["vclip"]),
                "policy/approx_kl": sum(stats["akl"]) / len(stats["akl"]),
                "policy/entropy": sum(stats["ent"]) / len(stats["ent"]),
                "completions/mean_length": n_tokens / len(rows),
                "completions/terminated_ratio": terminated.float().mean().item(),
                "value/mean": masked_mean(old_values, mask).item(),
                "optim/lr": scheduler.get_last_lr()[0],
                "perf/step_time_s": elapsed,
                "perf/generation_s": t_gen,
                "perf/tokens_per_s": n_tokens * rt.world_size / elapsed,
            }
            metrics["loss/total"] = metrics["loss/policy"] + p.vf_coef * metrics["loss/value"]
            metrics.update(throughput.step(metrics, policy.actor))
            if cfg.sniff_every and step % cfg.sniff_every == 0:
                sniff_model(step, policy.actor, rt.rank, output_dir)
            if step % cfg.logging_steps == 0 or step == cfg.max_steps:
                logger.log(step, reduce_mean(metrics, rt))
            if step % cfg.save_every == 0 or step == cfg.max_steps:
                save_checkpoint(ckpt_root, step, cfg, rt, policy, optimizer, scheduler, sharded)
            if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.max_steps:
                evaluate()
    except RuntimeError as exc:
        if is_oom(exc):
            raise TrainingError(f"{type(exc).__name__}: {str(exc).splitlines()[0]}", hint=OOM_HINT) from exc
        raise
    evaluate()
    logger.close()
    if rt.is_main:
        for line in throughput.report():
            print(line, file=sys.stderr)
    summary = {"step": step, "final": str(output_dir / FINAL_DIR), "metrics": str(logger.path)}
    save_model(policy.actor, output_dir / FINAL_DIR, rt)
    if rt.is_main:
        tokenizer.save_pretrained(output_dir / FINAL_DIR)
        png = plot_metrics(logger.path, output_dir / PLOT_FILE)
        summary["plot"] = str(png) if png else None
    barrier(rt)
    return summary
