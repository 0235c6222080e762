"""Scalars TF1's loop feeds to its train step (PPO's annealed ``LR`` and clip range, an
entropy coefficient), fed another value from the second train step on, on both sides.

The harness feeds one batch at every step, so a TF2 train step that ignores ``batch["lr"]``
and builds its optimizer with the same number, or keeps an entropy coefficient of its own
equal to the batch's, passed every rung (two helpers' ports did): the one value cannot tell
taking the input from matching it. From step 2 each such input is halved on both sides, as
an annealed schedule would move it; a port that takes it still agrees, one that ignores it
parts at step 2, and its rows say why. An input at which TF1's loss turns random when
halved (a keep_prob below 1 turns dropout on) is left as it is.
"""
from __future__ import annotations

import numpy as np

from pgtwin.parity.graph_walk import upstream_ops
from pgtwin.parity.ladder import Row
from pgtwin.parity.optimizer_config import tf1_rate_reads
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side

FACTOR = 0.5
"""What a fed scalar is multiplied by from step 2 on."""


def fed_rate_keys(legacy: TF1Side) -> list[str]:
    """The batch keys fed to the 0-d float placeholders TF1's learning rates read."""
    if legacy.train_op is None:
        return []
    read = tf1_rate_reads(legacy.train_op, ("Placeholder",))
    return [k for k in scalar_keys(legacy) if legacy.placeholders[k].op.name in read]


def stepped_scalar_keys(legacy: TF1Side) -> list[str]:
    """The batch keys of the 0-d float inputs TF1's ``train_op`` reads (its learning rate,
    or a coefficient of the loss it minimises) that the TF2 side gets too, where TF1's loss
    stays the same when run again with the input halved."""
    if legacy.train_op is None:
        return []
    ran = set(upstream_ops(legacy.train_op))
    return [k for k in scalar_keys(legacy)
            if legacy.placeholders[k].op in ran and moved_loss(legacy, k) is not None]


def moved_loss(legacy: TF1Side, key: str) -> float | None:
    """TF1's loss with input ``key`` multiplied by :data:`FACTOR`, or None where two runs
    of it differ (the input turns randomness on there: a keep_prob below 1)."""
    moved = {key: np.asarray(legacy.feed[legacy.placeholders[key]]) * FACTOR}
    first = float(np.asarray(legacy.run(replaced=moved)["loss"]))
    return first if float(np.asarray(legacy.run(replaced=moved)["loss"])) == first else None


def scalar_keys(legacy: TF1Side) -> list[str]:
    """The batch keys fed to 0-d float placeholders, holding a finite nonzero value."""
    out = []
    for key, ph in legacy.placeholders.items():
        value = np.asarray(legacy.feed[ph])
        if value.ndim == 0 and value.dtype.kind == "f" and np.isfinite(value) and value != 0:
            out.append(key)
    return out


def vary_scalars(legacy: TF1Side, eager: TF2Side, keys: list[str], where: str
                 ) -> tuple[list[Row], str]:
    """Halve each of ``keys`` on both sides: ``(a passing row saying so, the cause for the
    weights rows that part from here)``."""
    said = []
    keys = [k for k in keys if k in eager.inputs]
    for key in keys:
        old = float(np.asarray(legacy.feed[legacy.placeholders[key]]))
        legacy.set_input(key, old * FACTOR)
        eager.set_input(key, old * FACTOR)
        said.append(f"inputs[{key!r}] {old:g} -> {old * FACTOR:g}")
    shown = ", ".join(said)
    row = Row("weights", "fed scalars", 0.0, 0.0, True,
              f"from this step the harness feeds {shown} to both sides: TF1's train_op reads "
              "it (a rate or coefficient your loop anneals and feeds), so a TF2 train step "
              "that ignores it parts here", where)
    cause = (f"from this step the scalars TF1's train_op reads moved ({shown}) on both "
             "sides, and the weights part after agreeing before: the TF2 train step does not "
             f"take {', '.join(f'inputs[{k!r}]' for k in keys)} as TF1's does (a constant "
             "written in its place, an optimizer built with a fixed rate?): take it from the "
             "batch in each step (optimizer.learning_rate.assign(batch[KEY]) for a rate)")
    return [row], cause
