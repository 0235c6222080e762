"""The weights rung's optimizer groups, judged: their settings rows and how their pairs'
weights are judged after each step (:mod:`pgtwin.parity.optimizer_groups` forms them).

Per group: TF1's apply-op settings against its Keras optimizer's (read before the first
step, or after it for an optimizer the step made), the float32 tolerance where TF1 rounded
float64 settings, and the causes a weights row that parts is given: an RMSProp start, a
clipping one side does, two optimizers swapped or one shared, a schedule that moved the
rates, an optimizer made anew or counting several iterations in a step.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pgtwin.parity.ladder import Row
from pgtwin.parity.learning_rates import MOMENTUM_RATE_CHANGE, learning_rate_row
from pgtwin.parity.optimizer_config import (clipping_hint, drift_hint, float32_rounding,
                                            keras_optimizer, optimizer_rows, rounded_to_float32,
                                            settings_only, tf1_clipping, tf1_rate_reads,
                                            tf1_schedules)
from pgtwin.parity.optimizer_groups import NONE, OptimizerGroup, form_groups
from pgtwin.parity.parity_rows import tolerances
from pgtwin.parity.state_notes import EMA_SHADOW
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side


def first_step_groups(legacy: TF1Side, eager: TF2Side, pairs: list[tuple[str, str]],
                       tf1_before: Mapping[str, tuple[str, dict]],
                       keras_before: dict[int, tuple[str, dict]], drifts: dict[int, str],
                       made: list[Any], dtype: str, rtol: float, atol: float,
                       ctx: str, unclipped: set[str] = frozenset()) -> list[Judged]:
    """After the first step: the optimizer groups (:func:`form_groups`), judged.

    ``made``: Keras optimizers the first step made (``self.optimizer = Adam(...)`` in the
    train step). Their settings are read now, and so are TF1's for the pairs they step: a
    schedule has moved both sides' rates by one step alike. ``unclipped``: see
    :func:`judge`."""
    owners = {b: eager.owner_of(b) for _, b in pairs}
    tf1_settings = dict(tf1_before)
    if made:
        keras_before.update({id(o): keras_optimizer(o) for o in made})
        drifts.update({id(o): drift_hint("rmsprop", o, stepped=True) for o in made})
        tf1_now = legacy.optimizer_by_variable()
        lazy = {id(o) for o in made}
        tf1_settings.update({a: tf1_now[a] for a, b in pairs
                             if id(owners[b]) in lazy and a in tf1_now})
    groups = form_groups(pairs, tf1_settings, keras_before, owners)
    return swapped([judge(legacy, eager, g, drifts, dtype, rtol, atol, ctx, unclipped)
                    for g in groups])


def iterations(optimizer: Any) -> int:
    """A Keras optimizer's ``iterations`` now (0 where it has none)."""
    count = getattr(optimizer, "iterations", None)
    return int(np.asarray(count)) if count is not None else 0


def iterations_note(optimizer: Any, counted: Mapping[int, int]) -> str:
    """The weights rows' cause when the Keras ``optimizer`` counted more than one iteration
    in the step just run (``counted``: each optimizer's before it; one made in the step
    counted from 0), else ''."""
    if optimizer is None:
        return ""
    taken = iterations(optimizer) - counted.get(id(optimizer), 0)
    if taken <= 1:
        return ""
    return (f"{type(optimizer).__name__} counted {taken} iterations in one train step, "
            "where TF1's train_op takes one: the TF2 step applied gradients "
            f"{taken} times (model.fit over batches of its batch_size, 32 by default, or "
            "with epochs > 1; apply_gradients once per part of the model), so its weights, "
            "moments and step count (Adam's bias correction, a schedule) run ahead of TF1's: "
            "apply all the gradients in one call (with model.fit: batch_size=len(batch) and "
            "epochs=1), or give each part its own optimizer")


def remade_note(made: list[Any], step: int) -> str:
    """The weights rows' cause when the train step made new Keras optimizers at ``step``."""
    names = ", ".join(type(o).__name__ for o in made)
    return (f"the TF2 train step made a new Keras optimizer ({names}) at step {step}: its "
            "state (Adam's moments, iterations) starts again at every new one, while TF1's "
            "optimizer keeps its own; make the optimizer once, outside the train step")


