"""The protocol every update path follows, and the plain ``recompute`` path (no TensorFlow here).

An agent picks one update path when it is built (``pgtwin_core.path_choice``) and hands
``loss_value``, ``gradients``, ``update`` and ``rollout_policy`` to it; nothing branches on
the path again. All of them run the twin's ``WeightedLoss``: the REINFORCE loss on given inputs, one
``TrainInputs`` per local replica (a single one on one device).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import numpy as np

from pgtwin_core.advantages import TrainInputs
from pgtwin_core.baseline_memory import BaselineMemory
from pgtwin_core.rollout import Batch

Grads = dict[str, np.ndarray]
PolicyFn = Callable[[np.ndarray], np.ndarray]
"""Observations ``[N, *obs_shape]`` -> distribution parameters ``[N, num_params]``."""


class WeightedLoss(Protocol):
    """A twin's REINFORCE loss ``-sum_i w_i A_i log pi_i - c sum_i w_i H_i`` on given inputs
    (one ``TrainInputs`` per local replica; summed over every replica under a strategy)."""

    def loss(self, replicas: Sequence[TrainInputs]) -> float:
        """The loss."""

    def loss_and_entropy(self, replicas: Sequence[TrainInputs]) -> tuple[float, float]:
        """The loss and its ``sum_i w_i H_i``."""

    def gradients(self, replicas: Sequence[TrainInputs]) -> Grads:
        """The loss gradient by weight name (unclipped, not applied)."""

    def train(self, replicas: Sequence[TrainInputs]) -> tuple[float, float, float, bool]:
        """One guarded optimizer step on the loss: ``(loss, grad_norm, entropy, applied)``."""

    def apply(self, grads: Grads) -> bool:
        """Apply given (global) gradients with the agent's optimizer; False (skipped, nothing
        changed) if any is non-finite."""


class UpdatePath(Protocol):
    """How an agent turns a batch into an optimizer step."""

    memory: BaselineMemory | None
    """The episodic baselines' earlier-batch sums (part of the training state); else None."""

    def rollout_policy(self) -> PolicyFn:
        """The ``policy_fn`` for ``pgtwin_core.rollout.collect`` before the next update."""

    def loss_value(self, batch: Batch) -> float:
        """The loss on ``batch`` (no update)."""

    def gradients(self, batch: Batch) -> Grads:
        """The gradient the update would apply (unclipped, not applied), by weight name."""

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step; metrics ``loss``, ``grad_norm``, ``entropy``, ``applied``
        (False: a non-finite loss or gradient skipped it) and the path's own."""


def returns_args(inputs: TrainInputs) -> tuple[np.ndarray, ...]:
    """``(obs, actions, returns, weights)``: what a path that fits its own baseline to the
    returns (``OptimalScalarPath``) is fed."""
    return inputs.obs, inputs.actions, inputs.returns, inputs.weights


class RecomputePath:
    """``update_path='recompute'`` with a baseline of ``none`` or ``mean``: the rollout samples
    with the agent's forward pass, the update recomputes it over the whole batch.

    Args:
      weighted: the twin's ``WeightedLoss``.
      inputs: ``batch -> TrainInputs`` (the agent's ``inputs``).
      policy: the rollout's ``policy_fn`` (the agent's ``dist_params``).
    """

    memory = None

    def __init__(self, weighted: WeightedLoss, inputs: Callable[[Batch], TrainInputs],
                 policy: PolicyFn):
        self.weighted, self._inputs, self._policy = weighted, inputs, policy

    def rollout_policy(self) -> PolicyFn:
        return self._policy

    def loss_value(self, batch: Batch) -> float:
        return self.weighted.loss([self._inputs(batch)])

    def gradients(self, batch: Batch) -> Grads:
        return self.weighted.gradients([self._inputs(batch)])

    def update(self, batch: Batch) -> dict[str, Any]:
        loss, norm, ent, applied = self.weighted.train([self._inputs(batch)])
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                "applied": bool(applied)}
