"""How the eager twin makes its ``tf.function``s: batch signatures, no AutoGraph, one key per agent.

Every hot path is a ``tf.function`` with an input signature whose batch dimension is dynamic,
so it traces once and never again (``ReinforceAgent.trace_counts``).
"""
from __future__ import annotations

import functools
from typing import Callable

import tensorflow as tf

from pgtwin_core.specs import PolicySpec


def batch_signatures(spec: PolicySpec, dtype: str) -> dict[str, tf.TensorSpec]:
    """``{"obs": [None, *obs_shape], "actions": int64 [None] or [None, d], "vector": [None]}``
    in ``dtype`` (``ReinforceConfig.dtype``): the inputs of one batch, any size."""
    act = (tf.TensorSpec([None], tf.int64) if spec.is_discrete
           else tf.TensorSpec([None, spec.action_size], dtype))
    return {"obs": tf.TensorSpec([None, *spec.obs_shape], dtype), "actions": act,
            "vector": tf.TensorSpec([None], dtype)}


def traced(method: Callable, **kwargs) -> tf.types.experimental.GenericFunction:
    """``tf.function(method, autograph=False, **kwargs)`` keyed by this call, not the method.

    No AutoGraph: these bodies branch on tensors only through explicit ``tf.cond``, and
    converting them (and the Keras optimizer code they call) costs start-up time
    (docs/benchmarks.md). TF's retracing detector counts traces by the method's code across
    instances, so every agent after the fifth (the parity ladder builds dozens) was reported
    as "retracing"; a partial per call is its own key, so only a real retrace of one agent's
    function would be.
    """
    return tf.function(functools.partial(method), autograph=False, **kwargs)
