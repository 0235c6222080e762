"""Calls into the graph on the hot paths: the rollout's policy and the update.

A rollout calls the policy once per env step on a few dozen observations, so the fixed cost
of a call, not its arithmetic, bounds env-steps per second; the update pays the same fixed
cost once per batch. ``Session.make_callable`` skips ``Session.run``'s parsing of feeds and
fetches on every call. The policy also runs with ``RunOptions(inter_op_thread_pool=-1)``:
its few ops run in the caller's thread instead of being handed one by one to the inter-op
pool (TensorFlow recommends it for exactly such small graphs); together these take the
policy call from ~120 us to ~60 us. Mirrors ``eager/policy_call.py``, which calls the traced
function directly and runs the policy on the single-threaded executor.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def direct_callable(session: tf1.Session, fetches: Sequence[tf.Tensor | tf.Operation],
                    feeds: Sequence[tf.Tensor], caller_thread: bool = False,
                    ) -> Callable[..., list]:
    """``call(*arrays) -> [value, ...]``: ``fetches`` given ``feeds`` in ``session``.

    Args:
      session: the session holding the graph.
      fetches: tensors (values returned) and ops (None returned), in order.
      feeds: placeholders; ``call`` takes one array per placeholder, in order, each already
        of the placeholder's dtype (validate first, e.g. ``pgcommon.policy_inputs``).
      caller_thread: run the ops in the calling thread (for small graphs only).
    """
    fetches, feeds = list(fetches), list(feeds)
    if not caller_thread:
        return session.make_callable(fetches, feeds)
    callable_ = session.make_callable(fetches, feeds, accept_options=True)
    return functools.partial(callable_, options=tf1.RunOptions(inter_op_thread_pool=-1))


def policy_callable(session: tf1.Session, fetch: tf.Tensor, feed: tf.Tensor,
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """``call(obs) -> params``, numpy in and out, in the caller's thread.

    ``fetch`` is the distribution parameters ``[B, num_params]`` of the placeholder ``feed``
    (observations ``[B, *obs_shape]``); ``obs`` must already have its dtype and shape (see
    ``pgcommon.policy_inputs.as_obs``).
    """
    call = direct_callable(session, [fetch], [feed], caller_thread=True)
    return lambda obs: call(obs)[0]
