"""The rollout's policy call for TF1: numpy observations in, numpy parameters out, cheaply.

A rollout calls the policy once per env step on a few dozen observations, so the fixed cost
of a call, not its arithmetic, bounds env-steps per second. ``Session.make_callable`` skips
``Session.run``'s parsing of feeds and fetches on every call, and
``RunOptions(inter_op_thread_pool=-1)`` runs the few ops in the caller's thread instead of
handing each to the inter-op pool (TensorFlow recommends it for exactly such small graphs);
together they take the call from ~120 us to ~60 us. Mirrors ``eager/policy_call.py``, which
makes the same choice with the single-threaded executor.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def policy_callable(session: tf1.Session, fetch: tf.Tensor, feed: tf.Tensor,
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """A numpy-in, numpy-out caller of ``fetch`` given ``feed`` in ``session``.

    Args:
      session: the session holding ``fetch``'s graph.
      fetch: the tensor to compute (distribution parameters ``[B, num_params]``).
      feed: the placeholder to feed (observations ``[B, *obs_shape]``).

    Returns:
      ``call(obs) -> np.ndarray``: ``obs`` must already have the placeholder's dtype and
      shape (see ``pgcommon.policy_inputs.as_obs``).
    """
    callable_ = session.make_callable(fetch, [feed], accept_options=True)
    return functools.partial(callable_, options=tf1.RunOptions(inter_op_thread_pool=-1))
