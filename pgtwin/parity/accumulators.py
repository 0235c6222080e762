"""A ``train_op`` that applies gradients accumulated in variables by other ops.

Code that splits a rollout into minibatches keeps one non-trainable accumulator per
variable: a ``zero_ops`` group, an ``accum_ops`` group (``acc.assign_add(g)`` for the
loss's gradients, run once per minibatch) and an ``apply_op`` that applies ``acc / n``.
Named as ``TF1Program.train_op``, ``apply_op`` alone applies what the accumulators hold
(zeros at the start), TF1's weights never moved, and the weights rows blamed the TF2 step
for moving them. :func:`accumulator_message` names the pattern and the description that
compares it.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf

from pgtwin.parity.graph_walk import is_gradient_op, upstream_ops
from pgtwin.parity.model_state import VARIABLE_OPS
from pgtwin.parity.optimizer_config import apply_kind, gradient_input

_ADDS = frozenset({"AssignAdd", "AssignAddVariableOp"})


def accumulators(train_op: Any, graph: tf.Graph) -> dict[str, str]:
    """``{variable the train_op updates: accumulator its gradient is read from}`` where an
    apply op of ``train_op`` takes a gradient read from a variable that ops of the graph add
    the loss's gradients to (``assign_add`` of ``tf.gradients``' output), and no such add
    runs before that apply op (none in the ops it depends on, control inputs included): the
    apply alone, or grouped beside the adds with no order. A train_op that zeroes,
    accumulates and applies in order is a step of its own, and passes."""
    start = train_op.op if isinstance(train_op, tf.Tensor) else train_op
    adders: dict[tf.Operation, list[tf.Operation]] = {}
    for op in graph.get_operations():
        if op.type in _ADDS and any(is_gradient_op(x)
                                    for x in upstream_ops(op.inputs[1], control=False)):
            adders.setdefault(op.inputs[0].op, []).append(op)
    found = {}
    for op in upstream_ops(start):
        grad = gradient_input(op) if apply_kind(op.type) else None
        if grad is None or not adders:
            continue
        before = set(upstream_ops(op))
        for source in upstream_ops(grad, control=False):
            if source.type in VARIABLE_OPS and source in adders \
                    and not any(add in before for add in adders[source]):
                found[op.inputs[0].op.name] = source.name
                break
    return found


def accumulator_message(found: dict[str, str], what: str) -> str:
    """The refusal for :func:`accumulators`' pairs: what the ``train_op`` applies, and
    the description that compares it."""
    shown = ", ".join(f"{a} for {v}" for v, a in list(found.items())[:3])
    return (f"{what}.train_op applies gradients read from accumulator variables ({shown}"
            f"{', ...' if len(found) > 3 else ''}) that no op before it fills (an assign_add "
            "of the loss's gradients, which your loop runs once per minibatch before it; "
            "grouped beside it, TF1 runs the two in no order): run on one batch it applies "
            "what they hold, zeros at the start, and TF1's weights would not move. The harness feeds one batch a step, so describe the "
            "step your loop makes over a whole batch: a train_op function that applies the "
            "loss's gradients on it with your optimizer, e.g. train_op=lambda agent: "
            "agent.optimizer.apply_gradients(agent.optimizer.compute_gradients(agent.loss)) "
            "(for a mean loss over equal minibatches, accumulating and dividing by their "
            "count is that step)")
