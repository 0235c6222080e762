"""The weights rung: both programs' own train steps, then every pair after each step.

Where the optimizers are grouped (:mod:`pgtwin.parity.optimizer_judging`), step 1's rows
start with the gradient each train step took, read from Adam's first moment, and each
weights row that parts is told its cause: one side only moved it, a known difference of
the optimizers, a state update (moving statistics, a target network's copy), dropout in
the step, or the rungs before.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from pgtwin_core.errors import raised_at

from pgtwin.parity.fed_scalars import fed_rate_keys, stepped_scalar_keys, vary_scalars
from pgtwin.parity.ladder import FOLLOWS_PREFIX, Row, common_factor, compare_arrays
from pgtwin.parity.model_state import COPY_MOVED, STATE_CAUSE, STATE_MOVED
from pgtwin.parity.optimizer_config import (drift_hint, keras_optimizer, tf1_clipping,
                                            tf1_step_races, velocities_built)
from pgtwin.parity.optimizer_judging import (Judged, first_step_groups, iterations,
                                             iterations_note, rates_after_first_step,
                                             rates_now, remade_note)
from pgtwin.parity.optimizer_pairs import optimizer_factories
from pgtwin.parity.output_notes import random_step_note
from pgtwin.parity.parity_rows import gradient_rows
from pgtwin.parity.state_notes import bessel_note, copy_rate_note, momentum_note
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side
from pgtwin.parity.variable_mapping import VariableMapping


STEP_FRACTION = 1e-2
"""The weights rung's absolute tolerance, at most this fraction of a variable's larger step:
Adam's float32 noise measured up to 1.2e-5 after 5 steps of ~1e-2 (docs/migration.md,
"Tolerances"), a thousandth of a step."""


def weights_rung(legacy: TF1Side, eager: TF2Side, mapping: VariableMapping,
                  state: VariableMapping, steps: int, optimizer: Any, dtype: str, rtol: float,
                  atol: float, ctx: str, step_scaled: bool = True,
                  stuck: set[str] = frozenset(),
                  grad_tol: tuple[float, float] = (0.0, 0.0),
                  earlier_ok: bool = True) -> list[Row]:
    """The optimizers' rows, then the pairs and the state pairs after each step (the first
    step that parts). ``stuck``: TF1 names whose TF2 gradient is None, which no TF2 step
    can move (their rows say so, not that the step updates the wrong variables).

    The pairs are judged per optimizer group (:mod:`pgtwin.parity.optimizer_groups`: an
    actor's and a critic's optimizer), formed once the first step has built the Keras
    optimizers, with the settings each side had before it.

    Where both sides step with Adam, the first step's rows start with the gradient each
    train step took, read from Adam's first moment (:func:`_train_gradient_rows`, at the
    gradients rung's ``grad_tol``): a first Adam step moves each weight by about
    ``lr sign(g)``, so the weights after it hide a train step whose gradient is wrong.

    ``step_scaled`` (the default tolerances): a pair's ``atol`` is at most
    :data:`STEP_FRACTION` of its larger step (see :func:`_weight_row`). ``earlier_ok``: the
    outputs, loss and gradients rungs passed (else a train-step gradient row that parts
    says it follows from them, :data:`FOLLOWS_EARLIER`)."""
    legacy_step = legacy.train_op is not None and optimizer is None  # the user's own
    rows = _step_setup(legacy, eager, optimizer, dtype, ctx)
    if any(not r.ok and r.item == "train step" for r in rows) or \
            (legacy.train_op is None and not eager.has_step()):  # no step to take
        return rows
    tf1_before = legacy.optimizer_by_variable()
    keras_before = {id(o): keras_optimizer(o) for o in eager.optimizers}
    drifts = {id(o): drift_hint("rmsprop", o) for o in eager.optimizers}  # velocities now
    unbuilt = [o for o in eager.optimizers if not velocities_built(o)]  # built in the step
    adam = any(k == "adam" for k, _ in tf1_before.values())  # a Keras one may come lazily
    clips = legacy_step and tf1_clipping(legacy.train_op, legacy.loss) is not None
    pairs = [(p.tf1.name, p.tf2.name) for p in mapping.pairs]
    judged: list[Judged] = []
    random = ""  # why the steps would part by design (dropout in the train step)
    took_same = False  # both train steps took the same gradient at step 1 (Adam's m)
    scalars = stepped_scalar_keys(legacy) if legacy_step and steps > 1 else []
    rate_moves = bool(set(scalars) & set(fed_rate_keys(legacy)))  # at step 2
    varied = ""
    for step in range(1, steps + 1):
        where = ", ".join(x for x in (ctx, f"step {step}/{steps}") if x)
        if step == 2 and scalars:  # the scalars TF1's loop feeds: does the TF2 step take them?
            said, varied = vary_scalars(legacy, eager, scalars, where)
            rows = rows + said
        if step > 1 and not (step == 2 and rate_moves):
            # a schedule moves the rates between steps (a fed rate just moved is left to
            # the weights rows)
            rate_rows = rates_now(legacy, judged, where)
            if rate_rows:
                return rows + rate_rows
        before1, before2 = _all_values(legacy), _all_values(eager)
        counted = {id(o): iterations(o) for o in eager.optimizers}
        moments = (legacy.adam_moments(), eager.adam_moments()) if step == 1 and adam else None
        unclipped = legacy.unclipped() if step == 1 and clips else set()  # a clip acts?
        failure = _run_steps(legacy, eager, where)
        made = eager.refresh_optimizers()  # a train step that makes its optimizer
        if step == 1:  # the Keras optimizers know their variables now
            drifts.update({id(o): drift_hint("rmsprop", o, stepped=True) for o in unbuilt})
            judged = first_step_groups(legacy, eager, pairs, tf1_before, keras_before,
                                        drifts, made, dtype, rtol, atol, ctx, unclipped)
            for j in judged:  # a rate the step sets from the batch, read after it
                after = rates_after_first_step(j.rows, j.group, where)
                if after != j.rows:
                    j.rejudge(after)
            # a model with dropout may draw masks in the step: the cause where nothing
            # else is known (not where an earlier rung or a setting already explains it: it
            # is only a guess, whether the step calls the model with training=True)
            random = random_step_note(eager) if earlier_ok else ""
            for j in judged:
                j.said_else(random)
            for j in judged:
                rows += j.group.named(j.rows)
        elif made:
            for j in judged:  # its state (Adam's moments, iterations) starts again
                j.said_first(remade_note(made, step))
        if failure is not None:
            return rows + [failure]
        after1, after2 = _all_values(legacy), _all_values(eager)
        many = ""  # apply_gradients called more than once a step
        for j in judged:
            note = iterations_note(j.group.keras, counted)
            j.said_first(note)
            many = many or note
        by_name = {n: j for j in judged for n in j.group.tf1_names}
        gradient_rows = [] if moments is None else [
            r for j in judged if j.group.tf1_kind == j.group.keras_kind == "adam"
            for r in _train_gradient_rows(
                [(a, b) for a, b in pairs if by_name[a] is j], moments,
                (legacy.adam_moments(), eager.adam_moments()),
                (j.group.tf1_settings["beta_1"], j.group.keras_settings["beta_1"]),
                *grad_tol, where, j.clipping)]
        if not earlier_ok:  # the loss's gradient parts already: the steps' follows
            gradient_rows = [r if r.ok else Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                                                FOLLOWS_EARLIER, r.context)
                             for r in gradient_rows]
        gradient_rows = [r if r.ok or r.note or not random else
                         Row(r.rung, r.item, r.max_abs, r.max_rel, False, random, r.context)
                         for r in gradient_rows]
        if many:  # Adam's m then holds several steps' gradients: no one gradient to read
            gradient_rows = [r if r.ok else Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                                                many, r.context) for r in gradient_rows]
        scaled = "" if gradient_rows else _scaled_step_note(
            [(a, b) for a, b in pairs if not by_name[a].step_cause],
            before1, after1, before2, after2)
        step_rows = [_weight_row(a, b, before1, after1, before2, after2, by_name[a].rtol,
                                 by_name[a].atol, where, by_name[a].hint,
                                 by_name[a].step_cause or scaled,
                                 step_scaled, STUCK_MOVED if a in stuck else WEIGHT_MOVED)
                     for a, b in pairs]
        state_tol = (max(j.rtol for j in judged), max(j.atol for j in judged)) if judged \
            else (rtol, atol)
        step_rows += [_state_row(legacy, eager, p.tf1.name, p.tf2.name, before1, after1,
                                 before2, after2, *state_tol, where, step_scaled)
                      for p in state.pairs]
        if step == 1:
            took_same = bool(gradient_rows) and all(r.ok for r in gradient_rows)
        elif took_same:  # Adam's steps from equal first gradients: last bits amplified
            adam_names = {n for j in judged if j.group.tf1_kind == j.group.keras_kind == "adam"
                          for n in j.group.tf1_names}
            step_rows = [_adam_noise(r) if r.item.split(" -> ")[0] in adam_names else r
                         for r in step_rows]
        if varied and step == 2:
            step_rows = _noted(step_rows, varied)
        if not all(r.ok for r in gradient_rows + step_rows) and legacy_step:
            race = _race_note(legacy)  # TF1's own step is no one computation
            gradient_rows, step_rows = _noted(gradient_rows, race), _noted(step_rows, race)
        if step == 1 and earlier_ok and all(r.ok for r in gradient_rows + step_rows):
            gradient_rows += _gradients_after_first_step(legacy, eager, pairs, *grad_tol,
                                                         where)
        rows = rows + gradient_rows  # step 1's own checks, kept whatever follows
        if not all(r.ok for r in gradient_rows + step_rows) or step == steps:
            return rows + step_rows
    return rows


MOVED_GRADIENTS = (
    "the loss's gradients agreed at the starting weights and part at the weights after the "
    "first step (TF1's, loaded into both sides): a term of the loss that is 0, with no "
    "gradient, at the start differs (an L2 penalty on the biases, which start at 0, on one "
    "side only; a penalty on the weights' distance from where they started)")
"""The note of a gradient row that parts at the weights after step 1."""


def _gradients_after_first_step(legacy: TF1Side, eager: TF2Side, pairs: list[tuple[str, str]],
                                rtol: float, atol: float, where: str) -> list[Row]:
    """The loss's gradient and the named outputs on both sides again, at TF1's weights after
    its first step, loaded into the TF2 side for the call (its own put back after), at the
    gradients rung's tolerances: the starting weights hide a term that vanishes there (L2 on
    biases that start at 0; a KL taken the other way round, 0 with equal gradients where
    the policy is the old one), and Adam's normalised steps hide it in the weights."""
    tf1_weights, own = legacy.values(), eager.values()
    eager.load({b: tf1_weights[a] for a, b in pairs})
    try:
        tf2_out, tf2_grads = eager.run()
    finally:
        eager.load(own)
    tf1_grads = legacy.gradients()
    found = gradient_rows({a: tf1_grads[a] for a, _ in pairs},
                          {a: tf2_grads[b] for a, b in pairs}, rtol, atol, where)
    to_tf2 = dict(pairs)
    tf1_out = legacy.run()
    outputs = [compare_arrays("weights", f"{k}: output after step 1", tf1_out[k], tf2_out[k],
                              rtol, atol, where)
               for k in tf1_out if k != "loss" and k in tf2_out]
    return [Row("weights", f"{r.item} -> {to_tf2[r.item]}: loss gradient after step 1",
                r.max_abs, r.max_rel, r.ok, "" if r.ok else MOVED_GRADIENTS, r.context)
            for r in found] + [r if r.ok else Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                                                  MOVED_OUTPUTS, r.context) for r in outputs]


