"""A learning rate TF1 reads from a fed placeholder (PPO's annealed ``LR``), fed another
value from the second train step on, on both sides.

The harness feeds one batch at every step, so a TF2 train step that ignores
``batch["lr"]`` and builds its optimizer with the same number passed every rung (a
helper's port did): the one value cannot tell taking the input from matching it. From step
2 the input is halved on both sides, as an annealed rate would move; a port that takes it
still agrees, one that ignores it parts at step 2, and its rows say why.
"""
from __future__ import annotations

import numpy as np

from pgtwin.parity.ladder import Row
from pgtwin.parity.optimizer_config import tf1_rate_reads
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side

FACTOR = 0.5
"""What the fed rate is multiplied by from step 2 on."""


def fed_rate_keys(legacy: TF1Side) -> list[str]:
    """The batch keys fed to the 0-d float placeholders TF1's learning rates read."""
    if legacy.train_op is None:
        return []
    read = tf1_rate_reads(legacy.train_op, ("Placeholder",))
    return [k for k, t in legacy.placeholders.items() if t.op.name in read
            and np.ndim(legacy.feed[t]) == 0 and np.asarray(legacy.feed[t]).dtype.kind == "f"]


def vary_fed_rates(legacy: TF1Side, eager: TF2Side, keys: list[str], where: str
                   ) -> tuple[list[Row], str]:
    """Halve each of ``keys`` on both sides: ``(a passing row saying so, the cause for the
    weights rows that part from here)``."""
    said = []
    for key in keys:
        old = float(np.asarray(legacy.feed[legacy.placeholders[key]]))
        legacy.set_input(key, old * FACTOR)
        eager.set_input(key, old * FACTOR)
        said.append(f"inputs[{key!r}] {old:g} -> {old * FACTOR:g}")
    shown = ", ".join(said)
    row = Row("weights", "fed learning rate", 0.0, 0.0, True,
              f"from this step the harness feeds {shown} to both sides: TF1's learning rate "
              "reads it (a rate your loop anneals and feeds), so a TF2 train step that "
              "ignores it parts here", where)
    cause = (f"from this step TF1's fed learning rate moved ({shown}) on both sides, and "
             "the weights part after agreeing before: the TF2 train step does not take "
             f"{', '.join(f'inputs[{k!r}]' for k in keys)} (an optimizer built with a fixed "
             "rate?): set it from the batch in each step "
             "(optimizer.learning_rate.assign(batch[KEY]))")
    return [row], cause
