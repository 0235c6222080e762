"""Gradients that a TF1 ``train_op`` applies from placeholders: the gradient-buffer loop.

Code of the 2016-2017 tutorials trains in two runs: ``sess.run(self.gradients, feed)``
(``tf.gradients(loss, tvars)``) per episode, summed in numpy, then
``sess.run(update_batch, {holder_i: summed_i})`` with
``update_batch = optimizer.apply_gradients(zip(gradient_holders, tvars))``. Its ``train_op``
needs no batch at all, only those placeholders. On one batch the loop feeds each holder the
gradient of the loss with respect to its variable, and so does the harness
(:class:`pgtwin.parity.tf1_side.TF1Side`), each step, at the weights of that step.

Which holder is which variable's gradient is read from the graph: from the ``grad`` input of
the apply op that updates the variable, up through the ops of the gradient's own shape
(a ``tf.clip_by_global_norm`` over the holders reads every holder, but multiplies each by a
scalar) to one placeholder.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from pgtwin.parity.graph_walk import is_gradient_op, upstream_ops
from pgtwin.parity.optimizer_config import apply_kind, gradient_input


class GradientFeedError(ValueError):
    """A gradient placeholder of the ``train_op`` that the harness cannot feed as the
    gradient-buffer loop does (named in ``feeds``, or not told apart from another)."""


def fed_gradients(train_op: tf.Operation, feeds: Mapping[str, tf.Tensor],
                  what: str) -> dict[tf.Tensor, tf.Operation]:
    """``{holder placeholder: variable op}`` for each apply op of ``train_op`` whose gradient
    is fed: one that reads placeholders from its ``grad`` input through no gradient op
    (``tf.gradients``' ``gradients/`` scope, an op's ``*_grad/``).

    Args:
      train_op: the user's train op (an op of the TF1 graph).
      feeds: ``{feed key: placeholder}`` the user feeds (``TF1Program.feeds``).
      what: the program's name in messages (``TF1Program``).

    Raises:
      GradientFeedError: a holder is one of ``feeds`` (its array would be applied unchanged
        at every step), or the holders of one variable cannot be told apart.
    """
    keys = {p.op: key for key, p in feeds.items()}
    out: dict[tf.Tensor, tf.Operation] = {}
    fed_by_user: list[str] = []
    for op in upstream_ops(train_op):
        if not apply_kind(op.type):
            continue
        gradient = gradient_input(op)
        if gradient is None or not _fed(gradient):
            continue
        variable = op.inputs[0].op
        holders = _holders(gradient, tf.TensorShape(variable.get_attr("shape"))) \
            or _placeholders(gradient)
        if len(holders) != 1:
            raise GradientFeedError(
                f"{what}.train_op applies a gradient to {variable.name} that it reads from "
                f"placeholders {sorted(h.op.name for h in holders)}, and none of them alone "
                "has the variable's shape on its path, so the harness cannot tell which one "
                "is that variable's gradient: give train_op as a function of your object "
                "that applies the loss's own gradients, e.g. lambda a: "
                "a.optimizer.apply_gradients(zip(tf.gradients(a.loss, tvars), tvars))")
        (holder,) = holders
        if holder.op in keys:
            fed_by_user.append(f"feeds[{keys[holder.op]!r}] ({holder.op.name!r}, the "
                               f"gradient of {variable.name})")
        out[holder] = variable
    if fed_by_user:
        raise GradientFeedError(
            f"{what}.{', '.join(fed_by_user)} name placeholders that {what}.train_op applies "
            "as gradients: a fed array would be applied unchanged at every step, whatever "
            "the weights, so the steps after the first would compare nothing. Leave them "
            "out of feeds (and their arrays out of the inputs): the harness feeds each the "
            "gradient of the loss with respect to its variable at each step, as your "
            "gradient-buffer loop does")
    return out


def _fed(gradient: tf.Tensor) -> bool:
    """True when ``gradient`` reads placeholders and no op of a gradient's graph (a
    gradient that reaches one is computed in the graph; a variable it reads, a weight
    decay's, is neither)."""
    reached = list(upstream_ops(gradient, control=False, stop=lambda o: is_gradient_op(o)
                                or o.type in ("Placeholder", "VarHandleOp", "VariableV2")))
    return (not any(is_gradient_op(o) for o in reached)
            and any(o.type == "Placeholder" for o in reached))


def _placeholders(gradient: tf.Tensor) -> list[tf.Tensor]:
    """Every placeholder ``gradient`` reads."""
    return [o.outputs[0] for o in upstream_ops(gradient, control=False)
            if o.type == "Placeholder"]


def _holders(gradient: tf.Tensor, shape: tf.TensorShape) -> list[tf.Tensor]:
    """The placeholders reached from ``gradient`` through tensors whose shape may be
    ``shape`` (the variable's): the holder, not the scalars a clipping multiplies by."""
    seen, stack, found = {gradient.ref()}, [gradient], []
    while stack:
        t = stack.pop()
        if t.op.type == "Placeholder":
            found.append(t)
            continue
        for parent in t.op.inputs:
            if parent.ref() not in seen and parent.shape.is_compatible_with(shape) \
                    and (parent.shape.rank != 0 or shape.rank == 0):
                seen.add(parent.ref())
                stack.append(parent)
    return found
