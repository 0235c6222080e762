"""``baseline='optimal_scalar'`` (per-step b*) for TF2. Mirrors ``legacy_graph/optimal_scalar.py``.

One ``tf.function`` call per update: one forward pass under a persistent tape, one backward
pass to the pre-activations for the ghost norms ``||g_i||^2`` (``per_sample.ghost_sq_norms``),
``b*`` (``pgtwin.mode_agnostic.scalar_baseline``), then the gradient of the REINFORCE loss with
advantages ``R_i - b*`` from the same deltas (``per_sample.weighted_gradient``: the last step
of its backward pass, the chain not run twice), for both torsos (the LSTM's gate layer by its
sequence ghost norm). The functions have input signatures with a dynamic batch, so they trace
once.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin_core.rollout import Batch
from pgtwin_core.update_path import returns_args

from pgtwin.mode_agnostic import per_sample
from pgtwin.mode_agnostic.loss import reinforce_loss
from pgtwin.mode_agnostic.scalar_baseline import scalar_baseline

from eager.gradient_step import guarded_apply
from eager.per_sample import scored_deltas
from eager.policy_call import direct_callable
from eager.tracing import batch_signatures, traced


class OptimalScalarPath:
    """The ``UpdatePath`` (``pgtwin_core.update_path``) of ``baseline='optimal_scalar'``.

    Args:
      agent: an ``eager.agent.ReinforceAgent`` (its spec, config, variables, optimizer,
        ``inputs`` and ``dist_params``).
    """

    memory = None

    def __init__(self, agent):
        self.spec, self.config = agent.spec, agent.config
        self.variables, self.optimizer = agent.variables, agent.optimizer
        self._inputs, self._policy = agent.inputs, agent.dist_params
        s = batch_signatures(self.spec, self.config.dtype)
        sig = [s["obs"], s["actions"], s["vector"], s["vector"]]
        # As the agent's own train step: XLA for the train step, which fuses Keras Adam's
        # small ops.
        self.loss_and_grads_fn = traced(self.loss_and_grads, input_signature=sig)
        self.train_fn = traced(self.train_step, input_signature=sig,
                               jit_compile=self.config.jit_compile)
        self._train_call = None  # direct_callable(self.train_fn), on the first update

    def loss_and_grads(self, obs, actions, returns, weights):
        """``(loss, grads, sum_i w_i H_i, b*)`` of one batch at its ``b*`` (traceable)."""
        spec, coef, w = self.spec, self.config.entropy_coef, weights
        traced_deltas, log_probs, entropies, bonus = scored_deltas(spec, self.variables, obs,
                                                                   actions, w, coef)
        b = scalar_baseline(per_sample.ghost_sq_norms(traced_deltas), returns, w)
        loss = reinforce_loss(log_probs, returns - b, w, entropies, coef)
        # The backward pass of -sum_i w_i (R_i - b*) log pi_i reuses the deltas the norms
        # took; only an entropy bonus needs a pass of its own.
        grads = per_sample.weighted_gradient(spec, traced_deltas, -w * (returns - b))
        if bonus is not None:
            grads = [g + e for g, e in zip(grads, bonus)]
        return loss, grads, tf.reduce_sum(w * entropies), b

    def train_step(self, obs, actions, returns, weights):
        """``(loss, grad_norm, entropy, applied, b*)`` of one guarded step (traceable)."""
        loss, grads, entropy, b = self.loss_and_grads(obs, actions, returns, weights)
        applied = guarded_apply(self.optimizer, self.variables, grads, loss,
                                self.config.max_grad_norm)
        return loss, tf.linalg.global_norm(grads), entropy, applied, b

    def trace_counts(self) -> dict[str, int]:
        """How often each built function has been traced (1, whatever the batch sizes)."""
        fns = {"loss_and_grads": self.loss_and_grads_fn, "train": self.train_fn}
        return {k: f.experimental_get_tracing_count() for k, f in fns.items()}

    def _args(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return returns_args(self._inputs(batch))

    def rollout_policy(self):
        return self._policy

    def loss_value(self, batch: Batch) -> float:
        """The loss at ``b*``."""
        return float(self.loss_and_grads_fn(*self._args(batch))[0])

    def gradients(self, batch: Batch) -> dict[str, np.ndarray]:
        _, grads, _, _ = self.loss_and_grads_fn(*self._args(batch))
        return {n: g.numpy() for n, g in zip(self.variables, grads)}

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step; metrics add ``baseline`` (b*)."""
        if self._train_call is None:
            self._train_call = direct_callable(self.train_fn)
        loss, norm, ent, applied, b = self._train_call(*self._args(batch))
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                "applied": bool(applied), "baseline": float(b)}
