"""The episodic estimator: a batch's gradient estimate with an episodic optimal baseline.

One implementation for one device and for ``tf.distribute``: each replica cuts its own batch
into episodes (an env's episodes never cross replicas) and takes per-sample gradients on its
copy of the weights; every sum over episodes or steps goes through the reduce hook
(``pgtwin_core.baselines.replica_sums``: identity on one device, an all-reduce under a
strategy) before anything is divided. The single-device estimate is the one-replica case::

    scale   std of the reward-to-go over all valid steps     (normalize_returns; else 1)
    E, sum_e T_e, H                                          episodes, their steps, horizon
    b^(-e)  leave-one-out ratios (leave_one_out, time_dependent) over every replica and
            the memory of earlier batches
    ascent  sum_e (...) over every replica / (sum_e T_e * scale)

The formulas run on raw returns (the memory's units); ascent, advantages and the logged
baseline are divided by the scale afterwards (each is linear in R; every baseline here moves
with a shift of R, so the returns are not centred). The episodic ascent is a mean per step of
the complete episodes, so its step size matches the per-step estimators'. A batch's
reward-to-go is computed once and serves the inputs, the episodes and the scale.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from pgtwin_core.advantages import TrainInputs, training_inputs
from pgtwin_core.baseline_memory import BaselineMemory, EpisodeSums
from pgtwin_core.baselines.episodes import Segments, segments
from pgtwin_core.baselines.gradient_rows import Grads, episode_scores, flatten, unflatten
from pgtwin_core.baselines.leave_one_out import (as_scalar, as_vector, leave_one_out,
                                                 per_param_terms, scalar_terms)
from pgtwin_core.baselines.replica_sums import ONE_DEVICE, ReplicaSums
from pgtwin_core.baselines.time_dependent import time_estimate, time_psi
from pgtwin_core.errors import NoCompleteEpisodeError
from pgtwin_core.returns import discounted_returns
from pgtwin_core.rollout import Batch

EPISODIC = ("optimal_scalar_episodic", "optimal_per_param", "optimal_time")

PerSampleGradients = Callable[[np.ndarray, np.ndarray], Grads]
"""``(obs [M, ...], actions [M, ...]) -> {name: [M, *shape]}``: a twin's per-sample gradients."""


@dataclass(frozen=True)
class EpisodicEstimate:
    """What a twin needs to finish an episodic-baseline update on a (global) batch."""

    replica_inputs: tuple[TrainInputs, ...]
    """Per local replica: flat inputs over its batch with ``weights = 1 / sum_e T_e`` (global)
    on complete-episode steps (0 elsewhere) and ``advantages = R_e - b*`` there
    (``optimal_scalar_episodic``: an ordinary backward pass of this loss is the update; b*
    leave-one-out) or ``R_e - <R>`` (the others: only the reported loss uses it), in the
    normalised units. ``returns`` are ``training_inputs``' (the update does not read them)."""
    ascent: Grads | None
    """``optimal_per_param`` / ``optimal_time``: the ascent direction (+grad J estimate)
    by weight name; None for ``optimal_scalar_episodic``."""
    baseline: float
    """The plug-in b* over all episodes, or the mean of the per-element plug-in baselines
    (for logging)."""
    num_episodes: int
    """E, the complete episodes of every replica the estimate uses."""
    num_valid: int
    """Valid steps of every replica."""
    sums: EpisodeSums
    """The global batch's sums in raw return units (``pgtwin_core.baseline_memory``): what the
    agent's ``BaselineMemory`` takes in once the update is applied."""

    @property
    def inputs(self) -> TrainInputs:
        """The inputs of a one-replica (single-device) estimate."""
        (inputs,) = self.replica_inputs
        return inputs


@dataclass(frozen=True)
class _Replica:
    """One local replica's batch, cut into episodes (rows episode after episode)."""

    inputs: TrainInputs
    segments: Segments
    reward_to_go: np.ndarray  # float64 [num_valid_r], on the valid steps
    used: np.ndarray          # int64 [M_r]: flat indices of the complete episodes' steps
    episode: np.ndarray       # int64 [M_r]: the step's episode (0..E_r - 1)
    lengths: np.ndarray       # int64 [E_r]
    returns: np.ndarray       # float64 [E_r], R_e (raw: the memory's units)


