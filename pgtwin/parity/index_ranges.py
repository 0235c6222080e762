"""Integer inputs that index something (actions into logits, ids into a table), checked
against the range the op that takes them accepts, named by the input that holds the value.

A batch with an action the policy does not have (action 7 for 2 logits, a 1-based action
from an env wrapper) fails deep inside the code as TensorFlow's ``InvalidArgumentError``
("Received a label value of 7 which is outside the valid range of [0, 2)"), which names
neither the input nor the index, and reads as a bug in the code it was raised in. Worse,
``tf.one_hot`` raises nothing: it gives that step an all-zero row, which drops it from the
loss without a word, on whichever side uses it.

Two checks, one message:

* :func:`check_fed_indices`: before the TF1 graph runs, each fed integer placeholder is
  followed through value-preserving ops (casts, reshapes, identities) to the ops that take
  it as an index (``SparseSoftmaxCrossEntropyWithLogits``' labels, ``OneHot``'s indices,
  ``Gather``'s indices), whose range the graph knows statically;
* :func:`index_error_from`: the TF2 side is eager code no one can walk; where its first loss
  call raises TensorFlow's out-of-range error, the inputs that hold the value are named.

Negative ``OneHot`` indices are left alone: ``-1`` for "no action" on padded steps is a
known idiom, and its zero row is what that code wants.
"""
from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Collection, Mapping

import numpy as np
import tensorflow as tf

from pgtwin_core.errors import raised_at

PASS_THROUGH = frozenset({"Cast", "Identity", "Reshape", "Squeeze", "ExpandDims",
                          "StopGradient", "Snapshot"})
"""Ops through which an index keeps its value (the walk follows their first output)."""

_ERROR_PATTERNS = (
    re.compile(r"label value of (-?\d+) which is outside the valid range of \[(-?\d+), (\d+)\)"),
    re.compile(r"indices\[[\d, ]*\] = (-?\d+) is not in \[(-?\d+), (\d+)\)"),
)
"""TensorFlow's messages for an index out of range: sparse cross-entropy labels, and
gather / embedding lookup indices (CPU)."""


class IndexRangeError(ValueError):
    """An input holds an index outside the range of the op that takes it; the message names
    the input, where in it, the value, the op and the fix."""


@dataclass(frozen=True)
class IndexUse:
    """An op that takes a fed value as an index in ``[0, size)``."""

    op: tf.Operation
    what: str
    """How the message names the op and what it does with a value out of range."""
    size: int
    negatives_allowed: bool = False


def _static_int(tensor: tf.Tensor) -> int | None:
    """The value of a constant 0-d integer tensor of a TF1 graph, else None."""
    value = tf.get_static_value(tensor)
    return None if value is None or np.ndim(value) else int(value)


def _variable_shape(handle: tf.Tensor) -> tf.TensorShape | None:
    """The shape of the variable behind a resource handle of a TF1 graph, if it is one."""
    return tf.TensorShape(handle.op.get_attr("shape")) if handle.op.type == "VarHandleOp" \
        else None


def _use(op: tf.Operation, index_input: int) -> IndexUse | None:
    """What ``op`` does with a value at input ``index_input``, if it takes it as an index
    over a range the graph knows."""
    if op.type == "SparseSoftmaxCrossEntropyWithLogits" and index_input == 1:
        size = op.inputs[0].shape[-1] if op.inputs[0].shape.rank else None
        return None if size is None else IndexUse(
            op, f"SparseSoftmaxCrossEntropyWithLogits over {size} logits, which raises for "
                "it", size)
    if op.type == "OneHot" and index_input == 0:
        depth = _static_int(op.inputs[1])
        return None if depth is None else IndexUse(
            op, f"tf.one_hot(depth={depth}), which gives that step an all-zero row, so it "
                "would drop out of the loss without a word", depth, negatives_allowed=True)
    if op.type in ("GatherV2", "ResourceGather") and index_input == 1:
        axis = 0 if op.type == "ResourceGather" else _static_int(op.inputs[2])
        shape = _variable_shape(op.inputs[0]) if op.type == "ResourceGather" else \
            op.inputs[0].shape
        if shape is None or axis is None or shape.rank is None:
            return None
        size = shape[axis]
        return None if size is None else IndexUse(
            op, f"a gather from {size} rows, which raises for it", size)
    return None


