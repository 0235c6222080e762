"""Calls into the graph on the hot paths: the rollout's policy and the update.

A rollout calls the policy once per env step on a few dozen observations, so the fixed cost
of a call, not its arithmetic, bounds env-steps per second; the update pays the same fixed
cost once per batch. ``Session.run`` (and ``make_callable`` with feeds, which delegates to it)
parses its feeds and fetches in Python on every call. A session *callable*
(``Session::MakeCallable``, which ``Session._make_callable_from_options`` wraps, as Keras'
TF1 backend used it) fixes feeds, fetches and run options once; a call then only converts the
arrays. The policy also runs with ``inter_op_thread_pool=-1``: its few ops run in the
caller's thread instead of being handed one by one to the inter-op pool (TensorFlow
recommends it for exactly such small graphs). What each saves is measured in
docs/benchmarks.md ("Where the time goes"). Mirrors ``eager/policy_call.py``, which calls
the traced function directly and runs the policy on the single-threaded executor. The
cached path's partial runs get the same shortcut (``partial_step``).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def direct_callable(session: tf1.Session, fetches: Sequence[tf.Tensor],
                    feeds: Sequence[tf.Tensor], targets: Sequence[tf.Operation | tf.Tensor] = (),
                    caller_thread: bool = False) -> Callable[..., list[np.ndarray]]:
    """``call(*arrays) -> [array, ...]``: ``fetches`` given ``feeds``, running ``targets`` too.

    Args:
      session: the session holding the graph.
      fetches: tensors whose values ``call`` returns, in order.
      feeds: placeholders; ``call`` takes one array per placeholder, in order, each already
        of the placeholder's dtype (validate first, e.g. ``pgtwin_core.policy_inputs``).
      targets: ops (or tensors, whose ops) run in the same step, e.g. the train op; they
        return nothing.
      caller_thread: run the ops in the calling thread (for small graphs only).
    """
    run_options = tf1.RunOptions(inter_op_thread_pool=-1) if caller_thread else None
    direct = _session_callable(session, fetches, feeds, targets, run_options)
    if direct is not None:
        return direct
    # The public path, for a TensorFlow without the pieces ``_session_callable`` uses.
    callable_ = session.make_callable([list(fetches), list(targets)], list(feeds),
                                      accept_options=True)
    return lambda *arrays: callable_(*arrays, options=run_options)[0]


def policy_callable(session: tf1.Session, fetch: tf.Tensor, feed: tf.Tensor,
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """``call(obs) -> params``, numpy in and out, in the caller's thread.

    ``fetch`` is the distribution parameters ``[B, num_params]`` of the placeholder ``feed``
    (observations ``[B, *obs_shape]``); ``obs`` must already have its dtype and shape (see
    ``pgtwin_core.policy_inputs.as_obs``).
    """
    call = direct_callable(session, [fetch], [feed], caller_thread=True)
    return lambda obs: call(obs)[0]


def _session_callable(session, fetches, feeds, targets, run_options):
    """A ``Session::MakeCallable`` handle called through ``TF_SessionRunCallable``, as
    ``Session._make_callable_from_options`` does, or None if this TensorFlow lacks the pieces.

    Not through that method's wrapper object: its ``__del__`` runs at interpreter exit, after
    the module it needs is gone, and prints an error. The handle needs no release: the
    session frees its callables when it is closed.
    """
    try:
        from tensorflow.core.protobuf import config_pb2
        from tensorflow.python.client import pywrap_tf_session as tf_session
        options = config_pb2.CallableOptions(
            feed=[t.name for t in feeds], fetch=[t.name for t in fetches],
            target=[getattr(t, "op", t).name for t in targets])  # a tensor's op, or the op
        if run_options is not None:
            options.run_options.CopyFrom(run_options)
        session._extend_graph()  # noqa: SLF001  (the graph's latest nodes into the runtime)
        buffer = tf_session.TF_NewBufferFromString(options.SerializeToString())
        try:
            handle = tf_session.TF_SessionMakeCallable(session._session, buffer)  # noqa: SLF001
        finally:
            tf_session.TF_DeleteBuffer(buffer)
        run = tf_session.TF_SessionRunCallable
    except (ImportError, AttributeError):
        return None
    return lambda *arrays: run(session._session, handle, arrays, None)  # noqa: SLF001


def partial_step(session: tf1.Session, handle: str):
    """``step(placeholder, fetch, value) -> array``: one ``partial_run`` of the open run
    ``handle`` that feeds one array and fetches one tensor.

    ``Session.partial_run`` parses its feeds and fetches on every call (there is no
    ``make_callable`` for partial runs; its cost: docs/update_paths.md); this calls what it
    ends in (``TF_SessionPRun_wrapper``) directly, as ``direct_callable`` does for whole
    runs, and falls back to the public call on a TensorFlow without it. ``value`` must
    already have the placeholder's dtype and shape. Used by ``legacy_graph/cached.py``.
    """
    try:
        from tensorflow.python.client import pywrap_tf_session
        run, raw = pywrap_tf_session.TF_SessionPRun_wrapper, session._session  # noqa: SLF001 (TF's)
    except (ImportError, AttributeError):
        return lambda ph, fetch, value: session.partial_run(handle, fetch, {ph: value})

    def step(ph: tf.Tensor, fetch: tf.Tensor, value: np.ndarray) -> np.ndarray:
        (out,) = run(raw, handle, {ph._as_tf_output(): value}, [fetch._as_tf_output()])  # noqa: SLF001 (TF's)
        return out
    return step
