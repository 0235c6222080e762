"""The parity ladder on the user's TF1 program and TF2 model, both as they are written.

:func:`compare_programs` builds the :class:`~pgtwin.parity.programs.TF1Program` in a graph of its
own (:mod:`pgtwin.parity.tf1_side`) and the :class:`~pgtwin.parity.programs.TF2Program` on its own
variables (:mod:`pgtwin.parity.tf2_side`), pairs their variables (:mod:`pgtwin.parity.variable_mapping`,
printed as the report's mapping table) and climbs:

* ``initialisation``: each pair's initial-value distributions (:mod:`pgtwin.parity.initialisation`);
* ``variables``: the pairs and their dtypes; what could not be paired fails, with its
  candidates; variables only one loss reads are listed as "not compared";
* ``outputs``, ``loss`` (with :mod:`pgtwin.parity.loss_hints`' diagnosis when they part),
  ``gradients``: on the same weights (TF1's initial values, or ``weights``) and inputs;
* ``weights``: the optimizers each side runs (the TF1 ``train_op``'s ops against the Keras
  optimizer's ``get_config``), then every pair after each of ``steps`` runs of the user's
  own ``train_op`` and train step.

Inputs are cast to the TF1 placeholders' declared dtypes, and both sides get those arrays.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pgtwin.parity.initialisation import INIT_MODES, copy_rows, initial_value_row
from pgtwin.parity.ladder import ParityReport, Row, compare_arrays
from pgtwin.parity.learning_rates import MOMENTUM_RATE_CHANGE, learning_rate_row
from pgtwin.parity.loss_hints import ratio_hint, regularization_hint, softmax_hint
from pgtwin.parity.model_state import (COPY_MOVED, STATE_CAUSE, STATE_MOVED, explain_roles,
                                       split_name_map)
from pgtwin.parity.optimizer_config import (clipping_hint, drift_hint, float32_rounding,
                                            keras_optimizer, optimizer_rows, rounded_to_float32,
                                            tf1_clipping)
from pgtwin.parity.optimizer_groups import NONE, OptimizerGroup, form_groups
from pgtwin.parity.optimizer_pairs import optimizer_factories
from pgtwin.parity.output_notes import random_step_note, with_layer_hints, with_randomness
from pgtwin.parity.parity_rows import gradient_rows, output_rows, tolerances
from pgtwin.parity.programs import TF1Program, TF2Program
from pgtwin.parity.state_notes import bessel_note, copy_rate_note, momentum_note
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side
from pgtwin.parity.variable_mapping import MappingProblem, VariableMapping, infer_mapping

INIT_DRAWS = 5


def compare_programs(
    tf1: TF1Program,
    tf2: TF2Program,
    inputs: Mapping[str, Any],
    steps: int = 3,
    name_map: Mapping[str, str] | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
    init: str = "warn",
    optimizer: Any = None,
    rtol: float | None = None,
    atol: float | None = None,
    context: str = "",
    dtype: str | None = None,
) -> ParityReport:
    """Climb the ladder between the user's TF1 program and TF2 program.

    Args:
      tf1, tf2: the two programs (see :mod:`pgtwin.parity.programs`).
      inputs: ``{feed key: numpy array}``, one batch as the old code fed it (any numeric
        dtype that casts to the placeholder's without change).
      steps: train steps before the weights rung (0: no weights rung).
      name_map: ``{tf1 name: tf2 name}`` overriding the inferred pairing.
      weights: ``{tf1 name: value}`` to load on both sides; None: TF1's initial values.
      init: ``"warn"`` (default), ``"fail"`` or ``"off"`` for the initialisation rung.
      optimizer: when neither side has its own train step: a spec ``("adam", {...})`` or a
        pair of factories restated on both sides (as :func:`pgtwin.parity.compare`).
      rtol, atol: tolerances of every numeric row; None: by dtype and rung.
      context: a label put in every row.
      dtype: the float dtype the TF1 program must have built in (``pgtwin compare
        --dtype``); None: whatever it built.

    Returns:
      The :class:`~pgtwin.parity.ladder.ParityReport`, its ``mapping_table`` set.
    """
    if init not in INIT_MODES:
        raise ValueError(f"compare: init must be one of {INIT_MODES}, got {init!r}")
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"compare: steps must be an int >= 0, got {steps!r}")
    legacy = TF1Side(tf1, inputs)
    try:
        built = legacy.dtype()
        if dtype is not None and built != dtype:
            raise ValueError(f"the TF1 program built {built} variables, but {dtype} was asked "
                             "for: its factory must take a dtype argument and build in it")
        fed = {key: legacy.feed[ph] for key, ph in legacy.placeholders.items()}
        eager = TF2Side(tf2, fed)
        return _climb(legacy, eager, fed, steps, name_map, weights, init, optimizer,
                      (rtol, atol), context)
    finally:
        legacy.close()


def _climb(legacy: TF1Side, eager: TF2Side, fed: Mapping[str, np.ndarray], steps: int,
           name_map: Mapping[str, str] | None, weights: Mapping[str, np.ndarray] | None,
           init: str, optimizer: Any, tolerance: tuple[float | None, float | None],
           context: str) -> ParityReport:
    """The ladder of :func:`compare_programs` once both programs are built."""
    report = ParityReport()
    dtype = legacy.dtype()
    ctx = ", ".join(x for x in (context, dtype) if x)
    rtol, atol = tolerance
    tol = {rung: (rtol if rtol is not None else r, atol if atol is not None else a)
           for rung, (r, a) in tolerances(dtype).items()}
    frozen = _frozen_in_effect(legacy, eager)
    legacy.hold_as_state(frozen)
    weights_map, state_map = split_name_map(name_map, set(legacy.state))
    mapping = infer_mapping(legacy.infos(), eager.infos(), weights_map,
                            tf2_orders=[eager.infos(eager.creation_order)])
    state = infer_mapping(legacy.state_infos(), eager.state_infos(), state_map)
    explain_roles(mapping, state)
    _explain_left_out(mapping, legacy)
    report.mapping_table = mapping.to_table()
    report.pairs = mapping.to_records("trained") + state.to_records("state")
    if state.pairs or state.problems:
        report.mapping_table += ("\n\nState (not trained: moving statistics, frozen copies such as a "
                                 "target network):\n") + \
            state.to_table()
    report.rows.extend(_variable_rows(legacy, eager, mapping, ctx))
    report.rows.extend(_state_rows(state, ctx))
    report.rows.extend(Row("variables", f"TF1 {n}", 0.0, 0.0, True, FROZEN_IN_EFFECT, ctx)
                       for n in frozen)
    if not report.ok:
        return report
    if init != "off":
        report.rows.extend(_initial_rows(legacy, eager, mapping, init == "fail", ctx))
        report.rows.extend(copy_rows(
            legacy.values(), legacy.state_values(), eager.initial, eager.initial_state,
            {p.tf1.name: p.tf2.name for p in mapping.pairs},
            {p.tf1.name: p.tf2.name for p in state.pairs}, init == "fail", ctx))
    start = legacy.values() if weights is None else _weights(weights, legacy)
    legacy.load(start)
    eager.load({p.tf2.name: start[p.tf1.name] for p in mapping.pairs})
    start_state = legacy.state_values()
    eager.load_state({p.tf2.name: start_state[p.tf1.name] for p in state.pairs})
    to_tf2 = mapping.tf2_name()

    legacy_out = legacy.run()
    eager_out, eager_grads = eager.run()
    if eager.program.outputs is None:  # TF1Program.outputs' keys; the loss's others left out
        eager_out = {k: v for k, v in eager_out.items() if k in legacy_out}
    rows = with_layer_hints(output_rows(legacy_out, eager_out, *tol["outputs"], ctx,
                                         sides=("TF1Program", "TF2Program")), legacy, eager)
    rows.append(_loss_row(legacy, legacy_out["loss"], eager_out["loss"], fed, *tol["loss"], ctx))
    report.rows.extend(with_randomness(rows, legacy, eager, legacy_out, eager_out))
    tf1_grads, tf2_grads = legacy.gradients(), {n: eager_grads[to_tf2[n]] for n in to_tf2}
    report.rows.extend(gradient_rows(tf1_grads, tf2_grads, *tol["gradients"], ctx))
    stuck = {n for n in to_tf2 if tf2_grads[n] is None and tf1_grads[n] is not None}
    if steps:
        earlier_ok = all(r.ok for r in report.rows if r.rung in ("outputs", "loss",
                                                                    "gradients"))
        report.rows.extend(_weights_rung(legacy, eager, mapping, state, steps, optimizer,
                                         dtype, *tol["weights"], ctx, step_scaled=atol is None,
                                         stuck=stuck, grad_tol=tol["gradients"],
                                         earlier_ok=earlier_ok))
    return report


FROZEN_IN_EFFECT = ("compared as state: trainable, but TF1's train_op never updates it (no "
                    "apply op: left out of minimize's var_list) or var_list leaves it out "
                    "while the loss reads it, and the TF2 side holds a frozen partner")
"""The row of a TF1 variable :func:`_frozen_in_effect` compares as state."""


def _frozen_in_effect(legacy: TF1Side, eager: TF2Side) -> list[str]:
    """The TF1 variables to compare as state: trainable, but never updated by the
    ``train_op`` (:meth:`TF1Side.unstepped`: a DQN's target network left out of
    ``var_list``), or left out of ``var_list`` though the loss reads them, as many of each
    shape as the TF2 side holds state variables of it beyond TF1's own state (its frozen
    target network)."""
    candidates = [*legacy.unstepped(), *legacy.read_not_compared()]
    if not candidates:
        return []
    spare = Counter(i.shape for i in eager.state_infos()) \
        - Counter(i.shape for i in legacy.state_infos())
    shapes = {n: tuple(v.shape.as_list()) for n, v in legacy.graph_variables().items()}
    out = []
    for name in candidates:
        if spare[shapes[name]] > 0:
            spare[shapes[name]] -= 1
            out.append(name)
    return out


def _explain_left_out(mapping: VariableMapping, legacy: TF1Side) -> None:
    """A TF2 variable left unpaired where TF1's loss reads one of its shape outside an
    explicit ``var_list``: say that (in place), not that TF1 has no such variable."""
    shapes = {n: tuple(v.shape.as_list()) for n, v in legacy.graph_variables().items()}
    left = legacy.read_not_compared()
    for i, p in enumerate(mapping.problems):
        same = [n for n in left if shapes[n] == p.variable.shape]
        if p.side == "TF2" and same:
            mapping.problems[i] = MappingProblem(p.side, p.variable, (
                f"TF1's loss reads {', '.join(same)} of this shape, which TF1Program.var_list "
                "leaves out: add them to var_list, or, if they are a frozen copy (a target "
                "network), freeze the TF2 layer (layer.trainable = False)"))


def _weights(weights: Mapping[str, np.ndarray], legacy: TF1Side) -> dict[str, np.ndarray]:
    missing = sorted(set(legacy.variables) - {n.split(":")[0] for n in weights})
    if missing:
        raise ValueError(f"compare: weights has no value for the compared TF1 variables "
                         f"{missing}")
    out = {}
    for name, value in weights.items():
        name = name.split(":")[0]
        if name in legacy.variables:
            array = np.asarray(value)
            shape = tuple(legacy.variables[name].shape.as_list())
            if array.shape != shape:
                raise ValueError(f"compare: weights[{name!r}] has shape {array.shape}, the "
                                 f"TF1 variable {shape}")
            out[name] = array
    return out


NOT_COMPARED_STEPPED = (
    "WARNING not compared, though TF1's train_op updates it ({kind}): TF1Program.loss does "
    "not depend on it, so no rung sees how it is trained (an actor trained through "
    "tf.gradients(mu, actor_params, -dQ/da), as DDPG does, while the loss is the critic's): "
    "give a loss that reads it (for DDPG critic_loss - mean(Q(s, mu(s))), whose gradient for "
    "the actor is the one its train_op applies)")
"""The row of a TF1 variable outside the comparison that the train_op steps anyway."""


def _variable_rows(legacy: TF1Side, eager: TF2Side, mapping: VariableMapping,
                   ctx: str) -> list[Row]:
    """Pairs (and their dtypes), what could not be paired, then what is not compared."""
    rows = []
    for p in mapping.pairs:
        item = f"{p.tf1.name} -> {p.tf2.name}"
        if p.tf1.dtype != p.tf2.dtype:
            rows.append(Row("variables", item, float("inf"), float("inf"), False,
                            f"dtypes differ: TF1 {p.tf1.dtype}, TF2 {p.tf2.dtype}: build the "
                            f"TF2 model in {p.tf1.dtype} (dtype=...)", ctx))
        else:
            rows.append(Row("variables", item, 0.0, 0.0, True, f"paired by {p.how}", ctx))
    for problem in mapping.problems:
        rows.append(Row("variables", f"{problem.side} {problem.variable.name}",
                        float("inf"), float("inf"), False,
                        f"{problem.variable.shape}: {problem.message}", ctx))
    stepped = legacy.stepped_not_compared()
    rows.extend(Row("variables", f"TF1 {n}", 0.0, 0.0, True,
                    NOT_COMPARED_STEPPED.format(kind=stepped[n]) if n in stepped else
                    "not compared: the TF1 loss does not depend on it", ctx)
                for n in legacy.not_compared)
    rows.extend(Row("variables", f"TF2 {n}", 0.0, 0.0, True,
                    "not compared: the TF2 loss does not read it", ctx)
                for n in eager.not_compared)
    return rows


def _state_rows(state: VariableMapping, ctx: str) -> list[Row]:
    """The state pairs; a state variable without a partner is listed, not failed: one side
    may hold as a variable what the other holds as a constant."""
    rows = [Row("variables", f"{p.tf1.name} -> {p.tf2.name}", 0.0, 0.0, True,
                f"state, paired by {p.how}: compared after each train step", ctx)
            for p in state.pairs]
    rows.extend(Row("variables", f"{p.side} {p.variable.name}", 0.0, 0.0, True,
                    f"state {p.variable.shape}, not compared: {p.message}", ctx)
                for p in state.problems)
    return rows


def _initial_rows(legacy: TF1Side, eager: TF2Side, mapping: VariableMapping, fail: bool,
                  ctx: str) -> list[Row]:
    draws = legacy.initial_draws(INIT_DRAWS)
    return [initial_value_row(f"{p.tf1.name} -> {p.tf2.name}", draws[p.tf1.name],
                              eager.initial[p.tf2.name], fail, ctx,
                              legacy.initializer_kind(p.tf1.name),
                              eager.initializer_of(p.tf2.name))
            for p in mapping.pairs]


def _loss_row(legacy: TF1Side, a: np.ndarray, b: np.ndarray, fed: Mapping[str, np.ndarray],
              rtol: float, atol: float, ctx: str) -> Row:
    """The loss row, with the likely mistake as its note when the two part."""
    row = compare_arrays("loss", "loss", a, b, rtol, atol, ctx)
    if row.ok or np.shape(a) != () or np.shape(b) != ():
        return row
    a, b = float(a), float(b)
    sizes = [s for x in fed.values() for s in np.shape(x)[:2]]
    sizes += [int(np.prod(np.shape(x)[:2])) for x in fed.values() if np.ndim(x) >= 2]
    hint = (ratio_hint(a, b, sizes, max(rtol, 1e-6) * 10)
            or regularization_hint(legacy, a, b)
            or softmax_hint(legacy, b, max(rtol, 1e-6) * 10, a))
    return Row(row.rung, row.item, row.max_abs, row.max_rel, False,
               hint or f"TF1 loss {a:.6g}, TF2 loss {b:.6g}", ctx)


STEP_FRACTION = 1e-2
"""The weights rung's absolute tolerance, at most this fraction of a variable's larger step:
Adam's float32 noise measured up to 1.2e-5 after 5 steps of ~1e-2 (docs/migration.md,
"Tolerances"), a thousandth of a step."""


def _weights_rung(legacy: TF1Side, eager: TF2Side, mapping: VariableMapping,
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
    rows = _step_setup(legacy, eager, optimizer, dtype, ctx)
    if any(not r.ok and r.item == "train step" for r in rows):
        return rows
    tf1_before = legacy.optimizer_by_variable()
    keras_before = {id(o): keras_optimizer(o) for o in eager.optimizers}
    drifts = {id(o): drift_hint("rmsprop", o) for o in eager.optimizers}  # velocities now
    adam = any(k == "adam" for k, _ in tf1_before.values())  # a Keras one may come lazily
    pairs = [(p.tf1.name, p.tf2.name) for p in mapping.pairs]
    judged: list[_Judged] = []
    random = ""  # why the steps would part by design (dropout in the train step)
    for step in range(1, steps + 1):
        where = ", ".join(x for x in (ctx, f"step {step}/{steps}") if x)
        if step > 1:  # a schedule moves the rates between steps
            rate_rows = _rates_now(legacy, judged, where)
            if rate_rows:
                return rows + rate_rows
        before1, before2 = _all_values(legacy), _all_values(eager)
        counted = {id(o): _iterations(o) for o in eager.optimizers}
        moments = (legacy.adam_moments(), eager.adam_moments()) if step == 1 and adam else None
        failure = _run_steps(legacy, eager, where)
        made = eager.refresh_optimizers()  # a train step that makes its optimizer
        if step == 1:  # the Keras optimizers know their variables now
            judged = _first_step_groups(legacy, eager, pairs, tf1_before, keras_before,
                                        drifts, made, dtype, rtol, atol, ctx)
            random = random_step_note(eager)
            for j in judged:  # dropout in the step: the likeliest cause, said first
                j.cause = j.step_cause = "; ".join(x for x in (random, j.cause) if x)
            for j in judged:
                rows += j.group.named(_rates_after_first_step(j.rows, j.group, where))
        elif made:
            for j in judged:  # its state (Adam's moments, iterations) starts again
                note = _remade_note(made, step)
                j.cause = "; ".join(x for x in (note, j.cause) if x)
                j.step_cause = "; ".join(x for x in (note, j.step_cause) if x)
        if failure is not None:
            return rows + [failure]
        after1, after2 = _all_values(legacy), _all_values(eager)
        for j in judged:  # apply_gradients called more than once a step
            note = _iterations_note(j.group.keras, counted)
            if note and note not in j.step_cause:
                j.cause = "; ".join(x for x in (note, j.cause) if x)
                j.step_cause = "; ".join(x for x in (note, j.step_cause) if x)
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
        gradient_rows = [r if r.ok or not random else Row(
            r.rung, r.item, r.max_abs, r.max_rel, False, f"{random}; {r.note}", r.context)
            for r in gradient_rows]
        rows = rows + gradient_rows  # step 1's own check, kept whatever follows
        step_rows = [_weight_row(a, b, before1, after1, before2, after2, by_name[a].rtol,
                                 by_name[a].atol, where, by_name[a].hint, by_name[a].step_cause,
                                 step_scaled, STUCK_MOVED if a in stuck else WEIGHT_MOVED)
                     for a, b in pairs]
        state_tol = (max(j.rtol for j in judged), max(j.atol for j in judged)) if judged \
            else (rtol, atol)
        step_rows += [_state_row(legacy, eager, p.tf1.name, p.tf2.name, before1, after1,
                                 before2, after2, *state_tol, where, step_scaled)
                      for p in state.pairs]
        if not all(r.ok for r in gradient_rows + step_rows) or step == steps:
            return rows + step_rows
    return rows


def _first_step_groups(legacy: TF1Side, eager: TF2Side, pairs: list[tuple[str, str]],
                       tf1_before: Mapping[str, tuple[str, dict]],
                       keras_before: dict[int, tuple[str, dict]], drifts: dict[int, str],
                       made: list[Any], dtype: str, rtol: float, atol: float,
                       ctx: str) -> list[_Judged]:
    """After the first step: the optimizer groups (:func:`form_groups`), judged.

    ``made``: Keras optimizers the first step made (``self.optimizer = Adam(...)`` in the
    train step). Their settings are read now, and so are TF1's for the pairs they step: a
    schedule has moved both sides' rates by one step alike."""
    owners = {b: eager.owner_of(b) for _, b in pairs}
    tf1_settings = dict(tf1_before)
    if made:
        keras_before.update({id(o): keras_optimizer(o) for o in made})
        drifts.update({id(o): drift_hint("rmsprop", o) for o in made})
        tf1_now = legacy.optimizer_by_variable()
        lazy = {id(o) for o in made}
        tf1_settings.update({a: tf1_now[a] for a, b in pairs
                             if id(owners[b]) in lazy and a in tf1_now})
    groups = form_groups(pairs, tf1_settings, keras_before, owners)
    return _swapped([_judge(legacy, eager, g, drifts, dtype, rtol, atol, ctx) for g in groups])


