"""A conv net's features flattened in another order on the TF2 side: found by replaying it.

TF1's ``tf.compat.v1.layers.flatten`` (and a ``tf.reshape(x, [-1, h * w * c])``) flattens
an NHWC feature map row by row: height, then width, then channels. A port that flattens
channels first (a ``Permute((3, 1, 2))`` before ``Flatten``, a layer written from a PyTorch
reference, ``data_format="channels_first"``) has the same variables in the same shapes, so
every rung but the outputs passes, and the outputs part with nothing to say why (a helper's
A2C port). :func:`flatten_order_hint` finds the dense kernel that reads a flattened
``[h, w, c]`` map in TF1's graph, loads it into the TF2 side with its rows put in
``(c, h, w)`` order, runs the TF2 loss once more, and names the cause where every output then
agrees. The TF2 side's weights are put back after.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import tensorflow as tf

from pgtwin.parity.ladder import compare_arrays
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side

_THROUGH = frozenset({"Identity", "ReadVariableOp"})


def flattened_inputs(legacy: TF1Side) -> dict[str, tuple[int, int, int]]:
    """``{TF1 name: (h, w, c)}`` of the compared 2-D variables that a ``MatMul`` in TF1's
    graph takes as its kernel on an NHWC map ``[n, h, w, c]`` reshaped to ``[n, h w c]``."""
    found = {}
    for name, variable in legacy.variables.items():
        if variable.shape.rank != 2:
            continue
        for matmul in _consumers(variable, "MatMul"):
            source = matmul.inputs[0].op
            while source.type in _THROUGH and source.inputs:
                source = source.inputs[0].op
            if source.type != "Reshape":
                continue
            shape = source.inputs[0].shape
            if shape.rank == 4 and None not in shape[1:] and \
                    shape[1] * shape[2] * shape[3] == variable.shape[0] and shape[3] > 1 \
                    and shape[1] * shape[2] > 1:
                found[name] = (int(shape[1]), int(shape[2]), int(shape[3]))
    return found


def _consumers(variable, op_type: str) -> list[tf.Operation]:
    """The ops of ``op_type`` that read ``variable`` (a resource variable's reads, a ref
    variable's identities)."""
    try:
        start = variable.handle  # a resource variable: its reads consume the handle
    except AttributeError:
        start = variable.op.outputs[0]  # a ref variable: read through identities
    out, frontier, seen = [], [start], set()
    while frontier:
        tensor = frontier.pop()
        for op in tensor.consumers():
            if op in seen:
                continue
            seen.add(op)
            if op.type == op_type:
                out.append(op)
            elif op.type in _THROUGH:
                frontier.extend(op.outputs)
    return out


def channels_first_rows(kernel: np.ndarray, hwc: tuple[int, int, int]) -> np.ndarray:
    """``kernel [h w c, units]`` with its rows in ``(c, h, w)`` order: what a layer that
    flattens channels first must hold to compute what TF1's does."""
    h, w, c = hwc
    return kernel.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(h * w * c, -1)


def flatten_order_hint(legacy: TF1Side, eager: TF2Side, legacy_out: Mapping[str, np.ndarray],
                       rtol: float, atol: float) -> str:
    """The cause of outputs that part where the TF2 side flattens a conv map channels
    first (module doc), else ''."""
    found = flattened_inputs(legacy)
    if not found:
        return ""
    tf1_values, tf2_values = legacy.values(), eager.values()
    for name, hwc in found.items():
        partner = next((n for n, v in tf2_values.items()
                        if np.shape(v) == np.shape(tf1_values[name])
                        and np.array_equal(v, tf1_values[name])), None)
        if partner is None:
            continue
        eager.load({partner: channels_first_rows(tf1_values[name], hwc)})
        try:
            replayed, _ = eager.run()
        finally:
            eager.load({partner: tf2_values[partner]})
        keys = [k for k in legacy_out if k in replayed]
        if keys and all(compare_arrays("outputs", k, legacy_out[k], replayed[k], rtol, atol,
                                       "").ok for k in keys):
            h, w, c = hwc
            return (f"the TF2 side flattens the {h} x {w} x {c} feature map before {partner} "
                    f"channels first: with {name}'s rows put in (channels, height, width) "
                    f"order, every output agrees. TF1 flattens NHWC (height, width, then "
                    f"channels): flatten the channels-last map as it is (keras.layers.Flatten "
                    f"without a Permute, data_format='channels_last'), or reorder the kernel's "
                    f"rows where you convert TF1's weights")
    return ""
