"""The optimal baselines' update for TF2. Mirrors ``legacy_graph/baselines.py``.

``optimal_scalar`` (per step) runs in one ``tf.function`` call: one forward pass under a
persistent tape, one backward pass to the pre-activations for the ghost norms ``||g_i||^2``
(``per_sample.ghost_sq_norms``), ``b*``, then the gradient of the REINFORCE loss with
advantages ``R_i - b*`` from the same deltas (``per_sample.weighted_gradient``: the last step
of its backward pass, the chain not run twice), for both torsos (the LSTM's gate layer by
its sequence ghost norm). The episodic baselines get per-sample gradients from the twin and
their formulas from ``pgtwin_core.baselines``; ``optimal_scalar_episodic`` then trains with an
ordinary backward pass too, the per-parameter ones apply the estimated gradient through the
agent's optimizer. The functions have input signatures with a dynamic batch, so they trace
once.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin_core import baselines as shared
from pgtwin_core.errors import NoCompleteEpisodeError
from pgtwin_core.baseline_memory import BaselineMemory
from pgtwin_core.rollout import Batch

from pgtwin.mode_agnostic import distributions, per_sample
from pgtwin.mode_agnostic.loss import reinforce_loss

from eager.agent import checked_gradients
from eager.policy_call import direct_callable


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
        self._scalar_train_call = None  # direct_callable of the train step, on first update

    # ------------------------------------------------------------ optimal_scalar
    def _scalar_loss_and_grads(self, obs, actions, returns, weights):
        a, spec, coef, w = self._agent, self._agent.spec, self._agent.config.entropy_coef, weights
        with tf.GradientTape(persistent=coef > 0) as tape:  # a second gradient for the bonus
            params, layers = per_sample.traced_dist_params(spec, a.variables, obs)
            log_probs = distributions.log_prob(spec, params, actions)
            total = tf.reduce_sum(log_probs)
            entropies = distributions.entropy(spec, params)
            bonus_loss = -coef * tf.reduce_sum(w * entropies)
        deltas = tape.gradient(total, per_sample.delta_targets(params, layers))
        traced = per_sample.deltas_from_gradients(spec, params, log_probs, layers, deltas)
        b = scalar_baseline(per_sample.ghost_sq_norms(traced), returns, w)
        loss = reinforce_loss(log_probs, returns - b, w, entropies, coef)
        # The backward pass of -sum_i w_i (R_i - b*) log pi_i reuses the deltas the norms
        # took; only an entropy bonus needs a pass of its own.
        grads = per_sample.weighted_gradient(spec, traced, -w * (returns - b))
        if coef > 0:
            bonus = checked_gradients(tape, bonus_loss, a.variables)
            grads = [g + e for g, e in zip(grads, bonus)]
        return loss, grads, tf.reduce_sum(w * entropies), b

    def _scalar_train(self, obs, actions, returns, weights):
        loss, grads, entropy, b = self._scalar_loss_and_grads(obs, actions, returns, weights)
        applied = self._agent._guarded_apply(grads, loss)  # noqa: SLF001 (same twin)
        return loss, tf.linalg.global_norm(grads), entropy, applied, b

    def _scalar(self):
        """``tf.function``s ``(obs, actions, returns, weights) -> ...``: loss and grads, train step."""
        if self._scalar_fns is None:
            s = self._agent._signatures()  # noqa: SLF001
            sig = [s["obs"], s["actions"], s["vector"], s["vector"]]
            # As the agent's own train step: no AutoGraph (the bodies branch in Python on
            # config only), and XLA for the train step, which fuses Keras Adam's small ops.
            function = functools.partial(tf.function, autograph=False, input_signature=sig)
            self._scalar_fns = {
                "loss_and_grads": function(self._scalar_loss_and_grads),
                "train": function(self._scalar_train,
                                  jit_compile=self._agent.config.jit_compile),
            }
        return self._scalar_fns

    def trace_counts(self) -> dict[str, int]:
        """How often each built function has been traced (1, whatever the batch sizes)."""
        return {k: f.experimental_get_tracing_count() for k, f in (self._scalar_fns or {}).items()}

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

    def _run(self, fn, inputs):
        return fn(*self._agent._args(inputs))  # noqa: SLF001

    def _estimate_gradients(self, est: shared.EpisodicEstimate) -> dict[str, np.ndarray]:
        """Loss gradient: ``-ascent`` plus the entropy bonus's (zero advantages, same weights)."""
        a = self._agent
        grads = {n: -est.ascent[n] for n in a.variables}
        if a.config.entropy_coef > 0:
            zero = dataclasses.replace(est.inputs, advantages=np.zeros_like(est.inputs.advantages))
            _, entropy_grads, _ = self._run(a._loss_fn, zero)  # noqa: SLF001
            for n, g in zip(a.variables, entropy_grads):
                grads[n] = grads[n] + g.numpy()
        return {n: g.astype(a.spec.np_dtype) for n, g in grads.items()}

    # -------------------------------------------------------------------- public
    def loss_value(self, batch: Batch) -> float:
        """The loss at the baseline: for the per-parameter ones, the surrogate at ``<R>``."""
        a = self._agent
        if a.config.baseline == "optimal_scalar":
            return float(self._scalar()["loss_and_grads"](*self._scalar_args(batch))[0])
        return float(self._run(a._loss_fn, self._episodic(batch).inputs)[0])  # noqa: SLF001

    def gradients(self, batch: Batch) -> dict[str, np.ndarray]:
        """The loss gradient the update would apply (unclipped), by weight name."""
        a = self._agent
        if a.config.baseline == "optimal_scalar":
            _, grads, _, _ = self._scalar()["loss_and_grads"](*self._scalar_args(batch))
            return {n: g.numpy() for n, g in zip(a.variables, grads)}
        est = self._episodic(batch)
        if est.ascent is None:
            _, grads, _ = self._run(a._loss_fn, est.inputs)  # noqa: SLF001
            return {n: g.numpy() for n, g in zip(a.variables, grads)}
        return self._estimate_gradients(est)

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step; metrics add ``baseline`` (b*, or the per-element mean) and,
        for the episodic baselines, ``episodes`` (complete episodes used)."""
        a = self._agent
        if a.config.baseline == "optimal_scalar":
            if self._scalar_train_call is None:
                self._scalar_train_call = direct_callable(self._scalar()["train"])
            loss, norm, ent, applied, b = self._scalar_train_call(*self._scalar_args(batch))
            return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                    "applied": bool(applied), "baseline": float(b)}
        try:
            est = self._episodic(batch)
        except NoCompleteEpisodeError:  # no unbiased estimate: skip, and say so
            return shared.skipped_update_metrics()
        extra = {"baseline": est.baseline, "episodes": est.num_episodes}
        if est.ascent is None:
            loss, norm, ent, applied = self._run(a._train_fn, est.inputs)  # noqa: SLF001
        else:
            grads = self._estimate_gradients(est)
            loss, _, ent = self._run(a._loss_fn, est.inputs)  # noqa: SLF001
            norm = np.sqrt(sum(np.sum(np.square(g, dtype=np.float64)) for g in grads.values()))
            applied = a.apply_gradients(grads)
        if applied:  # a skipped (non-finite) update leaves the memory as it was
            self.memory.add(est.sums)
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                "applied": bool(applied), **extra}
