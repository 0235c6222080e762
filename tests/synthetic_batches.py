"""Hand-made ``Batch`` objects for agent tests: exact arrays, or seeded random ones.

A rollout needs an env; these do not, so a test can say exactly which observation, action
and reward each step has.
"""
from __future__ import annotations

import numpy as np

from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec


def batch_of(obs, actions, rewards, valid=None, terminated=None) -> Batch:
    """A one-env (N = 1) batch of T steps from per-step arrays.

    Args:
      obs: ``[T, *obs_shape]``.
      actions: int ``[T]`` or float ``[T, action_dim]``.
      rewards: ``[T]``.
      valid: bool ``[T]`` (default all True).
      terminated: bool ``[T]`` (default all False).
    """
    obs = np.asarray(obs, dtype=np.float64)
    actions = np.asarray(actions)
    rewards = np.asarray(rewards, dtype=np.float64)
    t = rewards.shape[0]
    valid = np.ones(t, bool) if valid is None else np.asarray(valid, bool)
    terminated = np.zeros(t, bool) if terminated is None else np.asarray(terminated, bool)
    return Batch(
        obs=obs[:, None], actions=actions[:, None], rewards=rewards[:, None],
        terminated=terminated[:, None], truncated=np.zeros((t, 1), bool),
        log_probs=np.zeros((t, 1)), valid=valid[:, None], next_obs=obs[-1:],
        episode_returns=np.zeros(0), episode_lengths=np.zeros(0, np.int64),
    )


def random_batch(spec: PolicySpec, num_steps: int, num_envs: int, seed: int) -> Batch:
    """A seeded random ``[T, N]`` batch for ``spec``, with episode ends and autoreset steps.

    Observations and rewards are standard normal; actions uniform (categorical) or normal
    around 0 (Gaussian). About one step in six terminates an episode, and the step after it
    is an autoreset step (``valid = False``), as ``pgtwin_core.rollout.collect`` makes them.
    """
    rng = np.random.default_rng(seed)
    t, n = num_steps, num_envs
    obs = rng.standard_normal((t, n, *spec.obs_shape))
    if spec.is_discrete:
        actions = rng.integers(0, spec.action_size, (t, n))
    else:
        actions = 0.5 * rng.standard_normal((t, n, spec.action_size))
    done = rng.random((t, n)) < 1 / 6
    valid = np.ones((t, n), bool)
    valid[1:] = ~done[:-1]
    terminated = done & valid
    rewards = np.where(valid, rng.standard_normal((t, n)), 0.0)
    return Batch(
        obs=obs, actions=actions, rewards=rewards, terminated=terminated,
        truncated=np.zeros((t, n), bool), log_probs=np.zeros((t, n)), valid=valid,
        next_obs=obs[-1], episode_returns=np.zeros(0), episode_lengths=np.zeros(0, np.int64),
    )