MOVED_OUTPUTS = (
    "the outputs agreed at the starting weights and part at the weights after the first step "
    "(TF1's, loaded into both sides): a term equal at the start differs, such as a KL taken "
    "the other way round (both are 0, with equal gradients, where the new policy is the old "
    "one), or a ratio exp(logp - old_logp) against its linearisation (both 1 there)")
"""The note of an output row that parts at the weights after step 1."""


ADAM_NOISE = (
    "both train steps took the same gradients at step 1 (those rows passed), and Adam "
    "divides each gradient by its own running scale (m / sqrt(v)): where a gradient is "
    "near zero (a ReLU network's filters), the last-bit differences between TF1's graph and "
    "the TF2 code (in float64, TF1's float32-rounded settings) grow into a sizeable part of a "
    "step within a few steps; compare over fewer steps (steps=1 or 2) to tell this from a "
    "real difference")
"""The cause of a later Adam step's weights parting, with no other cause, after equal
first gradients."""


def _adam_noise(row: Row) -> Row:
    """``row`` with :data:`ADAM_NOISE` as its cause where it parts with none given (its
    note only says how far apart the weights are)."""
    if row.ok or not row.note.startswith("the weights part by"):
        return row
    return Row(row.rung, row.item, row.max_abs, row.max_rel, False,
               f"{ADAM_NOISE}; {row.note}", row.context)


