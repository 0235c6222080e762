"""The REINFORCE loss, for both twins: one op in a TF1 graph, eagerly or in a ``tf.function``."""
from __future__ import annotations

import tensorflow as tf


def reinforce_loss(
    log_probs: tf.Tensor, advantages: tf.Tensor, weights: tf.Tensor,
    entropies: tf.Tensor, entropy_coef: float,
) -> tf.Tensor:
    """``-sum_i w_i A_i log pi_i - entropy_coef * sum_i w_i H_i`` (a scalar).

    Args:
      log_probs: ``[B]``, carries gradient.
      advantages: ``[B]``, data: wrapped in ``stop_gradient`` so no gradient reaches it.
      weights: ``[B]``, data (``valid / num_valid``).
      entropies: ``[B]``, carries gradient.
    """
    advantages = tf.stop_gradient(advantages)
    weights = tf.stop_gradient(weights)
    pg = -tf.reduce_sum(weights * advantages * log_probs)
    return pg - entropy_coef * tf.reduce_sum(weights * entropies)
