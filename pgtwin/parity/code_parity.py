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
* ``weights`` (:mod:`pgtwin.parity.weights_rung`): the optimizers each side runs (the TF1
  ``train_op``'s ops against the Keras optimizers' ``get_config``, per optimizer group:
  :mod:`pgtwin.parity.optimizer_judging`), then every pair after each of ``steps`` runs of
  the user's own ``train_op`` and train step.

Inputs are cast to the TF1 placeholders' declared dtypes, and both sides get those arrays.
"""
from __future__ import annotations

import inspect
import types

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from pgtwin.parity.initialisation import INIT_MODES, copy_rows, initial_value_row
from pgtwin.parity.ladder import ParityReport, Row
from pgtwin.parity.forward_rows import forward_rows
from pgtwin.parity.model_state import explain_roles, split_name_map
from pgtwin.parity.parity_rows import gradient_rows, tf_keras_rows, tolerances
from pgtwin.parity.row_causes import ROUNDED_PREFIX, float32_casts
from pgtwin.parity.programs import TF1Program, TF2Program
from pgtwin.parity.state_notes import EMA_SHADOW
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side
from pgtwin.parity.variable_mapping import MappingProblem, VariableMapping, infer_mapping
from pgtwin.parity.weights_rung import weights_rung

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
            raise ValueError(_dtype_fix(legacy.obj, built, dtype))
        fed = legacy.tf2_inputs()
        eager = TF2Side(tf2, fed)
        return _climb(legacy, eager, fed, steps, name_map, weights, init, optimizer,
                      (rtol, atol), context)
    finally:
        legacy.close()


SECOND_COPY = ("; every such variable has a compared one's shape: a second copy of the "
               "network the loss reads (an acting path that builds a new model where TF1 "
               "reuses its variables, AUTO_REUSE or reuse=True)? Call the trained model there")
"""Said on the TF2 rows not compared when all of them repeat the compared variables'
shapes."""

TF2_ONLY_INPUT = ("given to the TF2 side only: TF1Program.feeds names no placeholder for it, "
                  "so what TF1's code computed from it before feed_dict (returns made in "
                  "numpy) is whatever the inputs hold for that, and is compared as such")
"""The row of an input only the TF2 side takes."""


def _dtype_fix(obj: Any, built: str, dtype: str) -> str:
    """What to change where the TF1 code ``obj`` built ``built`` variables and ``dtype`` was
    asked for: the dtype reaches the factory that makes the TF1Program (``pgtwin compare``
    passes it where the factory takes one), and the user's code must get it from there."""
    if isinstance(obj, (dict, types.ModuleType)):  # TF1Program.from_script
        return (f"the TF1 script built {built} variables, but {dtype} was asked for: a "
                "script's dtype is written in its code (its placeholders, variables, and "
                f"tf.one_hot's dtype, {built} by default), so compare it in {built}, or "
                f"write {dtype} there in a copy of the script")
    name = type(obj).__name__
    try:
        takes = "dtype" in inspect.signature(type(obj)).parameters
    except (TypeError, ValueError):
        takes = True
    if not takes:
        return (f"the TF1 code built {built} variables, but {dtype} was asked for: {name} "
                f"takes no dtype argument, so its placeholders and variables are {built} as "
                f"written (and tf.one_hot's dtype, {built} by default): compare it in "
                f"{built}, or give {name} a dtype argument (or compare a copy written in "
                f"{dtype})")
    return (f"the TF1 code built {built} variables, but {dtype} was asked for: pass the dtype "
            "on to it. pgtwin gives the factory that makes the TF1Program dtype= where it "
            f"takes one; build {name} in that dtype there (its placeholders and variables), or "
            f"compare in {built}, the dtype it builds in")


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
    report.rows.extend(tf_keras_rows(eager.tf_keras_objects(), ctx))
    report.rows.extend(Row("outputs", f"input {key!r}", 0.0, 0.0, True, TF2_ONLY_INPUT, ctx)
                       for key in legacy.tf2_only)
    report.rows.extend(_state_rows(state, legacy, ctx))
    report.rows.extend(Row("variables", f"TF1 {n}", 0.0, 0.0, True, FROZEN_IN_EFFECT, ctx)
                       for n in frozen)
    report.rows.extend(_copies_rows(legacy, ctx))
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

    rounding: list[Row] = []  # TF1's float64 loss computed in float32 (tf.compat.v1.losses)
    if dtype == "float64" and tolerance == (None, None):
        tol, rounding = _float32_loss_tolerance(legacy, tol, ctx)
        report.rows.extend(rounding)
    legacy_out = legacy.run()
    eager_out, eager_grads = eager.run()
    forward = forward_rows(legacy, eager, legacy_out, eager_out, fed, tol, ctx)
    if rounding:  # an output through those casts holds their rounding too
        forward = [Row(r.rung, r.item, r.max_abs, r.max_rel, True, r.note, r.context)
                   if not r.ok and r.note.startswith(ROUNDED_PREFIX) else r for r in forward]
    report.rows.extend(forward)
    tf1_grads, tf2_grads = legacy.gradients(), {n: eager_grads[to_tf2[n]] for n in to_tf2}
    forward_ok = all(r.ok for r in report.rows if r.rung in ("outputs", "loss"))
    grads = gradient_rows(tf1_grads, tf2_grads, *tol["gradients"], ctx, forward_ok)
    report.rows = _constant_loss_gap(report.rows, grads)
    report.rows.extend(grads)
    stuck = {n for n in to_tf2 if tf2_grads[n] is None and tf1_grads[n] is not None}
    if steps:
        earlier_ok = all(r.ok for r in report.rows if r.rung in ("outputs", "loss",
                                                                    "gradients"))
        report.rows.extend(weights_rung(legacy, eager, mapping, state, steps, optimizer,
                                         dtype, *tol["weights"], ctx, step_scaled=atol is None,
                                         stuck=stuck, grad_tol=tol["gradients"],
                                         earlier_ok=earlier_ok))
    return report


