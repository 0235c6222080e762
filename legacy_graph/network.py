"""The policy network's variables as TF1 graph code: ``get_variable`` under variable scopes.

The forward pass over them is mode-agnostic (``pgtwin.mode_agnostic.forward_pass``); what is
the legacy twin's own is how the variables are made: in the current graph, named by their
variable scopes, zeros until the agent assigns its weights. Mirrors ``eager/network.py``.
"""
from __future__ import annotations

import tensorflow as tf

from pgtwin_core.specs import PolicySpec

tf1 = tf.compat.v1


def create_variables(spec: PolicySpec, dtype: str) -> dict[str, tf.Variable]:
    """Create the spec's variables, of ``dtype``, with ``get_variable`` in the current graph.

    Names are the canonical ``pgtwin_core`` names (``policy/dense_0/kernel`` ...). Values are
    zeros until the agent loads numpy weights into them.
    """
    variables = {}
    for name, shape in spec.weight_shapes().items():
        scope, _, leaf = name.rpartition("/")
        with tf1.variable_scope(scope, reuse=tf1.AUTO_REUSE):
            variables[name] = tf1.get_variable(
                leaf, shape=shape, dtype=dtype, initializer=tf1.zeros_initializer()
            )
    return variables
