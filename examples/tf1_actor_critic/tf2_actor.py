"""Keras 3 migration of the *actor* of ``tf1_actor_critic.ActorCritic`` (the critic stays in TF1).

* ``fc(..., init_scale=g)`` under ``actor/h1``, ``actor/h2``, ``actor/pi`` ->
  ``Dense(name="h1" | "h2" | "pi")`` in a subclassed ``keras.Model`` named ``actor``, with
  ``Orthogonal(gain=sqrt(2))`` / ``Orthogonal(gain=0.01)`` kernels and zero biases, as the
  old ``orthogonal_initializer(init_scale)`` drew them;
* ``actor_loss = pg_loss - ent_coef * entropy`` -> :func:`actor_loss`, advantages an input
  as the placeholder was;
* ``AdamOptimizer(actor_lr, epsilon=1e-5).minimize(actor_loss, var_list=actor_params)`` ->
  ``keras.optimizers.Adam(actor_lr, epsilon=1e-5)`` applied to the actor's variables in
  :meth:`ActorLearner.train_step`, a ``tf.function``.
"""
from __future__ import annotations

from collections.abc import Mapping

import keras
import numpy as np
import tensorflow as tf


class Actor(keras.Model):
    """``obs [B, obs_dim] -> logits [B, n_actions]`` through two tanh layers of ``hidden`` units."""

    def __init__(self, n_actions: int, hidden: int = 64, seed: int = 0, dtype: str = "float32"):
        super().__init__(name="actor", dtype=dtype)

        def dense(units, name, gain, activation=None, offset=0):
            return keras.layers.Dense(
                units, activation=activation, name=name, dtype=dtype, bias_initializer="zeros",
                kernel_initializer=keras.initializers.Orthogonal(gain=gain, seed=seed + offset))

        self.h1 = dense(hidden, "h1", np.sqrt(2), "tanh", 0)
        self.h2 = dense(hidden, "h2", np.sqrt(2), "tanh", 1)
        self.pi = dense(n_actions, "pi", 0.01, None, 2)

    def call(self, obs):
        return self.pi(self.h2(self.h1(obs)))


def actor_loss(logits: tf.Tensor, actions: tf.Tensor, advantages: tf.Tensor,
               ent_coef: float) -> tf.Tensor:
    """``mean(A * -log pi(a|s)) - ent_coef * mean(H(pi(.|s)))``, a scalar.

    Args: logits float [B, n_actions] (carries the gradient); actions int [B];
    advantages float [B], in the logits' dtype (data: no gradient).
    """
    neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=actions, logits=logits)
    pg_loss = tf.reduce_mean(advantages * neglogp)
    entropy = tf.reduce_mean(
        -tf.reduce_sum(tf.nn.softmax(logits) * tf.nn.log_softmax(logits), axis=1))
    return pg_loss - ent_coef * entropy


class ActorLearner:
    """The migrated actor, its Adam and its train step. ``actor_class`` picks the network."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int = 64, lr: float = 7e-4,
                 ent_coef: float = 0.01, seed: int = 0, dtype: str = "float32",
                 actor_class: type[keras.Model] = Actor):
        self.dtype = tf.as_dtype(dtype)
        self.ent_coef = ent_coef
        self.actor = actor_class(n_actions, hidden, seed=seed, dtype=dtype)
        self.actor(tf.zeros([1, obs_dim], self.dtype))  # variables now, not inside tf.function
        self.optimizer = keras.optimizers.Adam(learning_rate=lr, epsilon=1e-5)  # TF1: 1e-5
        self.optimizer.build(self.actor.trainable_variables)

    def loss(self, obs, actions, advantages) -> dict[str, tf.Tensor]:
        """:func:`actor_loss` on a batch (any numeric dtypes, cast here); ``{"loss", "logits"}``."""
        logits = self.actor(tf.cast(obs, self.dtype))
        loss = actor_loss(logits, tf.cast(actions, tf.int32), tf.cast(advantages, self.dtype),
                          self.ent_coef)
        return {"loss": loss, "logits": logits}

    def trained_variables(self) -> list[tf.Variable]:
        """What the step updates: TF1's ``var_list=tf.trainable_variables("actor")``."""
        return self.actor.trainable_variables

    @tf.function(reduce_retracing=True)
    def train_step(self, batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """One Adam step on ``obs``, ``actions``, ``advantages``; returns the loss."""
        variables = self.trained_variables()
        with tf.GradientTape() as tape:
            loss = self.loss(batch["obs"], batch["actions"], batch["advantages"])["loss"]
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss
