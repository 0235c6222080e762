"""The policy network's forward pass, for both twins: weights in, distribution parameters out.

A pure function of a ``{name: tensor}`` dict keyed by the canonical ``pgtwin_core`` names
(``policy/dense_0/kernel`` ...), so the same code serves the legacy twin's batched graph, its
per-sample graphs (``tf.vectorized_map``) and cached rollout graph, and the eager twin's
``tf.function``s. How the weights are made and held is each twin's own ``network.py``
(``get_variable`` under variable scopes; ``tf.Variable``s on a ``tf.Module``).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pgtwin_core.specs import PolicySpec


def dense(x: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """``x @ kernel + bias``: ``[B, in] -> [B, out]``."""
    return tf.matmul(x, kernel) + bias


def lstm_steps(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor, prefix: str = "policy"
               ) -> tuple[tf.Tensor, list[tf.Tensor], list[tf.Tensor]]:
    """Hand-written LSTM over the window ``obs [B, K, obs_dim]``, with each step's tensors.

    ``z = [x_t, h] @ W + b``; gates ``i, f, g, o = split(z)``;
    ``c = sigmoid(f) * c + sigmoid(i) * tanh(g)``; ``h = sigmoid(o) * tanh(c)``.
    Built from matmuls only (no ``tf.keras.layers.LSTM``, no while loop), unrolled over K,
    so both twins compute it identically and ``vectorized_map`` can batch it.

    ``prefix``: whose LSTM (``policy``, or ``value`` for the value net of
    ``pgtwin.mode_agnostic.value_net``): the weights ``{prefix}/lstm/kernel`` and ``bias``.

    Returns:
      ``h_K [B, units]``; per step t, the gate layer's input ``[x_t, h_{t-1}]``
      ``[B, obs_dim + units]`` and its pre-activation ``z_t [B, 4 units]`` (for the
      per-sample gradients of ``per_sample.py``).
    """
    units = spec.hidden[0]
    kernel, bias = w[f"{prefix}/lstm/kernel"], w[f"{prefix}/lstm/bias"]
    h = tf.zeros(tf.stack([tf.shape(obs)[0], units]), dtype=obs.dtype)
    c = h
    inputs, pre_activations = [], []
    for t in range(spec.history):
        inputs.append(tf.concat([obs[:, t, :], h], axis=1))
        z = dense(inputs[-1], kernel, bias)
        pre_activations.append(z)
        i, f, g, o = tf.split(z, 4, axis=1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        h = tf.sigmoid(o) * tf.tanh(c)
    return h, inputs, pre_activations


def lstm_last_hidden(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor) -> tf.Tensor:
    """``h_K [B, units]`` of the LSTM over the window ``obs [B, K, obs_dim]`` (:func:`lstm_steps`)."""
    return lstm_steps(spec, w, obs)[0]


def torso(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor) -> tf.Tensor:
    """Features ``[B, width]`` from observations ``[B, *obs_shape]``."""
    x = lstm_last_hidden(spec, w, obs) if spec.torso == "lstm" else obs
    act = tf.tanh if spec.activation == "tanh" else tf.nn.relu
    for i in range(len(spec.dense_sizes)):
        x = act(dense(x, w[f"policy/dense_{i}/kernel"], w[f"policy/dense_{i}/bias"]))
    return x


def squash_mean(spec: PolicySpec, z: tf.Tensor) -> tf.Tensor:
    """Put the Gaussian mean into the action bounds (``sigmoid``, ``tanh`` or ``none``); the
    bounds are taken in ``z``'s dtype.

    ``tanh``'s centre and half-width are halved before they are added: ``high / 2 - low / 2``
    is ``(high - low) / 2`` to the bit (halving is exact) but does not overflow for a Box of
    +-3.4e38, the float32 "unbounded" idiom, where ``high - low`` is inf in float32."""
    if spec.squash == "none":
        return z
    low = np.asarray(spec.action_low, dtype=z.dtype.as_numpy_dtype)
    high = np.asarray(spec.action_high, dtype=z.dtype.as_numpy_dtype)
    if spec.squash == "sigmoid":
        return low + (high - low) * tf.sigmoid(z)
    return (high / 2 + low / 2) + (high / 2 - low / 2) * tf.tanh(z)


def dist_params(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor) -> tf.Tensor:
    """Distribution parameters ``[B, spec.num_params]``: logits, or ``concat(mean, log_std)``."""
    z = dense(torso(spec, w, obs), w["policy/head/kernel"], w["policy/head/bias"])
    if spec.is_discrete:
        return z
    log_std = w["policy/log_std"] + tf.zeros_like(z)  # broadcast to [B, action_dim]
    return tf.concat([squash_mean(spec, z), log_std], axis=1)
