"""The TF2 migration of ``tf1_policy_gradient.PolicyGradient``: Keras 3 layers, GradientTape.

Piece by piece:

* placeholders -> arguments of :meth:`PolicyGradientAgent.loss` (cast to the model's dtype
  there, as ``feed_dict`` cast them before);
* ``get_variable`` under ``variable_scope("policy/fc1")`` -> ``keras.layers.Dense(name="fc1")``
  in a ``keras.Sequential`` named ``policy``; TF1's initialisers are written out
  (``TruncatedNormal(stddev=0.1)`` kernels, ``Constant(0.1)`` biases), since Keras'
  defaults (Glorot-uniform, zeros) are not what the old code drew;
* ``AdamOptimizer(lr)`` -> ``keras.optimizers.Adam(lr, epsilon=1e-8)``: TF1's epsilon is
  1e-8, Keras' default 1e-7;
* ``opt.minimize(loss)`` -> :meth:`PolicyGradientAgent.train_step` (``GradientTape`` +
  ``apply_gradients`` on the policy's trainable variables);
* ``Session`` -> nothing: the model and optimizer own their variables.

``dtype="float64"`` builds the whole policy in float64 (the TF1 class takes ``dtype`` too).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf


def policy_network(obs_dim: int, n_actions: int, hidden: Sequence[int] = (32, 32),
                   seed: int = 0, dtype: str = "float32") -> keras.Sequential:
    """The policy ``obs [B, obs_dim] -> logits [B, n_actions]``, ReLU hidden layers.

    Layers ``fc1``, ``fc2``, ... and ``logits``, created (and built) in that order, each a
    kernel then a bias: the TF1 class's creation order. Each layer's initialiser gets its own
    seed, since a seeded Keras 3 initialiser repeats its values on every call.
    """
    layers: list[keras.layers.Layer] = [keras.Input(shape=(obs_dim,), dtype=dtype)]
    for i, units in enumerate([*hidden, n_actions]):
        last = i == len(hidden)
        layers.append(keras.layers.Dense(
            units, activation=None if last else "relu", name="logits" if last else f"fc{i + 1}",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.1, seed=seed + i),
            bias_initializer=keras.initializers.Constant(0.1), dtype=dtype))
    return keras.Sequential(layers, name="policy")


class PolicyGradientAgent:
    """REINFORCE with a Keras 3 policy and a Keras Adam holding TF1's settings.

    Attributes: ``policy`` (the Keras model), ``optimizer`` (its Adam), ``dtype``.
    """

    def __init__(self, obs_dim: int, n_actions: int, lr: float = 0.01,
                 hidden: Sequence[int] = (32, 32), seed: int = 0, dtype: str = "float32"):
        self.n_actions = n_actions
        self.dtype = tf.as_dtype(dtype)
        self.policy = self.build_policy(obs_dim, n_actions, hidden, seed, self.dtype.name)
        self.optimizer = self.make_optimizer(lr)

    def build_policy(self, obs_dim: int, n_actions: int, hidden: Sequence[int], seed: int,
                     dtype: str) -> keras.Model:
        return policy_network(obs_dim, n_actions, hidden, seed, dtype)

    def make_optimizer(self, lr: float) -> keras.optimizers.Optimizer:
        """TF1's ``AdamOptimizer(lr)`` defaults, written out (Keras' epsilon would be 1e-7)."""
        return keras.optimizers.Adam(learning_rate=lr, beta_1=0.9, beta_2=0.999, epsilon=1e-8)

    def loss(self, obs, actions, returns) -> dict[str, tf.Tensor]:
        """REINFORCE loss ``mean_t(-log pi(a_t|s_t) G_t)``.

        Args:
          obs: float [B, obs_dim]; actions: int [B]; returns: float [B] (standardised
            discounted returns). Any numeric dtype: they are cast as ``feed_dict`` did.
            Only ``obs`` reaches the weights; actions and returns carry no gradient.
        Returns:
          ``{"loss": scalar, "logits": [B, n_actions]}`` in the model's dtype.
        """
        logits = self.policy(tf.cast(obs, self.dtype))
        neg_log_prob = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(actions, tf.int32), logits=logits)
        loss = tf.reduce_mean(neg_log_prob * tf.cast(returns, self.dtype))
        return {"loss": loss, "logits": logits}

    def train_step(self, batch: Mapping[str, object]) -> tf.Tensor:
        """One Adam step on ``batch`` (``obs``, ``actions``, ``returns``); returns the loss."""
        variables = self.policy.trainable_variables
        with tf.GradientTape() as tape:
            loss = self.loss(batch["obs"], batch["actions"], batch["returns"])["loss"]
        grads = tape.gradient(loss, variables)
        self.optimizer.apply_gradients(zip(grads, variables))
        return loss

    def choose_action(self, observation: np.ndarray, rng: np.random.Generator) -> int:
        """Sample ``a ~ pi(.|observation)`` for one float [obs_dim] observation."""
        probs = tf.nn.softmax(self.policy(tf.cast(observation[None], self.dtype)))[0].numpy()
        return int(rng.choice(self.n_actions, p=probs / probs.sum()))
