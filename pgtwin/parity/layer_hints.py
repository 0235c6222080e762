"""Hints for outputs that part, from the layers' settings on both sides.

Batch normalisation's epsilon is the common one: TF1's ``tf.layers.batch_normalization``
and Keras both default to 1e-3, while code ported from PyTorch (or written by hand) uses
1e-5, and the outputs then part with nothing in the weights to show why. TF1's epsilon is
read from the graph the loss depends on: the ``epsilon`` attribute of a ``FusedBatchNorm``
op, or the constant added to the variance under ``Rsqrt`` (``tf.nn.batch_normalization``,
which the unfused layers call). The Keras side's is each ``BatchNormalization`` layer's.

A layer's activation left out (``Dense(64)`` for TF1's ``tf.nn.relu(x @ w + b)``) is the
other: the activation ops the TF1 loss is computed through, counted by kind, against the
activations of the Keras layers that hold the compared variables (and of the weightless
activation layers), where the two counts differ.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin.parity.graph_walk import upstream_ops

_ADDS = {"Add", "AddV2"}
_FUNCTION_ATTRS = ("then_branch", "else_branch", "body", "cond", "f")
"""The attributes by which functional ops (If, While, PartitionedCall) name functions."""


def tf1_batch_norm_epsilons(root: Any) -> set[float]:
    """The batch-norm epsilons in the TF1 graph ``root`` (a tensor or op) depends on, the
    bodies of its functional ops included (a ``tf.cond`` on an ``is_training`` placeholder
    is an ``If`` op whose branches hold the layer's ops)."""
    return _epsilons(list(upstream_ops(root, control=False)), root.graph, set())


def _epsilons(ops: list[tf.Operation], graph: tf.Graph, seen: set[str]) -> set[float]:
    found = set()
    for op in ops:
        if op.type.startswith("FusedBatchNorm"):
            found.add(float(op.get_attr("epsilon")))
        elif op.type == "Rsqrt" and op.inputs[0].op.type in _ADDS:
            for t in op.inputs[0].op.inputs:
                value = tf.get_static_value(t) if t.shape.rank == 0 else None
                if value is not None:
                    found.add(float(value))
        for body in _bodies(op, graph, seen):
            found |= _epsilons(body.get_operations(), graph, seen)
    return found


def _bodies(op: tf.Operation, graph: tf.Graph, seen: set[str]) -> list[tf.Graph]:
    """The graphs of the functions ``op`` calls (``If`` branches, ``While`` bodies,
    ``PartitionedCall`` targets), each once."""
    out = []
    for attr in _FUNCTION_ATTRS:
        try:
            name = op.get_attr(attr).name
        except (ValueError, AttributeError):
            continue
        function = graph._get_function(name)  # noqa: SLF001  (the graph's own library)
        body = getattr(function, "graph", None)
        if name not in seen and body is not None:
            seen.add(name)
            out.append(body)
    return out


def keras_batch_norm_epsilons(layers: list[Any]) -> set[float]:
    """The ``epsilon`` of every batch-normalisation layer among ``layers``."""
    return {float(layer.epsilon) for layer in layers
            if "BatchNormalization" in type(layer).__name__ and hasattr(layer, "epsilon")}


def batch_norm_hint(tf1_epsilons: set[float], keras_epsilons: set[float]) -> str:
    """The note when both sides normalise and their epsilons differ, else ''."""
    if not tf1_epsilons or not keras_epsilons or _same(tf1_epsilons, keras_epsilons):
        return ""
    return (f"batch normalisation's epsilon differs: TF1's graph adds {_show(tf1_epsilons)} "
            f"to the variance, the Keras BatchNormalization layers {_show(keras_epsilons)}: "
            "build them with TF1's (tf.layers' default is 1e-3, as Keras'; 1e-5 is "
            "PyTorch's)")


def _same(a: set[float], b: set[float]) -> bool:
    return len(a) == len(b) and all(np.isclose(x, y, rtol=1e-6, atol=0.0)
                                    for x, y in zip(sorted(a), sorted(b)))


def _show(values: set[float]) -> str:
    return ", ".join(f"{v:g}" for v in sorted(values))


_TF1_ACTIVATIONS = {"Relu": "relu", "Relu6": "relu6", "Elu": "elu", "Selu": "selu",
                    "Tanh": "tanh", "Sigmoid": "sigmoid", "Softplus": "softplus",
                    "LeakyRelu": "leaky_relu", "Softsign": "softsign", "Gelu": "gelu"}
"""TF1 op type -> the Keras activation's name (softmax is left out: a loss applies it)."""
_KERAS_LAYERS = {"ReLU": "relu", "LeakyReLU": "leaky_relu", "ELU": "elu"}
"""Keras activation layers that have no ``activation`` attribute -> the activation."""


_LINEAR = frozenset({"MatMul", "BatchMatMulV2", "Conv2D", "Conv3D", "DepthwiseConv2dNative"})
"""The ops of a layer's linear part (``x @ w``, a convolution)."""
_READS = frozenset({"ReadVariableOp", "Identity", "Cast"})
"""The ops between a variable and the op that uses its value."""
_VARIABLES = frozenset({"VarHandleOp", "VariableV2"})


def tf1_activations(root: Any) -> Counter:
    """How many layers of each activation the TF1 tensor ``root`` is computed through: an
    activation op applied to a layer's linear part (``relu(x @ w + b)``, a convolution),
    counted once per kernel variable, so a network called twice (SAC's actor on two
    batches) counts as built, as Keras layers do; an activation of anything else (a tanh
    squashing an action, a softplus in a log-probability) is not a layer's."""
    found = set()
    for op in upstream_ops(root, control=False):
        kernel = _layer_kernel(op.inputs[0].op) if op.type in _TF1_ACTIVATIONS else None
        if kernel is not None:
            found.add((kernel, _TF1_ACTIVATIONS[op.type]))
    return Counter(kind for _, kind in found)


def _through_batch_norm(op: tf.Operation) -> tf.Operation:
    """The op whose output ``op`` normalises, where ``op`` is a batch normalisation (a
    ``FusedBatchNorm``, or ``tf.nn.batch_normalization``'s ``x * inv + (offset - mean *
    inv)`` with ``inv`` from an ``Rsqrt``), else ``op``: a layer's activation may follow its
    batch norm, ``relu(bn(x @ w))``."""
    if op.type.startswith("FusedBatchNorm"):
        return op.inputs[0].op
    if op.type in _ADDS:
        muls = [t.op for t in op.inputs if t.op.type == "Mul"]
        if len(muls) == 1 and any(t.op.type == "Sub" for t in op.inputs):
            inv = muls[0].inputs[1].op
            if inv.type == "Rsqrt" or (inv.type == "Mul" and any(
                    t.op.type == "Rsqrt" for t in inv.inputs)):
                return muls[0].inputs[0].op
    return op


def _layer_kernel(op: tf.Operation) -> str | None:
    """The name of the kernel variable of the layer whose pre-activation ``op`` is (``x @
    w``, or it plus a bias, either maybe batch-normalised), else None."""
    op = _through_batch_norm(op)
    if op.type == "BiasAdd":
        op = _unshaped(op.inputs[0].op)
    elif op.type in ("Add", "AddV2"):  # x @ w + b: one side linear, the other a variable
        sides = [_unshaped(t.op) for t in op.inputs]
        linear = [x for x in sides if x.type in _LINEAR]
        if len(linear) != 1 or _variable_source(next(x for x in sides
                                                     if x is not linear[0])) is None:
            return None
        op = linear[0]
    if op.type not in _LINEAR:
        return None
    return next((name for name in map(_variable_source, (t.op for t in op.inputs))
                 if name is not None), None)


def _unshaped(op: tf.Operation) -> tf.Operation:
    """The op whose output ``op`` reshapes, where it is a ``Reshape`` (a dense layer on a
    ``[B, T, F]`` sequence is ``tf.tensordot``: MatMul, then Reshape back to 3-D, a trial's
    relu went uncounted), else ``op``."""
    while op.type == "Reshape":
        op = op.inputs[0].op
    return op


def _variable_source(op: tf.Operation) -> str | None:
    """The name of the variable ``op`` reads (through reads, identities and casts), else
    None."""
    while op.type in _READS and op.inputs:
        op = op.inputs[0].op
    return op.name if op.type in _VARIABLES else None


def keras_activations(layers: list[Any], compared: set[int]) -> Counter:
    """How many of each activation the Keras ``layers`` apply: those holding a variable
    whose ``id`` is in ``compared`` (the weights and the state compared: a frozen target
    network's layers count, as TF1's do), and the weightless activation layers."""
    found = Counter()
    for layer in layers:
        weights = [_variable(w) for w in getattr(layer, "weights", [])]
        holds = any(id(w) in compared for w in weights)
        if type(layer).__name__ in _KERAS_LAYERS and not weights:
            found[_KERAS_LAYERS[type(layer).__name__]] += 1
            continue
        name = getattr(getattr(layer, "activation", None), "__name__", "linear")
        if (holds or (not weights and type(layer).__name__ == "Activation")) \
                and name in _TF1_ACTIVATIONS.values():
            found[name] += 1
    return found


def _variable(v: Any) -> Any:
    """The ``tf.Variable`` behind a Keras 3 variable, or ``v`` itself."""
    inner = getattr(v, "value", None)
    return inner if isinstance(inner, tf.Variable) else v


MOVING_STATISTICS = ("moving_mean", "moving_variance")
"""The leaf names of batch normalisation's moving statistics (TF1's layers and Keras')."""


def moving_statistics(names: list[str]) -> list[str]:
    """The names among ``names`` whose leaf is a moving statistic."""
    return [n for n in names if n.rsplit("/", 1)[-1].split(":")[0] in MOVING_STATISTICS]


def batch_norm_mode_hint(tf1_moving: list[str], tf1_read: list[str],
                         keras_moved: list[str]) -> str:
    """The note when the two forward passes normalise in different modes, else '' (for
    sides that both hold batch normalisation).

    Args:
      tf1_moving: TF1's moving statistics (its state variables so named).
      tf1_read: those of them the TF1 loss reads: it normalises with them (inference mode);
        reading none, it normalises with the batch's moments (training mode).
      keras_moved: the Keras moving statistics one call of the TF2 loss moved: it ran them in
        training mode (none moved: inference mode, a call without ``training=True``).
    """
    if tf1_read and keras_moved:
        return ("batch normalisation runs in another mode on each side: TF1's forward pass "
                f"normalises with its moving statistics (its loss reads {', '.join(tf1_read)}:"
                " inference mode), while TF2Program.loss calls the Keras model in training "
                f"mode (it moved {', '.join(keras_moved)}): call the model with training=False "
                "where the outputs are compared, or feed TF1's training switch True")
    if not tf1_read and not keras_moved:
        return ("batch normalisation runs in another mode on each side: TF1's forward pass "
                "normalises with the batch's moments (training mode: its loss reads none of "
                f"{', '.join(tf1_moving)}), while the Keras BatchNormalization layers ran in "
                "inference mode (a call without training=True leaves their moving statistics "
                "as they were): call the model with training=True in TF2Program.loss, or feed "
                "TF1's training switch False")
    return ""


def activation_hint(tf1: Counter, keras: Counter) -> str:
    """The note when the two counts of activations differ, else '': which activation a
    Keras layer lacks (or applies where TF1's does not), by name."""
    if tf1 == keras:
        return ""

    def show(c: Counter) -> str:
        return ", ".join(f"{k} x{n}" for k, n in sorted(c.items())) or "none"
    missing = sorted((tf1 - keras).elements())
    extra = sorted((keras - tf1).elements())
    fix = []
    if missing:
        fix.append("give each layer its TF1 activation ("
                   + ", ".join(f"Dense(..., activation={k!r})" for k in dict.fromkeys(missing))
                   + ")")
    if extra:
        fix.append("take " + ", ".join(dict.fromkeys(extra)) + " off the Keras layers TF1 "
                   "leaves linear (activation=None)")
    return (f"the activations differ: TF1's loss is computed through {show(tf1)}, the Keras "
            f"layers apply {show(keras)} (activations your code calls itself are not "
            f"counted): {'; '.join(fix)}")
