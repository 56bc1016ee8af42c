"""PPO maths against hand-computed values: masks, KL-penalised rewards, GAE, whitening, both losses."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from ascend_ready.training import ppo  # noqa: E402


def t(rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_completion_mask_stops_after_first_eos_and_flags_truncation():
    ids = torch.tensor([[5, 1, 7, 1], [5, 6, 7, 8], [1, 0, 0, 0]])
    mask, terminated = ppo.completion_mask(ids, eos_token_id=1)
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert terminated.tolist() == [True, False, True]


def test_kl_penalised_rewards_put_score_on_last_valid_token():
    logp, ref = t([[-1.0, -2.0, -3.0]]), t([[-1.5, -1.0, -3.0]])
    mask = torch.tensor([[1, 1, 0]])
    r = ppo.kl_penalized_rewards(torch.tensor([2.0]), logp, ref, mask, kl_coef=0.1)
    # token 0: -0.1*(0.5) = -0.05; token 1: -0.1*(-1.0) + 2.0 = 2.1; token 2 is padding.
    assert r.tolist()[0] == pytest.approx([-0.05, 2.1, 0.0])


def test_gae_by_hand():
    rewards, values = t([[0.0, 0.0, 1.0]]), t([[0.5, 0.6, 0.7]])
    mask = torch.tensor([[1, 1, 1]])
    adv, ret = ppo.gae(rewards, values, mask, gamma=0.9, lam=0.8)
    d2 = 1.0 - 0.7  # last token: no bootstrap
    d1 = 0.0 + 0.9 * 0.7 - 0.6  # 0.03
    d0 = 0.0 + 0.9 * 0.6 - 0.5  # 0.04
    a2 = d2
    a1 = d1 + 0.72 * a2
    a0 = d0 + 0.72 * a1
    assert adv.tolist()[0] == pytest.approx([a0, a1, a2], abs=1e-6)
    assert ret.tolist()[0] == pytest.approx([a0 + 0.5, a1 + 0.6, a2 + 0.7], abs=1e-6)


def test_gae_ignores_values_and_rewards_after_the_end():
    rewards, values = t([[0.0, 1.0, 9.0]]), t([[0.2, 0.4, 5.0]])
    adv, ret = ppo.gae(rewards, values, torch.tensor([[1, 1, 0]]), gamma=1.0, lam=1.0)
    # second token is terminal: a1 = 1 - 0.4 = 0.6; a0 = (0 + 0.4 - 0.2) + 0.6 = 0.8
    assert adv.tolist()[0] == pytest.approx([0.8, 0.6, 0.0], abs=1e-6)
    assert ret.tolist()[0] == pytest.approx([1.0, 1.0, 0.0], abs=1e-6)


def test_whitening_uses_only_valid_tokens():
    x, mask = t([[1.0, 3.0, 100.0]]), torch.tensor([[1, 1, 0]])
    w = ppo.masked_whiten(x, mask)
    assert w.tolist()[0] == pytest.approx([-1.0, 1.0, 0.0], abs=1e-4)  # mean 2, population std 1
    assert ppo.masked_mean(x, mask).item() == pytest.approx(2.0)
    assert ppo.masked_var(x, mask).item() == pytest.approx(1.0)


def test_policy_loss_clips_the_ratio():
    old = t([[0.0, 0.0]])
    new = t([[math.log(1.5), math.log(0.5)]])  # ratios 1.5 and 0.5
    adv = t([[1.0, -1.0]])
    loss, clipfrac, approx_kl = ppo.policy_loss(new, old, adv, torch.tensor([[1, 1]]), clip=0.2)
    # token 0: max(-1.5, -1.2) = -1.2 (clipped); token 1: max(0.5, 0.8) = 0.8 (clipped)
    assert loss.item() == pytest.approx((-1.2 + 0.8) / 2)
    assert clipfrac.item() == pytest.approx(1.0)
    assert approx_kl.item() == pytest.approx(0.5 * (math.log(1.5) ** 2 + math.log(0.5) ** 2) / 2)


def test_policy_loss_unclipped_inside_the_trust_region():
    loss, clipfrac, _ = ppo.policy_loss(
        t([[math.log(1.1)]]), t([[0.0]]), t([[2.0]]), torch.tensor([[1]]), 0.2
    )
    assert loss.item() == pytest.approx(-2.2)
    assert clipfrac.item() == 0.0


def test_value_loss_takes_the_worse_of_raw_and_clipped():
    values, old, ret = t([[1.0, 0.0]]), t([[0.0, 0.0]]), t([[1.0, 0.5]])
    loss, vclip = ppo.value_loss(values, old, ret, torch.tensor([[1, 1]]), clip=0.2)
    # token 0: raw err 0, clipped value 0.2 -> err 0.64 -> 0.64; token 1: both 0.25
    assert loss.item() == pytest.approx(0.5 * (0.64 + 0.25) / 2)
    assert vclip.item() == pytest.approx(0.5)


# --- padding can never poison the loss or the metrics (issue 9) ---------------------------------------------
# A pad slot holds whatever the forward pass produced there: a log-prob of -inf, a ratio that overflows, an
# exploding value. Masking by multiplication turns any of them into 0 * inf = NaN.

INF = float("inf")


def test_pad_slot_with_infinite_log_ratio_leaves_policy_loss_finite_and_unchanged():
    new = t([[math.log(1.1), math.log(0.7), 1e4]]).requires_grad_()
    old, adv = t([[0.0, 0.0, -INF]]), t([[1.0, -2.0, 3.0]])
    loss, clipfrac, approx_kl = ppo.policy_loss(new, old, adv, torch.tensor([[1, 1, 0]]), clip=0.2)
    kept = torch.tensor([[1, 1]])
    want, want_clip, want_kl = ppo.policy_loss(new[:, :2], old[:, :2], adv[:, :2], kept, clip=0.2)
    assert torch.isfinite(loss) and loss.item() == pytest.approx(want.item())
    assert clipfrac.item() == pytest.approx(want_clip.item())
    assert approx_kl.item() == pytest.approx(want_kl.item())
    loss.backward()
    assert torch.isfinite(new.grad).all() and new.grad[0, 2].item() == 0.0


def test_pad_slot_with_infinite_value_leaves_value_loss_finite_and_unchanged():
    values = t([[1.0, 0.0, INF]]).requires_grad_()
    old, ret = t([[0.0, 0.0, -INF]]), t([[1.0, 0.5, INF]])
    loss, vclip = ppo.value_loss(values, old, ret, torch.tensor([[1, 1, 0]]), clip=0.2)
    want, want_clip = ppo.value_loss(values[:, :2], old[:, :2], ret[:, :2], torch.tensor([[1, 1]]), clip=0.2)
    assert torch.isfinite(loss) and loss.item() == pytest.approx(want.item())
    assert vclip.item() == pytest.approx(want_clip.item())
    loss.backward()
    assert torch.isfinite(values.grad).all()


def test_rewards_gae_and_whitening_ignore_non_finite_pads():
    mask = torch.tensor([[1, 1, 0]])
    logp, ref = t([[-1.0, -2.0, 0.0]]), t([[-1.5, -1.0, -INF]])
    rewards = ppo.kl_penalized_rewards(torch.tensor([2.0]), logp, ref, mask, kl_coef=0.1)
    assert rewards.tolist()[0] == pytest.approx([-0.05, 2.1, 0.0])
    adv, ret = ppo.gae(t([[0.0, 1.0, INF]]), t([[0.2, 0.4, INF]]), mask, gamma=1.0, lam=1.0)
    assert adv.tolist()[0] == pytest.approx([0.8, 0.6, 0.0], abs=1e-6)
    assert ret.tolist()[0] == pytest.approx([1.0, 1.0, 0.0], abs=1e-6)
    whitened = ppo.masked_whiten(t([[1.0, 3.0, INF]]), mask)
    assert whitened.tolist()[0] == pytest.approx([-1.0, 1.0, 0.0], abs=1e-4)
    assert ppo.masked_mean(t([[1.0, 3.0, float("nan")]]), mask).item() == pytest.approx(2.0)


def test_entropy_is_finite_with_forbidden_tokens_and_ignores_pad_rows():
    # A logit of -inf (a token the sampler may never pick) has p = 0 and adds nothing; a pad row of all -inf
    # (softmax of nothing: NaN) is left out of the mean.
    logits = t([[[0.0, 0.0, -INF], [-INF, -INF, -INF]]])
    per_token = ppo.entropy_from_logits(logits)
    assert per_token[0, 0].item() == pytest.approx(math.log(2))
    assert ppo.masked_mean(per_token, torch.tensor([[1, 0]])).item() == pytest.approx(math.log(2))


# --- the KL estimator: k1 by default, k3 on request (Schulman, "Approximating KL divergence") ---------------


def test_k1_and_k3_kl_by_hand():
    logp, ref, mask = t([[-1.0, -2.0, 0.0]]), t([[-1.5, -1.0, -INF]]), torch.tensor([[1, 1, 0]])
    # log r = log pi_ref - log pi = [-0.5, 1.0]; k1 = -log r; k3 = (r - 1) - log r
    assert ppo.kl_per_token(logp, ref, mask, "k1").tolist()[0] == pytest.approx([0.5, -1.0, 0.0])
    k3 = [math.exp(-0.5) - 1 + 0.5, math.e - 1 - 1.0, 0.0]
    assert ppo.kl_per_token(logp, ref, mask, "k3").tolist()[0] == pytest.approx(k3)
    r = ppo.kl_penalized_rewards(torch.tensor([2.0]), logp, ref, mask, kl_coef=0.1, kl_estimator="k3")
    assert r.tolist()[0] == pytest.approx([-0.1 * k3[0], 2.0 - 0.1 * k3[1], 0.0])


def test_k3_is_non_negative_where_k1_is_not():
    gen = torch.Generator().manual_seed(0)
    logp, ref = -torch.rand(64, 32, generator=gen) * 5, -torch.rand(64, 32, generator=gen) * 5
    mask = torch.ones(64, 32, dtype=torch.long)
    assert (ppo.kl_per_token(logp, ref, mask, "k1") < 0).any()
    assert (ppo.kl_per_token(logp, ref, mask, "k3") >= 0).all()


def test_kl_estimator_is_a_ppo_setting_defaulting_to_k1():
    from pydantic import ValidationError

    from ascend_ready.training.config import PPOSettings

    assert PPOSettings().kl_estimator == "k1"
    assert PPOSettings(kl_estimator="k3").kl_estimator == "k3"
    with pytest.raises(ValidationError, match="k1"):
        PPOSettings(kl_estimator="k2")


# --- a response ends at its first EOS or its first pad; nothing after it is trained on or scored -----------


def test_pad_generated_mid_response_ends_the_sequence():
    pad, eos = 0, 1
    ids = torch.tensor(
        [
            [5, 7, pad, 8, eos, pad],  # a sampled pad mid-response ends it (not terminated by an EOS)
            [5, eos, pad, pad, pad, pad],  # EOS, then generate()'s padding
            [5, 6, 7, 8, 9, 10],  # hit the length limit
            [pad, 6, eos, pad, pad, pad],  # a pad as the very first token
        ]
    )
    mask, terminated = ppo.completion_mask(ids, eos_token_id=eos, pad_token_id=pad)
    assert mask.tolist() == [[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1] * 6, [1, 0, 0, 0, 0, 0]]
    assert terminated.tolist() == [False, True, False, False]
    # the score lands on the token that ended the response: the pad in rows 0 and 3, the EOS in row 1
    zeros = torch.zeros(4, 6)
    rewards = ppo.kl_penalized_rewards(torch.tensor([1.0, 2.0, 3.0, 4.0]), zeros, zeros, mask, kl_coef=0.1)
    assert rewards.tolist() == [
        [0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        [0.0, 2.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 3.0],
        [4.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    ]
    # and the tokens after the end (8, EOS in row 0) carry no advantage, so no gradient
    adv, _ = ppo.gae(rewards, torch.zeros(4, 6), mask, gamma=1.0, lam=1.0)
    assert adv[0].tolist() == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


def test_pad_equal_to_eos_counts_as_eos():
    mask, terminated = ppo.completion_mask(torch.tensor([[5, 0, 0]]), eos_token_id=0, pad_token_id=0)
    assert mask.tolist() == [[1, 1, 0]] and terminated.tolist() == [True]


def test_responses_are_truncated_and_scored_without_the_tokens_after_the_end():
    from ascend_ready.training.models import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    pad, eos = tok.pad_token_id, tok.eos_token_id
    digits = tok("12", add_special_tokens=False)["input_ids"]
    tail = tok("34", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([[*digits, pad, *tail, eos], [*digits, *tail, eos, pad]])
    mask, _ = ppo.completion_mask(ids, eos_token_id=eos, pad_token_id=pad)
    truncated, texts = ppo.end_responses(ids, mask, tok)
    assert texts == ["12", "1234"]
    assert truncated.tolist() == [[*digits, pad, pad, pad, pad], [*digits, *tail, eos, pad]]
