"""The layout of a ``tf.train.Checkpoint`` in the twins' shared terms (``pgtwin_core.checkpoint_layout``).

Mirrors ``legacy_graph/checkpoint_layout.py``. A TF2 checkpoint keys values by object path
(``optimizer/_trainable_variables/0/...``), not by variable name; its object graph records
each variable's ``full_name``, which for the policy is the canonical name. The Keras
optimizer's own variables are named after it: ``adam/iteration`` and ``adam/..._momentum``,
or ``sgd/iteration`` (Keras numbers the second one in a process ``adam_1``). The episodic
baselines' memory (``baseline_memory/...``) is training state outside the policy's layout,
read apart (``CheckpointLayout.memory``).
"""
from __future__ import annotations

import re

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from pgtwin_core.checkpoint_layout import CheckpointLayout
from pgtwin.mode_agnostic.checkpoint_reader import OBJECT_GRAPH, open_checkpoint

_MEMORY = "baseline_memory/"


def saved_layout(path: str) -> CheckpointLayout:
    """The policy variables (name -> (shape, dtype)) and optimizer of the checkpoint at
    ``path`` (a missing one, or a TF1 ``Saver`` file, refused by ``open_checkpoint``)."""
    reader = open_checkpoint(path, "eager")
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH))
    names = {attr.checkpoint_key: attr.full_name for node in graph.nodes
             for attr in node.attributes if attr.name == "VARIABLE_VALUE"}
    policy = {full: (tuple(shapes[key]), dtypes[key].name) for key, full in names.items()
              if full.startswith(("policy/", "value/"))}
    # The value net's optimizer (value_adam, eager/value_net.py) is not the policy's.
    optimizer = next((re.sub(r"_\d+$", "", full.split("/")[0]) for full in names.values()
                      if full.endswith("/iteration") and not full.startswith("value_")), "none")
    memory = {full[len(_MEMORY):]: tuple(shapes[key]) for key, full in names.items()
              if full.startswith(_MEMORY)}
    return CheckpointLayout(variables=policy, optimizer=optimizer, memory=memory)


def held_memory(variables: dict[str, tf.Variable]) -> dict[str, tuple[int | None, ...]]:
    """The agent's memory ``variables`` (field -> variable), field -> static shape
    (``None``: any)."""
    return {f: tuple(v.shape.as_list()) for f, v in variables.items()}


def saved_memory(path: str) -> bool:
    """Whether the checkpoint at ``path`` holds an episodic baseline's memory
    (``eager/episodic_path.py``); one saved before the memory was the agent's does not
    (``pgtwin train`` then restores it from ``baseline_memory.npz``)."""
    keys = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    return any(k.startswith("baseline_memory/") for k in keys)
