"""Episodes of a rollout batch and the variance-minimising baselines built on them (numpy only).

Both twins call this module with their own per-sample gradients, so the formulas below are
written once; the twins only differentiate. Flat index ``i = t * N + n`` (time-major), as in
``pgtwin_core.advantages``. ``g_i = grad log pi(a_i|s_i)``; ``<.>`` is a mean over episodes.

Baselines (``ReinforceConfig.baseline``)::

    optimal_scalar           b* = sum_i w_i ||g_i||^2 R_i / sum_i w_i ||g_i||^2
                             g_i per step, R_i the reward-to-go     (the twins do it in TF)
    optimal_scalar_episodic  the same with g_e = sum_{t in e} g_t and R_e = sum_l gamma^l r_l
                             per complete episode e   (Greensmith, Bartlett & Baxter 2004)
    optimal_per_param        b_h = <g_h^2 R> / <g_h^2>, element h of the parameters;
                             ascent <g_h (R - b_h)>   (Peters & Schaal 2008, episodic REINFORCE)
    optimal_time             psi_l = sum_{k<=l} g_k (score so far), per element h:
                             b_l^h = <psi_lh^2 a_l r_l> / <psi_lh^2>, a_l = gamma^l;
                             ascent <sum_l psi_lh (a_l r_l - b_l^h)>   (Peters & Schaal, GPOMDP)

A denominator that is exactly zero (a deterministic policy, a dead unit, an input feature that
is always 0) gives that element the mean baseline (``sum w R / sum w``, ``<R>`` or
``<a_l r_l>``), never NaN.

Leave-one-out (a decision, see docs/baselines.md): in the three episodic estimators the
baseline subtracted from episode e is the formula above over the OTHER episodes of the batch,
``b^(-e)``. It is then independent of episode e, so ``E[g_e b^(-e)] = E[g_e] E[b^(-e)] = 0``
and the estimate is exactly unbiased for independent episodes. The plug-in baseline over all
E episodes correlates with g_e and biases the estimate by O(1/E): measured over 400 batches
of 32 episodes, 8.5 % of the gradient (z = 5.3) for ``optimal_per_param`` and 10.6 %
(z = 10.9) for ``optimal_time``. A lone episode gets b = 0 (nothing else to estimate it
from). The plug-in values are what the updates log as ``baseline``. The per-step
``optimal_scalar`` keeps the plug-in b* of one batch (its samples are not independent, so
leaving one out would not make it exact; its bias measured within sampling error).

Memory (a decision, see docs/baselines.md): every episodic ratio above also takes in the
decayed sums of earlier batches (``pgtwin_core/baseline_memory.py``, ``ReinforceConfig.
baseline_memory``, default 0.5): ``b^(-e) = (M.num + sum_{e' != e} num_e') / (M.den +
sum_{e' != e} den_e')``, the mean fallback ``(M.sum_r + sum_{e' != e} R_e') / (M.count + E - 1)``.
Earlier batches are independent of episode e too, so the estimate stays exactly unbiased;
8 episodes a batch no longer estimate a ratio per parameter element on their own. The
formulas run on raw returns (the memory's units); ``normalize_returns`` divides the results.

Partial episodes (a decision, see docs/baselines.md): a batch of T steps cuts episodes at both
edges. The episodic estimators (``optimal_scalar_episodic``, ``optimal_per_param``,
``optimal_time``) use only *complete* episodes, whose first and last steps are both in the
batch: an episode cut at the start lacks the scores of its earlier steps, one cut at the end
lacks its later rewards, and either would bias ``g_e R_e``. The steps of cut episodes get
weight 0; a batch with no complete episode raises ``ValueError`` (raise ``num_steps``).
Whether a segment starting at ``t = 0`` is a whole episode is read off
``batch.episode_lengths`` (the rollout counts every episode from its real first step).

``optimal_time`` with episodes of different lengths: an episode that ended before step l
is continued to the longest one, H, with reward 0 and no further score (``psi`` frozen at its
last value). This is the fixed-horizon formula on an absorbing state, and keeps the baseline
term zero-mean (the score summed up to a stopping time has mean zero); averaging over the
episodes still running at l would not (whether an episode lasts past l depends on its actions).

Scale: the episodic ascent is ``sum_e (...) / sum_e T_e``, a mean per step of the complete
episodes, so its step size matches the per-step estimators' ``sum_i w_i (...)``. With
``normalize_returns`` the episodic returns and rewards are divided by the standard deviation
of the batch's reward-to-go (the per-step estimators' scale); they are not centred, as every
baseline here moves with a shift of R anyway (b(R + c) = b(R) + c).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np

from pgtwin_core.advantages import TrainInputs, training_inputs
from pgtwin_core.baseline_memory import BaselineMemory, EpisodeSums
from pgtwin_core.errors import NoCompleteEpisodeError
from pgtwin_core.returns import discounted_returns
from pgtwin_core.rollout import Batch

EPISODIC = ("optimal_scalar_episodic", "optimal_per_param", "optimal_time")
Grads = dict[str, np.ndarray]


# ----------------------------------------------------------------------------- episodes
@dataclass(frozen=True)
class Segments:
    """The runs of consecutive valid steps of each env in a batch, numbered env by env.

    ``B = T * N``, flat time-major; ``S`` segments. A segment is a whole episode, or the part
    of one that the batch edges cut.
    """

    ids: np.ndarray
    """int64 ``[B]``: segment of each step; -1 on autoreset steps (which belong to none)."""
    time: np.ndarray
    """int64 ``[B]``: l, steps since the segment's first step; -1 on autoreset steps."""
    lengths: np.ndarray
    """int64 ``[S]``: steps in each segment."""
    complete: np.ndarray
    """bool ``[S]``: the segment is a whole episode (first and last step in the batch)."""
    returns: np.ndarray
    """float64 ``[S]``: ``sum_l gamma^l r_l`` over the segment's steps (the discounted
    episode return for a complete one)."""
    discounted_rewards: np.ndarray
    """float64 ``[B]``: ``a_l r_l = gamma^l r_l``; 0 on autoreset steps."""

    @property
    def num_episodes(self) -> int:
        """E, the number of complete episodes."""
        return int(self.complete.sum())

    def episode_ids(self) -> np.ndarray:
        """int64 ``[B]``: index (0..E-1, in segment order) of each step's complete episode, else -1."""
        index = np.where(self.complete, np.cumsum(self.complete) - 1, -1)
        return np.where(self.ids >= 0, index[np.maximum(self.ids, 0)], -1)

    def episode_order(self) -> np.ndarray:
        """int64 ``[M]``: the flat indices of the complete episodes' steps, episode after
        episode, each in time order (the row order the episodic formulas expect)."""
        episode = self.episode_ids()
        used = np.flatnonzero(episode >= 0)
        return used[np.lexsort((self.time[used], episode[used]))]


