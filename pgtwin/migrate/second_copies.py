"""A checkpoint that holds a second full set of the converted variables under other names.

A script that builds its ``tf.keras`` model twice in one graph (a seed sweep without
``tf.reset_default_graph()``) saves both: Keras numbers the second's layers on
(``dense_2``, ``dense_3``), and the second is the one that trained, the first
re-initialised. The TF1 program, built once in a graph of its own, makes the first names,
so ``convert-checkpoint --tf1`` converted the untrained set, passed its checks (they compare
the checkpoint's values with the converted ones) and said nothing but a "not converted"
list. The warning names the other set and the ``--map`` that takes it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from pgtwin.migrate.tf1_checkpoint import slot_parents


def second_set_note(values: Mapping[str, np.ndarray], converted: Mapping[str, str],
                    left: Sequence[str]) -> str:
    """Where the names ``left`` unconverted hold, one for one, float arrays of the shapes
    of the ``converted`` ones (``{TF1 name: TF2 name}``) and some hold other values: the
    warning with that set and the ``--map`` for it; '' otherwise."""
    slots = slot_parents({n: np.shape(v) for n, v in values.items()})
    free = [n for n in left if np.asarray(values[n]).dtype.kind == "f"
            and np.ndim(values[n]) >= 1 and n not in slots]
    match = {}
    for name in converted:
        other = next((n for n in free if n not in match.values()
                      and np.shape(values[n]) == np.shape(values[name])), None)
        if other is None:
            return ""
        match[name] = other
    if all(np.array_equal(values[a], values[b]) for a, b in match.items()):
        return ""
    shown = ", ".join(f"{b} ({a})" for a, b in list(match.items())[:4])
    maps = " ".join(f"--map {b}={converted[a]}" for a, b in list(match.items())[:2])
    return (f"WARNING the checkpoint holds a second set of variables of the converted ones' "
            f"shapes, with other values, under other names: {shown}"
            f"{', ...' if len(match) > 4 else ''}. A model built twice in the process that "
            "saved it (Keras numbers the second's layers on: dense_2, dense_3) leaves the "
            "first set re-initialised and the second trained; the names the TF1 program "
            "makes are the first. If the trained weights are the other set, convert without "
            f"--tf1 and pair them by name ({maps} ...)")