def _iterations(optimizer: Any) -> int:
    """A Keras optimizer's ``iterations`` now (0 where it has none)."""
    count = getattr(optimizer, "iterations", None)
    return int(np.asarray(count)) if count is not None else 0


def _iterations_note(optimizer: Any, counted: Mapping[int, int]) -> str:
    """The weights rows' cause when the Keras ``optimizer`` counted more than one iteration
    in the step just run (``counted``: each optimizer's before it; one made in the step
    counted from 0), else ''."""
    if optimizer is None:
        return ""
    taken = _iterations(optimizer) - counted.get(id(optimizer), 0)
    if taken <= 1:
        return ""
    return (f"{type(optimizer).__name__} counted {taken} iterations in one train step: "
            "apply_gradients ran once per part of the model, so the step count (Adam's bias "
            "correction, a schedule) runs ahead of TF1's, which counts one per train_op: "
            "apply all the gradients in one call, or give each part its own optimizer")


def _remade_note(made: list[Any], step: int) -> str:
    """The weights rows' cause when the train step made new Keras optimizers at ``step``."""
    names = ", ".join(type(o).__name__ for o in made)
    return (f"the TF2 train step made a new Keras optimizer ({names}) at step {step}: its "
            "state (Adam's moments, iterations) starts again at every new one, while TF1's "
            "optimizer keeps its own; make the optimizer once, outside the train step")


