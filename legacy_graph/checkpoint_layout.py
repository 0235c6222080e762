"""The layout of a TF1 ``Saver`` checkpoint in the twins' shared terms (``pgtwin_core.checkpoint_layout``).

Mirrors ``eager/checkpoint_layout.py``. A ``Saver`` stores each variable under its graph
name, so the policy variables appear under their canonical names; Adam adds slots
``NAME/Adam`` and ``NAME/Adam_1`` and the accumulators ``beta1_power``/``beta2_power``,
plain gradient descent adds nothing. The episodic baselines' memory
(``baseline_memory/...``, ``legacy_graph/episodic_path.py``) is training state, not the
policy's layout: it is read apart (``CheckpointLayout.memory``, :func:`held_memory`), so
that memory saved for another baseline is refused, and a checkpoint saved before it existed
restores without it (:func:`missing_memory`).
"""
from __future__ import annotations

import tensorflow as tf

from pgtwin_core.checkpoint_layout import CheckpointLayout
from pgtwin.mode_agnostic.checkpoint_reader import open_checkpoint

_ADAM_ONLY = ("beta1_power", "beta2_power")
_MEMORY = "baseline_memory/"
_VALUE_OPTIMIZER = "value_optimizer/"  # the value net's beta powers (legacy_graph/value_net.py)


def saved_layout(path: str) -> CheckpointLayout:
    """The policy variables (name -> (shape, dtype)) and optimizer of the checkpoint at
    ``path`` (a missing one, or an eager twin's ``tf.train.Checkpoint``, refused by
    ``open_checkpoint``)."""
    reader = open_checkpoint(path, "graph")
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    slots = [n for n in shapes if n.endswith(("/Adam", "/Adam_1"))]
    # The value net's slots (value/...) are its own optimizer's: Adam under natural_kl
    # while the policy's is SGD (pgtwin_core.value_spec.value_optimizer_config).
    adam = (any(not n.startswith("value/") for n in slots)
            or any(n in shapes for n in _ADAM_ONLY))
    policy = {n: (tuple(shapes[n]), dtypes[n].name) for n in shapes
              if n not in slots and n not in _ADAM_ONLY and not n.startswith(_MEMORY)
              and not n.startswith(_VALUE_OPTIMIZER)}
    memory = {n[len(_MEMORY):]: tuple(shapes[n]) for n in shapes if n.startswith(_MEMORY)}
    return CheckpointLayout(variables=policy, optimizer="adam" if adam else "sgd",
                            memory=memory)


def held_memory(graph: tf.Graph) -> dict[str, tuple[int | None, ...]]:
    """The agent's memory variables in ``graph``, field -> static shape (``None``: any)."""
    with graph.as_default():
        return {v.op.name[len(_MEMORY):]: tuple(v.shape.as_list())
                for v in tf.compat.v1.global_variables() if v.op.name.startswith(_MEMORY)}


def missing_memory(path: str, graph: tf.Graph) -> list[tf.Variable]:
    """The memory variables of ``graph`` that the checkpoint at ``path`` lacks (saved before
    the memory was the agent's: ``pgtwin train`` then restores it from ``baseline_memory.npz``)."""
    saved = tf.compat.v1.train.NewCheckpointReader(path).get_variable_to_shape_map()
    with graph.as_default():
        return [v for v in tf.compat.v1.global_variables()
                if v.op.name.startswith(_MEMORY) and v.op.name not in saved]