CONSTANT_GAP = ("; the gradients agree, so the gap does not depend on the weights: a "
                "constant term (a log-density's 0.5 log(2 pi), an entropy's 0.5 log(2 pi e)) "
                "that training does not see, only the logged loss")
"""Added to a loss row that parts where every gradient row passes."""


def _float32_loss_tolerance(legacy: TF1Side, tol: dict[str, tuple[float, float]], ctx: str
                            ) -> tuple[dict[str, tuple[float, float]], list[Row]]:
    """Where TF1's float64 loss is computed through float32 casts (``tf.compat.v1.losses``):
    the loss, gradients and weights tolerances of float32, and a passing row saying so;
    else ``tol`` as it is. (A faithful port parted by 2e-7 at the loss rung, and the note
    said the rounding was TF1's own, as the optimizer's float32 settings are.)"""
    casts = float32_casts(legacy.loss)
    if not casts:
        return tol, []
    f32 = tolerances("float32")
    relaxed = {**tol, **{rung: f32[rung] for rung in ("loss", "gradients", "weights")}}
    shown = ", ".join(casts[:2]) + (", ..." if len(casts) > 2 else "")
    return relaxed, [Row("loss", "float32 rounding", 0.0, 0.0, True,
                         f"compared at float32 tolerance (the loss, its gradients and the "
                         f"steps): TF1's graph rounds float64 to float32 on the way to its "
                         f"loss ({shown}; tf.compat.v1.losses compute their weighted loss in "
                         "float32 whatever the graph's dtype), so its loss holds float32's "
                         "rounding (1e-7 relative) that no float64 port reproduces; an "
                         "output computed through the casts passes with the rounding named, "
                         "the others are compared at float64's", ctx)]


def _copies_rows(legacy: TF1Side, ctx: str) -> list[Row]:
    """A passing row that says how the harness steps A3C's local copies
    (:attr:`TF1Side.copies`), with the copies that held stale values; none without."""
    if not legacy.copies:
        return []
    pairs = list(legacy.copies.items())
    shown = ", ".join(f"{g} for {n}" for n, g in pairs[:3]) + (", ..." if len(pairs) > 3
                                                               else "")
    stale = legacy.unsynced()
    return [Row("variables", "local copies", 0.0, 0.0, True,
                ("WARNING " if stale else "")
                + f"TF1's train_op updates the variables the loss does not read in place of "
                f"those it reads ({shown}: A3C's global network and a worker's copy): the "
                "harness gives each pair the same weights, runs the train_op, then copies the "
                "updated weights into the loss's as your sync op does, and compares those"
                + (f". After build, {len(stale)} of the copies ({', '.join(stale[:3])}"
                   f"{', ...' if len(stale) > 3 else ''}) held other values than the global "
                   "variables: run the sync op before each rollout, or the worker's loss "
                   "reads stale weights" if stale else ""), ctx)]


def _constant_loss_gap(rows: list[Row], grads: list[Row]) -> list[Row]:
    """``rows`` with the failing loss row told :data:`CONSTANT_GAP` where every one of the
    gradient rows ``grads`` passed."""
    if not grads or not all(g.ok for g in grads):
        return rows
    return [Row(r.rung, r.item, r.max_abs, r.max_rel, False, r.note + CONSTANT_GAP, r.context)
            if r.rung == "loss" and r.item == "loss" and not r.ok else r for r in rows]


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


PAIR_BY_HAND = ("; pair them by hand: name_map={'TF1 name': 'TF2 name', ...} "
                "(pgtwin compare --map TF1_NAME=TF2_NAME, once for each)")