@dataclass
class _Judged:
    """How one optimizer group's pairs are judged (:func:`_judge`).

    Attributes:
      rows: its settings rows, without the group's label.
      cause, step_cause: the weights rows' note where they part (``step_cause``: with what
        a schedule has changed since the first step).
      hint: what the weights rows' tolerance says (float64 settings rounded to float32).
      rtol, atol: the weights rows' tolerances.
      clipping: the note of a clipping only one side does.
    """

    group: OptimizerGroup
    rows: list[Row]
    rtol: float
    atol: float
    cause: str = ""
    step_cause: str = ""
    hint: str = ""
    clipping: str = ""


NO_KERAS_OPTIMIZER = ("no Keras optimizer found on the TF2 object to compare settings with "
                      "(TF2Program.optimizer names it); compared through the weights")
"""The settings row where the TF2 object holds no Keras optimizer."""


def _judge(legacy: TF1Side, eager: TF2Side, group: OptimizerGroup, drifts: Mapping[int, str],
           dtype: str, rtol: float, atol: float, ctx: str) -> _Judged:
    """The group's settings rows (TF1's ``train_op`` against its Keras optimizer) and how
    its weights are judged. ``drifts``: :func:`drift_hint` per Keras optimizer, read before
    the first step."""
    if group.keras is None:
        held = ", ".join(type(o).__name__ for o in eager.optimizers)
        note = NO_KERAS_OPTIMIZER if not eager.optimizers else (
            "neither side's step updates these variables (no apply op of TF1's train_op, "
            "no Keras optimizer holds them): compared through the weights"
            if group.tf1_kind == "none" else
            f"none of the TF2 object's Keras optimizers ({held}) holds these variables "
            "after the first step; compared through the weights")
        return _Judged(group, [Row("weights", "optimizer", 0.0, 0.0, True, note, ctx)],
                       rtol, atol)
    if group.tf1_kind == "none":
        return _Judged(group, [Row(
            "weights", "optimizer", float("inf"), float("inf"), False,
            f"TF1's train_op updates none of these variables (no apply op: left out of its "
            f"var_list, or trained by another op) and the TF2 train step steps them with "
            f"{type(group.keras).__name__}: apply gradients to the variables TF1 trains "
            "(or give TF1Program.train_op every train op)", ctx)], rtol, atol)
    tf1_clip = tf1_clipping(legacy.train_op, legacy.loss,
                            [legacy.variables[n] for n in group.tf1_names])
    tf1_kind, tf1_settings = group.tf1_kind, group.tf1_settings
    settings = group.keras_settings
    rows = optimizer_rows(tf1_kind, tf1_settings, group.keras_kind, settings,
                          ("its train_op", type(group.keras).__name__), ctx, tf1_clip)
    clipping = clipping_hint(tf1_clip, settings)
    drift = drifts.get(id(group.keras), "") if tf1_kind == group.keras_kind == "rmsprop" else ""
    cause = "; ".join(x for x in (drift, clipping) if x)
    hint = ""
    if dtype == "float64" and rounded_to_float32(tf1_settings, settings):
        rtol, atol = tolerances("float32")["weights"]
        hint = "compared at float32 tolerance: " + float32_rounding(tf1_kind, tf1_settings,
                                                                    settings)
    return _Judged(group, rows, rtol, atol, cause, cause, hint, clipping)


