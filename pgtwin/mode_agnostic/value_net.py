"""The value network's forward pass and loss, for both twins (``baseline='value'``).

A pure function of a ``{name: tensor}`` dict under the canonical names of
``pgtwin_core.value_spec`` (``value/dense_0/kernel`` ...), as the policy's
``forward_pass``: the same ops in the legacy twin's graph and the eager twin's
``tf.function``s. How the variables are made and held is each twin's ``value_net.py``.
"""
from __future__ import annotations

import tensorflow as tf

from pgtwin_core.value_spec import ValueSpec

from pgtwin.mode_agnostic.forward_pass import dense, lstm_steps


def standardised_values(vspec: ValueSpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
                        tau: tf.Tensor) -> tf.Tensor:
    """z ``[B]``, the net's output in standardised units, of observations
    ``[B, *obs_shape]`` at time features tau ``[B]`` (``pgtwin_core.value_spec`` module
    doc), in the weights' dtype."""
    x = lstm_steps(vspec, w, obs, prefix="value")[0] if vspec.torso == "lstm" else obs
    x = tf.concat([x, tau[:, tf.newaxis]], axis=1)
    act = tf.tanh if vspec.activation == "tanh" else tf.nn.relu
    for i in range(len(vspec.dense_sizes)):
        x = act(dense(x, w[f"value/dense_{i}/kernel"], w[f"value/dense_{i}/bias"]))
    return dense(x, w["value/head/kernel"], w["value/head/bias"])[:, 0]


def values(vspec: ValueSpec, w: dict[str, tf.Tensor], obs: tf.Tensor, tau: tf.Tensor
           ) -> tf.Tensor:
    """V ``[B]`` = ``return_mean + return_std * z`` (:func:`standardised_values`)."""
    z = standardised_values(vspec, w, obs, tau)
    return w["value/return_mean"][0] + w["value/return_std"][0] * z


def value_loss(predicted: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """``0.5 sum_i w_i (z_i - y_i)^2`` (a scalar): the weighted mean squared error, in
    standardised units.

    Args:
      predicted: z ``[B]``, carries gradient. targets: y ``[B]`` (data, the standardised
        reward-to-go ``(G - return_mean) / return_std``).
      weights: ``[B]`` (data, ``valid / num_valid``).
    """
    targets, weights = tf.stop_gradient(targets), tf.stop_gradient(weights)
    return 0.5 * tf.reduce_sum(weights * tf.square(predicted - targets))
