"""Episodes of a rollout batch and the variance-minimising baselines built on them (numpy only).

Both twins call this module with their own per-sample gradients, so the formulas below are
written once; the twins only differentiate. Flat index ``i = t * N + n`` (time-major), as in
``pgcommon.advantages``. ``g_i = grad log pi(a_i|s_i)``; ``<.>`` is a mean over episodes.

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

from pgcommon.advantages import TrainInputs, training_inputs
from pgcommon.returns import discounted_returns
from pgcommon.rollout import Batch

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


def segments(batch: Batch, gamma: float) -> Segments:
    """Cut ``batch`` into segments and mark the complete episodes (see the module doc).

    Raises ``ValueError`` if ``batch.episode_lengths`` does not list one length per episode
    end in the batch, in rollout order, or disagrees with a segment started inside the batch.
    """
    valid = np.asarray(batch.valid, bool)
    num_steps, num_envs = valid.shape
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
    if recorded.shape != end_steps.shape:
        raise ValueError(
            f"batch.episode_lengths has {recorded.size} entries but the batch ends "
            f"{end_steps.size} episodes (terminated | truncated on valid steps)")
    to_em = lambda i: (i % num_envs) * num_steps + i // num_envs  # noqa: E731
    ended_ids = ids_em[to_em(end_steps)]
    inside = (first[ended_ids] % num_steps) > 0  # started after a boundary in the batch
    bad = inside & (lengths[ended_ids] != recorded)
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(
            f"batch.episode_lengths[{k}] = {recorded[k]} but the episode of env "
            f"{end_steps[k] % num_envs} ending at step {end_steps[k] // num_envs} has "
            f"{lengths[ended_ids[k]]} steps in the batch")
    complete = np.zeros(first.size, bool)
    complete[ended_ids] = lengths[ended_ids] == recorded

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


def episode_scores(grads: Grads, episode: np.ndarray, num_episodes: int) -> Grads:
    """``{name: [E, *shape]}``: ``g_e = sum_{i in e} g_i`` (segment sums of per-sample grads).

    Args:
      grads: ``{name: [M, *shape]}`` per-sample gradients.
      episode: int ``[M]`` in ``[0, E)``: the episode of each sample.
    """
    onehot = (np.arange(num_episodes)[:, None] == np.asarray(episode)[None, :]).astype(np.float64)
    return {name: (onehot @ g.reshape(g.shape[0], -1).astype(np.float64)).reshape(
        num_episodes, *g.shape[1:]) for name, g in grads.items()}


def _ratio_or(num: np.ndarray, den: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """``num / den`` where ``den > 0``, ``fallback`` (broadcast) where ``den == 0``."""
    safe = np.where(den > 0, den, 1.0)
    return np.where(den > 0, num / safe, np.broadcast_to(fallback, num.shape))


def per_param_ascent(scores: Grads, returns: np.ndarray, num_steps: int) -> tuple[Grads, Grads]:
    """Episodic REINFORCE with a baseline per parameter element (Peters & Schaal 2008).

    Args:
      scores: ``{name: [E, *shape]}``, g_e per complete episode.
      returns: float ``[E]``, R_e.
      num_steps: ``sum_e T_e`` (the ascent is a mean per step, see the module doc).

    Returns:
      ``(ascent, baselines)``: ``sum_e g_e (R_e - b) / num_steps`` and ``b`` per name (shape
      of the weight), ``b_h = sum_e g_eh^2 R_e / sum_e g_eh^2`` or ``mean_e R_e`` where the
      denominator is 0.
    """
    r = np.asarray(returns, np.float64)
    ascent, baselines = {}, {}
    for name, g in scores.items():
        g = g.astype(np.float64)
        r_e = r.reshape(-1, *[1] * (g.ndim - 1))
        b = _ratio_or(np.sum(g * g * r_e, axis=0), np.sum(g * g, axis=0), r.mean())
        ascent[name] = np.sum(g * (r_e - b), axis=0) / num_steps
        baselines[name] = b
    return ascent, baselines


def time_ascent(grads: Grads, episode: np.ndarray, time: np.ndarray, lengths: np.ndarray,
                discounted_rewards: np.ndarray, num_steps: int) -> tuple[Grads, Grads]:
    """GPOMDP with a time-dependent baseline per parameter element (Peters & Schaal 2008).

    Episodes shorter than ``H = max(lengths)`` are continued with r = 0 and a frozen
    ``psi`` (module doc). For each element h, with ``psi_el = sum_{k<=min(l, T_e-1)} g_ek``::

        b_l = sum_e psi_el^2 a_l r_el / sum_e psi_el^2   (sum_e a_l r_el / E where 0)
        ascent = sum_e sum_{l<H} psi_el (a_l r_el - b_l) / num_steps

    Args:
      grads: ``{name: [M, *shape]}`` per-sample gradients of the complete episodes' steps.
      episode: int ``[M]``, the episode (0..E-1) of each; time: int ``[M]``, its step l.
      lengths: int ``[E]``, T_e; discounted_rewards: float ``[M]``, ``a_l r_l``.

    Returns:
      ``(ascent, baselines)``; the baselines per name have shape ``[H, *shape]``.
    """
    episode, time = np.asarray(episode), np.asarray(time)
    lengths = np.asarray(lengths, np.int64)
    horizon, num_episodes = int(lengths.max()), lengths.size
    order = np.lexsort((time, episode))  # episode by episode, each in time order
    spans = [slice(s, s + n) for s, n in zip(np.cumsum(lengths) - lengths, lengths)]
    ar = np.asarray(discounted_rewards, np.float64)[order]
    mean_ar = np.zeros(horizon)
    for span, n in zip(spans, lengths):
        mean_ar[:n] += ar[span] / num_episodes
    ascent, baselines = {}, {}
    for name, g in grads.items():
        flat = g[order].reshape(g.shape[0], -1).astype(np.float64)
        psi = [np.cumsum(flat[span], axis=0) for span in spans]
        num = np.zeros((horizon, flat.shape[1]))
        den = np.zeros_like(num)
        for psi_e, span, n in zip(psi, spans, lengths):
            num[:n] += psi_e ** 2 * ar[span, None]
            den[:n] += psi_e ** 2
            den[n:] += psi_e[-1] ** 2  # ended: psi frozen at its last value, r = 0
        b = _ratio_or(num, den, mean_ar[:, None])
        total = np.zeros(flat.shape[1])
        for psi_e, span, n in zip(psi, spans, lengths):
            total += np.sum(psi_e * (ar[span, None] - b[:n]), axis=0)
            total -= psi_e[-1] * np.sum(b[n:], axis=0)
        ascent[name] = (total / num_steps).reshape(g.shape[1:])
        baselines[name] = b.reshape(horizon, *g.shape[1:])
    return ascent, baselines


# ----------------------------------------------------------------------------- estimate
@dataclass(frozen=True)
class EpisodicEstimate:
    """What a twin needs to finish an episodic-baseline update on a batch."""

    inputs: TrainInputs
    """Flat inputs over the whole batch with ``weights = 1 / sum_e T_e`` on complete-episode
    steps (0 elsewhere) and ``advantages = R_e - b*`` there (``optimal_scalar_episodic``: an
    ordinary backward pass of this loss is the update) or ``R_e - <R>`` (the others: only
    the reported loss uses it)."""
    ascent: Grads | None
    """``optimal_per_param`` / ``optimal_time``: the ascent direction (+grad J estimate)
    by weight name; None for ``optimal_scalar_episodic``."""
    baseline: float
    """b*, or the mean of the per-element baselines (for logging)."""
    num_episodes: int
    """E, the complete episodes the estimate uses."""


def returns_scale(batch: Batch, gamma: float) -> float:
    """The standard deviation of the batch's reward-to-go over valid steps (1 if it is 0)."""
    returns = discounted_returns(batch.rewards, batch.terminated, batch.truncated, gamma)
    std = float(np.std(returns[batch.valid]))
    return std if std > 0 else 1.0


