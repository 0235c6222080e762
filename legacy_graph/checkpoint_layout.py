"""The layout of a TF1 ``Saver`` checkpoint in the twins' shared terms (``pgtwin_core.checkpoint_layout``).

Mirrors ``eager/checkpoint_layout.py``. A ``Saver`` stores each variable under its graph
name, so the policy variables appear under their canonical names; Adam adds slots
``NAME/Adam`` and ``NAME/Adam_1`` and the accumulators ``beta1_power``/``beta2_power``,
plain gradient descent adds nothing.
"""
from __future__ import annotations

import tensorflow as tf

from pgtwin_core.checkpoint_layout import CheckpointLayout

_ADAM_ONLY = ("beta1_power", "beta2_power")


def saved_layout(path: str) -> CheckpointLayout:
    """The policy variables (name -> (shape, dtype)) and optimizer of the checkpoint at ``path``."""
    reader = tf.compat.v1.train.NewCheckpointReader(path)
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    slots = [n for n in shapes if n.endswith(("/Adam", "/Adam_1"))]
    adam = bool(slots) or any(n in shapes for n in _ADAM_ONLY)
    policy = {n: (tuple(shapes[n]), dtypes[n].name) for n in shapes
              if n not in slots and n not in _ADAM_ONLY}
    return CheckpointLayout(variables=policy, optimizer="adam" if adam else "sgd")