def _race_note(legacy: TF1Side) -> str:
    """The cause said first where the user's ``train_op`` writes variables its other
    gradients read with no order between them (:func:`tf1_step_races`), else ''."""
    races = tf1_step_races(legacy.train_op)
    if not races:
        return ""
    written, reader = races[0]
    more = f", and {len(races) - 1} more such pairs" if len(races) > 1 else ""
    return (f"TF1's train_op writes {written} while another of its ops (the gradient or the "
            f"update of {reader}) reads it, with no control dependency between the two{more}: "
            "TF1 runs each read "
            "before or after the write as it pleases (a race), so its step is no one "
            "computation a port can match; order its train ops (with "
            "tf.control_dependencies([train_pi]): train_q = ..., or an average's "
            "ema.apply(...) under the minimize it follows) as the TF2 train step orders "
            "them, then compare")


def _noted(rows: list[Row], note: str) -> list[Row]:
    """``rows`` with ``note`` said first on each that fails."""
    if not note:
        return rows
    return [r if r.ok else Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                               "; ".join(x for x in (note, r.note) if x), r.context)
            for r in rows]


def _scaled_step_note(pairs: list[tuple[str, str]], before1, after1, before2,
                      after2) -> str:
    """The weights rows' cause where TF2's step of every pair (``(TF1 name, TF2 name)``) is
    TF1's times one common factor c != 1 (to 1e-3 of its norm: float32 steps), else ''.
    Without Adam's moments to read (SGD, momentum), a step c times as long is a loss or a
    learning rate c times TF1's."""
    if not pairs:
        return ""
    d1 = np.concatenate([np.ravel(np.asarray(after1[a], np.float64) - before1[a])
                         for a, _ in pairs])
    d2 = np.concatenate([np.ravel(np.asarray(after2[b], np.float64) - before2[b])
                         for _, b in pairs])
    c = common_factor(d1, d2, 1e-3)
    if c is None or abs(c - 1.0) <= 1e-3:
        return ""
    return (f"the TF2 train step moved every weight {c:.4g}x as far as TF1's, all of it: a "
            "loss scaled in the train step (a mean against a sum, a coefficient) or a "
            f"learning rate {c:.4g}x TF1's")


