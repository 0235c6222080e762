"""A tiny deterministic env whose episodes are known in advance, for rollout tests.

Every episode lasts exactly ``length`` steps with reward 1 per step, whatever the action,
so under gymnasium's NEXT_STEP autoreset a vector of them has a fixed, hand-countable
pattern: ``length`` valid steps, then one autoreset step, and so on.
"""
from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from pgtwin_core.specs import PolicySpec

# Observations are [step within episode, env label]; two discrete actions, both ignored.
SPEC = PolicySpec("categorical", (2,), 2, hidden=(4,))


class FixedLengthEnv(gymnasium.Env):
    """Episodes of ``length`` steps, reward 1 each; optional NaN at a chosen ``step()`` call.

    ``nan_obs_at`` / ``nan_reward_at`` count calls to ``step`` since construction (0-based);
    ``nan_on_reset`` makes ``reset`` return a NaN observation.
    """

    observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, length: int = 3, label: float = 0.0, truncate: bool = False,
                 nan_obs_at: int | None = None, nan_reward_at: int | None = None,
                 nan_on_reset: bool = False):
        self.length, self.label, self.truncate = length, label, truncate
        self.nan_obs_at, self.nan_reward_at, self.nan_on_reset = nan_obs_at, nan_reward_at, nan_on_reset
        self.t = 0
        self.calls = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.label], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        obs = self._obs()
        if self.nan_on_reset:
            obs[0] = np.nan
        return obs, {}

    def step(self, action):
        self.t += 1
        obs, reward = self._obs(), 1.0
        if self.calls == self.nan_obs_at:
            obs[1] = np.nan
        if self.calls == self.nan_reward_at:
            reward = float("nan")
        self.calls += 1
        ended = self.t >= self.length
        return obs, reward, ended and not self.truncate, ended and self.truncate, {}


def fixed_length_vec(lengths=(3, 3), autoreset_mode=AutoresetMode.NEXT_STEP,
                     per_env: dict[int, dict] | None = None) -> SyncVectorEnv:
    """A SyncVectorEnv of ``FixedLengthEnv(length=lengths[i], label=i, **per_env[i])``."""
    per_env = per_env or {}

    def make(i: int):
        return lambda: FixedLengthEnv(length=lengths[i], label=float(i), **per_env.get(i, {}))

    return SyncVectorEnv([make(i) for i in range(len(lengths))], autoreset_mode=autoreset_mode)


def uniform_policy(obs: np.ndarray) -> np.ndarray:
    """Zero logits [N, 2] for SPEC: the actions do not matter to FixedLengthEnv."""
    return np.zeros((obs.shape[0], SPEC.num_params))