def segments(batch: Batch, gamma: float) -> Segments:
    """Cut ``batch`` into segments and mark the complete episodes (see the module doc).

    Raises ``ValueError`` if ``batch.episode_lengths`` does not list one length per episode
    end in the batch, in rollout order, or disagrees with a segment started inside the batch.
    An empty ``episode_lengths`` (a hand-made batch) counts only the segments started inside
    the batch as whole episodes.
    """
    valid = np.asarray(batch.valid, bool)
    num_steps, num_envs = valid.shape
    if not valid.any():
        raise ValueError(f"batch has no valid step (T={num_steps}, N={num_envs}): no episode")
    ended = (np.asarray(batch.terminated, bool) | np.asarray(batch.truncated, bool)) & valid
    after_boundary = np.zeros_like(valid)
    after_boundary[1:] = ended[:-1] | ~valid[:-1]
    starts = valid & after_boundary
    starts[0] |= valid[0]
    # Env-major order makes every segment a contiguous run, numbered by a cumulative sum.
    starts_em, valid_em = starts.T.reshape(-1), valid.T.reshape(-1)
    first = np.flatnonzero(starts_em)
    ids_em = np.where(valid_em, np.cumsum(starts_em) - 1, -1)
    time_em = np.where(valid_em, np.arange(valid_em.size) - first[np.maximum(ids_em, 0)], -1)
    lengths = np.bincount(ids_em[valid_em], minlength=first.size).astype(np.int64)

    # Episode ends in rollout order (t, then env) are matched to batch.episode_lengths.
    end_steps = np.flatnonzero(ended.reshape(-1))
    recorded = np.asarray(batch.episode_lengths, np.int64)
    if recorded.size == 0:
        # A hand-made batch that records no lengths: a segment from t = 0 may have begun
        # before the batch, so only segments started inside it count as whole episodes.
        recorded = np.full(end_steps.shape, -1, np.int64)
    elif recorded.shape != end_steps.shape:
        raise ValueError(
            f"batch.episode_lengths has {recorded.size} entries but the batch ends "
            f"{end_steps.size} episodes (terminated | truncated on valid steps)")
    to_em = lambda i: (i % num_envs) * num_steps + i // num_envs  # noqa: E731
    ended_ids = ids_em[to_em(end_steps)]
    inside = (first[ended_ids] % num_steps) > 0  # started after a boundary in the batch
    bad = inside & (lengths[ended_ids] != recorded) & (recorded >= 0)
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(
            f"batch.episode_lengths[{k}] = {recorded[k]} but the episode of env "
            f"{end_steps[k] % num_envs} ending at step {end_steps[k] // num_envs} has "
            f"{lengths[ended_ids[k]]} steps in the batch")
    complete = np.zeros(first.size, bool)
    complete[ended_ids] = inside | (lengths[ended_ids] == recorded)

    to_tm = lambda a: a.reshape(num_envs, num_steps).T.reshape(-1)  # noqa: E731
    rewards = np.where(valid, np.asarray(batch.rewards, np.float64), 0.0)
    reward_to_go = discounted_returns(rewards, batch.terminated & valid, batch.truncated & valid,
                                      gamma)
    time = to_tm(time_em)
    return Segments(
        ids=to_tm(ids_em), time=time, lengths=lengths, complete=complete,
        returns=reward_to_go.T.reshape(-1)[first],
        discounted_rewards=np.where(time >= 0, gamma ** np.maximum(time, 0), 0.0)
        * rewards.reshape(-1),
    )


