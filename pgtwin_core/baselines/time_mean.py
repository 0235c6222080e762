"""``baseline='time_mean'``: the per-time leave-one-out mean of the reward-to-go (numpy).

The cheap state-free, time-dependent baseline: no per-sample gradient, no network. For a
step at episode time t (``pgtwin_core.episode_time``)::

    b_t^(-e) = (1 / (E - 1)) sum_{e' != e} G_{e', t}     a step of complete episode e
    b_t      = (1 / E)       sum_{e'}      G_{e', t}     any other valid step

over the batch's E complete episodes (``pgtwin_core.baselines.episodes``), with
``G_{e', t} = 0`` once episode e' has ended (its absorbing state earns nothing: as
``optimal_time``'s padding, docs/baselines.md Decision 3, this keeps the baseline
independent of whether episode e survives to t). Leaving episode e out makes b independent
of it, so the estimate stays unbiased; no other episode (E <= 1): b = 0. Under
``ReinforceConfig.gpomdp`` the term of step t is ``gamma^t g_t (G_t - b_t)``: the baseline of
the gamma^t-weighted reward-to-go is gamma^t b_t.
"""
from __future__ import annotations

import numpy as np

from pgtwin_core.episode_time import episode_steps
from pgtwin_core.rollout import Batch


def time_mean_baseline(batch: Batch, reward_to_go: np.ndarray, gamma: float) -> np.ndarray:
    """float64 ``[T, N]``: b_t of every step (module doc), 0 on autoreset steps.

    Args:
      batch: the rollout batch ``[T, N]``.
      reward_to_go: float64 ``[T, N]``, its ``discounted_returns`` (raw units, 0 off valid).
      gamma: the discount the segments are cut with (``ReinforceConfig.gamma``).
    """
    from pgtwin_core.baselines.episodes import segments  # the package imports advantages

    seg = segments(batch, gamma, reward_to_go)
    episode = seg.episode_ids()                       # [B], -1 off complete episodes
    steps = episode_steps(batch).reshape(-1)          # [B], -1 on autoreset steps
    g = np.asarray(reward_to_go, np.float64).reshape(-1)
    in_episode = episode >= 0
    horizon = int(steps[in_episode].max()) + 1 if in_episode.any() else 0
    totals = np.bincount(steps[in_episode], weights=g[in_episode], minlength=horizon)
    # One slot past the horizon: a time no complete episode reached sums to 0.
    padded = np.append(totals, 0.0)
    total = padded[np.where((steps >= 0) & (steps < horizon), steps, horizon)]
    num = seg.num_episodes
    others = np.where(in_episode, num - 1, num).astype(np.float64)
    own = np.where(in_episode, g, 0.0)
    b = np.where(others > 0, (total - own) / np.maximum(others, 1.0), 0.0)
    return np.where(steps >= 0, b, 0.0).reshape(batch.valid.shape)