def per_sample_method(torso: str) -> str:
    """The fastest exact per-sample method for a torso: one backward pass for an MLP."""
    return "analytic" if torso == "mlp" else "vectorized"


def episodic_estimate(batch: Batch, config, spec,
                      per_sample_gradients: Callable[[np.ndarray, np.ndarray], Grads]
                      ) -> EpisodicEstimate:
    """The episodic baselines of ``config.baseline`` on ``batch`` (module doc).

    ``per_sample_gradients(obs, actions) -> {name: [M, *shape]}`` is the twin's.
    Raises ``ValueError`` when the batch holds no complete episode.
    """
    if config.baseline not in EPISODIC:
        raise ValueError(f"episodic_estimate: baseline={config.baseline!r} is not one of {EPISODIC}")
    inputs = training_inputs(batch, config, spec)
    segs = segments(batch, config.gamma)
    if segs.num_episodes == 0:
        raise ValueError(
            f"baseline={config.baseline!r} needs a complete episode in the batch, and none of "
            f"its {segs.lengths.size} segments (T={batch.num_steps}, N={batch.num_envs}) both "
            "starts and ends in it: raise ReinforceConfig.num_steps above the episode length")
    scale = returns_scale(batch, config.gamma) if config.normalize_returns else 1.0
    episode = segs.episode_ids()
    used = np.flatnonzero(episode >= 0)
    lengths = segs.lengths[segs.complete]
    num_steps = int(lengths.sum())
    returns = segs.returns[segs.complete] / scale
    grads = per_sample_gradients(inputs.obs[used], inputs.actions[used])
    ascent = None
    if config.baseline == "optimal_time":
        ascent, b = time_ascent(grads, episode[used], segs.time[used], lengths,
                                segs.discounted_rewards[used] / scale, num_steps)
    else:
        scores = episode_scores(grads, episode[used], segs.num_episodes)
        if config.baseline == "optimal_scalar_episodic":
            sq_norms = sum(np.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in scores.values())
            b = {"b*": np.float64(optimal_scalar_baseline(sq_norms, returns))}
        else:
            ascent, b = per_param_ascent(scores, returns, num_steps)
    baseline = float(np.mean(np.concatenate([np.ravel(v) for v in b.values()])))
    centre = baseline if ascent is None else returns.mean()
    advantages = np.zeros(inputs.batch_size)
    advantages[used] = returns[episode[used]] - centre
    weights = np.zeros(inputs.batch_size)
    weights[used] = 1.0 / num_steps
    dtype = inputs.weights.dtype
    return EpisodicEstimate(
        inputs=dataclasses.replace(inputs, advantages=advantages.astype(dtype),
                                   weights=weights.astype(dtype)),
        ascent=ascent, baseline=baseline, num_episodes=segs.num_episodes)
