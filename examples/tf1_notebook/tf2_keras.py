"""Keras 3 migration of ``tf1_notebook.py``: a subclassed ``keras.Model``, its own ``train_step``.

* ``slim.stack(obs, slim.fully_connected, [64, 64], scope="fc")`` with ``tanh`` ->
  two ``Dense(64, activation="tanh")`` layers; slim's default initialisers are Xavier
  (Glorot-uniform) weights and zero biases, which are Keras' defaults too (written out);
* ``slim.fully_connected(..., activation_fn=None, scope="logits")`` -> ``Dense(n_actions)``;
* ``sparse_softmax_cross_entropy_with_logits`` weighted by returns, averaged ->
  ``SparseCategoricalCrossentropy(from_logits=True)`` with ``sample_weight=returns``
  (its default reduction divides by the batch size, as ``reduce_mean`` did);
* the ``entropy_coef`` placeholder -> a 0-d input of the loss;
* ``AdamOptimizer(1e-3)`` -> ``keras.optimizers.Adam(1e-3, epsilon=1e-8)`` given to
  ``compile``; ``global_step`` -> ``optimizer.iterations``;
* ``minimize`` -> :meth:`PolicyNet.train_step` (what ``fit`` would call).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import keras
import tensorflow as tf

LEARNING_RATE = 1e-3  # the notebook's LEARNING_RATE


class PolicyNet(keras.Model):
    """``obs [B, obs_dim] -> logits [B, n_actions]``, tanh hidden layers, and its loss and step."""

    def __init__(self, n_actions: int = 2, hidden: Sequence[int] = (64, 64), seed: int = 0,
                 dtype: str = "float32", **kwargs):
        super().__init__(dtype=dtype, **kwargs)
        self.hidden_layers = [
            keras.layers.Dense(units, activation="tanh", name=f"fc_{i + 1}", dtype=dtype,
                               kernel_initializer=keras.initializers.GlorotUniform(seed=seed + i),
                               bias_initializer="zeros")
            for i, units in enumerate(hidden)]
        self.logits_layer = keras.layers.Dense(
            n_actions, name="logits", dtype=dtype, bias_initializer="zeros",
            kernel_initializer=keras.initializers.GlorotUniform(seed=seed + len(hidden)))
        # a Keras 3 loss computes in its own dtype (float32 unless told): the model's here
        self.xent = keras.losses.SparseCategoricalCrossentropy(from_logits=True, dtype=dtype)

    def call(self, obs):
        x = obs
        for layer in self.hidden_layers:
            x = layer(x)
        return self.logits_layer(x)

    def policy_loss(self, data: Mapping[str, object]) -> tf.Tensor:
        """``mean(-log pi(a|s) G) - entropy_coef * mean(H(pi(.|s)))``, a scalar.

        ``data``: ``obs`` float [B, obs_dim], ``actions`` int [B], ``returns`` float [B],
        ``entropy_coef`` float [] (any numeric dtypes; cast here). Only ``obs`` reaches the
        weights.
        """
        logits = self(tf.cast(data["obs"], self.compute_dtype))
        returns = tf.cast(data["returns"], logits.dtype)
        pg_loss = self.xent(tf.cast(data["actions"], tf.int32), logits, sample_weight=returns)
        entropy = tf.reduce_mean(
            -tf.reduce_sum(tf.nn.softmax(logits) * tf.nn.log_softmax(logits), axis=1))
        return pg_loss - tf.cast(data["entropy_coef"], logits.dtype) * entropy

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss = self.policy_loss(data)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return {"loss": loss}


def build_policy(obs_dim: int = 4, n_actions: int = 2, seed: int = 0, dtype: str = "float32",
                 model_class: type[PolicyNet] = PolicyNet) -> PolicyNet:
    """A built, compiled :class:`PolicyNet` (its variables exist: one call on zeros)."""
    model = model_class(n_actions, seed=seed, dtype=dtype, name="policy")
    model(tf.zeros([1, obs_dim], dtype))
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=LEARNING_RATE, epsilon=1e-8))
    return model
