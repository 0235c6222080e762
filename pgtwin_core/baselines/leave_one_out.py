"""Leave-one-out ratio baselines ``b^(-e) = num / den`` over the OTHER episodes (and memory).

In the episodic estimators the baseline subtracted from episode e is a ratio of sums over
the other episodes of the global batch plus the decayed sums of earlier batches
(``pgtwin_core/baseline_memory.py``). It is then independent of episode e, so
``E[g_e b^(-e)] = 0`` and the estimate is exactly unbiased for independent episodes; the
plug-in ratio over all episodes is what the updates log (docs/baselines.md, Decisions)::

    b^(-e) = (M.num + sum_{e' != e} num_e') / (M.den + sum_{e' != e} den_e')
    where that denominator is 0:  (M.sum_r + sum_{e' != e} R_e') / (M.count + E - 1),
    and 0 when that count is 0 (a lone episode and no memory)

A denominator that is exactly zero (a deterministic policy, a dead unit, an input feature
that is always 0) gives the mean baseline, never NaN. ``optimal_scalar_episodic`` has
``num_e = n_e R_e, den_e = n_e`` with ``n_e = ||g_e||^2`` (Greensmith, Bartlett & Baxter
2004); ``optimal_per_param`` the same per parameter element h, ``n_eh = g_eh^2`` (Peters &
Schaal 2008), with ascent ``sum_e g_e (R_e - b^(-e))``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from pgtwin_core.baseline_memory import EpisodeSums
from pgtwin_core.baselines.gradient_rows import cumsum_rows
from pgtwin_core.baselines.replica_sums import ONE_DEVICE, ReplicaSums
from pgtwin_core.baselines.shrinkage import AUTO, auto_lambda, episode_terms, shrunk

NO_MEMORY = EpisodeSums(num=0.0, den=0.0, sum_r=0.0, count=0.0)


def ratio_or(num: np.ndarray, den: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """``num / den`` where ``den > 0``, ``fallback`` (broadcast) where ``den == 0``."""
    safe = np.where(den > 0, den, 1.0)
    return np.where(den > 0, num / safe, np.broadcast_to(fallback, num.shape))


def others(x: np.ndarray) -> np.ndarray:
    """``out[e] = sum_{e' != e} x[e']`` for ``x [E, ...]``, from prefix and suffix sums (no
    cancellation: an element only episode e touches gives exactly 0 for e)."""
    if x.shape[0] == 0:
        return x.copy()
    before = np.concatenate([np.zeros_like(x[:1]), cumsum_rows(x)[:-1]])
    after = np.concatenate([cumsum_rows(x[::-1])[::-1][1:], np.zeros_like(x[:1])])
    return before + after


@dataclass(frozen=True)
class LeaveOneOut:
    """The leave-one-out baselines of a global batch, and its sums."""

    per_replica: list[np.ndarray]
    """``b^(-e)`` float64 ``[E_r, K]`` for each local replica's episodes."""
    plug_in: np.ndarray
    """float64 ``[K]``: the ratio over the memory and all E episodes (for logging)."""
    sums: EpisodeSums
    """The global batch's own sums (``[K]``): what the memory takes in after the update."""


def leave_one_out(num_terms: Sequence[np.ndarray], den_terms: Sequence[np.ndarray],
                  returns: Sequence[np.ndarray], prior: EpisodeSums | None,
                  reduce: ReplicaSums = ONE_DEVICE, shrinkage=None) -> LeaveOneOut:
    """The leave-one-out ratio baselines (module doc) of every local replica's episodes.

    The other replicas' episodes enter as all-reduced sums, ``global - own replica's``
    (exactly 0 on one device); a replica's own other episodes by prefix and suffix sums.

    Args:
      num_terms, den_terms: per local replica, float64 ``[E_r, K]``: each episode's
        ``den_e R_e`` and ``den_e``.
      returns: per local replica, float64 ``[E_r, 1]``: R_e.
      prior: the memory's sums (``[K]``) or None.
      reduce: the sums over replicas (``pgtwin_core.baselines.replica_sums``).
      shrinkage: ``ReinforceConfig.baseline_shrinkage``: None or 0 (the ratio), lambda in
        (0, 1] or ``"auto"``: shrunk towards the leave-one-out mean
        (``pgtwin_core.baselines.shrinkage``).
    """
    local = [[n.sum(axis=0), d.sum(axis=0), r.sum(), np.float64(r.shape[0])]
             for n, d, r in zip(num_terms, den_terms, returns)]
    s_num, s_den, s_r, count = reduce.sum(local)
    sums = EpisodeSums(num=s_num, den=s_den, sum_r=s_r, count=float(count))
    total = sums if prior is None else sums.plus(prior)  # plus checks the prior's shapes
    plug_in = ratio_or(total.num, total.den, total.sum_r / total.count)
    prior = NO_MEMORY if prior is None else prior
    others_count = prior.count + sums.count - 1
    per_replica, means, den_others = [], [], []
    for n, d, r, (own_num, own_den, own_r, _) in zip(num_terms, den_terms, returns, local):
        others_r = prior.sum_r + (s_r - own_r) + others(r)
        fallback = others_r / others_count if others_count > 0 else np.zeros_like(r)
        den_others.append(prior.den + (s_den - own_den) + others(d))
        per_replica.append(ratio_or(prior.num + (s_num - own_num) + others(n), den_others[-1],
                                    fallback))
        means.append(fallback)
    if shrinkage == AUTO:
        centre = s_r / sums.count
        terms = [episode_terms(d, r, centre) for d, r in zip(den_terms, returns)]
        names = sorted(terms[0])
        own = [[t[k].sum(axis=0) for k in names] for t in terms]
        total = dict(zip(names, reduce.sum(own)))
        per_replica = [
            shrunk(b, m, auto_lambda(
                {k: total[k] - o + others(t[k]) for k, o in zip(names, own_k)}, b, m, dn,
                others_count, sums.count - 1, centre))
            for b, m, dn, t, own_k in zip(per_replica, means, den_others, terms, own)]
    elif shrinkage:
        per_replica = [shrunk(b, m, float(shrinkage)) for b, m in zip(per_replica, means)]
    return LeaveOneOut(per_replica=per_replica, plug_in=plug_in, sums=sums)


