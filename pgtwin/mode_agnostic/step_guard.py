"""The condition every optimizer step of both twins is guarded by (``gradient_step.py`` of
each twin): one op in a TF1 graph, eagerly, in a ``tf.function`` or under XLA."""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf


def all_finite(grads: Sequence[tf.Tensor], loss: tf.Tensor,
               allowed: tf.Tensor | None = None) -> tf.Tensor:
    """A scalar bool: ``loss`` and every element of every gradient are finite, and
    ``allowed`` (a scalar bool, if given: a condition of the caller's, such as
    ``episodic_baselines.rows_held``) holds. A NaN or inf must never reach the weights or
    the optimizer's state."""
    checks = [tf.reduce_all(tf.math.is_finite(g)) for g in grads] + [tf.math.is_finite(loss)]
    if allowed is not None:
        checks.append(tf.convert_to_tensor(allowed, tf.bool))
    return tf.reduce_all(tf.stack(checks))