def _swapped(judged: list[_Judged]) -> list[_Judged]:
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
                          f"{cause} ({row.note})", row.context)
    return judged


def _rates_now(legacy: TF1Side, judged: list[_Judged], where: str) -> list[Row]:
    """Before a step after the first: a failing learning-rate row of the first group whose
    rates part (:func:`learning_rate_row`), else none, with each momentum group's
    ``step_cause`` told once its rate has moved (:data:`MOMENTUM_RATE_CHANGE`)."""
    now = legacy.optimizer_by_variable()
    for j in judged:
        g = j.group
        if g.keras is None or g.tf1_kind != g.keras_kind:
            continue
        rate = now.get(g.tf1_names[0], NONE)[1].get("learning_rate")
        row = learning_rate_row(rate, g.keras, where)
        if row is not None:
            return g.named([row])
        if g.keras_kind == "sgd" and g.keras_settings.get("momentum") \
                and rate != g.tf1_settings.get("learning_rate"):
            j.step_cause = "; ".join(x for x in (j.cause, MOMENTUM_RATE_CHANGE) if x)
    return []


FOLLOWS_EARLIER = ("follows from the outputs, loss or gradients that parted on an earlier "
                   "rung: a train step applies the loss's gradient, so fix those first")
"""The note of a train-step gradient row that parts where an earlier rung parted."""

