"""The ops a TF1 tensor or op depends on, walked once, nearest first.

The harness asks the user's graph several questions of this one shape: which variables
the loss reads, which placeholders it needs, which softmax ops it goes through, which
optimizer ops a ``train_op`` runs.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf

ASSIGN_OPS = frozenset({"Assign", "AssignVariableOp", "AssignAdd", "AssignSub",
                        "AssignAddVariableOp", "AssignSubVariableOp"})
"""The ops that write a TF1 variable in place (its first input), its value the second."""


def is_gradient_op(op: tf.Operation) -> bool:
    """An op of a gradient's graph: under ``tf.gradients``' ``gradients/`` scope (or
    ``gradients_1/`` ...), or an op's ``*_grad/`` scope."""
    return op.name.split("/")[0].startswith("gradients") or "_grad/" in op.name


def upstream_ops(root: Any, control: bool = True,
                 stop: Callable[[tf.Operation], bool] | None = None) -> Iterator[tf.Operation]:
    """Every op ``root`` (a tensor or op) depends on, ``root``'s own op first (breadth first).

    Args:
      root: a ``tf.Tensor`` or ``tf.Operation`` of a TF1 graph.
      control: follow control inputs too (what a ``train_op`` groups), not only data inputs.
      stop: ops for which it is True are yielded but not walked through (a variable op,
        a softmax whose own inputs do not matter).
    """
    start = root.op if isinstance(root, tf.Tensor) else root
    seen, queue = {start}, deque([start])
    while queue:
        op = queue.popleft()
        yield op
        if stop is not None and stop(op):
            continue
        parents = [t.op for t in op.inputs] + (list(op.control_inputs) if control else [])
        for parent in parents:
            if parent not in seen:
                seen.add(parent)
                queue.append(parent)