def as_vector(sums: EpisodeSums) -> EpisodeSums:
    """Scalar sums (``optimal_scalar_episodic``) as ``[1]`` arrays: the ``K = 1`` case."""
    return EpisodeSums(num=np.reshape(sums.num, 1), den=np.reshape(sums.den, 1),
                       sum_r=np.float64(sums.sum_r), count=sums.count)


def as_scalar(sums: EpisodeSums) -> EpisodeSums:
    """``[1]`` sums back to the scalar sums a scalar memory holds."""
    return EpisodeSums(num=np.float64(sums.num[0]), den=np.float64(sums.den[0]),
                       sum_r=np.float64(sums.sum_r), count=sums.count)


def scalar_terms(scores: np.ndarray, returns: np.ndarray) -> tuple[np.ndarray, ...]:
    """``optimal_scalar_episodic``'s ``(num_e, den_e, R_e)``, each ``[E, 1]``, from the
    episode scores ``[E, P]`` and returns ``[E]``."""
    n = np.sum(scores ** 2, axis=1)[:, None]
    r = np.asarray(returns, np.float64)[:, None]
    return n * r, n, r


def per_param_terms(scores: np.ndarray, returns: np.ndarray) -> tuple[np.ndarray, ...]:
    """``optimal_per_param``'s ``(num_e [E, P], den_e [E, P], R_e [E, 1])``."""
    g, r = np.asarray(scores, np.float64), np.asarray(returns, np.float64)[:, None]
    return g * g * r, g * g, r


def loo_scalar_baselines(sq_norms: np.ndarray, returns: np.ndarray,
                         prior: EpisodeSums | None = None) -> np.ndarray:
    """``[E]``: b* of each episode of one batch from the OTHER episodes (module doc).

    ``b*_e = sum_{e' != e} ||g_e'||^2 R_e' / sum_{e' != e} ||g_e'||^2``; their mean return
    where that denominator is 0, and 0 for a lone episode. ``prior``: earlier batches' sums
    (``[]`` each, ``pgtwin_core.baseline_memory``) added to both.
    """
    n = np.asarray(sq_norms, np.float64)[:, None]
    r = np.asarray(returns, np.float64)[:, None]
    loo = leave_one_out([n * r], [n], [r], None if prior is None else as_vector(prior))
    return loo.per_replica[0][:, 0]


def per_param_ascent(scores: np.ndarray, returns: np.ndarray, num_steps: int,
                     prior: EpisodeSums | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Episodic REINFORCE with a baseline per parameter element (Peters & Schaal 2008), one batch.

    Args:
      scores: float ``[E, P]``, g_e per complete episode; returns: float ``[E]``, R_e.
      num_steps: ``sum_e T_e`` (the ascent is a mean per step, docs/baselines.md).
      prior: earlier batches' sums (``[P]``) added to the other episodes' in every ratio
        and fallback; None: this batch alone.

    Returns:
      ``(ascent [P], b [P])``: ``sum_e g_e (R_e - b^(-e)) / num_steps``, and the plug-in
      ``b`` over all E episodes and the prior, for logging.
    """
    num, den, r = per_param_terms(scores, returns)
    loo = leave_one_out([num], [den], [r], prior)
    g = np.asarray(scores, np.float64)
    return np.sum(g * (r - loo.per_replica[0]), axis=0) / num_steps, loo.plug_in


def loo_from_sums(num: np.ndarray, den: np.ndarray, own_num: np.ndarray, own_den: np.ndarray,
                  total_r: np.ndarray, own_r: np.ndarray, num_episodes: float) -> np.ndarray:
    """Leave-one-out ``(num - own_num) / (den - own_den)`` from sums over ALL episodes less
    the episode's own terms; where that denominator is 0, the other episodes' mean
    ``(total_r - own_r) / (E - 1)``, and 0 for a lone episode. Subtracting the own terms
    leaves exactly 0 where no other episode contributes. The sums (and ``num_episodes``, then
    a decayed count) may include earlier batches' (``pgtwin_core.baseline_memory``)."""
    count = num_episodes - 1
    fallback = ((total_r - own_r) / count if count > 0
                else np.zeros_like(np.asarray(own_r, np.float64)))
    return ratio_or(num - own_num, den - own_den, fallback)