FOLLOWS_EARLIER = (f"{FOLLOWS_PREFIX} the outputs, loss or gradients that parted on an "
                   "earlier rung: a train step applies the loss's gradient, so fix those first")
"""The note of a train-step gradient row that parts where an earlier rung parted."""

TRAIN_GRADIENT = ("the gradient the train step took (from Adam's first moment) parts: "
                  "where the gradients rung passed, the TF2 train step minimises another "
                  "loss than TF2Program.loss (a term such as the entropy bonus or the value "
                  "loss left out, added twice, or scaled: Adam's steps hide a scale) or "
                  "applies other gradients (clipped, or of other variables)")
"""The note of a train-step gradient row that parts (:func:`_train_gradient_rows`)."""


def _train_gradient_rows(pairs: list[tuple[str, str]], before: tuple[dict, dict],
                         after: tuple[dict, dict], beta_1: tuple[float, float], rtol: float,
                         atol: float, where: str, clipping: str) -> list[Row]:
    """Per pair ``(TF1 name, TF2 name)`` with Adam slots on both sides: the gradient each
    side's first train step applied, ``g = (m_after - beta_1 m_before) / (1 - beta_1)``
    (Adam's first-moment update solved for g; a Keras slot not built before the step was
    0), from the two sides' m ``before`` and ``after`` it, with a note where they part
    (:func:`_train_gradient_note`: ``clipping``, the note of a clipping only TF1's
    graph does, where the two differ by one common factor). None for a pair
    where either side has no slot, or a step left a side's m as it was (it applied no
    gradient to the variable: its weights row names the side that did not move it)."""
    (before1, before2), (after1, after2) = before, after
    rows, taken = [], []
    for a, b in pairs:
        if a not in after1 or b not in after2 or any(
                np.array_equal(after[n], before.get(n, np.zeros_like(after[n])))
                for after, before, n in ((after1, before1, a), (after2, before2, b))):
            continue  # a step that left m as it was applied no gradient: the weights say so
        g1, g2 = ((np.asarray(after[n], np.float64)
                   - beta * np.asarray(before.get(n, 0.0), np.float64)) / (1.0 - beta)
                  for after, before, n, beta in ((after1, before1, a, beta_1[0]),
                                                 (after2, before2, b, beta_1[1])))
        rows.append(compare_arrays("weights", f"{a} -> {b}: train step's gradient", g1, g2,
                                   rtol, atol, where))
        taken.append((g1, g2))
    if all(r.ok for r in rows):
        return rows
    note = _train_gradient_note(taken, clipping)
    return [r if r.ok else Row(r.rung, r.item, r.max_abs, r.max_rel, False, note, where)
            for r in rows]


