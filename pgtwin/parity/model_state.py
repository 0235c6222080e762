"""Model state: the non-trainable variables a model's forward pass reads or updates.

BatchNormalization's moving mean and variance are the common case. They are not trained,
so the trainable pairs say nothing about them, yet the policy acts with them in inference
mode. A migration that sets the layer's momentum differently, or calls the model without
``training=True`` in its train step, trains the same weights and moves these differently.

Which variables are state:

* TF1: the non-trainable float variables that the loss or an output reads (through a
  ``tf.cond`` on a ``training`` placeholder), or that an op of the ``UPDATE_OPS``
  collection reads or assigns (``tf.layers.batch_normalization``, ``tf_slim``'s
  ``batch_norm``). ``global_step`` is an integer; optimizer slots and Adam's beta powers
  are read by the ``train_op`` alone.
* TF2: the non-trainable float variables of the model (``non_trainable_variables``, or
  a ``tf.Module``'s variables less its trainable ones); a Keras 3 seed generator's
  integer state is not a float.

The harness pairs them like the weights, loads TF1's values into both sides, and keeps
them out of its own calls: a Keras layer called in training mode updates its moving
statistics on every call, so the harness's forward passes (outputs, gradients) would
otherwise move them where TF1's ``train_op`` does not.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import numpy as np
import tensorflow as tf

from pgtwin.parity.graph_walk import upstream_ops
from pgtwin.parity.variable_mapping import MappingProblem, VariableMapping

tf1 = tf.compat.v1

VARIABLE_OPS = frozenset({"VariableV2", "Variable", "VarHandleOp"})
"""The op types that hold a TF1 variable."""

STATE_CAUSE = ("a non-trainable state variable (such as BatchNormalization's moving mean or "
               "variance), which the forward pass updates in training mode: compare the "
               "layer's momentum (TF1 tf.layers 0.99, tf_slim's batch_norm decay 0.999, "
               "Keras 0.99) and epsilon (TF1 1e-3, Keras 1e-3, PyTorch-style code 1e-5)")
"""The weights rung's note on a state pair that parts where both sides moved it."""

STATE_MOVED = ("TF1's train_op updated this state variable and the TF2 train step did not: "
               "does the train step call the model with training=True (a layer updates its "
               "moving statistics only then)?",
               "the TF2 train step updated this state variable and TF1's train_op did not: "
               "does the TF1 train_op run the update ops (tf.control_dependencies("
               "tf.get_collection(tf.GraphKeys.UPDATE_OPS))), and does the batch feed "
               "is_training as the TF2 train step calls the model?")
"""The notes on a state pair that only TF1's step moved, and that only TF2's step moved."""

COPY_MOVED = ("TF1's train_op updated this state variable and the TF2 train step did not: "
              "where it is a copy, such as a target network (no Keras normalisation layer "
              "holds it), the TF2 train step leaves out the update TF1's train_op runs "
              "({assigner}): move it after apply_gradients (a soft update t.assign(tau * w + "
              "(1 - tau) * t), or a copy every N steps)",
              "the TF2 train step updated this state variable and TF1's train_op did not: "
              "where it is a copy, such as a target network (no Keras normalisation layer "
              "holds it), TF1 updates it in an op of its own (run every N steps) that the "
              "train_op does not run: update it in the TF2 train step only as often, or "
              "compare steps that do not update it")
""":data:`STATE_MOVED` for a state variable no Keras normalisation layer holds; the first
has TF1's assign op filled in (``{assigner}``)."""


class HasState(Protocol):
    """A side whose state the harness can read and put back."""

    def state_values(self) -> dict[str, np.ndarray]: ...

    def load_state(self, values: Mapping[str, np.ndarray]) -> None: ...


def variable_ops(roots: list[Any]) -> set[tf.Operation]:
    """The variable ops ``roots`` (tensors or ops) read or write through data inputs."""
    found: set[tf.Operation] = set()
    for root in roots:
        found |= {op for op in upstream_ops(root, control=False,
                                            stop=lambda op: op.type in VARIABLE_OPS)
                  if op.type in VARIABLE_OPS}
    return found