def cut_replica(batch: Batch, config, spec) -> _Replica:
    """One replica's batch cut into complete episodes (its inputs, segments, rows, returns)."""
    reward_to_go = discounted_returns(batch.rewards, batch.terminated, batch.truncated,
                                      config.gamma)
    inputs = training_inputs(batch, config, spec, reward_to_go)
    segs = segments(batch, config.gamma, reward_to_go)
    used = segs.episode_order()
    lengths = segs.lengths[segs.complete]
    # `used` is episode after episode: episode e's lengths[e] rows in a row.
    return _Replica(inputs=inputs, segments=segs, reward_to_go=reward_to_go[batch.valid],
                    used=used, episode=np.repeat(np.arange(lengths.size), lengths),
                    lengths=lengths, returns=segs.returns[segs.complete])


def return_scale(replicas: list[_Replica], count: int, total: float, reduce: ReplicaSums) -> float:
    """The std of the global reward-to-go over its ``count`` valid steps (sum ``total``), or
    1 if it is 0: ``np.std``'s arithmetic (mean, then the mean square about it) on summed parts."""
    (squares,) = reduce.sum([[np.sum((r.reward_to_go - total / count) ** 2)] for r in replicas])
    std = float(np.sqrt(squares / count))
    return std if std > 0 else 1.0


def no_episode_error(config, replicas: list[_Replica], batch: Batch,
                      reduce: ReplicaSums) -> NoCompleteEpisodeError:
    (num_segments,) = reduce.sum([[np.float64(r.segments.lengths.size)] for r in replicas])
    where = (f"T={batch.num_steps}, N={batch.num_envs}" if reduce.num_replicas == 1 else
             f"T={batch.num_steps}, N={batch.num_envs} on each of {reduce.num_replicas} replicas")
    return NoCompleteEpisodeError(
        f"baseline={config.baseline!r} needs a complete episode in the batch, and none of "
        f"its {int(num_segments)} segments ({where}) both starts and ends in it: raise "
        "ReinforceConfig.num_steps above the episode length")


@dataclass(frozen=True)
class _Fit:
    """One baseline's fit on the global batch."""

    ascent: np.ndarray | None  # float64 [P], not divided by the steps; None: scalar episodic
    baseline: np.ndarray       # the plug-in b (scalar, [P] or [H, P]), for logging
    sums: EpisodeSums          # the global batch's own sums
    b_loo: list[np.ndarray] | None  # scalar episodic: b^(-e) [E_r] per local replica


def _scalar_episodic_fit(rows, replicas, memory, reduce, num_episodes, shrinkage) -> _Fit:
    scores = [episode_scores(g, r.lengths) for g, r in zip(rows, replicas)]
    terms = [scalar_terms(s, r.returns) for s, r in zip(scores, replicas)]
    prior = None if memory is None or memory.sums is None else as_vector(memory.sums)
    loo = leave_one_out(*zip(*terms), prior, reduce, shrinkage)
    return _Fit(ascent=None, baseline=float(loo.plug_in[0]), sums=as_scalar(loo.sums),
                b_loo=[x[:, 0] for x in loo.per_replica])


def _per_param_fit(rows, replicas, memory, reduce, num_episodes, shrinkage) -> _Fit:
    scores = [episode_scores(g, r.lengths) for g, r in zip(rows, replicas)]
    terms = [per_param_terms(s, r.returns) for s, r in zip(scores, replicas)]
    loo = leave_one_out(*zip(*terms), None if memory is None else memory.sums, reduce,
                        shrinkage)
    (ascent,) = reduce.sum([[np.sum(s * (t[2] - x), axis=0)]
                            for s, t, x in zip(scores, terms, loo.per_replica)])
    return _Fit(ascent=ascent, baseline=loo.plug_in, sums=loo.sums, b_loo=None)


def _time_fit(rows, replicas, memory, reduce, num_episodes, shrinkage) -> _Fit:
    # ReinforceConfig refuses baseline_shrinkage with optimal_time.
    horizon = max(int(reduce.max([int(r.lengths.max(initial=0)) for r in replicas])),
                  0 if memory is None else memory.horizon)
    ascent, b, sums = time_estimate(
        [time_psi(g, r.lengths) for g, r in zip(rows, replicas)], [r.lengths for r in replicas],
        [r.segments.discounted_rewards[r.used] for r in replicas], horizon, num_episodes,
        None if memory is None else memory.sums, reduce)
    return _Fit(ascent=ascent, baseline=b, sums=sums, b_loo=None)


_FITS = {"optimal_scalar_episodic": _scalar_episodic_fit, "optimal_per_param": _per_param_fit,
         "optimal_time": _time_fit}


