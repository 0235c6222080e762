"""What a TF1 graph holds: the op types under a name scope and the compiled functions it calls.

For the structural tests of the graph twin, which builds its XLA computations as functions
called in its graph (``legacy_graph.per_sample.xla_compiled``).
"""
from __future__ import annotations

import tensorflow as tf

CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


def scope_op_types(graph: tf.Graph, scope: str) -> set[str]:
    """The types of the ops in ``graph`` itself (not in its functions) under ``scope/``."""
    return {op.type for op in graph.get_operations() if op.name.startswith(f"{scope}/")}


def compiled_calls(graph: tf.Graph, scope: str) -> list[str]:
    """The names of the functions that the call ops under ``scope/`` call and that are
    marked ``_XlaMustCompile`` (``tf.function(jit_compile=True)``), in the graph's order."""
    library = {f.signature.name: f for f in graph.as_graph_def().library.function}
    out = []
    for op in graph.get_operations():
        if op.type in CALL_OPS and op.name.startswith(f"{scope}/"):
            name = op.get_attr("f").name
            if library[name].attr["_XlaMustCompile"].b:
                out.append(name)
    return out