TRAIN_GRADIENT = ("the gradient the train step took (from Adam's first moment) parts: "
                  "where the gradients rung passed, the TF2 train step minimises another "
                  "loss than TF2Program.loss (a term such as the entropy bonus or the value "
                  "loss left out, added twice, or scaled: Adam's steps hide a scale) or "
                  "applies other gradients (clipped, or of other variables)")
"""The note of a train-step gradient row that parts (:func:`_train_gradient_rows`)."""


def _rates_after_first_step(rows: list[Row], group: OptimizerGroup, where: str) -> list[Row]:
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
    norm1, norm2 = float(g1 @ g1), float(np.linalg.norm(g2))
    if norm1 == 0.0 or norm2 == 0.0:
        return TRAIN_GRADIENT
    c = float(g1 @ g2) / norm1
    common = np.linalg.norm(g2 - c * g1) <= 1e-6 * norm2
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
        if optimizer is None:
            return [Row("weights", "train step", float("inf"), float("inf"), False,
                        "neither side has a train step: give TF1Program.train_op and "
                        "TF2Program.train_step (or optimizer), or steps=0", ctx)]
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
    return []


def _run_steps(legacy: TF1Side, eager: TF2Side, where: str) -> Row | None:
    """One step on each side; a failing row naming the side whose step raised, else None."""
    for side, step in (("TF1 train_op", legacy.step), ("TF2 train step", eager.step)):
        try:
            step()
        except Exception as err:  # noqa: BLE001  (the user's code: reported, not hidden)
            return Row("weights", "train step", float("inf"), float("inf"), False,
                       f"the {side} raised {type(err).__name__}: {_error_text(err)}", where)
    return None


