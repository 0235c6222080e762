"""``baseline='optimal_scalar'`` (per-step b*), TF1 graph mode. Mirrors ``eager/optimal_scalar.py``.

One ``Session`` call per update: one forward pass, one backward pass to the pre-activations
for the ghost norms ``||g_i||^2`` (``per_sample.ghost_sq_norms``), ``b*``
(``pgtwin.mode_agnostic.scalar_baseline``), then the gradient of the REINFORCE loss with
advantages ``R_i - b*`` from the same deltas (``per_sample.weighted_gradient``: the last step
of its backward pass, the chain not run twice), for both torsos (the LSTM's gate layer by its
sequence ghost norm). The ops are built in the agent's graph with the path.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin_core.rollout import Batch
from pgtwin_core.update_path import returns_args

from pgtwin.mode_agnostic import distributions, per_sample
from pgtwin.mode_agnostic.loss import reinforce_loss
from pgtwin.mode_agnostic.scalar_baseline import scalar_baseline

from legacy_graph.gradient_step import checked_gradients, guarded_apply
from legacy_graph.per_sample import layer_deltas
from legacy_graph.policy_call import direct_callable

tf1 = tf.compat.v1


class OptimalScalarPath:
    """The ``UpdatePath`` (``pgtwin_core.update_path``) of ``baseline='optimal_scalar'``.

    Args:
      agent: a ``legacy_graph.agent.ReinforceAgent`` (its graph, session and public ops).
    """

    memory = None

    def __init__(self, agent):
        self._inputs, self._policy = agent.inputs, agent.dist_params
        self._variables = agent.variables
        spec, config = agent.spec, agent.config
        with agent.graph.as_default(), tf1.name_scope("optimal_scalar"):
            returns = tf1.placeholder(config.dtype, [None], name="returns")
            coef, w = config.entropy_coef, agent.weights_ph
            traced = layer_deltas(spec, agent.variables, agent.obs_ph, agent.actions_ph)
            b = scalar_baseline(per_sample.ghost_sq_norms(traced), returns, w)
            entropies = distributions.entropy(spec, traced.params)
            loss = reinforce_loss(traced.log_probs, returns - b, w, entropies, coef)
            # The backward pass of -sum_i w_i (R_i - b*) log pi_i reuses the deltas the
            # norms took; only an entropy bonus needs a pass of its own.
            grads = per_sample.weighted_gradient(spec, traced, -w * (returns - b))
            if coef > 0:
                bonus = checked_gradients(-coef * tf.reduce_sum(w * entropies), agent.variables)
                grads = [g + e for g, e in zip(grads, bonus)]
            train_op, applied = guarded_apply(agent.optimizer, agent.variables, grads, loss,
                                              config.max_grad_norm)
            metrics = [loss, tf.linalg.global_norm(grads), tf.reduce_sum(w * entropies),
                       applied, b]
        feeds = [agent.obs_ph, agent.actions_ph, returns, agent.weights_ph]
        self._loss_call = agent.session.make_callable(loss, feeds)
        self._grads_call = agent.session.make_callable(grads, feeds)
        # As the agent's own train step: the Session's callable without its Python.
        self._train_call = direct_callable(agent.session, metrics, feeds, targets=[train_op])

    def _args(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return returns_args(self._inputs(batch))

    def rollout_policy(self):
        return self._policy

    def loss_value(self, batch: Batch) -> float:
        """The loss at ``b*``."""
        return float(self._loss_call(*self._args(batch)))

    def gradients(self, batch: Batch) -> dict[str, np.ndarray]:
        return dict(zip(self._variables, self._grads_call(*self._args(batch))))

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step; metrics add ``baseline`` (b*)."""
        loss, norm, ent, applied, b = self._train_call(*self._args(batch))
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                "applied": bool(applied), "baseline": float(b)}
