"""``tf.compat.v1.train`` optimizers with hyperparameters matched to Keras' exactly.

Mirrors ``eager/optimizers.py``. Two differences from Keras hide in the TF1 defaults and
are removed here: TF1's AdamOptimizer defaults to epsilon 1e-8 (Keras: 1e-7), and TF1
turns Python hyperparameters into float32 tensors, so in a float64 graph beta1 = 0.9 would
be float32(0.9) while Keras uses float64(0.9). Hyperparameters are therefore given as
tensors of the variables' dtype; the learning rate is rounded to float32 first because
Keras keeps it in a float32 variable.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pgcommon.config import ReinforceConfig

tf1 = tf.compat.v1


def make_optimizer(config: ReinforceConfig, dtype: str) -> tf1.train.Optimizer:
    """Adam or plain SGD for variables of ``dtype``, built in the current graph."""
    lr = tf.constant(np.float32(config.learning_rate), dtype=dtype)
    if config.optimizer == "sgd":
        return tf1.train.GradientDescentOptimizer(lr)
    return tf1.train.AdamOptimizer(
        learning_rate=lr,
        beta1=tf.constant(config.adam_beta1, dtype=dtype),
        beta2=tf.constant(config.adam_beta2, dtype=dtype),
        epsilon=tf.constant(config.adam_epsilon, dtype=dtype),
    )
