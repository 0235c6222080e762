"""Three plausible, wrong migrations of ``tf1_policy_gradient``: one changed piece each.

Each is :class:`~examples.tf1_agent_class.tf2_policy_gradient.PolicyGradientAgent` with the
one piece a user really gets wrong; ``programs.py`` says which rung catches it.
"""
from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from examples.tf1_agent_class.tf2_policy_gradient import PolicyGradientAgent


class KerasEpsilonAgent(PolicyGradientAgent):
    """WRONG: ``keras.optimizers.Adam(lr)``, so epsilon is Keras' 1e-7, not TF1's 1e-8."""

    def make_optimizer(self, lr: float) -> keras.optimizers.Optimizer:
        return keras.optimizers.Adam(learning_rate=lr)


class GlorotInitAgent(PolicyGradientAgent):
    """WRONG: ``Dense(units)`` with Keras' defaults (Glorot-uniform kernels, zero biases).

    TF1 drew kernels from ``truncated_normal(stddev=0.1)`` and set biases to 0.1.
    """

    def build_policy(self, obs_dim: int, n_actions: int, hidden: Sequence[int], seed: int,
                     dtype: str) -> keras.Model:
        layers: list[keras.layers.Layer] = [keras.Input(shape=(obs_dim,), dtype=dtype)]
        layers += [keras.layers.Dense(units, activation="relu", name=f"fc{i + 1}", dtype=dtype)
                   for i, units in enumerate(hidden)]
        layers.append(keras.layers.Dense(n_actions, name="logits", dtype=dtype))
        return keras.Sequential(layers, name="policy")


class NumpyLogProbsAgent(PolicyGradientAgent):
    """WRONG (seed 000's bug): log pi(a|s) taken in numpy, so the loss has no path to the weights.

    The value is right (same softmax, same returns); ``tape.gradient`` gives None for every
    variable, and :meth:`train_step`'s ``apply_gradients`` then has nothing to apply.
    """

    def loss(self, obs, actions, returns) -> dict[str, tf.Tensor]:
        logits = self.policy(tf.cast(obs, self.dtype))
        z = logits.numpy()
        z = z - z.max(axis=1, keepdims=True)
        log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        picked = log_probs[np.arange(len(z)), np.asarray(actions, np.int64)]
        loss = tf.reduce_mean(-picked * tf.cast(returns, self.dtype))
        return {"loss": loss, "logits": logits}