@dataclass
class Judged:
    """How one optimizer group's pairs are judged (:func:`judge`).

    Attributes:
      rows: its settings rows, without the group's label.
      cause, step_cause: the weights rows' note where they part (``step_cause``: with what
        a schedule has changed since the first step).
      hint: what the weights rows' tolerance says (float64 settings rounded to float32).
      rtol, atol: the weights rows' tolerances.
      clipping: the note of a clipping only one side does.
      drift: the note of RMSProp's accumulator start, where both sides use it.
    """

    group: OptimizerGroup
    rows: list[Row]
    rtol: float
    atol: float
    cause: str = ""
    step_cause: str = ""
    hint: str = ""
    clipping: str = ""
    drift: str = ""

    def rejudge(self, rows: list[Row]) -> None:
        """Take ``rows`` as the settings rows, and the causes from them (a learning rate
        the train step sets from the batch passes once read after the first step, and the
        weights rows no longer blame it)."""
        self.rows = rows
        self.cause = self.step_cause = settings_cause(rows, self.drift, self.clipping)

    def said_else(self, note: str) -> None:
        """Give ``note`` as the cause where no other is known."""
        if note and not self.cause:
            self.cause = note
        if note and not self.step_cause:
            self.step_cause = note

    def said_first(self, note: str) -> None:
        """Put ``note`` (a cause the step showed: dropout, an optimizer made anew) before
        the others, once."""
        if note and note not in self.step_cause:
            self.cause = "; ".join(x for x in (note, self.cause) if x)
            self.step_cause = "; ".join(x for x in (note, self.step_cause) if x)


NO_KERAS_OPTIMIZER = ("no Keras optimizer found on the TF2 object to compare settings with "
                      "(TF2Program.optimizer names it); compared through the weights")
"""The settings row where the TF2 object holds no Keras optimizer."""


def judge(legacy: TF1Side, eager: TF2Side, group: OptimizerGroup, drifts: Mapping[int, str],
           dtype: str, rtol: float, atol: float, ctx: str,
           unclipped: set[str] = frozenset()) -> Judged:
    """The group's settings rows (TF1's ``train_op`` against its Keras optimizer) and how
    its weights are judged. ``drifts``: :func:`drift_hint` per Keras optimizer, read before
    the first step. ``unclipped``: the TF1 names whose gradient TF1's clipping left as it
    was at the first step (:meth:`TF1Side.unclipped`): where that is all of the group's,
    its clipping rows warn that this batch tests no clipping."""
    if group.keras is None:
        held = ", ".join(type(o).__name__ for o in eager.optimizers)
        note = NO_KERAS_OPTIMIZER if not eager.optimizers else (
            "neither side's step updates these variables (no apply op of TF1's train_op, "
            "no Keras optimizer holds them): compared through the weights"
            if group.tf1_kind == "none" else
            f"none of the TF2 object's Keras optimizers ({held}) holds these variables "
            "after the first step; compared through the weights")
        return Judged(group, [Row("weights", "optimizer", 0.0, 0.0, True, note, ctx)],
                       rtol, atol)
    if group.tf1_kind == "none":
        return Judged(group, [Row(
            "weights", "optimizer", float("inf"), float("inf"), False,
            f"TF1's train_op updates none of these variables (no apply op: left out of its "
            f"var_list, or trained by another op) and the TF2 train step steps them with "
            f"{type(group.keras).__name__}: apply gradients to the variables TF1 trains "
            "(or give TF1Program.train_op every train op)", ctx)], rtol, atol)
    trained = legacy.trained
    tf1_clip = tf1_clipping(legacy.train_op, legacy.loss, [trained[n] for n in group.tf1_names])
    tf1_kind, tf1_settings = group.tf1_kind, group.tf1_settings
    settings = group.keras_settings
    at = legacy.clip_threshold(group.tf1_names) if tf1_clip is not None else None
    rows = optimizer_rows(tf1_kind, tf1_settings, group.keras_kind, settings,
                          ("its train_op", type(group.keras).__name__), ctx, tf1_clip, at)
    if tf1_clip is not None and set(group.tf1_names) <= unclipped:
        rows = [_idle_clip(r, tf1_clip[0], at) for r in rows]
    if settings.get("use_ema") and any(n.endswith("ExponentialMovingAverage")
                                       for n in legacy.graph_variables()):
        rows = [r if r.item != "optimizer.use_ema" else Row(
            r.rung, r.item, r.max_abs, r.max_rel, False,
            f"TF1 keeps {EMA_SHADOW.replace(': Keras', ', and Keras', 1)}", r.context)
            for r in rows]
    clipping = clipping_hint(tf1_clip, settings)
    drift = drifts.get(id(group.keras), "") if tf1_kind == group.keras_kind == "rmsprop" else ""
    cause = settings_cause(rows, drift, clipping)
    hint = ""
    if dtype == "float64" and rounded_to_float32(tf1_settings, settings):
        rtol, atol = tolerances("float32")["weights"]
        hint = "compared at float32 tolerance: " + float32_rounding(tf1_kind, tf1_settings,
                                                                    settings)
    return Judged(group, rows, rtol, atol, cause, cause, hint, clipping, drift)


def settings_cause(rows: list[Row], drift: str, clipping: str) -> str:
    """The weights rows' cause from a group's settings rows that fail, RMSProp's drift and
    a clipping one side lacks."""
    differ = [settings_only(r.note) for r in rows if not r.ok]  # a setting that differs
    differing = f"the optimizers' settings differ ({'; '.join(differ)})" if differ else ""
    return "; ".join(x for x in (differing, drift, clipping) if x)


