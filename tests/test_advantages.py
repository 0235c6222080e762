"""Tests for ``pgtwin_core.advantages.training_inputs``: a hand-derived case with an
autoreset step, and a slow numpy oracle on random NEXT_STEP-shaped batches."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pgtwin_core.advantages import flat_returns, training_inputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec

CAT = PolicySpec("categorical", (3,), 4)
GAUSS = PolicySpec("gaussian", (3,), 2)


def random_batch(rng: np.random.Generator, spec: PolicySpec, T: int = 13, N: int = 4) -> Batch:
    """A batch shaped like a NEXT_STEP rollout: after an end, one autoreset step (valid
    False, reward 0, no flags); some envs start the batch on an autoreset step."""
    rewards = np.zeros((T, N))
    terminated = np.zeros((T, N), bool)
    truncated = np.zeros((T, N), bool)
    valid = np.zeros((T, N), bool)
    for n in range(N):
        needs_reset = rng.random() < 0.3
        for t in range(T):
            if needs_reset:
                needs_reset = False
                continue
            valid[t, n] = True
            rewards[t, n] = rng.normal()
            if rng.random() < 0.25:
                (terminated if rng.random() < 0.5 else truncated)[t, n] = True
                needs_reset = True
    obs = rng.normal(size=(T, N, 3))
    if spec.is_discrete:
        actions = rng.integers(0, spec.action_size, size=(T, N))
    else:
        actions = rng.normal(size=(T, N, spec.action_size))
    return Batch(obs=obs, actions=actions, rewards=rewards, terminated=terminated,
                 truncated=truncated, log_probs=np.zeros((T, N)), valid=valid,
                 next_obs=rng.normal(size=(N, 3)), episode_returns=np.zeros(0),
                 episode_lengths=np.zeros(0, np.int64))


def oracle(batch: Batch, config: ReinforceConfig):
    """Slow, literal version: per flat index i = t * N + n, sum the discounted rewards
    from step t to the end of its episode (an end flag or the last row)."""
    T, N = batch.rewards.shape
    returns, valid, obs, actions = [], [], [], []
    for t in range(T):
        for n in range(N):
            obs.append(batch.obs[t, n])
            actions.append(batch.actions[t, n])
            valid.append(bool(batch.valid[t, n]))
            g = 0.0
            if batch.valid[t, n]:
                k = t
                while True:
                    g += config.gamma ** (k - t) * batch.rewards[k, n]
                    if batch.terminated[k, n] or batch.truncated[k, n] or k == T - 1:
                        break
                    k += 1
            returns.append(g)
    returns, valid = np.array(returns), np.array(valid)
    counted = returns[valid]
    if config.normalize_returns:
        # Scaled by the std, not centred: the baseline alone shifts the returns.
        mean = sum(counted) / len(counted)
        std = math.sqrt(sum((x - mean) ** 2 for x in counted) / len(counted))
        returns = np.where(valid, returns / (std + 1e-8), 0.0)
    advantages = returns
    if config.baseline == "mean":
        advantages = np.where(valid, returns - returns[valid].mean(), 0.0)
    weights = np.where(valid, 1.0 / valid.sum(), 0.0)
    return np.array(obs), np.array(actions), returns, advantages, weights


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("baseline", ["none", "mean", "optimal_scalar"])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("gamma", [0.9, 1.0])
@pytest.mark.parametrize("spec", [CAT, GAUSS], ids=["categorical", "gaussian"])
def test_training_inputs_match_slow_oracle(spec, gamma, normalize, baseline, dtype):
    rng = np.random.default_rng(0)
    config = ReinforceConfig(gamma=gamma, normalize_returns=normalize, baseline=baseline,
                             num_envs=4, num_steps=13, dtype=dtype)
    for _ in range(3):
        batch = random_batch(rng, spec)
        got = training_inputs(batch, config, spec)
        obs, actions, returns, advantages, weights = oracle(batch, config)
        tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
        assert got.batch_size == 52
        np.testing.assert_allclose(got.obs, obs, **tol)
        assert got.obs.dtype == np.dtype(dtype)
        if spec.is_discrete:
            np.testing.assert_array_equal(got.actions, actions)
            assert got.actions.dtype == np.int64
        else:
            np.testing.assert_allclose(got.actions, actions, **tol)
            assert got.actions.dtype == np.dtype(dtype) and got.actions.shape == (52, 2)
        for name, want in (("returns", returns), ("advantages", advantages), ("weights", weights)):
            value = getattr(got, name)
            assert value.dtype == np.dtype(dtype) and value.shape == (52,), name
            np.testing.assert_allclose(value, want, err_msg=name, **tol)
        invalid = ~batch.valid.reshape(-1)
        assert np.all(got.weights[invalid] == 0) and np.all(got.advantages[invalid] == 0)
        assert np.all(got.returns[invalid] == 0)
        np.testing.assert_allclose(got.weights.sum(dtype=np.float64), 1.0, rtol=1e-6)


def _hand_batch() -> Batch:
    # One env, T = 4: rewards 1, 2 (terminated), autoreset step, 4 (cut by T).
    return Batch(obs=np.arange(4.0).reshape(4, 1, 1) * np.ones((1, 1, 3)),
                 actions=np.array([[0], [1], [2], [3]]), rewards=np.array([[1.0], [2.0], [0.0], [4.0]]),
                 terminated=np.array([[False], [True], [False], [False]]),
                 truncated=np.zeros((4, 1), bool), log_probs=np.zeros((4, 1)),
                 valid=np.array([[True], [True], [False], [True]]), next_obs=np.zeros((1, 3)),
                 episode_returns=np.array([3.0]), episode_lengths=np.array([2]))


def test_hand_derived_case_with_an_autoreset_step():
    batch = _hand_batch()
    # gamma = 0.5: G_0 = 1 + 0.5 * 2 = 2, G_1 = 2 (terminated), G_3 = 4 (last row).
    # Mean baseline over the 3 valid steps: (2 + 2 + 4) / 3 = 8/3, so A = -2/3, -2/3, 4/3.
    config = ReinforceConfig(gamma=0.5, normalize_returns=False, baseline="mean", dtype="float64")
    got = training_inputs(batch, config, CAT)
    np.testing.assert_allclose(got.returns, [2.0, 2.0, 0.0, 4.0], rtol=1e-15)
    np.testing.assert_allclose(got.advantages, [-2 / 3, -2 / 3, 0.0, 4 / 3], rtol=1e-15)
    np.testing.assert_allclose(got.weights, [1 / 3, 1 / 3, 0.0, 1 / 3], rtol=1e-15)
    # Normalised: std of (2, 2, 4) = sqrt(((2/3)^2 + (2/3)^2 + (4/3)^2) / 3) = sqrt(8/9),
    # and the returns are divided by it, not centred: R = (2, 2, 4) / sqrt(8/9)
    # = (3/sqrt 2, 3/sqrt 2, 6/sqrt 2). With no baseline the advantages are R itself.
    normalized = config.replace(normalize_returns=True, baseline="none")
    got = training_inputs(batch, normalized, CAT)
    expected = [3 / math.sqrt(2), 3 / math.sqrt(2), 0.0, 6 / math.sqrt(2)]
    np.testing.assert_allclose(got.returns, expected, rtol=1e-7)
    np.testing.assert_allclose(got.advantages, expected, rtol=1e-7)
    np.testing.assert_allclose(flat_returns(batch, normalized)[:, 0], expected, rtol=1e-7)


def test_none_and_mean_differ_under_normalisation():
    # The bug of issue 15: normalisation used to centre the returns, so "none" trained with
    # the mean baseline. Hand batch: R = (2, 2, 4) on the valid steps, std sqrt(8/9).
    # none: A = R / sqrt(8/9) = (3/sqrt 2, 3/sqrt 2, 6/sqrt 2), mean 2 sqrt 2 (not 0);
    # mean: A = (R - 8/3) / sqrt(8/9) = (-1/sqrt 2, -1/sqrt 2, sqrt 2), mean 0.
    batch = _hand_batch()
    config = ReinforceConfig(gamma=0.5, normalize_returns=True, dtype="float64")
    none = training_inputs(batch, config.replace(baseline="none"), CAT).advantages
    mean = training_inputs(batch, config.replace(baseline="mean"), CAT).advantages
    r2 = math.sqrt(2)
    np.testing.assert_allclose(none, [3 / r2, 3 / r2, 0.0, 6 / r2], rtol=1e-7)
    np.testing.assert_allclose(mean, [-1 / r2, -1 / r2, 0.0, r2], rtol=1e-7)
    np.testing.assert_allclose((none - mean)[batch.valid.reshape(-1)], 2 * r2, rtol=1e-7)


def test_constant_returns_are_not_blown_up():
    # A constant reward-to-go has no scale to remove: dividing by eps = 1e-8 alone would
    # multiply it by 1e8. gamma = 0, rewards 3 on every valid step: R = 3 stays 3.
    batch = _hand_batch()
    batch = Batch(**{**batch.__dict__, "rewards": np.where(batch.valid, 3.0, 0.0)})
    config = ReinforceConfig(gamma=0.0, normalize_returns=True, dtype="float64")
    np.testing.assert_array_equal(training_inputs(batch, config, CAT).returns, [3.0, 3.0, 0.0, 3.0])


def test_gamma_zero_gives_the_rewards():
    # Identity check: with gamma = 0 the reward-to-go is the reward itself.
    batch = random_batch(np.random.default_rng(5), CAT)
    config = ReinforceConfig(gamma=0.0, normalize_returns=False)
    np.testing.assert_array_equal(flat_returns(batch, config), batch.rewards)


def test_no_valid_step_raises():
    batch = random_batch(np.random.default_rng(6), CAT, T=2, N=3)
    batch = Batch(**{**batch.__dict__, "valid": np.zeros((2, 3), bool),
                     "rewards": np.zeros((2, 3)), "terminated": np.zeros((2, 3), bool),
                     "truncated": np.zeros((2, 3), bool)})
    with pytest.raises(ValueError, match=r"^batch has no valid step \(T=2, N=3\): every step was an autoreset step$"):
        training_inputs(batch, ReinforceConfig(), CAT)
