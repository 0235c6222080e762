"""Tests for ``pgtwin_core.rollout.collect``: NEXT_STEP autoreset masking on an env whose
episodes are known in advance, episode statistics across batches, seeded determinism,
shapes, and the errors for non-finite data.

FixedLengthEnv (tests/fixed_length_env.py) runs episodes of exactly L steps with reward 1
each. Under NEXT_STEP autoreset, a vector env of them follows a pattern countable by hand:
L valid steps, one autoreset step (valid=False, reward 0, part of no episode), repeat.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from pgtwin_core.advantages import training_inputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.envs import make_vec_env
from pgtwin_core.rollout import RolloutState, collect
from pgtwin_core.sampling import log_prob
from pgtwin_core.specs import PolicySpec, spec_for_env
from tests.fixed_length_env import SPEC, fixed_length_vec, uniform_policy

V, I = True, False  # valid step, autoreset step


def _collect(envs, num_steps, state=None, seed=0):
    if state is None:
        state = RolloutState.start(envs, seed=0)
    return collect(envs, uniform_policy, SPEC, num_steps, np.random.default_rng(seed), state)


# ---------------------------------------------------------------------------------------
# Autoreset masking.


def test_autoreset_steps_are_masked_length_three():
    envs = fixed_length_vec(lengths=(3, 3))
    batch, state = _collect(envs, 10)
    # t:        0  1  2  3  4  5  6  7  8  9   (episodes end at t = 2 and 6; t = 3, 7 reset)
    pattern = [V, V, V, I, V, V, V, I, V, V]
    np.testing.assert_array_equal(batch.valid, np.array([pattern, pattern]).T)
    np.testing.assert_array_equal(batch.rewards, np.where(batch.valid, 1.0, 0.0))
    ends = np.zeros((10, 2), bool)
    ends[[2, 6]] = True
    np.testing.assert_array_equal(batch.terminated, ends)
    assert not batch.truncated.any()
    # The observation each action was chosen from: at t = 3 the terminal one (step 3 of
    # the episode, action ignored), at t = 4 the new episode's reset observation.
    np.testing.assert_array_equal(batch.obs[:, :, 0].T, [[0, 1, 2, 3, 0, 1, 2, 3, 0, 1]] * 2)
    np.testing.assert_array_equal(batch.obs[:, :, 1], [[0, 1]] * 10)  # env labels
    np.testing.assert_array_equal(batch.next_obs, [[2, 0], [2, 1]])
    # Two complete episodes per env, each of return 3 and length 3; the third is running.
    np.testing.assert_array_equal(batch.episode_returns, [3.0] * 4)
    np.testing.assert_array_equal(batch.episode_lengths, [3] * 4)
    assert batch.episode_returns.dtype == np.float64 and batch.episode_lengths.dtype == np.int64
    np.testing.assert_array_equal(state.episode_return, [2.0, 2.0])
    np.testing.assert_array_equal(state.episode_length, [2, 2])
    np.testing.assert_array_equal(state.needs_reset, [False, False])
    assert (batch.num_steps, batch.num_envs, batch.num_valid) == (10, 2, 16)
    assert batch.env_steps == state.env_steps == 20  # autoreset steps are env steps too

    # The training inputs give the autoreset steps zero weight (flat index i = t * N + n).
    config = ReinforceConfig(gamma=1.0, normalize_returns=False, num_envs=2, num_steps=10)
    inputs = training_inputs(batch, config, SPEC)
    valid_flat = np.repeat(pattern, 2)
    np.testing.assert_array_equal(inputs.weights, np.where(valid_flat, 1 / 16, 0.0).astype(np.float32))
    # gamma = 1 reward-to-go per env: 3 2 1 | 3 2 1 | 2 1 (the last episode cut by T).
    np.testing.assert_array_equal(inputs.returns, np.repeat([3, 2, 1, 0, 3, 2, 1, 0, 2, 1], 2))


def test_autoreset_masking_with_unequal_lengths_and_truncation():
    envs = fixed_length_vec(lengths=(3, 2), per_env={0: dict(truncate=True), 1: dict(truncate=True)})
    batch, state = _collect(envs, 10)
    # t:      0  1  2  3  4  5  6  7  8  9
    env0 = [V, V, V, I, V, V, V, I, V, V]  # ends at t = 2, 6
    env1 = [V, V, I, V, V, I, V, V, I, V]  # ends at t = 1, 4, 7
    np.testing.assert_array_equal(batch.valid, np.array([env0, env1]).T)
    assert not batch.terminated.any()
    np.testing.assert_array_equal(np.argwhere(batch.truncated).tolist(),
                                  [[1, 1], [2, 0], [4, 1], [6, 0], [7, 1]])
    # Episodes in the order they finished: t = 1 (env 1), 2 (env 0), 4, 6, 7.
    np.testing.assert_array_equal(batch.episode_returns, [2.0, 3.0, 2.0, 3.0, 2.0])
    np.testing.assert_array_equal(batch.episode_lengths, [2, 3, 2, 3, 2])
    np.testing.assert_array_equal(state.episode_return, [2.0, 1.0])


def test_episode_spanning_two_batches_is_counted_once_with_its_full_return():
    envs = fixed_length_vec(lengths=(3, 3))
    first, state = _collect(envs, 5, seed=1)
    # t: 0 1 2 3 4 -> V V V(end) I V: one episode each, and one step of the next.
    np.testing.assert_array_equal(first.episode_returns, [3.0, 3.0])
    np.testing.assert_array_equal(state.episode_return, [1.0, 1.0])
    second, state = _collect(envs, 5, state=state, seed=2)
    # global t: 5 6 7 8 9 -> V V(end) I V V: the spanning episode (1 + 2 steps) ends at 6.
    np.testing.assert_array_equal(second.valid[:, 0], [V, V, I, V, V])
    np.testing.assert_array_equal(second.episode_returns, [3.0, 3.0])
    np.testing.assert_array_equal(second.episode_lengths, [3, 3])
    assert second.env_steps == 20

    # The same ten steps collected at once give the same arrays, split in two.
    whole, _ = _collect(fixed_length_vec(lengths=(3, 3)), 10)
    for name in ("valid", "rewards", "terminated", "truncated", "obs"):
        joined = np.concatenate([getattr(first, name), getattr(second, name)])
        np.testing.assert_array_equal(joined, getattr(whole, name), err_msg=name)


def test_batch_that_starts_with_an_autoreset_step():
    envs = fixed_length_vec(lengths=(3, 3))
    first, state = _collect(envs, 3)
    np.testing.assert_array_equal(state.needs_reset, [True, True])  # ended on the last step
    second, state = _collect(envs, 2, state=state)
    np.testing.assert_array_equal(second.valid, [[I, I], [V, V]])
    np.testing.assert_array_equal(second.rewards, [[0.0, 0.0], [1.0, 1.0]])
    assert second.episode_returns.size == 0 and second.episode_lengths.size == 0
    np.testing.assert_array_equal(state.episode_length, [1, 1])


def test_a_batch_of_only_autoreset_steps_has_no_valid_step():
    envs = fixed_length_vec(lengths=(3,))
    _, state = _collect(envs, 3)
    batch, _ = _collect(envs, 1, state=state)
    assert batch.num_valid == 0
    config = ReinforceConfig(num_envs=1, num_steps=1)
    with pytest.raises(ValueError, match=r"batch has no valid step \(T=1, N=1\)"):
        training_inputs(batch, config, SPEC)


# ---------------------------------------------------------------------------------------
# Determinism and shapes on real envs.


def _linear_policy(spec: PolicySpec, seed: int):
    w = np.random.default_rng(seed).normal(size=(spec.obs_dim, spec.num_params))

    def policy_fn(obs):
        params = obs.reshape(obs.shape[0], -1)[:, -spec.obs_dim:] @ w
        if not spec.is_discrete:  # mean from the obs, log_std = log 3 (wide: some clipping)
            params[:, spec.action_size:] = np.log(3.0)
        return params

    return policy_fn


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_same_seed_same_batch(env_id):
    batches = []
    for rng_seed in (9, 9, 10):
        envs = make_vec_env(env_id, 3, seed=4)
        spec = spec_for_env(envs)
        batch, _ = collect(envs, _linear_policy(spec, 0), spec, 40, np.random.default_rng(rng_seed))
        batches.append(batch)
        envs.close()
    a, b, c = batches
    for name in ("obs", "actions", "rewards", "terminated", "truncated", "log_probs", "valid",
                 "next_obs", "episode_returns", "episode_lengths", "params"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert not np.array_equal(a.actions, c.actions)


def test_shapes_and_dtypes_categorical_with_history():
    envs = make_vec_env("CartPole-v1", 3, seed=0, history=4)
    spec = spec_for_env(envs, torso="lstm", hidden=(8,))
    batch, state = collect(envs, _linear_policy(spec, 1), spec, 7, np.random.default_rng(0))
    assert batch.obs.shape == (7, 3, 4, 4) and batch.obs.dtype == np.float32
    assert batch.actions.shape == (7, 3) and batch.actions.dtype == np.int64
    for name in ("rewards", "log_probs"):
        assert getattr(batch, name).shape == (7, 3) and getattr(batch, name).dtype == np.float64
    for name in ("terminated", "truncated", "valid"):
        assert getattr(batch, name).shape == (7, 3) and getattr(batch, name).dtype == bool
    assert batch.params.shape == (7, 3, 2) and batch.next_obs.shape == (3, 4, 4)
    assert state.obs is batch.next_obs and batch.env_steps == 21


def test_gaussian_batch_keeps_unclipped_actions_and_their_log_probs():
    envs = make_vec_env("Pendulum-v1", 4, seed=0)
    spec = spec_for_env(envs)
    batch, _ = collect(envs, _linear_policy(spec, 2), spec, 30, np.random.default_rng(3))
    assert batch.actions.shape == (30, 4, 1) and batch.actions.dtype == np.float64
    assert batch.params.shape == (30, 4, 2)
    # std 3 around a mean in [-4, 4]: many samples fall outside [-2, 2] and are kept so.
    assert np.abs(batch.actions).max() > 2.0
    flat = log_prob(spec, batch.params.reshape(-1, 2), batch.actions.reshape(-1, 1))
    np.testing.assert_allclose(batch.log_probs.reshape(-1), flat, rtol=1e-15)


# ---------------------------------------------------------------------------------------
# Errors.


def test_nan_observation_names_env_and_step():
    # Env 1's 4th step() call (index 3) is rollout step 4: steps 0-2, reset at 3, then 4.
    envs = fixed_length_vec(per_env={1: dict(nan_obs_at=3)})
    with pytest.raises(ValueError, match=re.escape(
            "non-finite observation from env 1 at rollout step 4 (env-step 10): [ 1. nan]")):
        _collect(envs, 10)


def test_nan_reward_names_env_and_step():
    envs = fixed_length_vec(lengths=(3, 3, 3), per_env={2: dict(nan_reward_at=1)})
    with pytest.raises(ValueError, match=re.escape(
            "non-finite reward nan from env 2 at rollout step 1 (env-step 6)")):
        _collect(envs, 10)


def test_nan_observation_at_reset():
    envs = fixed_length_vec(per_env={1: dict(nan_on_reset=True)})
    with pytest.raises(ValueError, match=re.escape(
            "non-finite observation from env 1 at reset (env-step 0)")):
        RolloutState.start(envs, seed=0)


def test_non_finite_params_name_env_and_step():
    def policy(obs):
        params = np.zeros((obs.shape[0], 2))
        params[1, 0] = np.nan if obs[1, 0] == 2 else 0.0  # env 1, episode step 2 (t = 2)
        return params

    envs = fixed_length_vec()
    with pytest.raises(ValueError, match=re.escape(
            "policy_fn returned non-finite distribution params for env 1 at rollout step 2: [nan  0.]")):
        collect(envs, policy, SPEC, 5, np.random.default_rng(0), RolloutState.start(envs, seed=0))


def test_wrongly_shaped_params():
    envs = fixed_length_vec()
    with pytest.raises(ValueError, match=re.escape(
            "policy_fn returned distribution params of shape (2, 3) at rollout step 0; "
            "expected [2, 2] for a categorical policy")):
        collect(envs, lambda obs: np.zeros((2, 3)), SPEC, 5, np.random.default_rng(0),
                RolloutState.start(envs, seed=0))


def test_same_step_autoreset_is_refused():
    envs = fixed_length_vec(autoreset_mode=AutoresetMode.SAME_STEP)
    with pytest.raises(ValueError, match=r"autoresets in mode <AutoresetMode.SAME_STEP.*rollouts need"):
        _collect(envs, 4)


def test_num_steps_must_be_positive():
    with pytest.raises(ValueError, match="collect: num_steps must be >= 1, got 0"):
        _collect(fixed_length_vec(), 0)
