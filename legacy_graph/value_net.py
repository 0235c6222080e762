"""The value baseline's network, the TF1 way: variables, placeholders, its own optimizer, all
in the agent's graph and session (``baseline='value'``).

The ops are ``pgtwin.mode_agnostic.value_net``'s; the variables are made by ``get_variable``
under the canonical names (``value/dense_0/kernel`` ...) as the policy's are
(``legacy_graph/network.py``); the optimizer is ``pgtwin_core.value_spec.value_optimizer_config``'s
(the policy's kind, Adam under ``natural_kl``) at ``ReinforceConfig.value_learning_rate``
with its own state, built under the name scope
``value_optimizer`` (its ``beta1_power``/``beta2_power``; the moment slots are named after
the variables, ``value/.../Adam``), guarded like the policy's step (``guarded_apply``: a
non-finite loss or gradient leaves weights and state untouched). The agent's ``Saver``
holds them all. Mirrors ``eager/value_net.py``.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.value_spec import (STATS, ValueSpec, check_value_weights, init_value_weights,
                                    value_optimizer_config, value_spec)

from pgtwin.mode_agnostic.value_net import standardised_values, value_loss, values

from legacy_graph import network
from legacy_graph.gradient_step import checked_gradients, guarded_apply
from legacy_graph.optimizers import make_optimizer
from legacy_graph.policy_call import direct_callable

tf1 = tf.compat.v1


class ValueNet:
    """``pgtwin_core.value_path.ValueNet`` in a graph agent's graph and session.

    Args:
      session: the agent's session (its graph is made the default while building).
      vspec: the value net (``pgtwin_core.value_spec.value_spec``).
      config: the agent's (``dtype``, the optimizer, ``value_learning_rate``).
      weights: initial numpy weights by canonical name.
    """

    def __init__(self, session: tf1.Session, vspec: ValueSpec, config: ReinforceConfig,
                 weights: dict[str, np.ndarray]):
        self.vspec, self._session, self._dtype = vspec, session, config.dtype
        dtype = config.dtype
        with session.graph.as_default():
            self.variables = network.create_variables(vspec, dtype)
            """The trained weights by canonical name."""
            self.stats = {}
            """``value/return_mean``, ``value/return_std``: set, not trained."""
            for name in STATS:
                with tf1.variable_scope("value", reuse=tf1.AUTO_REUSE):
                    self.stats[name] = tf1.get_variable(
                        name.split("/")[1], shape=(1,), dtype=dtype, trainable=False,
                        initializer=tf1.zeros_initializer())
            self.all_variables = {**self.variables, **self.stats}
            self.obs_ph = tf1.placeholder(dtype, [None, *vspec.obs_shape], name="value_obs")
            self.tau_ph = tf1.placeholder(dtype, [None], name="value_tau")
            self.targets_ph = tf1.placeholder(dtype, [None], name="value_targets")
            self.weights_ph = tf1.placeholder(dtype, [None], name="value_weights")
            self.values = values(vspec, self.all_variables, self.obs_ph, self.tau_ph)
            z = standardised_values(vspec, self.variables, self.obs_ph, self.tau_ph)
            self.loss = value_loss(z, self.targets_ph, self.weights_ph)
            self.grads = checked_gradients(self.loss, self.variables)
            with tf1.name_scope("value_optimizer"):
                self.optimizer = make_optimizer(value_optimizer_config(config), dtype)
                self.train_op, self.applied = guarded_apply(
                    self.optimizer, self.variables, self.grads, self.loss, None)
            self.weight_phs = {n: tf1.placeholder(dtype, v.shape)
                               for n, v in self.all_variables.items()}
            self.assign_op = tf.group(*[v.assign(self.weight_phs[n])
                                        for n, v in self.all_variables.items()])
            own = list(self.all_variables.values()) + self.optimizer.variables()
            session.run(tf1.variables_initializer(own))
        feeds = [self.obs_ph, self.tau_ph, self.targets_ph, self.weights_ph]
        self._values_call = direct_callable(session, [self.values], [self.obs_ph, self.tau_ph])
        self._fit_call = direct_callable(session, [self.loss, self.applied], feeds,
                                         targets=[self.train_op])
        self._loss_call = direct_callable(session, [self.loss, *self.grads], feeds)
        self.set_weights(weights)

    def predict(self, obs: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """V ``[B]`` in ``config.dtype`` (raw units) of ``obs [B, *obs_shape]``, ``tau [B]``."""
        return self._values_call(obs, tau)[0]

    def fit_step(self, obs, tau, targets, weights) -> tuple[float, bool]:
        """One guarded optimizer step on the value loss at standardised ``targets``:
        ``(loss before the step, applied)``."""
        loss, applied = self._fit_call(obs, tau, targets, weights)
        return float(loss), bool(applied)

    def loss_and_gradients(self, obs, tau, targets, weights
                           ) -> tuple[float, dict[str, np.ndarray]]:
        """The value loss and its gradient by weight name (nothing applied)."""
        loss, *grads = self._loss_call(obs, tau, targets, weights)
        return float(loss), dict(zip(self.variables, grads))

    def set_target_stats(self, mean: float, std: float) -> None:
        """Set ``value/return_mean`` and ``value/return_std`` (std > 0)."""
        self.set_weights({**self.get_weights(), "value/return_mean": np.array([mean]),
                          "value/return_std": np.array([std])})

    def get_weights(self) -> dict[str, np.ndarray]:
        """Current values of every variable (weights and statistics) by canonical name."""
        names = list(self.all_variables)
        return dict(zip(names, self._session.run([self.all_variables[n] for n in names])))

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load every variable (checked against the spec)."""
        weights = check_value_weights(self.vspec, weights, dtype=self._dtype)
        self._session.run(self.assign_op,
                          {self.weight_phs[n]: weights[n] for n in self.all_variables})


def agent_value_net(agent) -> ValueNet:
    """The value net of a graph ``agent`` (its public ``session``, ``spec``, ``config``,
    ``seed``), initial weights ``init_value_weights(value_spec, agent.seed)``."""
    vspec = value_spec(agent.spec, agent.config)
    return ValueNet(agent.session, vspec, agent.config,
                    init_value_weights(vspec, agent.seed, dtype=agent.config.dtype))
