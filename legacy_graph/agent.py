"""REINFORCE, the TF1 way: one ``tf.Graph``, placeholders, ``tf.gradients``, one ``Session``.

Mirrors ``eager/agent.py`` method for method. Everything lives in the agent's own graph and
session, so this twin runs in the same process as the eager one without switching eager
execution off for the whole process. The hot paths (the rollout's policy call and the update) go
through session callables fixed once (``legacy_graph/policy_call.py``), which skip
``Session.run``'s per-call feed/fetch parsing.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin_core import policy_inputs
from pgtwin_core.advantages import TrainInputs, training_inputs
from pgtwin_core.baselines import EPISODIC
from pgtwin_core.checkpoint_layout import agent_layout, check_layout
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.errors import DisconnectedGradientError
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec, check_weights, init_weights

from pgtwin.mode_agnostic import distributions, forward_pass
from pgtwin.mode_agnostic.loss import reinforce_loss

from legacy_graph import network
from legacy_graph.checkpoint_layout import saved_layout
from legacy_graph.optimizers import make_optimizer
from legacy_graph.policy_call import direct_callable, policy_callable

tf1 = tf.compat.v1


def checked_gradients(loss: tf.Tensor, variables: dict[str, tf.Variable]) -> list[tf.Tensor]:
    """``tf.gradients(loss, variables)``, raising ``DisconnectedGradientError`` on any None."""
    grads = tf.gradients(loss, list(variables.values()))
    missing = [name for name, g in zip(variables, grads) if g is None]
    if missing:
        raise DisconnectedGradientError(missing)
    return grads


class ReinforceAgent:
    """A REINFORCE learner built as a TF1 graph.

    Args:
      spec: the policy; computed in ``config.dtype`` (the config decides the dtype).
      config: hyperparameters.
      weights: initial numpy weights by canonical name; ``init_weights(spec, seed)`` if None.
      seed: seeds the initial weights (when ``weights`` is None).
    """

    impl = "graph"

    def __init__(self, spec: PolicySpec, config: ReinforceConfig = ReinforceConfig(),
                 weights: dict[str, np.ndarray] | None = None, seed: int = 0):
        self.spec = spec.with_dtype(config.dtype)
        self.config = config
        weights = init_weights(self.spec, seed) if weights is None else weights
        weights = check_weights(self.spec, weights)
        self.graph = tf.Graph()
        with self.graph.as_default():
            self._build()
        self.session = tf1.Session(graph=self.graph)
        self.session.run(self._init_op)
        self.set_weights(weights)
        self._dist_params_fn = policy_callable(self.session, self.params, self.obs_ph)
        self._train_call = direct_callable(
            self.session, [self.loss, self.grad_norm, self.entropy, self.applied],
            [self.obs_ph, self.actions_ph, self.advantages_ph, self.weights_ph],
            targets=[self.train_op])
        self._cached_update = None  # legacy_graph.cached.CachedUpdate, built on first use
        self._per_sample = None  # legacy_graph.per_sample.PerSampleGradients, built on first use
        self._baseline_update = None  # legacy_graph.baselines.BaselineUpdate, built on first use

    # ----------------------------------------------------------------- graph
    def _build(self) -> None:
        spec, dtype = self.spec, self.spec.dtype
        self.variables = network.create_variables(spec)
        self.obs_ph = tf1.placeholder(dtype, [None, *spec.obs_shape], name="obs")
        act_shape = [None] if spec.is_discrete else [None, spec.action_size]
        self.actions_ph = tf1.placeholder(tf.int64 if spec.is_discrete else dtype, act_shape,
                                          name="actions")
        self.advantages_ph = tf1.placeholder(dtype, [None], name="advantages")
        self.weights_ph = tf1.placeholder(dtype, [None], name="weights")

        self.params = forward_pass.dist_params(spec, self.variables, self.obs_ph)
        self.log_probs = distributions.log_prob(spec, self.params, self.actions_ph)
        self.entropies = distributions.entropy(spec, self.params)
        self.entropy = tf.reduce_sum(self.weights_ph * self.entropies)
        self.loss = reinforce_loss(self.log_probs, self.advantages_ph, self.weights_ph,
                                   self.entropies, self.config.entropy_coef)
        self.grads = checked_gradients(self.loss, self.variables)
        self.grad_norm = tf.linalg.global_norm(self.grads)

        # Custom gradients (optimal per-parameter baselines) arrive as numpy and are applied
        # through placeholders by the same optimizer.
        self.grad_phs = {name: tf1.placeholder(dtype, v.shape, name=f"grad/{name}")
                         for name, v in self.variables.items()}
        self.optimizer = make_optimizer(self.config, dtype)
        self.train_op, self.applied = self._guarded_apply(self.grads, self.loss)
        self.apply_op, self.apply_applied = self._guarded_apply(
            list(self.grad_phs.values()), tf.constant(0.0, dtype))

        self.weight_phs = {name: tf1.placeholder(dtype, v.shape) for name, v in self.variables.items()}
        self.assign_op = tf.group(*[v.assign(self.weight_phs[n]) for n, v in self.variables.items()])
        self._init_op = tf1.global_variables_initializer()
        self.saver = tf1.train.Saver(var_list=tf1.global_variables(), max_to_keep=None)

    def _guarded_apply(self, grads: list[tf.Tensor], loss: tf.Tensor) -> tuple[tf.Operation, tf.Tensor]:
        """An op applying ``grads`` (clipped if configured) only when loss and grads are finite.

        Returns ``(op, applied)`` where ``applied`` is the bool the op was guarded by.
        """
        finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(g)) for g in grads]
                                        + [tf.math.is_finite(loss)]))
        if self.config.max_grad_norm is not None:
            grads, _ = tf.clip_by_global_norm(grads, self.config.max_grad_norm)
        pairs = list(zip(grads, self.variables.values()))
        # Slots are made outside the cond so that the branch only reads and writes them.
        self.optimizer._create_slots(list(self.variables.values()))  # noqa: SLF001
        self.optimizer._prepare()  # noqa: SLF001
        op = tf.cond(finite, lambda: tf.group(self.optimizer.apply_gradients(pairs)),
                     lambda: tf.no_op())
        return op, finite

    # -------------------------------------------------------------- policy
    def dist_params(self, obs: np.ndarray) -> np.ndarray:
        """Distribution parameters ``[B, num_params]`` for observations ``[B, *obs_shape]``."""
        return self._dist_params_fn(policy_inputs.as_obs(self.spec, obs))

    def rollout_policy(self):
        """The ``policy_fn`` for ``pgtwin_core.rollout.collect`` before the next update.

        With ``update_path='recompute'`` this is :meth:`dist_params`; with ``'cached'`` it is a
        fresh ``legacy_graph.cached.RolloutRecording`` that the next update differentiates.
        """
        if self.config.update_path == "cached":
            return self._cached().recorder()
        return self.dist_params

    def _cached(self):
        """The cached update path (``legacy_graph/cached.py``), built on first use."""
        if self._cached_update is None:
            from legacy_graph.cached import CachedUpdate  # it imports this module
            self._cached_update = CachedUpdate(self)
        return self._cached_update

    def log_prob(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """log pi(a|s) ``[B]`` in the spec's dtype."""
        obs = policy_inputs.as_obs(self.spec, obs)
        actions = policy_inputs.as_actions(self.spec, actions, obs.shape[0])
        return self.session.run(self.log_probs, {self.obs_ph: obs, self.actions_ph: actions})

    def per_sample_gradients(self, obs: np.ndarray, actions: np.ndarray,
                             method: str = "vectorized") -> dict[str, np.ndarray]:
        """``{name: [B, *shape]}``: the gradient of each ``log pi(a_i|s_i)``, not summed.

        ``method``: ``vectorized`` (pfor), ``analytic`` (MLP: one backward pass) or ``loop``
        (one ``tf.gradients`` run per sample; the slow reference). See ``legacy_graph/per_sample.py``.
        """
        return self._per_sample_ops().gradients(obs, actions, method)

    def per_sample_sq_norms(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``[B]``: ``||grad log pi(a_i|s_i)||^2`` over all weights (ghost norms for an MLP)."""
        return self._per_sample_ops().sq_norms(obs, actions)

    def _per_sample_ops(self):
        if self._per_sample is None:
            from legacy_graph.per_sample import PerSampleGradients
            self._per_sample = PerSampleGradients(self)
        return self._per_sample

    def _baselines(self):
        """The optimal-baseline update (``legacy_graph/baselines.py``), built on first use."""
        if self._baseline_update is None:
            from legacy_graph.baselines import BaselineUpdate
            self._baseline_update = BaselineUpdate(self)
        return self._baseline_update

    @property
    def baseline_memory(self):
        """The episodic baselines' earlier-batch sums (``pgtwin_core.baseline_memory.BaselineMemory``;
        None for the other baselines): part of the training state, like the optimizer's."""
        return self._baselines().memory if self.config.baseline in EPISODIC else None

    # -------------------------------------------------------------- update
    def inputs(self, batch: Batch) -> TrainInputs:
        """The flat arrays an update on ``batch`` is fed (validated by ``training_inputs``)."""
        return training_inputs(batch, self.config, self.spec)

    def _feed(self, inputs: TrainInputs) -> dict[tf.Tensor, np.ndarray]:
        return {self.obs_ph: inputs.obs, self.actions_ph: inputs.actions,
                self.advantages_ph: inputs.advantages, self.weights_ph: inputs.weights}

    def loss_value(self, batch: Batch) -> float:
        """The REINFORCE loss on ``batch`` (no update)."""
        if self.config.needs_per_sample_gradients:
            return self._baselines().loss_value(batch)
        return float(self.session.run(self.loss, self._feed(self.inputs(batch))))

    def gradients(self, batch: Batch) -> dict[str, np.ndarray]:
        """Gradient of the loss on ``batch`` by variable name (unclipped, not applied)."""
        if self.config.needs_per_sample_gradients:
            return self._baselines().gradients(batch)
        if self.config.update_path == "cached":
            return self._cached().gradients(batch)
        grads = self.session.run(self.grads, self._feed(self.inputs(batch)))
        return dict(zip(self.variables, grads))

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step on ``batch``; returns metrics.

        A non-finite loss or gradient skips the step (weights and optimizer state unchanged)
        and is reported as ``applied = False``.
        """
        if self.config.needs_per_sample_gradients:
            return self._baselines().update(batch)
        if self.config.update_path == "cached":
            return self._cached().update(batch)
        inputs = self.inputs(batch)
        loss, norm, ent, applied = self._train_call(
            inputs.obs, inputs.actions, inputs.advantages, inputs.weights)
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                "applied": bool(applied)}

    def apply_gradients(self, grads: dict[str, np.ndarray]) -> bool:
        """Apply given gradients with the agent's optimizer; False (skipped) if non-finite."""
        feed = {self.grad_phs[n]: np.asarray(grads[n], self.spec.np_dtype) for n in self.variables}
        applied, _ = self.session.run([self.apply_applied, self.apply_op], feed)
        return bool(applied)

    # ------------------------------------------------------------- weights
    def get_weights(self) -> dict[str, np.ndarray]:
        """Current weights by canonical name."""
        return dict(zip(self.variables, self.session.run(list(self.variables.values()))))

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load weights (validated against the spec: missing, extra or misshapen raise)."""
        weights = check_weights(self.spec, weights)
        self.session.run(self.assign_op, {self.weight_phs[n]: weights[n] for n in self.variables})

    def variable_info(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """``{name: (shape, dtype)}`` of the policy variables, as TensorFlow names them."""
        return {v.name.split(":")[0]: (tuple(v.shape.as_list()), v.dtype.base_dtype.name)
                for v in self.variables.values()}

    def save(self, path: str) -> str:
        """Write a TF1 ``Saver`` checkpoint (weights and optimizer state) at prefix ``path``."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with self.graph.as_default():
            return self.saver.save(self.session, path, write_meta_graph=False)

    def restore(self, path: str) -> None:
        """Restore a checkpoint written by :meth:`save`.

        Raises ``IncompatibleCheckpointError`` (nothing restored) when the checkpoint's
        variables, shapes, dtypes or optimizer differ from this agent's: a ``Saver`` alone
        would load a (4, 64) kernel into a (4, 32) variable.
        """
        check_layout(path, saved_layout(path), agent_layout(self.spec, self.config))
        with self.graph.as_default():
            self.saver.restore(self.session, path)

    def close(self) -> None:
        """Release the session."""
        self.session.close()