def tf1_state_variables(graph: tf.Graph, reads: list[Any], compared: Mapping[str, Any]
                        ) -> dict[str, Any]:
    """``{name: variable}``, in creation order: the TF1 state (module docstring).

    Args:
      graph: the program's graph.
      reads: the loss and the output tensors.
      compared: the trainable variables already compared, left out.
    """
    with graph.as_default():
        candidates = [v for v in tf1.global_variables() if not v.trainable]
        # ops, tensors, or (tf1.assign on a resource variable) variables: each by its op
        updates = [getattr(u, "op", u) for u in tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)]
    reached = variable_ops(reads + updates)
    taken = {v.op for v in compared.values()}
    return {v.op.name: v for v in candidates
            if v.op in reached and v.op not in taken and v.dtype.base_dtype.is_floating}


def tf2_state_variables(*owners: Any) -> list[Any]:
    """The TF2 state of the first owner that has any (the model, then the object around it),
    each variable once, in the model's order; none from a model not built yet."""
    for owner in owners:
        try:
            found = _non_trainable(owner)
        except ValueError:  # a tf_keras model not built yet: no variables to find
            found = []
        floats = list({id(v): v for v in found if tf.as_dtype(v.dtype).is_floating}.values())
        if floats:
            return floats
    return []


def _non_trainable(owner: Any, depth: int = 2) -> list[Any]:
    """A Keras model's (or layer's) ``non_trainable_variables``, a ``tf.Module``'s
    variables less its trainable ones; for any other object, those of the models and
    modules its attributes hold (``depth`` levels down: an agent holding an online and a
    frozen target network), else none."""
    found = getattr(owner, "non_trainable_variables", None)
    if found is None and isinstance(owner, tf.Module):
        trainable = {id(v) for v in owner.trainable_variables}
        found = [v for v in owner.variables if id(v) not in trainable]
    if found is None and depth > 0 and hasattr(owner, "__dict__"):
        return [v for value in vars(owner).values() for v in _non_trainable(value, depth - 1)]
    return list(found or [])


def explain_roles(weights: VariableMapping, state: VariableMapping) -> None:
    """Where a variable is trained on one side and the other holds one of its shape as
    state, say so in both problems (in place): the pairing of each kind alone finds no
    partner for either, and its messages (no variable of this shape, no bias) mislead.

    The common case is a frozen copy, a target network: TF1 makes it with
    ``trainable=False``, and a migration that forgot ``layer.trainable = False`` trains it.
    """
    def across(problem: MappingProblem, others: list[MappingProblem]) -> list[MappingProblem]:
        return [o for o in others if o.side != problem.side and o.exists and problem.exists
                and o.variable.shape == problem.variable.shape]

    def names(found: list[MappingProblem]) -> str:
        return ", ".join(o.variable.name for o in found)

    trained, held = list(weights.problems), list(state.problems)
    for i, p in enumerate(trained):
        other = across(p, held)
        if not other:
            continue
        if p.side == "TF2":
            fix = ("if it is a frozen copy (a target network), freeze the TF2 layer "
                   "(layer.trainable = False, or build it with trainable=False); if it "
                   "should train, create the TF1 variable with trainable=True")
        else:
            fix = ("make the TF2 one trainable; if it is a frozen copy (a target network), "
                   "create the TF1 variable with trainable=False")
        other_side = other[0].side
        trained[i] = MappingProblem(p.side, p.variable, (
            f"trained in {p.side}, while {other_side} holds {names(other)} of shape "
            f"{p.variable.shape} as state (not trainable): {fix}"))
    for i, p in enumerate(held):
        other = across(p, weights.problems)
        if other:
            held[i] = MappingProblem(p.side, p.variable, (
                f"not trainable in {p.side}, while {other[0].side} trains {names(other)} of "
                f"this shape: see {'that row' if len(other) == 1 else 'those rows'}"))
    weights.problems[:], state.problems[:] = trained, held


def split_name_map(name_map: Mapping[str, str] | None, state_names: set[str]
                   ) -> tuple[dict[str, str], dict[str, str]]:
    """``name_map`` as ``(the weights' entries, the state's entries)``, by TF1 name."""
    weights, state = {}, {}
    for old, new in (name_map or {}).items():
        (state if old in state_names else weights)[old] = new
    return weights, state


@contextlib.contextmanager
def state_kept(side: HasState) -> Iterator[None]:
    """Run the body, then put the side's state back as it was before."""
    values = side.state_values()
    try:
        yield
    finally:
        if values:
            side.load_state(values)