def index_uses(placeholder: tf.Tensor, run: Collection[tf.Operation] | None = None
               ) -> list[IndexUse]:
    """The ops that take ``placeholder``'s values as indices, through :data:`PASS_THROUGH`
    ops, nearest first; only those in ``run`` (the ops the harness runs) where given."""
    found, seen, queue = [], set(), deque([placeholder])
    while queue:
        tensor = queue.popleft()
        for consumer in tensor.consumers():
            if consumer in seen or (run is not None and consumer not in run):
                continue
            seen.add(consumer)
            if consumer.type in PASS_THROUGH:
                queue.append(consumer.outputs[0])
                continue
            for i, t in enumerate(consumer.inputs):
                if t is tensor:
                    use = _use(consumer, i)
                    if use is not None:
                        found.append(use)
    return found


def _first_outside(array: np.ndarray, size: int, negatives_allowed: bool
                   ) -> tuple[tuple[int, ...], int] | None:
    """``(index, value)`` of the first entry of ``array`` outside ``[0, size)`` (negatives
    ignored where allowed), else None."""
    bad = array >= size if negatives_allowed else (array < 0) | (array >= size)
    if not np.any(bad):
        return None
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return index, int(array[index])


def _fix(size: int) -> str:
    return (f"Every value must lie in [0, {size}). An action the policy does not have: check "
            "how the batch was recorded (a 1-based action, another env's action space) or the "
            "number of actions the code was built with")


def check_fed_indices(key: str, array: np.ndarray, placeholder: tf.Tensor,
                      run: Collection[tf.Operation] | None = None) -> None:
    """Raise :class:`IndexRangeError` where ``array`` (``inputs[key]``, cast as it is fed)
    holds a value outside the range of an op that takes ``placeholder`` as an index (of
    the ops in ``run`` where given: an op the harness never runs refuses nothing)."""
    if not placeholder.dtype.base_dtype.is_integer:
        return
    for use in index_uses(placeholder, run):
        found = _first_outside(np.asarray(array), use.size, use.negatives_allowed)
        if found is not None:
            index, value = found
            raise IndexRangeError(
                f"inputs[{key!r}] holds {value} at index {index}, outside [0, {use.size}): "
                f"TF1's placeholder {placeholder.op.name!r} reaches {use.op.name!r}, "
                f"{use.what}. {_fix(use.size)}")


def index_error_from(err: BaseException, inputs: Mapping[str, Any], what: str
                     ) -> IndexRangeError | None:
    """The :class:`IndexRangeError` for TensorFlow's out-of-range error ``err`` raised by
    the user's ``what`` (``"TF2Program.loss"``), naming the integer inputs that hold the
    value; None for any other error or where no input holds it."""
    if not isinstance(err, tf.errors.InvalidArgumentError):
        return None
    for pattern in _ERROR_PATTERNS:
        match = pattern.search(str(err))
        if match:
            break
    else:
        return None
    value, low, high = (int(g) for g in match.groups())
    holders = []
    for key, raw in inputs.items():
        array = np.asarray(raw)
        if array.dtype.kind in "iu" and array.size and np.any(array == value):
            index = tuple(int(i) for i in np.argwhere(array == value)[0])
            holders.append(f"inputs[{key!r}] holds {value} at index {index}")
    if not holders:
        return None
    op = err.message.split("[Op:")[-1].split("]")[0] if "[Op:" in err.message else "an op"
    where = raised_at(err)
    return IndexRangeError(
        f"{' and '.join(holders)}, outside [{low}, {high}), the range that {op} in {what}"
        f"{f' ({where})' if where else ''} takes: it raised {type(err).__name__}. "
        f"{_fix(high)}")
