"""Log-probabilities and entropies from distribution parameters, for both twins.

The same ops build a TF1 graph (``legacy_graph``) or run eagerly and inside ``tf.function``
(``eager``). ``params`` are those of ``forward_pass.dist_params``: logits ``[B, action_size]``
(categorical) or ``concat(mean, log_std)`` ``[B, 2 action_dim]`` (Gaussian), in the config's dtype.
"""
from __future__ import annotations

import math

import tensorflow as tf

from pgtwin_core.specs import PolicySpec

LOG_2PI = math.log(2.0 * math.pi)


def log_prob(spec: PolicySpec, params: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
    """log pi(a|s) ``[B]``.

    Args:
      params: ``[B, num_params]`` (carries gradient).
      actions: int ``[B]`` or float ``[B, action_dim]`` (no gradient: data).
    """
    if spec.is_discrete:
        onehot = tf.one_hot(actions, spec.action_size, dtype=params.dtype)
        return tf.reduce_sum(onehot * tf.nn.log_softmax(params), axis=1)
    mean, log_std = tf.split(params, 2, axis=1)
    # The action is a sample, not a function of the weights (the score-function estimator):
    # without this, d loss / d actions would be (a - mean) / sigma^2, not None.
    actions = tf.stop_gradient(actions)
    z = (actions - mean) * tf.exp(-log_std)
    return tf.reduce_sum(-0.5 * tf.square(z) - log_std - 0.5 * LOG_2PI, axis=1)


def entropy(spec: PolicySpec, params: tf.Tensor) -> tf.Tensor:
    """Entropy of pi(.|s) ``[B]``: ``-sum p log p``, or ``sum(log_std) + d/2 (1 + log 2 pi)``."""
    if spec.is_discrete:
        logp = tf.nn.log_softmax(params)
        return -tf.reduce_sum(tf.exp(logp) * logp, axis=1)
    _, log_std = tf.split(params, 2, axis=1)
    return tf.reduce_sum(log_std + 0.5 * (1.0 + LOG_2PI), axis=1)