# ----------------------------------------------------------------------------- formulas
def optimal_scalar_baseline(sq_norms: np.ndarray, returns: np.ndarray,
                            weights: np.ndarray | None = None) -> float:
    """``b* = sum w ||g||^2 R / sum w ||g||^2``; the mean ``sum w R / sum w`` if all scores are 0.

    The b minimising ``sum_i w_i ||g_i||^2 (R_i - b)^2``, the second moment of the estimate
    (Greensmith, Bartlett & Baxter 2004, Theorem 13 for its per-sample form).

    Args:
      sq_norms: float ``[M]``, ``||g_i||^2 >= 0``.
      returns: float ``[M]``, R_i.
      weights: float ``[M]`` >= 0 with a positive sum; ones if None.
    """
    n, r = np.asarray(sq_norms, np.float64), np.asarray(returns, np.float64)
    w = np.ones_like(r) if weights is None else np.asarray(weights, np.float64)
    if not (n.shape == r.shape == w.shape and n.ndim == 1):
        raise ValueError(f"sq_norms {n.shape}, returns {r.shape} and weights {w.shape} must "
                         "be vectors of one length")
    den = np.sum(w * n)
    return float(np.sum(w * n * r) / den) if den > 0 else float(np.sum(w * r) / np.sum(w))


def flatten(grads: Grads) -> np.ndarray:
    """float64 ``[M, P]``: every weight's per-sample gradient side by side (dict order)."""
    return np.concatenate([g.reshape(g.shape[0], -1) for g in grads.values()], axis=1,
                          dtype=np.float64)


def unflatten(values: np.ndarray, like: Grads) -> Grads:
    """Split the last axis of ``values [..., P]`` back into ``like``'s weights and shapes."""
    out, start = {}, 0
    for name, g in like.items():
        size = int(np.prod(g.shape[1:], dtype=np.int64))
        out[name] = values[..., start:start + size].reshape(*values.shape[:-1], *g.shape[1:])
        start += size
    return out


def _cumsum_rows(x: np.ndarray) -> np.ndarray:
    """``np.cumsum(x, axis=0)`` for a C-ordered ``[R, P]``, a row at a time.

    numpy's axis-0 accumulate walks memory column by column and is ~10x slower on the
    ``[M, P]`` matrices here than R contiguous row additions.
    """
    out = np.empty_like(x)
    out[0] = x[0]
    for r in range(1, x.shape[0]):
        np.add(out[r - 1], x[r], out=out[r])
    return out


