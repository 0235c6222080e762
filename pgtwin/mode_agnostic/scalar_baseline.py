"""The per-step optimal scalar baseline ``b*`` as a TensorFlow op, for both twins.

Greensmith, Bartlett & Baxter (2004); the numpy reference is
``pgtwin_core.baselines.optimal_scalar``. The twins feed it the ghost norms of
``pgtwin.mode_agnostic.per_sample.ghost_sq_norms``.
"""
from __future__ import annotations

import tensorflow as tf


def scalar_baseline(sq_norms: tf.Tensor, returns: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """``b* = sum w n R / sum w n`` (a scalar, no gradient); ``sum w R / sum w`` if ``sum w n = 0``.

    Args:
      sq_norms: ``[B]``, ``n_i = ||grad log pi_i||^2``; returns: ``[B]``, R_i;
      weights: ``[B]``, ``valid_i / num_valid``. All data: gradient is stopped.
    """
    n, r, w = (tf.stop_gradient(x) for x in (sq_norms, returns, weights))
    den = tf.reduce_sum(w * n)
    safe = tf.where(den > 0, den, tf.ones_like(den))  # no 0/0 even in the unused branch
    return tf.where(den > 0, tf.reduce_sum(w * n * r) / safe,
                    tf.reduce_sum(w * r) / tf.reduce_sum(w))