UNKNOWN_VARIABLE = ("a Keras optimizer is built on the variables of its first "
                    "apply_gradients, and this one was given others later (one optimizer "
                    "applied to two models' variables in two calls): build it on all of them "
                    "first (optimizer.build(variables)), or give each model its own")
"""The cause said before Keras 3's ``Unknown variable`` error from ``apply_gradients``."""


def _error_text(err: Exception) -> str:
    """What a raising step said, without the values a Keras variable's repr prints (a
    whole weight matrix), and with the cause first where it is known."""
    text = re.sub(r", value=[^>]*>", ">", str(err))
    text = text if len(text) <= 400 else text[:400] + " ..."
    if text.startswith("Unknown variable"):
        return f"{UNKNOWN_VARIABLE} ({text})"
    return text


WEIGHT_MOVED = ("the TF2 train step did not change this variable, TF1's train_op did: does "
                "it apply gradients to the right variables (model.trainable_variables)?",
                "the TF2 train step changed this variable, TF1's train_op did not: does it "
                "update variables that TF1 keeps fixed (its var_list)?")
"""A weights row's note when only TF1's step moved the variable, and when only TF2's did."""

STUCK_MOVED = ("its TF2 gradient is None (the gradients rung): the TF2 loss does not reach "
               "it, so no train step can move it", WEIGHT_MOVED[1])
