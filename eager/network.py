"""The policy network's variables for TF2: ``tf.Variable``s held by a ``tf.Module``.

The forward pass over them is mode-agnostic (``pgtwin.mode_agnostic.forward_pass``); what is
the eager twin's own is how the variables are made and held: created from the weights, owned
by a module that ``tf.train.Checkpoint`` tracks. Mirrors ``legacy_graph/network.py``.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pgtwin_core.specs import PolicySpec


class PolicyVariables(tf.Module):
    """The spec's ``tf.Variable``s under their canonical names (``policy/dense_0/kernel`` ...).

    Tracked by ``tf.train.Checkpoint`` through the ``variables_by_name`` dict. Each variable
    takes its weight's dtype (``check_weights`` casts them to ``ReinforceConfig.dtype``).
    """

    def __init__(self, spec: PolicySpec, weights: dict[str, np.ndarray]):
        super().__init__(name="policy_variables")
        self.variables_by_name = {
            name: tf.Variable(weights[name], name=name)
            for name in spec.weight_shapes()
        }
