"""Variables the loss reads that are copies of the ones the ``train_op`` updates (A3C).

An A3C worker computes its loss on a local copy of the network (``worker_0/...``), takes
``tf.gradients(loss, local_vars)``, and applies them to the global network
(``apply_gradients(zip(grads, global_vars))``); a sync op (``local.assign(global)``) copies
the global weights back before the next rollout. The loss then reads variables the
``train_op`` never updates, and updates variables the loss never reads: compared as they
are, the weights after a step could not agree, the optimizer looked unpaired, and a
checkpoint's trained weights were the global ones while the compared names were the stale
local copies.

:func:`local_copies` finds the pairs: a compared variable the ``train_op`` does not update,
and a variable of its shape that the ``train_op`` updates and the loss does not read, tied
by an assign op in the graph that writes the first with the second's value (the sync op),
or, where the graph holds no such op, by names equal past their first scope.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from pgtwin.parity.graph_walk import ASSIGN_OPS
from pgtwin.parity.model_state import variable_ops
from pgtwin.parity.optimizer_config import tf1_stepped

_READS = frozenset({"ReadVariableOp", "Identity", "Cast"})


def local_copies(graph: tf.Graph, loss: tf.Tensor, train_op: Any,
                 compared: Mapping[str, Any], variables: Mapping[str, Any]
                 ) -> dict[str, str]:
    """``{compared name: name of the variable the train_op updates in its place}``.

    Args:
      graph: the TF1 graph.
      loss: TF1's loss (what reads the copies).
      train_op: the op the harness runs as a step, or None (no copies then).
      compared: ``{name: variable}`` the harness compares (those the loss reads).
      variables: ``{name: variable}`` of every variable of the graph.
    """
    if train_op is None:
        return {}
    stepped = tf1_stepped(train_op)
    read = variable_ops([loss])
    local = {v.op: n for n, v in compared.items() if v.op not in stepped}
    trained = {v.op: n for n, v in variables.items()
               if v.op in stepped and v.op not in read and n not in compared}
    if not local or not trained:
        return {}
    found = _synced(graph, local, trained)
    if not found:
        found = _by_name(local, trained, variables)
    shapes = {n: tuple(v.shape.as_list()) for n, v in variables.items()}
    return {l: g for l, g in found.items() if shapes[l] == shapes[g]}


def _synced(graph: tf.Graph, local: Mapping[tf.Operation, str],
            trained: Mapping[tf.Operation, str]) -> dict[str, str]:
    """Pairs tied by an assign op of the graph: ``local.assign(trained)``."""
    found: dict[str, str] = {}
    for op in graph.get_operations():
        if op.type not in ASSIGN_OPS or len(op.inputs) < 2 or op.inputs[0].op not in local:
            continue
        source = op.inputs[1].op
        while source.type in _READS and source.inputs:
            source = source.inputs[0].op
        if source in trained:
            found.setdefault(local[op.inputs[0].op], trained[source])
    return found


def _by_name(local: Mapping[tf.Operation, str], trained: Mapping[tf.Operation, str],
             variables: Mapping[str, Any]) -> dict[str, str]:
    """Pairs whose names are equal past their first scope (``worker_0/fc/w`` and
    ``global/fc/w``), each the only such match."""
    def tail(name: str) -> str:
        return name.split("/", 1)[1] if "/" in name else ""

    by_tail: dict[str, list[str]] = {}
    for name in trained.values():
        by_tail.setdefault(tail(name), []).append(name)
    return {n: by_tail[tail(n)][0] for n in local.values()
            if tail(n) and len(by_tail.get(tail(n), [])) == 1}
