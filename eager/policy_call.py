"""Calls into the traced functions on the hot paths: the rollout's policy and the update.

A rollout calls the policy once per env step on a few dozen observations, so the fixed cost
of a call, not its arithmetic, bounds env-steps per second; the update pays the same fixed
cost once per batch. A ``tf.function`` call spends its own time in Python (matching the
arguments to a trace, converting them; docs/benchmarks.md, "Where the time goes") before
TensorFlow runs anything. This module calls the one
traced function directly, as ``ConcreteFunction.__call__`` ends up doing
(``context.call_function``): the function's name, its flat inputs (the arrays, then the
captured variable handles) and the call attributes. No gradient tape records the call.

The policy also runs on the single-threaded executor, i.e. its few tiny ops run in the
caller's thread instead of being handed one by one to the inter-op pool: the same choice the
legacy twin makes with ``RunOptions(inter_op_thread_pool=-1)`` (``legacy_graph/policy_call.py``).
The update keeps the default executor: its guarded apply is a ``tf.cond``, which the
single-threaded executor does not run.
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


def direct_callable(fn: tf.types.experimental.PolymorphicFunction, executor: str = "",
                    ) -> Callable[..., list[tf.Tensor]]:
    """``call(*arrays) -> [tensor, ...]``: ``fn``'s single trace, called without its Python.

    Args:
      fn: a ``tf.function`` with an ``input_signature`` of tensors only. It is traced here,
        once (the same trace later ``fn(...)`` calls use).
      executor: ``""`` (TensorFlow's default executor) or ``SINGLE_THREADED``.

    Returns:
      ``call(*arrays)``: the arrays in signature order, each already of the signature's
      dtype (validate them first, e.g. ``pgtwin_core.policy_inputs``); returns ``fn``'s outputs
      flattened (``tf.nest.flatten`` order). No gradient is recorded. Under
      ``tf.config.run_functions_eagerly(True)`` it calls ``fn`` itself, which then runs its
      Python body op by op, as that switch promises.
    """
    concrete = fn.get_concrete_function()
    direct = _direct_call(concrete, executor)

    def call(*arrays: np.ndarray) -> list[tf.Tensor]:
        if tf.config.functions_run_eagerly():
            return tf.nest.flatten(fn(*arrays))
        if direct is not None:
            return direct(*arrays)
        # The public path, for a TensorFlow without the pieces ``_direct_call`` uses.
        with tf.experimental.function_executor_type(executor or None):
            return tf.nest.flatten(concrete(*map(tf.constant, arrays)))
    call.concrete = concrete  # the runtime drops the traced function when ``concrete`` goes
    return call


def policy_callable(fn: tf.types.experimental.PolymorphicFunction,
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """``call(obs) -> params``, numpy in and out, on the single-threaded executor.

    ``fn`` maps observations ``[B, *obs_shape]`` to one tensor; ``obs`` must already have the
    signature's dtype and shape (see ``pgtwin_core.policy_inputs.as_obs``).
    """
    call = direct_callable(fn, SINGLE_THREADED)
    return lambda obs: call(obs)[0].numpy()


def _direct_call(concrete, executor: str) -> Callable[..., list[tf.Tensor]] | None:
    """Call ``concrete``'s traced function as ``context.call_function`` does, or None if this
    TensorFlow lacks the pieces (then the caller uses the public, slower path)."""
    try:
        from tensorflow.python.eager import context, execute
        name = concrete._inference_function.name  # noqa: SLF001
        name = name.decode() if isinstance(name, bytes) else name
        captured = list(concrete.captured_inputs)
        num_outputs = len(concrete.outputs)
        ctx = context.context()
        options = copy.copy(ctx.function_call_options)
        options.executor_type = executor
        attrs = tuple(itertools.chain(*options.as_attrs().items()))
        run = execute.execute
    except (ImportError, AttributeError):
        return None

    return lambda *arrays: run(name, num_outputs, [*map(tf.constant, arrays), *captured],
                               attrs, ctx)