"""Added to a variables row whose variable could be paired with several."""

NOT_COMPARED_STEPPED = (
    "WARNING not compared, though TF1's train_op updates it ({kind}): TF1Program.loss does "
    "not depend on it, so no rung sees how it is trained (an actor trained through "
    "tf.gradients(mu, actor_params, -dQ/da), as DDPG does, while the loss is the critic's): "
    "give a loss that reads it (for DDPG critic_loss - mean(Q(s, mu(s))), whose gradient for "
    "the actor is the one its train_op applies)")
"""The row of a TF1 variable outside the comparison that the train_op steps anyway."""

NOT_IN_VAR_LIST_STEPPED = (
    "WARNING not compared, though TF1's train_op updates it ({kind}) and the loss reads it: "
    "TF1Program.var_list leaves it out, so no rung sees it or how it is trained: add it to "
    "var_list, or leave var_list out (every trainable variable the loss reads is compared)")
"""The same, for a variable the loss reads that an explicit ``var_list`` leaves out."""


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
    rows.extend(problem_row(problem, ctx) for problem in mapping.problems)
    stepped = legacy.stepped_not_compared()
    read = set(legacy.read_not_compared())
    rows.extend(Row("variables", f"TF1 {n}", 0.0, 0.0, True,
                    _not_compared_note(stepped.get(n), n in read), ctx)
                for n in legacy.not_compared)
    compared = {tuple(v.shape.as_list()) for v in eager.variables.values()}
    copies = len(eager.not_compared) > 1 and all(
        s in compared for s in eager.not_compared_shapes.values())
    rows.extend(Row("variables", f"TF2 {n}", 0.0, 0.0, True,
                    f"WARNING not compared: the TF2 loss does not read it{SECOND_COPY}"
                    if copies else "not compared: the TF2 loss does not read it", ctx)
                for n in eager.not_compared)
    return rows


def problem_row(problem: MappingProblem, ctx: str) -> Row:
    """The failing row of a variable that could not be paired; one that could be paired
    with several is told how to pair it by hand."""
    return Row("variables", f"{problem.side} {problem.variable.name}", float("inf"),
               float("inf"), False, f"{problem.shape_text}: {problem.message}"
               + (PAIR_BY_HAND if problem.message.startswith("ambiguous") else ""), ctx)


def _not_compared_note(stepped_by: str | None, read: bool) -> str:
    """The row of a TF1 variable left out of the comparison: ``stepped_by`` the optimizer
    kind TF1's ``train_op`` steps it with (None: not stepped), ``read``: the loss reads it
    (an explicit ``var_list`` left it out)."""
    if stepped_by is not None:
        return (NOT_IN_VAR_LIST_STEPPED if read else NOT_COMPARED_STEPPED).format(
            kind=stepped_by)
    return ("not compared: left out of TF1Program.var_list (the loss reads it)" if read
            else "not compared: the TF1 loss does not depend on it")


def _state_rows(state: VariableMapping, legacy: TF1Side, ctx: str) -> list[Row]:
    """The state pairs; a state variable without a partner is listed, not failed: one side
    may hold as a variable what the other holds as a constant. A TF1 one that the
    ``train_op`` assigns is a warning: no rung sees that update."""
    rows = [Row("variables", f"{p.tf1.name} -> {p.tf2.name}", 0.0, 0.0, True,
                f"state, paired by {p.how}: compared after each train step", ctx)
            for p in state.pairs]
    for p in state.problems:
        assigner = legacy.assigner_of(p.variable.name) if p.side == "TF1" else ""
        note = f"state {p.variable.shape}, not compared: {p.message}"
        if assigner:
            shadow = p.variable.name.endswith("ExponentialMovingAverage")
            note = (f"WARNING {note}; TF1's train_op updates it ({assigner}), and no rung "
                    "sees that update" + (f": it is {EMA_SHADOW}" if shadow else ""))
        rows.append(Row("variables", f"{p.side} {p.variable.name}", 0.0, 0.0, True, note, ctx))
    return rows


def _initial_rows(legacy: TF1Side, eager: TF2Side, mapping: VariableMapping, fail: bool,
                  ctx: str) -> list[Row]:
    draws = legacy.initial_draws(INIT_DRAWS)
    return [initial_value_row(f"{p.tf1.name} -> {p.tf2.name}", draws[p.tf1.name],
                              eager.initial[p.tf2.name], fail, ctx,
                              legacy.initializer_kind(p.tf1.name),
                              eager.initializer_of(p.tf2.name))
            for p in mapping.pairs]


def is_program_pair(a: Any, b: Any) -> bool:
    """True when ``compare`` was given a :class:`TF1Program` and a :class:`TF2Program`."""
    return isinstance(a, TF1Program) and isinstance(b, TF2Program)