def _train_gradient_note(taken: list[tuple[np.ndarray, np.ndarray]], clipping: str) -> str:
    """Why the train steps' gradients part, from all of them ``(TF1's, TF2's)``: where TF2's
    is TF1's times one common factor c (to 1e-6 of its norm), a clipping only TF1 does
    (c > 1, with ``clipping`` said) or a scaled loss; else :data:`TRAIN_GRADIENT`."""
    g1 = np.concatenate([a.ravel() for a, _ in taken])
    g2 = np.concatenate([b.ravel() for _, b in taken])
    if not (np.any(g1) and np.any(g2)):
        return TRAIN_GRADIENT
    c = common_factor(g1, g2, 1e-6)
    common = c is not None
    factor = f"the TF2 train step's gradient is {c:.4g}x TF1's, all of it: " if common else ""
    if clipping:  # the two sides clip differently: the likeliest cause, said first
        return factor + clipping if common else (
            f"{clipping} (the gradients the two train steps took part, read from Adam's m)")
    if not common:
        return TRAIN_GRADIENT
    return (factor + "a loss scaled in the train step (a mean against a sum, a coefficient), "
            "or a clipping one side does (Adam's steps hide a scale: only its m shows it)")


def _step_setup(legacy: TF1Side, eager: TF2Side, optimizer: Any, dtype: str,
                ctx: str) -> list[Row]:
    """Give each side its train step: the user's own, else the restated ``optimizer``."""
    if legacy.train_op is None and not eager.has_step():
        if optimizer is None:  # nothing to step: what was compared stands (TRPO's loss)
            return [Row("weights", "train step", 0.0, 0.0, True,
                        "WARNING no train steps compared: neither side has one (give "
                        "TF1Program.train_op and TF2Program.train_step, or optimizer, to "
                        "compare them; steps=0 says none are wanted)", ctx)]
        make_tf1, make_keras = optimizer_factories(optimizer, dtype)
        legacy.restate_optimizer(make_tf1)
        eager.set_optimizer(make_keras())
        return []
    if legacy.train_op is None or not eager.has_step():
        missing = "TF1Program.train_op" if legacy.train_op is None else \
            "TF2Program.train_step (or optimizer)"
        return [Row("weights", "train step", float("inf"), float("inf"), False,
                    f"only one side has a train step: give {missing} too, so both sides' "
                    "own optimizer code is compared (or steps=0)", ctx)]
    fed = legacy.gradient_feed_note()
    return [Row("weights", "train step", 0.0, 0.0, True, fed, ctx)] if fed else []


