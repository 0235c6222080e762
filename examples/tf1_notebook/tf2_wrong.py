"""Three plausible, wrong migrations of ``tf1_notebook.py``, one changed piece each.

``programs.py`` says which rung catches each and what its numbers look like.
"""
from __future__ import annotations

import keras
import tensorflow as tf
import tf_keras

from examples.tf1_notebook.tf2_keras import PolicyNet
from examples.tf1_notebook.tf2_tf_keras import LEARNING_RATE, Trainer


class FromLogitsDefaultPolicy(PolicyNet):
    """WRONG: ``SparseCategoricalCrossentropy()``: ``from_logits`` left at False on raw logits.

    Keras then treats the logits as probabilities (rescaled to sum to one, clipped to
    [1e-7, 1 - 1e-7]) before taking their log.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.xent = keras.losses.SparseCategoricalCrossentropy(dtype=self.dtype)


class DoubleSoftmaxPolicy(PolicyNet):
    """WRONG: the head became ``Dense(n_actions, activation="softmax")`` (to sample from it).

    The loss still says ``from_logits=True`` and the entropy still takes a softmax, so
    both apply a second softmax to probabilities.
    """

    def call(self, obs):
        return tf.nn.softmax(super().call(obs))


class TfKerasEpsilonTrainer(Trainer):
    """WRONG: ``tf_keras.optimizers.Adam(1e-3)``: tf_keras' default epsilon 1e-7, not TF1's 1e-8."""

    def make_optimizer(self) -> tf_keras.optimizers.Optimizer:
        return tf_keras.optimizers.Adam(learning_rate=LEARNING_RATE)
