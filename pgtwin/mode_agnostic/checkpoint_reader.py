"""Opening an agent checkpoint for either twin, refusing the other twin's format.

The graph twin saves TF1 ``Saver`` files (variables under their graph names), the eager
twin ``tf.train.Checkpoint`` files (values under object paths, with the object graph under
``_CHECKPOINTABLE_OBJECT_GRAPH``). Handed the other's file, each would otherwise fail
deep inside (a ``NotFoundError`` for the object graph, or a layout "written with sgd" that
reads nothing right); a missing prefix raised TensorFlow's ``NotFoundError`` from its
slice reader.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf

from pgtwin_core.errors import CheckpointFormatError

OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
"""The key under which a ``tf.train.Checkpoint`` stores its object graph."""

_FORMATS = {
    "graph": ("a TF2 tf.train.Checkpoint (the eager twin's, eager.agent.ReinforceAgent.save)",
              "restore it with eager.agent.ReinforceAgent, or move the weights across with "
              "get_weights() and set_weights()"),
    "eager": ("a TF1 Saver checkpoint (the graph twin's, legacy_graph.agent.ReinforceAgent."
              "save, or old TF1 code's)",
              "convert it with pgtwin convert-checkpoint SRC DST (pgtwin.migrate."
              "agent_checkpoint.convert_checkpoint, Adam's state included), or restore it "
              "with legacy_graph.agent.ReinforceAgent"),
}
"""Per reading twin: how the other twin's file is described, and the way across."""


def open_checkpoint(path: str, twin: str) -> Any:
    """``tf.train.load_checkpoint(path)`` for ``twin`` (``"graph"`` or ``"eager"``).

    Raises:
      FileNotFoundError: no checkpoint at ``path`` (naming the prefix).
      CheckpointFormatError: the file is the other twin's format.
    """
    try:
        reader = tf.train.load_checkpoint(path)
    except (tf.errors.NotFoundError, ValueError) as err:
        raise FileNotFoundError(f"no checkpoint at {path!r} (a prefix whose .index file "
                                f"exists, or its directory): {str(err).splitlines()[0]}") from None
    has_graph = reader.has_tensor(OBJECT_GRAPH)
    if has_graph == (twin == "graph"):
        written_as, fix = _FORMATS[twin]
        raise CheckpointFormatError(path, written_as, fix)
    return reader
