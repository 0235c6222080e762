"""Opening an agent checkpoint for either twin, refusing the other twin's format.

The graph twin saves TF1 ``Saver`` files (variables under their graph names), the eager
twin ``tf.train.Checkpoint`` files (values under object paths, with the object graph under
``_CHECKPOINTABLE_OBJECT_GRAPH``). Handed the other's file, each would otherwise fail
deep inside (a ``NotFoundError`` for the object graph, or a layout "written with sgd" that
reads nothing right); a missing prefix raised TensorFlow's ``NotFoundError`` from its
slice reader.
"""
from __future__ import annotations

import glob
import os
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


def checkpoint_prefix(path: str | os.PathLike) -> str:
    """The prefix to read for ``path``: the prefix itself, or for a directory its latest
    checkpoint (a TF1 ``Saver``'s ``checkpoint`` file names it) or its one ``.index`` file.

    The eager twin's ``tf.train.Checkpoint.write`` leaves no ``checkpoint`` file, so a
    directory is read by its index file, which both twins' ``save`` write.

    Raises:
      FileNotFoundError: a directory holding no checkpoint, or several and no
        ``checkpoint`` file to choose among them (naming them).
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        return path
    latest = tf.train.latest_checkpoint(path)
    if latest is not None:
        return latest
    prefixes = sorted(p[:-len(".index")] for p in glob.glob(os.path.join(path, "*.index")))
    if len(prefixes) == 1:
        return prefixes[0]
    found = ", ".join(os.path.basename(p) for p in prefixes) or "none"
    raise FileNotFoundError(f"no checkpoint to restore in the directory {path!r}: it holds "
                            f"{'several' if prefixes else 'no'} checkpoint prefixes ({found}); "
                            "pass the prefix save() returned")


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
