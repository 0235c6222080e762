"""The episodic baselines' update path, the same for both twins and the distributed agent.

An ``UpdatePath`` (``pgtwin_core.update_path``).

The estimate is numpy (``estimator``); what is the twin's own is the weighted REINFORCE loss
it then runs (``WeightedLoss``): an ordinary backward pass of it for
``optimal_scalar_episodic``; for ``optimal_per_param`` and ``optimal_time`` the estimated
ascent, plus the entropy bonus's gradient, applied through the agent's optimizer. Under a
strategy the loss is all-reduced over replicas and the estimate's sums too (its reduce hook).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from pgtwin_core.baseline_memory import BaselineMemory
from pgtwin_core.baselines.estimator import (EpisodicEstimate, estimate, per_sample_method,
                                             skipped_update_metrics)
from pgtwin_core.baselines.gradient_rows import Grads
from pgtwin_core.baselines.replica_sums import ONE_DEVICE, ReplicaSums
from pgtwin_core.errors import NoCompleteEpisodeError
from pgtwin_core.rollout import Batch
from pgtwin_core.update_path import PolicyFn, WeightedLoss


class EpisodicUpdate:
    """The update path of ``optimal_scalar_episodic``, ``optimal_per_param``, ``optimal_time``.

    Args:
      config, spec: the agent's.
      weighted: the twin's ``WeightedLoss``.
      per_sample_gradients: ``(obs, actions, method) -> {name: [M, *shape]}`` (the agent's).
      policy: the rollout's ``policy_fn`` (the agent's ``dist_params``).
      reduce: the sums over replicas (``ONE_DEVICE``; an all-reduce under a strategy).
      shapes: the weights' shapes, for a process whose replicas hold no complete episode.
      reports_num_valid: add ``num_valid`` (the global valid steps) to the metrics, as every
        update of the distributed agent does.
    """

    def __init__(self, config, spec, weighted: WeightedLoss,
                 per_sample_gradients: Callable[..., Grads], policy: PolicyFn,
                 reduce: ReplicaSums = ONE_DEVICE,
                 shapes: dict[str, tuple[int, ...]] | None = None,
                 reports_num_valid: bool = False):
        self.config, self.spec, self.weighted = config, spec, weighted
        self.memory = BaselineMemory(config.baseline_memory)
        """The earlier batches' sums (``pgtwin_core/baseline_memory.py``): read by every
        estimate, added to (global sums, the same on every replica) only by an applied update."""
        method = per_sample_method(spec.torso)
        self._per_sample = lambda obs, actions: per_sample_gradients(obs, actions, method)
        self._policy, self._reduce, self._shapes = policy, reduce, shapes
        self._reports_num_valid = reports_num_valid

    def rollout_policy(self) -> PolicyFn:
        """The rollout's ``policy_fn``: the agent's forward pass."""
        return self._policy

    def estimate(self, batches: Batch | Sequence[Batch]) -> EpisodicEstimate:
        """The estimate on one batch per local replica (a lone ``Batch`` on one device)."""
        batches = [batches] if isinstance(batches, Batch) else list(batches)
        return estimate(batches, self.config, self.spec, self._per_sample, self.memory,
                        self._reduce, self._shapes)

    def _gradients(self, est: EpisodicEstimate) -> Grads:
        """Loss gradient: ``-ascent`` plus the entropy bonus's (zero advantages, same weights)."""
        if est.ascent is None:
            return self.weighted.gradients(est.replica_inputs)
        grads = {n: -g for n, g in est.ascent.items()}
        if self.config.entropy_coef > 0:
            zero = [dataclasses.replace(x, advantages=np.zeros_like(x.advantages))
                    for x in est.replica_inputs]
            bonus = self.weighted.gradients(zero)
            grads = {n: g + bonus[n] for n, g in grads.items()}
        return {n: g.astype(self.config.dtype) for n, g in grads.items()}

    def loss_value(self, batches: Batch | Sequence[Batch]) -> float:
        """The loss at the baseline: for the per-parameter ones, the surrogate at ``<R>``."""
        return self.weighted.loss(self.estimate(batches).replica_inputs)

    def gradients(self, batches: Batch | Sequence[Batch]) -> Grads:
        """The loss gradient the update would apply (unclipped), by weight name."""
        return self._gradients(self.estimate(batches))

    def update(self, batches: Batch | Sequence[Batch]) -> dict[str, Any]:
        """One optimizer step; metrics add ``baseline`` (b*, or the per-element mean) and
        ``episodes`` (complete episodes used). A batch without a complete episode skips it."""
        counted = {"num_valid": 0} if self._reports_num_valid else {}
        try:
            est = self.estimate(batches)
        except NoCompleteEpisodeError:  # no unbiased estimate: skip, and say so
            return {**skipped_update_metrics(), **counted}
        if est.ascent is None:
            loss, norm, ent, applied = self.weighted.train(est.replica_inputs)
        else:
            grads = self._gradients(est)
            loss, ent = self.weighted.loss_and_entropy(est.replica_inputs)
            norm = np.sqrt(sum(np.sum(np.square(g, dtype=np.float64)) for g in grads.values()))
            # A non-finite loss skips the step too, as every update path's does.
            applied = bool(np.isfinite(loss)) and self.weighted.apply(grads)
        if applied:  # a skipped (non-finite) update leaves the memory as it was
            self.memory.add(est.sums)
        counted = {"num_valid": est.num_valid} if self._reports_num_valid else {}
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                "applied": bool(applied), **counted, "baseline": est.baseline,
                "episodes": est.num_episodes}