def _blocks(lengths: np.ndarray) -> list[slice]:
    """The rows of each episode when rows are episode after episode (``Segments.episode_order``)."""
    ends = np.cumsum(lengths)
    return [slice(int(e - n), int(e)) for e, n in zip(ends, lengths)]


def episode_scores(grads: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``[E, P]``: ``g_e = sum_{t in e} g_t``, the per-episode scores.

    Args:
      grads: float ``[M, P]`` per-sample gradients, rows episode after episode
        (``Segments.episode_order``); lengths: int ``[E]``, T_e, summing to M.
    """
    return np.stack([grads[block].sum(axis=0, dtype=np.float64) for block in _blocks(lengths)])


def _ratio_or(num: np.ndarray, den: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """``num / den`` where ``den > 0``, ``fallback`` (broadcast) where ``den == 0``."""
    safe = np.where(den > 0, den, 1.0)
    return np.where(den > 0, num / safe, np.broadcast_to(fallback, num.shape))


def _others(x: np.ndarray) -> np.ndarray:
    """``out[e] = sum_{e' != e} x[e']`` for ``x [E, ...]``, from prefix and suffix sums (no
    cancellation: an element only episode e touches gives exactly 0 for e)."""
    before = np.concatenate([np.zeros_like(x[:1]), _cumsum_rows(x)[:-1]])
    after = np.concatenate([_cumsum_rows(x[::-1])[::-1][1:], np.zeros_like(x[:1])])
    return before + after


def _ratio_estimate(num_terms: np.ndarray, den_terms: np.ndarray, returns: np.ndarray,
                    prior: EpisodeSums | None) -> tuple[np.ndarray, np.ndarray, EpisodeSums]:
    """The leave-one-out ratio baselines of one batch, earlier batches' sums included.

    ``b^(-e) = (prior.num + sum_{e' != e} num_e') / (prior.den + sum_{e' != e} den_e')``;
    where that denominator is 0, ``(prior.sum_r + sum_{e' != e} R_e') / (prior.count + E - 1)``,
    and 0 when that count is 0 (a lone episode and no memory).

    Args:
      num_terms, den_terms: float64 ``[E, K]``, each episode's ``den_e R_e`` and ``den_e``.
      returns: float64 ``[E, 1]``, R_e. prior: the memory's sums (``pgtwin_core.baseline_memory``,
        shaped ``[K]``) or None.

    Returns:
      ``(b_loo [E, K], b [K], sums)``: ``b`` the plug-in over the prior and all E episodes
      (for logging), ``sums`` this batch's own (what the memory takes in after the update).
    """
    sums = EpisodeSums(num=num_terms.sum(axis=0), den=den_terms.sum(axis=0),
                       sum_r=returns.sum(), count=float(returns.shape[0]))
    total = sums if prior is None else sums.plus(prior)  # plus checks the prior's shapes
    b = _ratio_or(total.num, total.den, total.sum_r / total.count)
    if prior is None:
        prior = EpisodeSums(num=0.0, den=0.0, sum_r=0.0, count=0.0)
    count = prior.count + returns.shape[0] - 1
    others_r = prior.sum_r + _others(returns)
    fallback = others_r / count if count > 0 else np.zeros_like(returns)
    b_loo = _ratio_or(prior.num + _others(num_terms), prior.den + _others(den_terms), fallback)
    return b_loo, b, sums


def loo_scalar_baselines(sq_norms: np.ndarray, returns: np.ndarray,
                         prior: EpisodeSums | None = None) -> np.ndarray:
    """``[E]``: b* of each episode from the OTHER episodes (leave-one-out, module doc).

    ``b*_e = sum_{e' != e} ||g_e'||^2 R_e' / sum_{e' != e} ||g_e'||^2``; their mean return
    where that denominator is 0, and 0 for a lone episode. ``prior``: earlier batches' sums
    (``[]`` each, ``pgtwin_core.baseline_memory``) added to both.
    """
    return _scalar_estimate(sq_norms, returns, prior)[0]


def _scalar_estimate(sq_norms, returns, prior):
    """``(b_loo [E], plug-in b, this batch's scalar sums)`` of ``optimal_scalar_episodic``."""
    n = np.asarray(sq_norms, np.float64)[:, None]
    r = np.asarray(returns, np.float64)[:, None]
    b_loo, b, sums = _ratio_estimate(n * r, n, r, None if prior is None else _as_vector(prior))
    return b_loo[:, 0], float(b[0]), _as_scalar(sums)


def _as_vector(sums: EpisodeSums) -> EpisodeSums:
    """Scalar sums as ``[1]`` arrays (the ``K = 1`` of ``_ratio_estimate``)."""
    return EpisodeSums(num=np.reshape(sums.num, 1), den=np.reshape(sums.den, 1),
                       sum_r=np.float64(sums.sum_r), count=sums.count)


def _as_scalar(sums: EpisodeSums) -> EpisodeSums:
    return EpisodeSums(num=np.float64(sums.num[0]), den=np.float64(sums.den[0]),
                       sum_r=np.float64(sums.sum_r), count=sums.count)


def per_param_ascent(scores: np.ndarray, returns: np.ndarray, num_steps: int,
                     prior: EpisodeSums | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Episodic REINFORCE with a baseline per parameter element (Peters & Schaal 2008).

    ``b_h = sum g_h^2 R / sum g_h^2``, taken for each episode over the other episodes
    (leave-one-out, module doc); where that denominator is 0, the others' mean return.

    Args:
      scores: float ``[E, P]``, g_e per complete episode; returns: float ``[E]``, R_e.
      num_steps: ``sum_e T_e`` (the ascent is a mean per step, see the module doc).
      prior: earlier batches' sums (``[P]``, ``pgtwin_core.baseline_memory``) added to the
        other episodes' in every ratio and fallback; None: this batch alone.

    Returns:
      ``(ascent [P], b [P])``: ``sum_e g_e (R_e - b^(-e)) / num_steps``, and the plug-in
      ``b`` over all E episodes and the prior (the mean fallback included), for logging.
    """
    ascent, b, _ = _per_param_estimate(scores, returns, prior)
    return ascent / num_steps, b


def _per_param_estimate(scores, returns, prior):
    """``(ascent [P] not divided by the steps, plug-in b [P], this batch's sums)``."""
    g, r = np.asarray(scores, np.float64), np.asarray(returns, np.float64)[:, None]
    b_loo, b, sums = _ratio_estimate(g * g * r, g * g, r, prior)
    return np.sum(g * (r - b_loo), axis=0), b, sums


def time_ascent(grads: np.ndarray, lengths: np.ndarray, discounted_rewards: np.ndarray,
                num_steps: int, prior: EpisodeSums | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """GPOMDP with a time-dependent baseline per parameter element (Peters & Schaal 2008).

    Episodes shorter than ``H = max(lengths)`` are continued with r = 0 and a frozen
    ``psi`` (module doc). For each element h, with ``psi_el = sum_{k<=min(l, T_e-1)} g_ek``::

        b_l = sum psi_l^2 a_l r_l / sum psi_l^2   (the mean of a_l r_l where that is 0)
        ascent = sum_e sum_{l<H} psi_el (a_l r_el - b_l^(-e)) / num_steps

    with ``b^(-e)`` taken over the episodes other than e (leave-one-out, module doc).

    Args:
      grads: float ``[M, P]`` per-sample gradients, rows episode after episode, each in
        time order (``Segments.episode_order``); lengths: int ``[E]``, T_e.
      discounted_rewards: float ``[M]``, ``a_l r_l`` in the same row order.
      prior: earlier batches' sums (``[H', P]``, ``pgtwin_core.baseline_memory``) added to the
        other episodes' in every ratio and fallback; H becomes ``max(H, H')``, the batch's
        episodes continued to it like the shorter ones. None: this batch alone.

    Returns:
      ``(ascent [P], b [H, P])``, b the plug-in over all E episodes (and the prior), for
      logging.
    """
    ascent, b, _ = _time_estimate(grads, lengths, discounted_rewards, prior)
    return ascent / num_steps, b


def _time_estimate(grads, lengths, discounted_rewards, prior):
    """``(ascent [P] not divided by the steps, plug-in b [H, P], this batch's sums [H, ...])``,
    H at least the prior's horizon."""
    lengths = np.asarray(lengths, np.int64)
    horizon = max(int(lengths.max()), 0 if prior is None else prior.horizon)
    ar = np.asarray(discounted_rewards, np.float64)
    psi = time_psi(grads, lengths)
    sums = EpisodeSums(*time_sums(psi, lengths, ar, horizon), count=float(lengths.size))
    total = sums if prior is None else sums.plus(prior)
    ascent = time_ascent_from_sums(psi, lengths, ar, (total.num, total.den, total.sum_r),
                                   total.count)
    return ascent, _ratio_or(total.num, total.den, total.sum_r / total.count), sums


def time_psi(grads: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """float64 ``[M, P]``: ``psi_el = sum_{k<=l} g_ek``, the score so far, per episode block."""
    psi = np.empty(grads.shape)
    for block in _blocks(np.asarray(lengths, np.int64)):
        psi[block] = _cumsum_rows(np.asarray(grads[block], np.float64))
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
    given (rows as ``time_ascent``), padded to ``horizon`` >= their longest. A distributed
    update all-reduces these over replicas before ``time_ascent_from_sums``."""
    lengths = np.asarray(lengths, np.int64)
    ar = np.asarray(discounted_rewards, np.float64)
    num, den = np.zeros((horizon, psi.shape[1])), np.zeros((horizon, psi.shape[1]))
    sum_ar = np.zeros((horizon, 1))
    for block, n in zip(_blocks(lengths), lengths):
        terms = _time_terms(psi, ar, block, int(n), horizon)
        num, den, sum_ar = num + terms[0], den + terms[1], sum_ar + terms[2]
    return num, den, sum_ar


def loo_from_sums(num: np.ndarray, den: np.ndarray, own_num: np.ndarray, own_den: np.ndarray,
                  total_r: np.ndarray, own_r: np.ndarray, num_episodes: float) -> np.ndarray:
    """Leave-one-out ``(num - own_num) / (den - own_den)`` from sums over ALL episodes less
    the episode's own terms; where that denominator is 0, the other episodes' mean
    ``(total_r - own_r) / (E - 1)``, and 0 for a lone episode. Subtracting the own terms
    leaves exactly 0 where no other episode contributes. The sums (and ``num_episodes``, then
    a decayed count) may include earlier batches' (``pgtwin_core.baseline_memory``)."""
    others = num_episodes - 1
    fallback = ((total_r - own_r) / others if others > 0
                else np.zeros_like(np.asarray(own_r, np.float64)))
    return _ratio_or(num - own_num, den - own_den, fallback)


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
    for block, n in zip(_blocks(lengths), lengths):
        own_num, own_den, own_ar = _time_terms(psi, ar, block, int(n), horizon)
        b = loo_from_sums(num, den, own_num, own_den, sum_ar, own_ar, num_episodes)
        total += np.sum(psi[block] * (ar[block, None] - b[:n]), axis=0)
        total -= psi[block.stop - 1] * np.sum(b[n:], axis=0)  # frozen psi, r = 0
    return total


# ----------------------------------------------------------------------------- estimate
@dataclass(frozen=True)
class EpisodicEstimate:
    """What a twin needs to finish an episodic-baseline update on a batch."""

    inputs: TrainInputs
    """Flat inputs over the whole batch with ``weights = 1 / sum_e T_e`` on complete-episode
    steps (0 elsewhere) and ``advantages = R_e - b*`` there (``optimal_scalar_episodic``: an
    ordinary backward pass of this loss is the update; b* leave-one-out) or ``R_e - <R>``
    (the others: only the reported loss uses it)."""
    ascent: Grads | None
    """``optimal_per_param`` / ``optimal_time``: the ascent direction (+grad J estimate)
    by weight name; None for ``optimal_scalar_episodic``."""
    baseline: float
    """The plug-in b* over all episodes, or the mean of the per-element plug-in baselines
    (for logging)."""
    num_episodes: int
    """E, the complete episodes the estimate uses."""
    sums: EpisodeSums
    """This batch's sums in raw return units (``pgtwin_core.baseline_memory``): what the
    agent's ``BaselineMemory`` takes in once the update is applied."""


def returns_scale(batch: Batch, gamma: float) -> float:
    """The standard deviation of the batch's reward-to-go over valid steps (1 if it is 0)."""
    returns = discounted_returns(batch.rewards, batch.terminated, batch.truncated, gamma)
    std = float(np.std(returns[batch.valid]))
    return std if std > 0 else 1.0


def skipped_update_metrics() -> dict[str, float | int | bool]:
    """``agent.update``'s metrics for a batch with no complete episode: nothing applied.

    The episodic estimators have no unbiased estimate there, so the update is skipped (weights,
    optimizer state and baseline memory unchanged) and the loop goes on: ``episodes = 0`` and
    ``applied = False`` say why; loss, gradient norm, entropy and baseline are NaN (not
    computed). ``pgtwin train`` counts these updates and says how to avoid them.
    """
    nan = float("nan")
    return {"loss": nan, "grad_norm": nan, "entropy": nan, "applied": False,
            "baseline": nan, "episodes": 0}


def per_sample_method(torso: str) -> str:
    """The fastest exact per-sample method for a torso: one backward pass for an MLP."""
    return "analytic" if torso == "mlp" else "vectorized"


def episodic_estimate(batch: Batch, config, spec,
                      per_sample_gradients: Callable[[np.ndarray, np.ndarray], Grads],
                      memory: BaselineMemory | None = None) -> EpisodicEstimate:
    """The episodic baselines of ``config.baseline`` on ``batch`` (module doc).

    ``per_sample_gradients(obs, actions) -> {name: [M, *shape]}`` is the twin's. ``memory``:
    the agent's earlier batches' sums, added to every leave-one-out ratio (read only here;
    the caller adds ``EpisodicEstimate.sums`` to it once the update is applied). The
    formulas run on raw returns (the memory's units) and the ascent, advantages and logged
    baseline are divided by the batch's scale afterwards (``normalize_returns``): every one
    of them is linear in R.
    Raises ``ValueError`` when the batch holds no complete episode.
    """
    if config.baseline not in EPISODIC:
        raise ValueError(f"episodic_estimate: baseline={config.baseline!r} is not one of {EPISODIC}")
    inputs = training_inputs(batch, config, spec)
    segs = segments(batch, config.gamma)
    if segs.num_episodes == 0:
        raise NoCompleteEpisodeError(
            f"baseline={config.baseline!r} needs a complete episode in the batch, and none of "
            f"its {segs.lengths.size} segments (T={batch.num_steps}, N={batch.num_envs}) both "
            "starts and ends in it: raise ReinforceConfig.num_steps above the episode length")
    scale = returns_scale(batch, config.gamma) if config.normalize_returns else 1.0
    used = segs.episode_order()
    episode = segs.episode_ids()[used]
    lengths = segs.lengths[segs.complete]
    num_steps = int(lengths.sum())
    returns = segs.returns[segs.complete]
    per_sample = per_sample_gradients(inputs.obs[used], inputs.actions[used])
    grads = flatten(per_sample)
    ascent = None
    prior = None if memory is None else memory.sums
    if config.baseline == "optimal_time":
        ascent, b, sums = _time_estimate(grads, lengths, segs.discounted_rewards[used], prior)
    else:
        scores = episode_scores(grads, lengths)
        if config.baseline == "optimal_scalar_episodic":
            b_loo, b, sums = _scalar_estimate(np.sum(scores ** 2, axis=1), returns, prior)
        else:
            ascent, b, sums = _per_param_estimate(scores, returns, prior)
    ascent = None if ascent is None else ascent / (num_steps * scale)
    returns = returns / scale
    baseline = float(np.mean(b)) / scale
    advantages = np.zeros(inputs.batch_size)
    advantages[used] = returns[episode] - (b_loo[episode] / scale if ascent is None
                                           else returns.mean())
    weights = np.zeros(inputs.batch_size)
    weights[used] = 1.0 / num_steps
    dtype = inputs.weights.dtype
    return EpisodicEstimate(
        inputs=dataclasses.replace(inputs, advantages=advantages.astype(dtype),
                                   weights=weights.astype(dtype)),
        ascent=None if ascent is None else unflatten(ascent, per_sample),
        baseline=baseline, num_episodes=segs.num_episodes, sums=sums)
