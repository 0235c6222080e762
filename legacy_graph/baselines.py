"""The optimal baselines' update, TF1 graph mode. Mirrors ``eager/baselines.py``.

``optimal_scalar`` (per step) runs in one ``Session`` call: one forward pass, one backward
pass to the pre-activations for the ghost norms ``||g_i||^2`` (``per_sample.ghost_sq_norms``),
``b*``, then the gradient of the REINFORCE loss with advantages ``R_i - b*`` from the same
deltas (``per_sample.weighted_gradient``: the last step of its backward pass, the chain not
run twice), for both torsos (the LSTM's gate layer by its sequence ghost norm). The
episodic baselines get per-sample gradients from the twin and their formulas from ``pgtwin_core.baselines``; ``optimal_scalar_episodic``
then trains with an ordinary backward pass too, the per-parameter ones apply the estimated
gradient through the agent's optimizer. All ops are built in the agent's graph on first use.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin_core import baselines as shared
from pgtwin_core.errors import NoCompleteEpisodeError
from pgtwin_core.baseline_memory import BaselineMemory
from pgtwin_core.rollout import Batch

from pgtwin.mode_agnostic import distributions, per_sample
from pgtwin.mode_agnostic.loss import reinforce_loss

from legacy_graph.agent import checked_gradients
from legacy_graph.per_sample import layer_deltas
from legacy_graph.policy_call import direct_callable

tf1 = tf.compat.v1


def scalar_baseline(sq_norms: tf.Tensor, returns: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """``b* = sum w n R / sum w n`` (a scalar, no gradient); ``sum w R / sum w`` if ``sum w n = 0``.

    Args:
      sq_norms: ``[B]``, ``n_i = ||grad log pi_i||^2``; returns: ``[B]``, R_i;
      weights: ``[B]``, ``valid_i / num_valid``. All data: gradient is stopped.
    """
    n, r, w = (tf.stop_gradient(x) for x in (sq_norms, returns, weights))
    den = tf.reduce_sum(w * n)
    safe = tf.where(den > 0, den, tf.ones_like(den))  # no 0/0 even in the unused branch
    return tf.where(den > 0, tf.reduce_sum(w * n * r) / safe,
                    tf.reduce_sum(w * r) / tf.reduce_sum(w))


class BaselineUpdate:
    """``gradients``, ``update`` and ``loss_value`` of an agent whose baseline is ``optimal_*``."""

    def __init__(self, agent):
        self._agent = agent
        self._scalar_fns = None
        self.memory = BaselineMemory(agent.config.baseline_memory)
        """The episodic baselines' earlier batches (``pgtwin_core/baseline_memory.py``): read by
        every estimate, added to only by an applied update."""

    # ------------------------------------------------------------ optimal_scalar
    def _scalar(self):
        """Callables ``(obs, actions, returns, weights) -> ...`` for loss, grads and a train step."""
        if self._scalar_fns is None:
            a, spec = self._agent, self._agent.spec
            with a.graph.as_default(), tf1.name_scope("optimal_scalar"):
                returns = tf1.placeholder(spec.dtype, [None], name="returns")
                coef, w = a.config.entropy_coef, a.weights_ph
                traced = layer_deltas(spec, a.variables, a.obs_ph, a.actions_ph)
                b = scalar_baseline(per_sample.ghost_sq_norms(traced), returns, w)
                entropies = distributions.entropy(spec, traced.params)
                loss = reinforce_loss(traced.log_probs, returns - b, w, entropies, coef)
                # The backward pass of -sum_i w_i (R_i - b*) log pi_i reuses the deltas the
                # norms took; only an entropy bonus needs a pass of its own.
                grads = per_sample.weighted_gradient(spec, traced, -w * (returns - b))
                if coef > 0:
                    bonus = checked_gradients(-coef * tf.reduce_sum(w * entropies), a.variables)
                    grads = [g + e for g, e in zip(grads, bonus)]
                train_op, applied = a._guarded_apply(grads, loss)  # noqa: SLF001 (same twin)
                metrics = [loss, tf.linalg.global_norm(grads), tf.reduce_sum(w * entropies),
                           applied, b]
            feeds = [a.obs_ph, a.actions_ph, returns, a.weights_ph]
            self._scalar_fns = {
                "loss": a.session.make_callable(loss, feeds),
                "grads": a.session.make_callable(grads, feeds),
                # As the agent's own train step: the Session's callable without its Python.
                "train": direct_callable(a.session, metrics, feeds, targets=[train_op]),
            }
        return self._scalar_fns

    def _scalar_args(self, batch: Batch) -> tuple[np.ndarray, ...]:
        inputs = self._agent.inputs(batch)
        return inputs.obs, inputs.actions, inputs.returns, inputs.weights

    # ------------------------------------------------------------------ episodic
    def _episodic(self, batch: Batch) -> shared.EpisodicEstimate:
        a = self._agent
        method = shared.per_sample_method(a.spec.torso)
        return shared.episodic_estimate(
            batch, a.config, a.spec, lambda obs, act: a.per_sample_gradients(obs, act, method),
            self.memory)

    def _run(self, fetches, inputs):
        return self._agent.session.run(fetches, self._agent._feed(inputs))  # noqa: SLF001

    def _estimate_gradients(self, est: shared.EpisodicEstimate) -> dict[str, np.ndarray]:
        """Loss gradient: ``-ascent`` plus the entropy bonus's (zero advantages, same weights)."""
        a = self._agent
        grads = {n: -est.ascent[n] for n in a.variables}
        if a.config.entropy_coef > 0:
            zero = dataclasses.replace(est.inputs, advantages=np.zeros_like(est.inputs.advantages))
            for n, g in zip(a.variables, self._run(a.grads, zero)):
                grads[n] = grads[n] + g
        return {n: g.astype(a.spec.np_dtype) for n, g in grads.items()}

    # -------------------------------------------------------------------- public
    def loss_value(self, batch: Batch) -> float:
        """The loss at the baseline: for the per-parameter ones, the surrogate at ``<R>``."""
        if self._agent.config.baseline == "optimal_scalar":
            return float(self._scalar()["loss"](*self._scalar_args(batch)))
        return float(self._run(self._agent.loss, self._episodic(batch).inputs))

    def gradients(self, batch: Batch) -> dict[str, np.ndarray]:
        """The loss gradient the update would apply (unclipped), by weight name."""
        a = self._agent
        if a.config.baseline == "optimal_scalar":
            return dict(zip(a.variables, self._scalar()["grads"](*self._scalar_args(batch))))
        est = self._episodic(batch)
        if est.ascent is None:
            return dict(zip(a.variables, self._run(a.grads, est.inputs)))
        return self._estimate_gradients(est)

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step; metrics add ``baseline`` (b*, or the per-element mean) and,
        for the episodic baselines, ``episodes`` (complete episodes used)."""
        a = self._agent
        if a.config.baseline == "optimal_scalar":
            loss, norm, ent, applied, b = self._scalar()["train"](*self._scalar_args(batch))
            return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                    "applied": bool(applied), "baseline": float(b)}
        try:
            est = self._episodic(batch)
        except NoCompleteEpisodeError:  # no unbiased estimate: skip, and say so
            return shared.skipped_update_metrics()
        extra = {"baseline": est.baseline, "episodes": est.num_episodes}
        if est.ascent is None:
            loss, norm, ent, applied, _ = self._run(
                [a.loss, a.grad_norm, a.entropy, a.applied, a.train_op], est.inputs)
        else:
            grads = self._estimate_gradients(est)
            loss, ent = self._run([a.loss, a.entropy], est.inputs)
            norm = np.sqrt(sum(np.sum(np.square(g, dtype=np.float64)) for g in grads.values()))
            applied = a.apply_gradients(grads)
        if applied:  # a skipped (non-finite) update leaves the memory as it was
            self.memory.add(est.sums)
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                "applied": bool(applied), **extra}
