"""The value baseline's network, the TF2 way: ``tf.Variable``s on a ``tf.Module`` with its own
Keras optimizer, in ``tf.function``s traced once (``baseline='value'``).

The ops are ``pgtwin.mode_agnostic.value_net``'s; the variables take the canonical names
(``value/dense_0/kernel`` ...) and the numpy initial weights the legacy twin loads; the
optimizer is ``pgtwin_core.value_spec.value_optimizer_config``'s (the policy's kind, Adam
under ``natural_kl``) at ``ReinforceConfig.value_learning_rate``, named ``value_adam`` /
``value_sgd`` so that a checkpoint tells it from the policy's, and its step is guarded
like the policy's (``guarded_apply``). The module, optimizer included, is part of the
agent's ``tf.train.Checkpoint`` (``value``). Mirrors ``legacy_graph/value_net.py``.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.value_spec import (STATS, ValueSpec, check_value_weights, init_value_weights,
                                    value_optimizer_config, value_spec)

from pgtwin.mode_agnostic.value_net import standardised_values, value_loss, values

from eager.gradient_step import checked_gradients, guarded_apply
from eager.optimizers import make_optimizer
from eager.tracing import traced


class ValueNet(tf.Module):
    """``pgtwin_core.value_path.ValueNet`` of an eager agent.

    Args:
      vspec: the value net (``pgtwin_core.value_spec.value_spec``).
      config: the agent's (``dtype``, the optimizer, ``value_learning_rate``, ``jit_compile``).
      weights: initial numpy weights by canonical name.
    """

    def __init__(self, vspec: ValueSpec, config: ReinforceConfig,
                 weights: dict[str, np.ndarray]):
        super().__init__(name="value_net")
        self.vspec, self._dtype = vspec, config.dtype
        weights = check_value_weights(vspec, weights, dtype=config.dtype)
        self.variables_by_name = {n: tf.Variable(weights[n], name=n)
                                  for n in vspec.weight_shapes()}
        """The trained weights by canonical name."""
        self.stats_by_name = {n: tf.Variable(weights[n], name=n, trainable=False) for n in STATS}
        """``value/return_mean``, ``value/return_std``: set, not trained."""
        self.all_variables = {**self.variables_by_name, **self.stats_by_name}
        optimizer_config = value_optimizer_config(config)
        self.optimizer = make_optimizer(optimizer_config,
                                        name=f"value_{optimizer_config.optimizer}")
        self.optimizer.build(list(self.variables_by_name.values()))
        vector = tf.TensorSpec([None], config.dtype)
        obs = tf.TensorSpec([None, *vspec.obs_shape], config.dtype)
        self._values_fn = traced(self._values, input_signature=[obs, vector])
        batch = [obs, vector, vector, vector]
        self._loss_fn = traced(self._loss_and_grads, input_signature=batch)
        self._fit_fn = traced(self._fit_step, input_signature=batch,
                              jit_compile=config.jit_compile)

    # ------------------------------------------------------------ traced bodies
    def _values(self, obs, tau):
        return values(self.vspec, self.all_variables, obs, tau)

    def _loss_and_grads(self, obs, tau, targets, weights):
        with tf.GradientTape() as tape:
            z = standardised_values(self.vspec, self.variables_by_name, obs, tau)
            loss = value_loss(z, targets, weights)
        return loss, checked_gradients(tape, loss, self.variables_by_name)

    def _fit_step(self, obs, tau, targets, weights):
        loss, grads = self._loss_and_grads(obs, tau, targets, weights)
        applied = guarded_apply(self.optimizer, self.variables_by_name, grads, loss, None)
        return loss, applied

    def trace_counts(self) -> dict[str, int]:
        """How often each ``tf.function`` has been traced (1 after warm-up, never more)."""
        fns = {"value": self._values_fn, "value_loss": self._loss_fn, "value_fit": self._fit_fn}
        return {k: f.experimental_get_tracing_count() for k, f in fns.items()}

    # ------------------------------------------------------------ ValueNet
    def predict(self, obs: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """V ``[B]`` in ``config.dtype`` (raw units) of ``obs [B, *obs_shape]``, ``tau [B]``."""
        return self._values_fn(obs, tau).numpy()

    def fit_step(self, obs, tau, targets, weights) -> tuple[float, bool]:
        """One guarded optimizer step on the value loss at standardised ``targets``:
        ``(loss before the step, applied)``."""
        loss, applied = self._fit_fn(obs, tau, targets, weights)
        return float(loss), bool(applied)

    def loss_and_gradients(self, obs, tau, targets, weights
                           ) -> tuple[float, dict[str, np.ndarray]]:
        """The value loss and its gradient by weight name (nothing applied)."""
        loss, grads = self._loss_fn(obs, tau, targets, weights)
        return float(loss), {n: g.numpy() for n, g in zip(self.variables_by_name, grads)}

    def set_target_stats(self, mean: float, std: float) -> None:
        """Set ``value/return_mean`` and ``value/return_std`` (std > 0)."""
        self.set_weights({**self.get_weights(), "value/return_mean": np.array([mean]),
                          "value/return_std": np.array([std])})

    def get_weights(self) -> dict[str, np.ndarray]:
        """Current values of every variable (weights and statistics) by canonical name."""
        return {n: v.numpy() for n, v in self.all_variables.items()}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load every variable (checked against the spec)."""
        weights = check_value_weights(self.vspec, weights, dtype=self._dtype)
        for n, v in self.all_variables.items():
            v.assign(weights[n])


def agent_value_net(agent) -> ValueNet:
    """The value net of an eager ``agent`` (its public ``spec``, ``config``, ``seed``),
    initial weights ``init_value_weights(value_spec, agent.seed)``."""
    vspec = value_spec(agent.spec, agent.config)
    return ValueNet(vspec, agent.config,
                    init_value_weights(vspec, agent.seed, dtype=agent.config.dtype))
