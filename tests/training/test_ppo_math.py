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
