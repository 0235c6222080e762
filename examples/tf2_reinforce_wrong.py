"""Two plausible but wrong migrations of ``tf1_reinforce.py``, for the parity harness to catch.

1. ``loss_fn_numpy_log_probs``: seed 000's shortcut. To skip the second forward pass, the
   log-probs are taken during the rollout and kept as numpy values; the loss built from
   them has the right *value* but no path to the weights. The harness passes the outputs
   and loss rungs and fails at the **gradients** rung: every gradient is None on the TF2
   side (``DisconnectedGradientError``).
2. ``make_optimizer_default_epsilon``: ``keras.optimizers.Adam(lr)`` with Keras' default
   epsilon 1e-7 where TF1's AdamOptimizer used 1e-8. Outputs, loss and gradients agree;
   the harness fails at the **weights** rung (the hyperparameter row names the epsilon, and
   the weights after the optimizer steps part where gradients are small).
"""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from examples.tf2_reinforce import LEARNING_RATE, NUM_ACTIONS, policy_logits


def rollout_log_probs(variables, obs, actions) -> np.ndarray:
    """What the rollout stored for each step: log pi(a|s) as numpy (no tape, no gradient)."""
    logits = policy_logits(variables, obs)
    onehot = tf.one_hot(actions, NUM_ACTIONS, dtype=logits.dtype)
    return tf.reduce_sum(onehot * tf.nn.log_softmax(logits), axis=1).numpy()


def loss_fn_numpy_log_probs(variables, inputs):
    """WRONG: the loss from stored numpy log-probs (seed 000); equal value, no gradient."""
    logits = policy_logits(variables, inputs["obs"])
    stored = rollout_log_probs(variables, inputs["obs"], inputs["actions"])
    log_probs = tf.convert_to_tensor(stored)  # a constant: the tape cannot see through numpy
    loss = -tf.reduce_mean(log_probs * inputs["returns"])
    return {"loss": loss, "logits": logits, "log_probs": log_probs}


def make_optimizer_default_epsilon():
    """WRONG: Keras Adam with its default epsilon (1e-7), not TF1's 1e-8."""
    return keras.optimizers.Adam(learning_rate=LEARNING_RATE)