def _run_steps(legacy: TF1Side, eager: TF2Side, where: str) -> Row | None:
    """One step on each side; a failing row naming the side whose step raised, else None."""
    for side, step in (("TF1 train_op", legacy.step), ("TF2 train step", eager.step)):
        try:
            step()
        except Exception as err:  # noqa: BLE001  (the user's code: reported, not hidden)
            empty = any(getattr(o, "built", False) and not getattr(o, "_trainable_variables",
                                                                  [None])
                        for o in eager.optimizers)
            at = raised_at(err)
            return Row("weights", "train step", float("inf"), float("inf"), False,
                       f"the {side} raised {type(err).__name__}"
                       + (f" in {at}" if at else "") + f": {_error_text(err, empty)}", where)
    return None


UNKNOWN_VARIABLE = ("a Keras optimizer is built on the variables of its first "
                    "apply_gradients, and this one was given others later (one optimizer "
                    "applied to two models' variables in two calls): build it on all of them "
                    "first (optimizer.build(variables)), or give each model its own")
"""The cause said before Keras 3's ``Unknown variable`` error from ``apply_gradients``."""


EMPTY_OPTIMIZER = ("the Keras optimizer was built on no variables: optimizer.build ran on an "
                   "empty list (model.build(shape) on a subclassed model whose layers make "
                   "their weights on the first call makes none): call the model on an input "
                   "before optimizer.build(model.trainable_variables)")
"""The cause said before ``Unknown variable`` where an optimizer holds no variables."""


def _error_text(err: Exception, empty_optimizer: bool = False) -> str:
    """What a raising step said, without the values a Keras variable's repr prints (a
    whole weight matrix), and with the cause first where it is known
    (``empty_optimizer``: a built Keras optimizer of the TF2 side holds no variables)."""
    text = re.sub(r", value=[^>]*>", ">", str(err))
    text = text if len(text) <= 400 else text[:400] + " ..."
    if text.startswith("Unknown variable"):
        return f"{EMPTY_OPTIMIZER if empty_optimizer else UNKNOWN_VARIABLE} ({text})"
    return text


WEIGHT_MOVED = ("the TF2 train step did not change this variable, TF1's train_op did: does "
                "it apply gradients to the right variables (model.trainable_variables)?",
                "the TF2 train step changed this variable, TF1's train_op did not: does it "
                "update variables that TF1 keeps fixed (its var_list)?")
"""A weights row's note when only TF1's step moved the variable, and when only TF2's did."""

STUCK_MOVED = ("its TF2 gradient is None (the gradients rung): the TF2 loss does not reach "
               "it, so no train step can move it", WEIGHT_MOVED[1])
"""The same, for a variable whose TF2 gradient is None."""


def _moved_or_still(before: np.ndarray, after: np.ndarray) -> tuple[bool, bool]:
    """``(moved, still)`` of one side's variable over a step: its largest change is over 8
    units in the last place of its largest value (more than rounding makes), or at most 2
    (an average updated before the step it should follow moves by its rounding only);
    neither in between."""
    w = np.asarray(after)
    if not w.size:
        return False, True
    ulp = float(np.spacing(np.max(np.abs(w)).astype(w.dtype)))
    change = largest_change((before, after))
    return change > 8 * ulp, change <= 2 * ulp


def step_atol(atol: float, step: float) -> float:
    """The weights rung's ``atol`` for a variable whose larger step is ``step``: at most
    :data:`STEP_FRACTION` of it (both harness paths)."""
    return min(atol, STEP_FRACTION * step)


def largest_change(*before_after: tuple[np.ndarray, np.ndarray]) -> float:
    """The largest absolute change of any element over the ``(before, after)`` pairs: a
    variable's step, the larger of the two sides'."""
    return max(float(np.max(np.abs(after - before), initial=0.0))
               for before, after in before_after)


def _state_row(legacy: TF1Side, eager: TF2Side, tf1_name: str, tf2_name: str, before1,
               after1, before2, after2, rtol: float, atol: float, where: str,
               step_scaled: bool) -> Row:
    """A state pair's weights row: a moving statistic's notes where a Keras normalisation
    layer holds it, else a copy's (a target network: :data:`COPY_MOVED`)."""
    momentum = eager.momentum_of(tf2_name)
    assigner = legacy.assigner_of(tf1_name) if momentum is None else ""
    moved = STATE_MOVED if momentum is not None else (
        COPY_MOVED[0].format(assigner=assigner or "an assign op"), COPY_MOVED[1])
    return _weight_row(tf1_name, tf2_name, before1, after1, before2, after2, rtol, atol,
                       where, "", _state_cause(tf1_name, tf2_name, before1, after1, before2,
                                               after2, momentum, assigner),
                       step_scaled, moved)