CLIPPING_ITEMS = ("optimizer.clipping", "optimizer.clipnorm", "optimizer.global_clipnorm",
                  "optimizer.clipvalue")
"""The settings rows about gradient clipping."""


def _idle_clip(row: Row, what: str, at: float | None) -> Row:
    """``row`` warned, where it is a passing clipping row, that TF1's clip did not act on
    the batch: a port without it, or with another threshold, passes there."""
    if row.item not in CLIPPING_ITEMS or not row.ok:
        return row
    at_text = "" if at is None else f" at {at:g}"
    return Row(row.rung, row.item, row.max_abs, row.max_rel, True,
               f"WARNING TF1 clips the gradients {what}{at_text}, but on this batch the clip "
               "does not act (the gradients its apply ops take equal the loss's), so the "
               "train steps test no clipping: a port without it, or with another threshold, "
               "passes here; compare on a batch whose gradients TF1 clips as well "
               f"({row.note})", row.context)


def swapped(judged: list[Judged]) -> list[Judged]:
    """``judged`` with the first failing settings row of each group told its cause where
    another group explains it: the group's Keras optimizer has that group's TF1 settings
    (the TF2 step gives each network the other's optimizer), or steps both groups (one
    Keras optimizer where TF1 has two)."""
    for j in judged:
        g = j.group
        bad = next((i for i, r in enumerate(j.rows) if not r.ok), None)
        if bad is None or g.keras is None or g.tf1_kind == "none":
            continue
        shared = next((h.group for h in judged if h is not j and h.group.keras is g.keras
                       and h.group.tf1_kind != "none"), None)
        other = next((h.group for h in judged if h is not j and h.group.keras is not g.keras
                      and all(r.ok for r in optimizer_rows(
                          h.group.tf1_kind, h.group.tf1_settings, g.keras_kind,
                          g.keras_settings, ("", ""), ""))), None)
        if shared is not None:
            cause = (f"the TF2 side steps {g.label} and {shared.label} with one Keras "
                     f"optimizer, TF1 with two: give {g.label} a Keras optimizer of its own")
        elif other is not None:
            cause = ("the TF2 train step swaps two optimizers: the Keras optimizer that steps "
                     f"{g.label} has the settings TF1 gives {other.label}")
        else:
            continue
        row = j.rows[bad]
        j.rows[bad] = Row(row.rung, row.item, row.max_abs, row.max_rel, False,
                          f"{cause} ({settings_only(row.note)})", row.context)
    return judged


def rates_now(legacy: TF1Side, judged: list[Judged], where: str) -> list[Row]:
    """Before a step after the first: a failing learning-rate row of the first group whose
    rates part (:func:`learning_rate_row`), else none, with each momentum group's
    ``step_cause`` told once its rate has moved (:data:`MOMENTUM_RATE_CHANGE`)."""
    now = legacy.optimizer_by_variable()
    for j in judged:
        g = j.group
        if g.keras is None or g.tf1_kind != g.keras_kind:
            continue
        rate = now.get(g.tf1_names[0], NONE)[1].get("learning_rate")
        fed = sorted(tf1_rate_reads(legacy.train_op, ("Placeholder",)))
        row = learning_rate_row(rate, g.keras, where, fed, tf1_schedules(legacy.train_op))
        if row is not None:
            return g.named([row])
        if g.keras_kind == "sgd" and g.keras_settings.get("momentum") \
                and rate != g.tf1_settings.get("learning_rate"):
            j.step_cause = "; ".join(x for x in (j.cause, MOMENTUM_RATE_CHANGE) if x)
    return []


def rates_after_first_step(rows: list[Row], group: OptimizerGroup, where: str) -> list[Row]:
    """``rows`` (a group's settings rows) with a failing ``optimizer.learning_rate`` row
    judged again on the rate the group's Keras optimizer holds after the first step: a
    train step may set it from the batch (``optimizer.learning_rate.assign(batch["lr"])``,
    as annealed-rate PPO code does), so the rate read before any step is not the one the
    step used."""
    index = next((i for i, r in enumerate(rows)
                  if r.item == "optimizer.learning_rate" and not r.ok), None)
    if index is None or group.keras is None:
        return rows
    _, settings = keras_optimizer(group.keras)
    a, b = float(group.tf1_settings.get("learning_rate", 0.0)), settings.get("learning_rate")
    if b is None or abs(a - b) > 1e-6 * max(abs(a), abs(b)):
        return rows
    old = rows[index]
    return rows[:index] + [Row(old.rung, old.item, 0.0, 0.0, True,
                               f"{old.note} before the first step; the TF2 train step sets "
                               f"{b:g}, TF1's rate (read after it)", where)] + rows[index + 1:]
