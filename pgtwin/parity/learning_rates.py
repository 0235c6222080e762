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
from pgtwin.parity.optimizer_config import TF1_SCHEDULES, keras_optimizer

MOMENTUM_RATE_CHANGE = (
    "the learning rate has changed since step 1, and TF1's MomentumOptimizer multiplies its "
    "whole accumulated momentum by the current rate while Keras' SGD puts each step's rate "
    "into its velocity: the two agree only while the rate is constant, so they part from "
    "the first decayed step by design (compare with a constant rate to check the rest)")
"""The weights rows' note once a schedule has moved a momentum optimizer's learning rate."""


def learning_rate_row(tf1_rate: float | None, optimizer: Any, where: str,
                      fed: list[str] = (), schedules: list[str] = ()) -> Row | None:
    """A failing row when ``tf1_rate`` (TF1's learning rate now, before a step after the
    first) and the Keras ``optimizer``'s part by more than the relative 1e-6 the settings
    rows use, else None. ``fed``: the placeholders TF1's rate reads (a schedule the
    training loop computes and feeds), which the harness feeds one input at every step;
    ``schedules``: the ``tf.compat.v1.train`` schedules it is computed by
    (``optimizer_config.tf1_schedules``), whose settings the note names."""
    a, b = tf1_rate, keras_optimizer(optimizer)[1].get("learning_rate")
    if a is None or b is None or abs(a - b) <= 1e-6 * max(abs(a), abs(b)):
        return None
    name = type(optimizer).__name__
    why = _schedules_differ(schedules, getattr(optimizer, "_learning_rate", None)) \
        if not fed else (
        f"TF1's rate is the placeholder {', '.join(fed)}, which the harness feeds the "
        "batch's value (halved from step 2), and the Keras optimizer's schedule has moved "
        "its own: a schedule your loop feeds cannot be compared over steps here; set the "
        "Keras rate "
        "from the same input in the train step (optimizer.learning_rate.assign(batch[KEY])) "
        "to compare the rest, or compare over one step (--steps 1)")
    return Row("weights", "optimizer.learning_rate", abs(a - b), abs(a - b) / max(abs(a), abs(b)),
               False, f"before this step TF1's learning rate is {a:g} and {name}'s {b:g}, "
               f"after the same steps: {why}", where)


def _with_settings(schedule: Any) -> str:
    """A Keras schedule as it would be written: ``ExponentialDecay(initial_learning_rate=
    0.001, decay_steps=2, decay_rate=0.5, staircase=False)`` (its config, but its name)."""
    try:
        config = {k: v for k, v in schedule.get_config().items() if k != "name"}
    except (NotImplementedError, TypeError, AttributeError):
        config = {}
    return f"{type(schedule).__name__}({', '.join(f'{k}={v!r}' for k, v in config.items())})"


def _schedules_differ(schedules: list[str], keras_rate: Any) -> str:
    """Why the rates part where no placeholder feeds TF1's: the schedules differ, named by
    TF1's (``TF1_SCHEDULES``) and the Keras optimizer's (``keras_rate``, what Keras 3 and
    ``tf_keras`` keep as ``optimizer._learning_rate``: a ``LearningRateSchedule``, which is
    called with the step, or the fixed rate's variable)."""
    keras = type(keras_rate).__name__ if callable(keras_rate) \
        and hasattr(keras_rate, "get_config") else ""
    if not schedules:
        return ("the schedules differ: TF1's rate is fixed" + (
            f", the Keras optimizer's a {keras}" if keras else "") + " (a schedule on one "
                "side only)")
    tf1_name, keras_name, settings = TF1_SCHEDULES[schedules[0]]
    mine = (f"the Keras optimizer's rate is fixed: give it "
            f"keras.optimizers.schedules.{keras_name}" if not keras else
            f"the Keras optimizer's is {_with_settings(keras_rate)}" + (
                "" if keras == keras_name else f", where {keras_name} computes TF1's"))
    return (f"the schedules differ: TF1's rate is tf.compat.v1.train.{tf1_name}, {mine}; "
            f"compare their {settings}")