def _state_cause(tf1_name: str, tf2_name: str, before1, after1, before2, after2,
                 momentum: float | None, assigner: str = "") -> str:
    """The note for a state pair that parts where both sides moved it: what the two updates
    say (:mod:`pgtwin.parity.state_notes`): when the Keras layer's ``momentum`` is known,
    a moving statistic's; when no normalisation layer holds it, a copy's rate (TF1's
    ``assigner`` op named); else the general :data:`STATE_CAUSE`."""
    before = np.asarray(before1[tf1_name], np.float64)
    d1 = np.asarray(after1[tf1_name], np.float64) - before
    d2 = np.asarray(after2[tf2_name], np.float64) - np.asarray(before2[tf2_name], np.float64)
    if momentum is None:
        rounding = tuple(float(np.finfo(np.asarray(v).dtype).eps * np.linalg.norm(v))
                         for v in (after1[tf1_name], after2[tf2_name]))
        return copy_rate_note(d1, d2, assigner, rounding) or STATE_CAUSE
    note = bessel_note(before, d1, d2, momentum) if "variance" in tf2_name else ""
    return note or momentum_note(d1, d2, momentum) or STATE_CAUSE


def _all_values(side: TF1Side | TF2Side) -> dict[str, np.ndarray]:
    """The side's weights and state by name (the two sets of names do not meet)."""
    return {**side.values(), **side.state_values()}


def _weight_row(tf1_name: str, tf2_name: str, before1, after1, before2, after2,
                rtol: float, atol: float, where: str, hint: str = "", cause: str = "",
                step_scaled: bool = False, moved: tuple[str, str] = WEIGHT_MOVED) -> Row:
    """A weights row; names a variable only one side's step changed (``moved``: the notes
    for TF1's only and TF2's only); ``hint`` on a pass, ``cause`` (a known difference of
    the two optimizers, or of the layers' state updates) on a part where both moved.

    ``step_scaled``: ``atol`` is capped at :data:`STEP_FRACTION` of the larger of the two
    steps (the variable's largest change on either side). The default float32 atol (1e-4)
    allows for Adam's amplification of float32 noise at a step of ~1e-2; at a learning rate
    of 1e-4 it would pass a step wrong by all of itself (a clipping left out). A step one
    side took and the other did not fails, though ``rtol`` of the weights would pass it
    (a ``log_std`` of 0.5 moved by 4e-6; :func:`_moved_or_still`)."""
    item = f"{tf1_name} -> {tf2_name}"
    step = largest_change((before1[tf1_name], after1[tf1_name]),
                          (before2[tf2_name], after2[tf2_name]))
    if step_scaled:
        atol = step_atol(atol, step)
    row = compare_arrays("weights", item, after1[tf1_name], after2[tf2_name], rtol, atol, where)
    (moved1, still1), (moved2, still2) = (
        _moved_or_still(before[n], after[n]) for before, after, n in
        ((before1, after1, tf1_name), (before2, after2, tf2_name)))
    only1, only2 = moved1 and still2, moved2 and still1
    if row.ok and (only1 or only2):
        # rtol of the weights passes a whole small step (a log_std moved by 4e-6) that
        # one side never took
        row = Row(row.rung, row.item, row.max_abs, row.max_rel, False, "", where)
    if row.ok:
        return Row(row.rung, row.item, row.max_abs, row.max_rel, True, hint, where) \
            if hint else row
    note = moved[0] if only1 else moved[1] if only2 else cause
    # max_rel is relative to the weights, which a small step barely moves: say how far
    # apart the steps are, the size the check is about.
    size = (f"the weights part by {row.max_abs:.3g}, {row.max_abs / step:.3g} of the step's "
            f"largest change ({step:.3g})" if step > 0 else "")
    note = "; ".join(x for x in (note, size) if x)
    return Row(row.rung, row.item, row.max_abs, row.max_rel, False, note, row.context)
