"""A scalar input TF1's loss reads that the TF2 loss does not: found by moving it.

PPO2 feeds its clip range (and often its entropy coefficient) through 0-d placeholders
that its loop anneals. A port that writes the constant in its loss instead agrees on any
one batch whose input holds that constant (a helper's port passed every rung). Here each
0-d float input TF1 feeds is halved for one more forward pass of each side: where TF1's
loss moves and the TF2 loss does not move at all, the TF2 loss does not read it. (Only
"not at all" is told, and only where TF1's loss is the same when run again at the moved
value: a keep_prob below 1 turns dropout on, and a port whose loss runs in inference mode
rightly ignores it.)
"""
from __future__ import annotations

import numpy as np

from pgtwin.parity.fed_scalars import FACTOR, moved_loss, scalar_keys
from pgtwin.parity.ladder import Row
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side

def ignored_scalar_rows(legacy: TF1Side, eager: TF2Side, ctx: str) -> list[Row]:
    """A failing ``loss`` row for each 0-d float input that moves TF1's loss and leaves the
    TF2 loss as it was; none otherwise (nothing is run where no input is 0-d)."""
    keys = [k for k in scalar_keys(legacy) if k in eager.inputs]
    if not keys:
        return []
    tf1_loss = float(np.asarray(legacy.run()["loss"]))
    if float(np.asarray(legacy.run()["loss"])) != tf1_loss:
        return []  # a random forward pass moves anyway
    tf2_loss = np.asarray(eager.run()[0]["loss"])
    rows = []
    for key in keys:
        value = float(np.asarray(legacy.feed[legacy.placeholders[key]]))
        moved = value * FACTOR
        tf1_moved = moved_loss(legacy, key)
        if tf1_moved is None:
            continue  # random at the moved value: a keep_prob below 1 turns dropout on
        before = eager.inputs[key]
        eager.set_input(key, moved)
        try:
            tf2_moved = np.asarray(eager.run()[0]["loss"])
        finally:
            eager.inputs[key] = before
        if tf1_moved != tf1_loss and np.array_equal(tf2_moved, tf2_loss):
            rows.append(Row(
                "loss", f"input {key!r}", abs(tf1_moved - tf1_loss), 1.0, False,
                f"TF1's loss moves with inputs[{key!r}] ({value:g} -> {moved:g}: "
                f"{tf1_loss:.6g} -> {tf1_moved:.6g}) and the TF2 loss does not: it does not "
                f"read inputs[{key!r}] (a constant written in its place, equal to this batch's "
                f"{value:g}?). Take it from the batch, as TF1 takes its placeholder, or the "
                "port parts once your loop changes it", ctx))
    return rows
