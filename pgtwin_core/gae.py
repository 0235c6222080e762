"""Generalized advantage estimation: lambda-advantages from a learned value, for REINFORCE
with ``baseline='value'`` and ``ReinforceConfig.gae_lambda`` (Schulman et al. 2016, "High-
dimensional continuous control using generalized advantage estimation"; Spinning Up's VPG).

Computed once here, in float64 numpy, so both twins train on the same arrays (as
``pgtwin_core.returns``). Time-major: ``[T]`` for one env, ``[T, N]`` for N in lock-step.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from pgtwin_core.returns import _check_finite, _check_shape, episode_ends

__all__ = ["lambda_advantages"]


def lambda_advantages(
    rewards: ArrayLike,
    values: ArrayLike,
    terminated: ArrayLike,
    truncated: ArrayLike,
    gamma: float,
    lambda_: float,
    bootstrap: ArrayLike | None = None,
) -> np.ndarray:
    """GAE(gamma, lambda): ``A_t = sum_l (gamma lambda)^l delta_{t+l}`` within each episode.

    With ``r_t = rewards[t]``, ``v_t = values[t]``, ``v_tp1 = bootstrap[t]``::

        next_t  = 0              if terminated[t]            (true end: nothing follows)
                = v_tp1          if truncated[t]             (time limit: value of s_t+1)
                = v_tp1          if t == T-1, not ended      (rollout cut mid-episode)
                = v_{t+1}        otherwise                   (episode continues)
        delta_t = r_t + gamma * next_t - v_t
        A_t     = delta_t                                  if step t ends the array's episode
                = delta_t + gamma * lambda * A_{t+1}       otherwise

    ``A + values`` are the lambda-returns, the value net's targets. Identities: lambda = 1
    gives ``discounted_returns(rewards, terminated, truncated, gamma, bootstrap) - values``
    (the Monte-Carlo advantage, for any bootstrap); lambda = 0 gives delta_t.

    A step that belongs to no episode (gymnasium's autoreset step, reward 0) gets a value
    like any other; the step before it ends its episode, so nothing flows from it into a
    real step, and the caller masks it (``Batch.valid``).

    Args:
        rewards: float array ``[T]`` or ``[T, N]`` (time-major); finite.
        values: float array, shape of ``rewards``; v_t = V(s_t), the baseline's value of the
            state step t acted in (raw return units); finite.
        terminated: bool array, shape of ``rewards``; the episode truly ended at step t.
        truncated: bool array, shape of ``rewards``; a time limit cut the episode at step t
            (never together with ``terminated``).
        gamma: python float in [0, 1].
        lambda_: python float in [0, 1]; the trace decay (1: Monte-Carlo, 0: one-step TD).
        bootstrap: optional float array, shape of ``rewards``; v_tp1, the value of the
            state after step t, read only where ``truncated[t]`` and at t = T-1 of an
            episode still running. Default: zeros (no bootstrap).

    Returns:
        float64 array, shape of ``rewards``: A_t. Plain numpy (no gradient).

    Raises:
        ValueError: naming the argument (and the first bad index): ``rewards`` not 1-D or
            2-D, another array of another shape, ``gamma`` or ``lambda_`` outside [0, 1],
            a non-finite reward, value or bootstrap, both flags set at one step.
    """
    r_t, ends_t, next_t = episode_ends(rewards, terminated, truncated, bootstrap,
                                       gamma=gamma, lambda_=lambda_)
    shape = r_t.shape
    v_t = np.asarray(values, dtype=np.float64)
    _check_shape(v_t, shape, "values", "rewards")
    _check_finite(v_t, "values")
    gamma, lam = float(gamma), float(lambda_)
    a_t = np.empty(shape, dtype=np.float64)
    if shape[0] == 0:
        return a_t
    # After an end, what follows (0, or the bootstrap after a cut); else the next value.
    next_t[:-1] = np.where(ends_t[:-1], next_t[:-1], v_t[1:])
    delta_t = r_t + gamma * next_t - v_t
    a_tp1 = np.zeros(shape[1:], dtype=np.float64)
    for t in range(shape[0] - 1, -1, -1):
        a_tp1 = delta_t[t] + gamma * lam * np.where(ends_t[t], 0.0, a_tp1)
        a_t[t] = a_tp1
    return a_t
