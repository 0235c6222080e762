"""``optimal_time``: GPOMDP with a time-dependent baseline per parameter element.

Peters & Schaal (2008). With ``psi_el = sum_{k<=l} g_ek`` (the score so far) and
``a_l = gamma^l``, for each parameter element h::

    b_l^h = <psi_lh^2 a_l r_l> / <psi_lh^2>      (the mean of a_l r_l where that is 0)
    ascent = sum_e sum_{l<H} psi_elh (a_l r_el - b_l^h(-e)) / sum_e T_e

``b^(-e)`` over the other episodes (and the memory), as in ``leave_one_out``. Episodes of
different lengths: one that ended before step l is continued to the longest one, H, with
reward 0 and ``psi`` frozen at its last value (the fixed-horizon formula on an absorbing
state, which keeps the baseline term zero-mean; docs/baselines.md, Decisions).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from pgtwin_core.baseline_memory import EpisodeSums
from pgtwin_core.baselines.gradient_rows import cumsum_rows, episode_blocks
from pgtwin_core.baselines.leave_one_out import loo_from_sums, ratio_or
from pgtwin_core.baselines.replica_sums import ONE_DEVICE, ReplicaSums


def time_psi(grads: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """float64 ``[M, P]``: ``psi_el = sum_{k<=l} g_ek``, the score so far, per episode block."""
    psi = np.empty(grads.shape)
    for block in episode_blocks(np.asarray(lengths, np.int64)):
        psi[block] = cumsum_rows(np.asarray(grads[block], np.float64))
    return psi


def _time_terms(psi: np.ndarray, ar: np.ndarray, block: slice, n: int,
                horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One episode's padded terms ``[H, P]``: psi^2 a r, psi^2, and a r ``[H, 1]``."""
    sq = np.concatenate([psi[block] ** 2, np.repeat(psi[block.stop - 1:block.stop] ** 2,
                                                    horizon - n, axis=0)])
    r = np.zeros((horizon, 1))
    r[:n, 0] = ar[block]
    return sq * r, sq, r


def time_sums(psi: np.ndarray, lengths: np.ndarray, discounted_rewards: np.ndarray,
              horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sum_e psi^2 a r [H, P], sum_e psi^2 [H, P], sum_e a r [H, 1])`` over the episodes
    given (rows episode after episode), padded to ``horizon`` >= their longest."""
    lengths = np.asarray(lengths, np.int64)
    ar = np.asarray(discounted_rewards, np.float64)
    num, den = np.zeros((horizon, psi.shape[1])), np.zeros((horizon, psi.shape[1]))
    sum_ar = np.zeros((horizon, 1))
    for block, n in zip(episode_blocks(lengths), lengths):
        terms = _time_terms(psi, ar, block, int(n), horizon)
        num, den, sum_ar = num + terms[0], den + terms[1], sum_ar + terms[2]
    return num, den, sum_ar


def time_ascent_from_sums(psi: np.ndarray, lengths: np.ndarray,
                          discounted_rewards: np.ndarray,
                          sums: tuple[np.ndarray, np.ndarray, np.ndarray],
                          num_episodes: float) -> np.ndarray:
    """``[P]``: ``sum_e sum_{l<H} psi_el (a_l r_el - b_l^(-e))`` over the episodes given (not
    divided by the step count), ``b^(-e)`` from ``sums = time_sums(...)`` over all
    ``num_episodes`` episodes (possibly of other replicas and earlier batches too), H their
    horizon (at least the episodes' longest)."""
    num, den, sum_ar = sums
    horizon = num.shape[0]
    lengths = np.asarray(lengths, np.int64)
    ar = np.asarray(discounted_rewards, np.float64)
    total = np.zeros(psi.shape[1])
    for block, n in zip(episode_blocks(lengths), lengths):
        own_num, own_den, own_ar = _time_terms(psi, ar, block, int(n), horizon)
        b = loo_from_sums(num, den, own_num, own_den, sum_ar, own_ar, num_episodes)
        total += np.sum(psi[block] * (ar[block, None] - b[:n]), axis=0)
        total -= psi[block.stop - 1] * np.sum(b[n:], axis=0)  # frozen psi, r = 0
    return total


def time_estimate(psis: Sequence[np.ndarray], lengths: Sequence[np.ndarray],
                  discounted_rewards: Sequence[np.ndarray], horizon: int, num_episodes: int,
                  prior: EpisodeSums | None, reduce: ReplicaSums = ONE_DEVICE
                  ) -> tuple[np.ndarray, np.ndarray, EpisodeSums]:
    """``optimal_time`` over every replica's episodes (per local replica: psi ``[M_r, P]``,
    lengths ``[E_r]``, a r ``[M_r]``), padded to ``horizon`` (the global longest, at least
    the prior's); ``num_episodes``: E over all replicas.

    Returns ``(ascent [P] not divided by the steps, plug-in b [H, P], the global batch's
    sums [H, ...])``.
    """
    local = [list(time_sums(p, n, ar, horizon))
             for p, n, ar in zip(psis, lengths, discounted_rewards)]
    sums = EpisodeSums(*reduce.sum(local), count=float(num_episodes))
    total = sums if prior is None else sums.plus(prior)
    (ascent,) = reduce.sum([[time_ascent_from_sums(p, n, ar, (total.num, total.den, total.sum_r),
                                                   total.count)]
                            for p, n, ar in zip(psis, lengths, discounted_rewards)])
    return ascent, ratio_or(total.num, total.den, total.sum_r / total.count), sums


def time_ascent(grads: np.ndarray, lengths: np.ndarray, discounted_rewards: np.ndarray,
                num_steps: int, prior: EpisodeSums | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """``optimal_time`` on one batch: ``(ascent [P], plug-in b [H, P])`` (module doc).

    Args:
      grads: float ``[M, P]`` per-sample gradients, rows episode after episode, each in
        time order (``Segments.episode_order``); lengths: int ``[E]``, T_e.
      discounted_rewards: float ``[M]``, ``a_l r_l`` in the same row order.
      num_steps: ``sum_e T_e``.
      prior: earlier batches' sums (``[H', P]``) added to the other episodes' in every
        ratio and fallback; H becomes ``max(H, H')``. None: this batch alone.
    """
    lengths = np.asarray(lengths, np.int64)
    horizon = max(int(lengths.max()), 0 if prior is None else prior.horizon)
    ascent, b, _ = time_estimate([time_psi(grads, lengths)], [lengths],
                                 [np.asarray(discounted_rewards, np.float64)], horizon,
                                 lengths.size, prior)
    return ascent / num_steps, b
