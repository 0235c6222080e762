"""The rollout's policy call for TF2: numpy observations in, numpy parameters out, cheaply.

A rollout calls the policy once per env step on a few dozen observations, so the fixed cost
of a call, not its arithmetic, bounds env-steps per second. A ``tf.function`` call spends
most of its ~200 us in Python (matching the arguments to a trace) and in handing each of its
ops to the inter-op thread pool. This module calls the one traced function directly and runs
it on the single-threaded executor, i.e. in the caller's thread, the same choice the legacy
twin makes with ``RunOptions(inter_op_thread_pool=-1)`` (``legacy_graph/policy_call.py``).

The direct call is what ``ConcreteFunction.__call__`` ends in (``context.call_function``):
the function's name, its flat inputs (the observations, then the captured variable handles)
and the call attributes. It needs no gradient tape: the outputs leave as numpy.
"""
from __future__ import annotations

import copy
import itertools
from typing import Callable

import numpy as np
import tensorflow as tf

# Executor that runs a function's ops one after another in the calling thread; it supports
# every op but control flow (Switch/Merge), which the policy's forward pass does not use.
SINGLE_THREADED = "SINGLE_THREADED_EXECUTOR"


def policy_callable(fn: tf.types.experimental.PolymorphicFunction,
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """A numpy-in, numpy-out caller of ``fn`` (a ``tf.function`` with one-tensor signature).

    Args:
      fn: a ``tf.function`` with an ``input_signature`` of one tensor (observations
        ``[B, *obs_shape]``) returning one tensor. It is traced here, once.

    Returns:
      ``call(obs) -> np.ndarray``: ``obs`` must already have the signature's dtype and
      shape (see ``pgcommon.policy_inputs.as_obs``); no gradient is recorded.
    """
    concrete = fn.get_concrete_function()
    direct = _direct_call(concrete)
    if direct is not None:
        return direct

    def call(obs: np.ndarray) -> np.ndarray:  # the public path, for TF versions without the above
        with tf.experimental.function_executor_type(SINGLE_THREADED):
            return concrete(tf.constant(obs)).numpy()
    return call


def _direct_call(concrete) -> Callable[[np.ndarray], np.ndarray] | None:
    """Call ``concrete``'s traced function as ``context.call_function`` does, or None if this
    TensorFlow lacks the pieces (then the caller uses the public, slower path)."""
    try:
        from tensorflow.python.eager import context, execute
        name = concrete._inference_function.name  # noqa: SLF001
        name = name.decode() if isinstance(name, bytes) else name
        captured = list(concrete.captured_inputs)
        options = copy.copy(context.context().function_call_options)
        options.executor_type = SINGLE_THREADED
        attrs = tuple(itertools.chain(*options.as_attrs().items()))
        run = execute.execute
        ctx = context.context()
    except (ImportError, AttributeError):
        return None

    def call(obs: np.ndarray) -> np.ndarray:
        # ``concrete`` stays referenced here: the runtime drops the function with it.
        (params,) = run(name, 1, [tf.constant(obs), *captured], attrs, ctx)
        return params.numpy()
    call.concrete = concrete
    return call
