"""``pgtwin.measure.baseline_variance``'s efficiency and reference gradient: the formula
against its closed form on synthetic estimates, and the first-episode cut by hand."""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin.measure.baseline_variance import efficiency, first_episodes, per_step_config
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.rollout import Batch


def test_efficiency_matches_its_closed_form():
    # x_k = c grad + noise (iid N(0, s^2) per element, P elements), reference r = grad +
    # noise: E[grad·x]^2 / (|grad|^2 E|x|^2) = c^2 |g|^2 / (c^2 |g|^2 + P s^2), for any c > 0
    # (the scale cancels). |g|^2 = 4, P = 50, s^2 = 0.04: eff = 4 / (4 + 2) = 2/3.
    rng = np.random.default_rng(0)
    grad = np.zeros(50)
    grad[:4] = 1.0
    ref = grad + rng.normal(0, 1.0, size=(4000, 50))  # noisy: the pair statistic removes it
    for c in (1.0, 7.0):
        x = c * (grad + rng.normal(0, 0.2, size=(4000, 50)))
        eff, se = efficiency(x, ref, resamples=50)
        assert abs(eff - 2 / 3) < 3 * se + 0.01, (c, eff, se)
    # A biased estimator pointing half away: x = grad/2 + orthogonal part of the same norm:
    # (g·x)^2 / (|g|^2 |x|^2) = (2)^2 / (4 * (1 + 1)) = 0.5 (noise-free).
    ortho = np.zeros(50)
    ortho[10:14] = 0.5
    x = np.tile(grad / 2 + ortho, (100, 1))
    eff, se = efficiency(x, ref, resamples=50)  # se: the reference's noise alone here
    assert abs(eff - 0.5) < 3 * se + 0.005, (eff, se)


def test_first_episodes_keeps_each_envs_first_episode():
    # env 0 ends at t = 1, autoresets at 2, runs on; env 1 ends at t = 3.
    T, N = 5, 2
    valid = np.ones((T, N), bool)
    valid[2, 0] = valid[4, 1] = False
    terminated = np.zeros((T, N), bool)
    terminated[1, 0] = terminated[3, 1] = True
    batch = Batch(obs=np.zeros((T, N, 1)), actions=np.zeros((T, N), np.int64),
                  rewards=np.ones((T, N)), terminated=terminated,
                  truncated=np.zeros((T, N), bool), log_probs=np.zeros((T, N)), valid=valid,
                  next_obs=np.zeros((N, 1)), episode_returns=np.array([2.0, 4.0]),
                  episode_lengths=np.array([2, 4]),
                  episode_steps=np.array([[0, 0], [1, 1], [-1, 2], [0, 3], [1, -1]]))
    cut = first_episodes(batch)
    np.testing.assert_array_equal(cut.valid, [[1, 1], [1, 1], [0, 1], [0, 1], [0, 0]])
    np.testing.assert_array_equal(cut.rewards[:, 0], [1, 1, 0, 0, 0])
    np.testing.assert_array_equal(cut.episode_lengths, [2, 4])
    np.testing.assert_array_equal(cut.episode_steps[:, 0], [0, 1, -1, -1, -1])
    never = Batch(**{**batch.__dict__, "terminated": np.zeros((T, N), bool)})
    with pytest.raises(ValueError, match=r"env 0's first episode does not end within T=5"):
        first_episodes(never)


def test_estimator_names_map_to_configs():
    c = ReinforceConfig()
    assert per_step_config("gpomdp_value_before", c).replace() == c.replace(
        baseline="value", gpomdp=True, value_fit="before")
    assert per_step_config("time_mean", c) == c.replace(baseline="time_mean")
    assert per_step_config("optimal_time", c) is None
    assert per_step_config("episodic_mean", c) is None