def _gradient_rows(replicas: list[_Replica], per_sample_gradients: PerSampleGradients,
                   shapes: dict[str, tuple[int, ...]] | None
                   ) -> tuple[list[np.ndarray], dict[str, tuple[int, ...]]]:
    """Each replica's per-sample gradients of its complete episodes' steps as rows ``[M_r, P]``
    (``[0, P]`` for a replica without one), and their per-sample shapes."""
    grads = [None if r.used.size == 0 else
             per_sample_gradients(r.inputs.obs[r.used], r.inputs.actions[r.used])
             for r in replicas]
    shapes = next(({n: g.shape[1:] for n, g in per_sample.items()}
                   for per_sample in grads if per_sample is not None), shapes)
    width = sum(int(np.prod(s, dtype=np.int64)) for s in shapes.values())
    return [np.zeros((0, width)) if g is None else flatten(g) for g in grads], shapes


def estimate(batches: Sequence[Batch], config, spec, per_sample_gradients: PerSampleGradients,
             memory: BaselineMemory | None = None, reduce: ReplicaSums = ONE_DEVICE,
             shapes: dict[str, tuple[int, ...]] | None = None) -> EpisodicEstimate:
    """The episodic baseline ``config.baseline`` on one batch per local replica (module doc).

    Args:
      batches: this process's replicas' batches, in local replica order (one on one device).
      config, spec: the agent's ``ReinforceConfig`` and ``PolicySpec``.
      per_sample_gradients: the twin's (``PerSampleGradients``), on this replica's weights.
      memory: the agent's earlier batches' sums, added to every leave-one-out ratio (read
        only here; the caller adds ``EpisodicEstimate.sums`` once the update is applied).
      reduce: the sums over replicas (``ONE_DEVICE``, or an all-reduce under a strategy).
      shapes: per-sample shapes ``{name: shape}`` of the gradients, for a process whose
        replicas hold no complete episode (read off the gradients otherwise).

    Raises ``NoCompleteEpisodeError`` when no replica's batch holds a complete episode.
    """
    if config.baseline not in EPISODIC:
        raise ValueError(f"episodic estimate: baseline={config.baseline!r} is not one of {EPISODIC}")
    replicas = [cut_replica(b, config, spec) for b in batches]
    num_episodes, num_steps, num_valid, total = reduce.sum(
        [[np.float64(r.lengths.size), np.float64(r.lengths.sum()),
          np.float64(r.reward_to_go.size), np.sum(r.reward_to_go)] for r in replicas])
    num_episodes, num_steps, num_valid = int(num_episodes), int(num_steps), int(num_valid)
    if num_episodes == 0:
        raise no_episode_error(config, replicas, batches[0], reduce)
    scale = return_scale(replicas, num_valid, total, reduce) if config.normalize_returns else 1.0
    rows, shapes = _gradient_rows(replicas, per_sample_gradients, shapes)
    fit = _FITS[config.baseline](rows, replicas, memory, reduce, num_episodes,
                                 config.baseline_shrinkage)
    ascent, centre = None, None
    if fit.ascent is not None:
        ascent = unflatten(fit.ascent / (num_steps * scale), shapes)
        (centre,) = reduce.sum([[np.sum(r.returns / scale)] for r in replicas])
        centre = centre / num_episodes  # <R>, the reported loss's
    inputs = tuple(_episodic_inputs(r, scale, num_steps, centre,
                                    None if fit.b_loo is None else fit.b_loo[k])
                   for k, r in enumerate(replicas))
    return EpisodicEstimate(replica_inputs=inputs, ascent=ascent,
                            baseline=float(np.mean(fit.baseline)) / scale,
                            num_episodes=num_episodes, num_valid=num_valid, sums=fit.sums)


def _episodic_inputs(r: _Replica, scale: float, num_steps: int, centre: float | None,
                     b_loo: np.ndarray | None) -> TrainInputs:
    """The replica's inputs with the episodic advantages and weights (``EpisodicEstimate``)."""
    returns = r.returns / scale
    advantages = np.zeros(r.inputs.batch_size)
    advantages[r.used] = returns[r.episode] - (b_loo[r.episode] / scale if centre is None
                                               else centre)
    weights = np.zeros(r.inputs.batch_size)
    weights[r.used] = 1.0 / num_steps
    dtype = r.inputs.weights.dtype
    return dataclasses.replace(r.inputs, advantages=advantages.astype(dtype),
                               weights=weights.astype(dtype))


def episodic_estimate(batch: Batch, config, spec, per_sample_gradients: PerSampleGradients,
                      memory: BaselineMemory | None = None) -> EpisodicEstimate:
    """``estimate`` on one device: one batch, the identity reduce."""
    return estimate([batch], config, spec, per_sample_gradients, memory)


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
