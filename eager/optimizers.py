"""Keras optimizers with hyperparameters matched to ``tf.compat.v1.train`` exactly.

Mirrors ``legacy_graph/optimizers.py``. Keras Adam's default epsilon is 1e-7 (TF1: 1e-8):
every hyperparameter is passed explicitly from the config, never left to a default.
"""
from __future__ import annotations

import keras

from pgtwin_core.config import ReinforceConfig


def make_optimizer(config: ReinforceConfig, name: str | None = None) -> keras.optimizers.Optimizer:
    """Adam or plain SGD (no momentum, no Nesterov). ``name``: Keras' default (``adam``,
    ``sgd``) if None; the value net's is ``value_adam`` / ``value_sgd``
    (``eager/value_net.py``), which names its variables in a checkpoint."""
    named = {} if name is None else {"name": name}
    if config.optimizer == "sgd":
        return keras.optimizers.SGD(learning_rate=config.learning_rate, momentum=0.0, **named)
    return keras.optimizers.Adam(
        learning_rate=config.learning_rate, beta_1=config.adam_beta1,
        beta_2=config.adam_beta2, epsilon=config.adam_epsilon, **named,
    )