"""The same, for a variable whose TF2 gradient is None."""


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
        return copy_rate_note(d1, d2, assigner) or STATE_CAUSE
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
    of 1e-4 it would pass a step wrong by all of itself (a clipping left out)."""
    item = f"{tf1_name} -> {tf2_name}"
    step = largest_change((before1[tf1_name], after1[tf1_name]),
                          (before2[tf2_name], after2[tf2_name]))
    if step_scaled:
        atol = step_atol(atol, step)
    row = compare_arrays("weights", item, after1[tf1_name], after2[tf2_name], rtol, atol, where)
    if row.ok:
        return Row(row.rung, row.item, row.max_abs, row.max_rel, True, hint, where) \
            if hint else row
    moved1 = not np.array_equal(before1[tf1_name], after1[tf1_name])
    moved2 = not np.array_equal(before2[tf2_name], after2[tf2_name])
    note = ""
    if moved1 and not moved2:
        note = moved[0]
    elif moved2 and not moved1:
        note = moved[1]
    else:
        note = cause
    # max_rel is relative to the weights, which a small step barely moves: say how far
    # apart the steps are, the size the check is about.
    size = (f"the weights part by {row.max_abs:.3g}, {row.max_abs / step:.3g} of the step's "
            f"largest change ({step:.3g})" if step > 0 else "")
    note = "; ".join(x for x in (note, size) if x)
    return Row(row.rung, row.item, row.max_abs, row.max_rel, False, note, row.context)


def is_program_pair(a: Any, b: Any) -> bool:
    """True when ``compare`` was given a :class:`TF1Program` and a :class:`TF2Program`."""
    return isinstance(a, TF1Program) and isinstance(b, TF2Program)
