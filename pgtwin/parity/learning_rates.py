"""The learning rates, read again before every train step after the first.

A TF1 schedule runs on ``global_step`` (``tf.compat.v1.train.exponential_decay``), a Keras
one on ``optimizer.iterations``; both read equal before step 1 even when their
``decay_steps``, ``decay_rate`` or ``staircase`` differ, so the settings rows cannot see it.
Once a schedule has moved the rate, a momentum optimizer also parts by design:
TF1's ``MomentumOptimizer`` scales its whole accumulated momentum by the current rate
(``a <- m a + g; w <- w - lr_t a``), Keras' SGD puts each step's rate into its velocity
(``v <- m v - lr_t g; w <- w + v``).
"""
from __future__ import annotations

from typing import Any

from pgtwin.parity.ladder import Row
from pgtwin.parity.optimizer_config import keras_optimizer

MOMENTUM_RATE_CHANGE = (
    "the learning rate has changed since step 1, and TF1's MomentumOptimizer multiplies its "
    "whole accumulated momentum by the current rate while Keras' SGD puts each step's rate "
    "into its velocity: the two agree only while the rate is constant, so they part from "
    "the first decayed step by design (compare with a constant rate to check the rest)")
"""The weights rows' note once a schedule has moved a momentum optimizer's learning rate."""


def learning_rate_row(tf1_rate: float | None, optimizer: Any, where: str,
                      fed: list[str] = ()) -> Row | None:
    """A failing row when ``tf1_rate`` (TF1's learning rate now, before a step after the
    first) and the Keras ``optimizer``'s part by more than the relative 1e-6 the settings
    rows use, else None. ``fed``: the placeholders TF1's rate reads (a schedule the
    training loop computes and feeds), which the harness feeds one input at every step."""
    a, b = tf1_rate, keras_optimizer(optimizer)[1].get("learning_rate")
    if a is None or b is None or abs(a - b) <= 1e-6 * max(abs(a), abs(b)):
        return None
    name = type(optimizer).__name__
    why = ("the schedules differ (compare decay_steps, decay_rate and staircase of "
           "tf.compat.v1.train.exponential_decay and keras.optimizers.schedules."
           "ExponentialDecay, or a schedule on one side only)") if not fed else (
        f"TF1's rate is the placeholder {', '.join(fed)}, which the harness feeds the same "
        "input at every step, and the Keras optimizer's schedule has moved its own: a "
        "schedule your loop feeds cannot be compared over steps here; set the Keras rate "
        "from the same input in the train step (optimizer.learning_rate.assign(batch[KEY])) "
        "to compare the rest, or compare over one step (--steps 1)")
    return Row("weights", "optimizer.learning_rate", abs(a - b), abs(a - b) / max(abs(a), abs(b)),
               False, f"before this step TF1's learning rate is {a:g} and {name}'s {b:g}, "
               f"after the same steps: {why}", where)
