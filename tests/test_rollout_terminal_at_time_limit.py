"""A step that both terminates and hits the time limit (CartPole's pole falling at step
500 sets both flags) is a terminal step: ``collect`` keeps it as ``terminated`` only, so the
returns, which refuse a step flagged both ways, can be computed.
"""
from __future__ import annotations

import numpy as np
from gymnasium.vector import SyncVectorEnv

from pgtwin_core.advantages import training_inputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.rollout import RolloutState, collect
from tests.fixed_length_env import SPEC, FixedLengthEnv, uniform_policy


class _FailsAtTheLimit(FixedLengthEnv):
    """FixedLengthEnv whose last step reports terminated and truncated together."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        ended = terminated or truncated
        return obs, reward, ended, ended, info


def test_terminated_and_truncated_together_count_as_terminated():
    envs = SyncVectorEnv([lambda: _FailsAtTheLimit(length=2)])
    state = RolloutState.start(envs, seed=0)
    batch, _ = collect(envs, uniform_policy, SPEC, 3, np.random.default_rng(0), state)
    # Steps 0, 1 are the episode (ending at step 1), step 2 only resets.
    np.testing.assert_array_equal(batch.terminated[:, 0], [False, True, False])
    np.testing.assert_array_equal(batch.truncated[:, 0], [False, False, False])
    # gamma = 0.5, no normalisation: G_1 = 1, G_0 = 1 + 0.5 * G_1 = 1.5, step 2 invalid: 0.
    inputs = training_inputs(batch, ReinforceConfig(gamma=0.5, normalize_returns=False), SPEC)
    np.testing.assert_allclose(inputs.returns, [1.5, 1.0, 0.0])
