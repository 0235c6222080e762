"""Legacy-Keras (``tf_keras``) migration of ``tf1_notebook.py``: a Sequential and a trainer.

What users do who keep Keras 2 semantics on TF 2.16+ (``import tf_keras``; ``tf.keras`` is
Keras 3 there). The same pieces as ``tf2_keras.py``: Glorot-uniform / zero (slim's defaults),
``tf_keras.optimizers.Adam(1e-3, epsilon=1e-8)`` (TF1's epsilon; tf_keras' default is 1e-7),
and a ``tf.function`` train step with ``GradientTape`` + ``apply_gradients``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import tensorflow as tf
import tf_keras

LEARNING_RATE = 1e-3  # the notebook's LEARNING_RATE


def policy_network(obs_dim: int = 4, n_actions: int = 2, hidden: Sequence[int] = (64, 64),
                   seed: int = 0, dtype: str = "float32") -> tf_keras.Sequential:
    """``obs [B, obs_dim] -> logits [B, n_actions]``, built (kernel, bias per layer, in order)."""
    init = tf_keras.initializers.GlorotUniform
    layers = [tf_keras.Input(shape=(obs_dim,), dtype=dtype)]
    layers += [tf_keras.layers.Dense(units, activation="tanh", kernel_initializer=init(seed + i),
                                     dtype=dtype) for i, units in enumerate(hidden)]
    layers.append(tf_keras.layers.Dense(n_actions, kernel_initializer=init(seed + len(hidden)),
                                        dtype=dtype))
    return tf_keras.Sequential(layers)


class Trainer:
    """The policy, its Adam and the loss; ``global_step`` is ``optimizer.iterations``."""

    def __init__(self, obs_dim: int = 4, n_actions: int = 2, seed: int = 0,
                 dtype: str = "float32"):
        self.dtype = tf.as_dtype(dtype)
        self.model = policy_network(obs_dim, n_actions, seed=seed, dtype=dtype)
        self.optimizer = self.make_optimizer()
        self.optimizer.build(self.model.trainable_variables)  # slots exist before tracing

    def make_optimizer(self) -> tf_keras.optimizers.Optimizer:
        return tf_keras.optimizers.Adam(learning_rate=LEARNING_RATE, epsilon=1e-8)

    def loss(self, batch: Mapping[str, object]) -> tf.Tensor:
        """The notebook's ``loss``: ``pg_loss - entropy_coef * entropy`` (see ``tf2_keras``)."""
        logits = self.model(tf.cast(batch["obs"], self.dtype))
        neg_log_prob = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(batch["actions"], tf.int32), logits=logits)
        pg_loss = tf.reduce_mean(neg_log_prob * tf.cast(batch["returns"], self.dtype))
        entropy = tf.reduce_mean(
            -tf.reduce_sum(tf.nn.softmax(logits) * tf.nn.log_softmax(logits), axis=1))
        return pg_loss - tf.cast(batch["entropy_coef"], self.dtype) * entropy

    @tf.function(reduce_retracing=True)
    def train_step(self, batch):
        with tf.GradientTape() as tape:
            loss = self.loss(batch)
        variables = self.model.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss
