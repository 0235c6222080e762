"""Action sampling from distribution parameters, in numpy (and their entropy and KL).

The twins only compute distribution parameters during rollouts; sampling happens here,
with one ``np.random.Generator``, so that both twins produce identical trajectories for
the same seed and weights.

Distribution parameters (``params``), one row per sample:
    categorical: logits                         float [B, num_actions]
    gaussian   : concat(mean, log_std)          float [B, 2 * action_dim]
"""
from __future__ import annotations

import functools
import math

import numpy as np

from pgtwin_core.specs import PolicySpec

LOG_2PI = math.log(2.0 * math.pi)


def split_gaussian(params: np.ndarray, action_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mean [B, d], log_std [B, d])`` from Gaussian params ``[B, 2d]``."""
    return params[:, :action_dim], params[:, action_dim:]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Stable log-softmax over the last axis; finite for logits as large as 1e3."""
    # Array methods, not np.max/np.sum: rollouts call this every env step on [N, n] arrays,
    # where numpy's function wrappers cost as much as the arithmetic.
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def log_prob(spec: PolicySpec, params: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """log pi(a|s) for each row, float64 ``[B]``.

    Args:
      params: float ``[B, spec.num_params]`` (see module docstring).
      actions: int ``[B]`` (categorical) or float ``[B, action_dim]`` (gaussian, the
        unclipped sample).
    """
    params = np.asarray(params, dtype=np.float64)
    if spec.is_discrete:
        idx = np.asarray(actions, dtype=np.int64)
        return np.take_along_axis(log_softmax(params), idx[:, None], axis=1)[:, 0]
    mean, log_std = split_gaussian(params, spec.action_size)
    z = (np.asarray(actions, dtype=np.float64) - mean) * np.exp(-log_std)
    return np.sum(-0.5 * z * z - log_std - 0.5 * LOG_2PI, axis=1)


def sample(
    spec: PolicySpec, params: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Draw one action per row and return ``(actions, log_probs)``.

    Returns:
      actions: int64 ``[B]`` (categorical) or float64 ``[B, action_dim]`` (gaussian,
        unclipped: clip to the bounds only when stepping the env, see :func:`env_actions`).
      log_probs: float64 ``[B]``, log pi of the returned (unclipped) actions.
    """
    params = np.asarray(params, dtype=np.float64)
    if spec.is_discrete:
        # Inverse-CDF sampling: one uniform per row, deterministic given the rng.
        # The log-softmax is computed once and serves both the CDF and the log-probs
        # (the same values ``log_prob`` would recompute).
        logp = log_softmax(params)
        cdf = np.exp(logp).cumsum(axis=1)
        # Rounding can leave cdf[-1] a few ulps below 1; a u above it would then pick the
        # last action even at probability 0 (a masked logit). Dividing makes cdf[-1] == 1.
        cdf /= cdf[:, -1:]
        u = rng.random(params.shape[0])[:, None]
        actions = np.minimum((u > cdf).sum(axis=1), params.shape[1] - 1).astype(np.int64)
        return actions, np.take_along_axis(logp, actions[:, None], axis=1)[:, 0]
    mean, log_std = split_gaussian(params, spec.action_size)
    actions = mean + np.exp(log_std) * rng.standard_normal(mean.shape)
    return actions, log_prob(spec, params, actions)


def env_actions(spec: PolicySpec, actions: np.ndarray,
                dtype: np.dtype | str = np.float32) -> np.ndarray:
    """The actions to step the env with: Gaussian samples clipped to the action bounds, in
    the env's action ``dtype`` (its Box's); categorical indices ``[B]`` shifted to the env's
    ``Discrete(n, start)`` (int64 ``[B]``).

    A bound cast to float32 may round outward (a float64 Box's -0.1 is -0.10000000149 in
    float32, outside it): the cast actions are clipped again to the float32 bounds rounded
    inward, so what the env gets lies in its Box whatever its dtype. An integer Box gets
    each sample rounded to the nearest integer (a cast alone truncates: the env's actions
    were then 0.5 lower on average, and its upper bound out of reach); the log-probability
    stays the sample's, as for the clipping: the env applies a fixed function of it."""
    if spec.is_discrete:
        return actions + spec.action_start if spec.action_start else actions
    if spec.action_low is None:
        return actions
    clipped = np.clip(actions, spec.action_low, spec.action_high)
    dtype = np.dtype(dtype)
    if dtype == clipped.dtype:
        return clipped
    if dtype.kind in "iu":
        clipped = np.rint(clipped)
    low, high = _inward_bounds(spec.action_low, spec.action_high, dtype.str)
    return np.clip(clipped.astype(dtype), low, high)


@functools.lru_cache(maxsize=16)
def _inward_bounds(low: tuple[float, ...], high: tuple[float, ...], dtype: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The bounds in ``dtype``, each rounded toward the inside of ``[low, high]``."""
    want_low, want_high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    cast_low, cast_high = want_low.astype(dtype), want_high.astype(dtype)
    cast_low = np.where(cast_low < want_low, np.nextafter(cast_low, np.inf), cast_low)
    cast_high = np.where(cast_high > want_high, np.nextafter(cast_high, -np.inf), cast_high)
    return cast_low.astype(dtype), cast_high.astype(dtype)


def entropy(spec: PolicySpec, params: np.ndarray) -> np.ndarray:
    """H(pi(.|s)) per row, float64 ``[B]``: ``-sum p log p``, or ``sum(log_std) + d/2 (1 +
    log 2 pi)`` (the twins' ``pgtwin.mode_agnostic.distributions.entropy`` in numpy)."""
    params = np.asarray(params, dtype=np.float64)
    if spec.is_discrete:
        logp = log_softmax(params)
        return -np.sum(np.exp(logp) * logp, axis=1)
    _, log_std = split_gaussian(params, spec.action_size)
    return np.sum(log_std + 0.5 * (1.0 + LOG_2PI), axis=1)


def kl_divergence(spec: PolicySpec, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL(p || q) per row, float64 ``[B]``, between two sets of params of the same states::

        categorical: sum_a p_a (log p_a - log q_a)
        gaussian   : sum_d log(s_q / s_p) + (s_p^2 + (m_p - m_q)^2) / (2 s_q^2) - 1/2
    """
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if spec.is_discrete:
        logp, logq = log_softmax(p), log_softmax(q)
        return np.sum(np.exp(logp) * (logp - logq), axis=1)
    (mp, lp), (mq, lq) = split_gaussian(p, spec.action_size), split_gaussian(q, spec.action_size)
    var_ratio = np.exp(2.0 * (lp - lq))
    return np.sum(lq - lp + 0.5 * (var_ratio + np.square(mp - mq) * np.exp(-2.0 * lq)) - 0.5,
                  axis=1)
