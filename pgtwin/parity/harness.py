"""The parity ladder for the user's own code: a TF1 loss builder against its TF2 migration.

:func:`compare` builds the user's TF1-style loss in a fresh ``tf.Graph`` (placeholders,
``get_variable``, ``tf.gradients``, a ``tf.compat.v1.train`` optimizer, one ``Session``) and
runs the user's TF2 function on ``tf.Variable``\\ s (``GradientTape``, a Keras optimizer),
both from the same numpy weights and on the same numpy inputs, and climbs the ladder of
:mod:`pgtwin.parity.ladder`:

* ``variables``: the TF1 graph's trainable variables against ``weights`` (missing, extra,
  misshapen) and against what the TF2 function reads (through ``name_map``: unmapped names,
  names asked for that no TF1 variable maps to, variables the harness did not create);
* ``outputs``: every extra entry both functions return (logits, log-probs ...);
* ``loss``;
* ``gradients``: per variable; a ``None`` gradient on one side is reported with the
  semantics of :class:`pgtwin_core.errors.DisconnectedGradientError` (a loss built from
  numpy log-probs has no path to the weights);
* ``weights``: the optimizers' hyperparameters (TF1 Adam's epsilon is 1e-8, Keras' 1e-7),
  then every variable after each of ``steps`` optimizer steps on the same inputs (the rows
  of the first step where the two part, else of the last step).

Contracts (the same inputs dict on both sides)::

    legacy_build(inputs: dict[str, tf.Tensor]) -> loss | {"loss": loss, name: tensor, ...}
        called inside a fresh tf.Graph; ``inputs`` are placeholders named like the numpy
        ``inputs`` with their dtypes and a dynamic batch dimension ([None, *shape[1:]]);
        it creates its variables (get_variable, tf.Variable): every *trainable* one is
        compared and must have a value in ``weights`` (keyed by its TF1 name, no ``:0``).
    eager_fn(variables: Mapping[str, tf.Variable], inputs: dict[str, tf.Tensor])
        -> loss | {"loss": loss, name: tensor, ...}
        called eagerly under a GradientTape (it may be a tf.function); ``variables`` holds
        the harness's tf.Variables under the TF2 names ``name_map.get(tf1_name, tf1_name)``.

The loss is a scalar; the other entries are compared at the outputs rung by key.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin.parity.code_checks import eager_guard, require_eager
from pgtwin.parity.code_parity import compare_programs, is_program_pair
from pgtwin.parity.ladder import ParityReport, Row, compare_arrays
from pgtwin.parity.optimizer_config import (float32_rounding, keras_optimizer, optimizer_rows,
                                            rounded_to_float32, tf1_optimizer)
from pgtwin.parity.optimizer_pairs import optimizer_factories
from pgtwin.parity.parity_rows import DEFAULT_TOLERANCES, gradient_rows, output_rows, tolerances
from pgtwin.parity.programs import TF1Program, TF2Program
from pgtwin.parity.tf1_side import (GRAPH_SEED, Assigner, cast_feed, op_by_op_config,
                                     restated_step, tf1_variables)
from pgtwin.parity.variable_mapping import kind
from pgtwin.parity.weights_rung import largest_change, step_atol

tf1 = tf.compat.v1

_UNKNOWN = re.compile(r"eager_fn asked for variable '([^']+)'")

LegacyBuild = Callable[[dict[str, tf.Tensor]], Any]
EagerFn = Callable[[Mapping[str, tf.Variable], dict[str, tf.Tensor]], Any]


class UnknownVariableError(KeyError):
    """``eager_fn`` asked for a variable name that no TF1 variable is named or mapped to."""

    def __init__(self, name: str, available: list[str]):
        self.name = name
        super().__init__(f"eager_fn asked for variable {name!r}, which no TF1 variable is "
                         f"named or mapped to (available: {available})")


class RecordingVariables(Mapping):
    """The ``variables`` mapping given to ``eager_fn``: it records names asked for but absent."""

    def __init__(self, variables: Mapping[str, tf.Variable]):
        # ``dict(...)``: tf.function rebuilds a Mapping argument from (key, value) pairs.
        self._variables = dict(variables)
        self.unknown: list[str] = []

    def __getitem__(self, name: str) -> tf.Variable:
        if name not in self._variables:
            self.unknown.append(name)
            raise UnknownVariableError(name, list(self._variables))
        return self._variables[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._variables)

    def __len__(self) -> int:
        return len(self._variables)


# --------------------------------------------------------------------- inputs
def _check_inputs(inputs: Mapping[str, np.ndarray], dtype: str | None) -> dict[str, np.ndarray]:
    if not isinstance(inputs, Mapping) or not inputs:
        raise ValueError(f"compare: inputs must be a non-empty dict of numpy arrays, got {inputs!r}")
    out = {}
    for key, value in inputs.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"compare: inputs keys must be non-empty strings, got {key!r}")
        array = np.asarray(value)
        if array.dtype == object:
            raise ValueError(f"compare: inputs[{key!r}] is not numeric (dtype object)")
        if dtype is not None and np.issubdtype(array.dtype, np.floating):
            array = array.astype(dtype)
        out[key] = array
    return out


def _check_weights_dict(weights: Mapping[str, np.ndarray], dtype: str | None) -> dict[str, np.ndarray]:
    if not isinstance(weights, Mapping):
        raise ValueError(f"compare: weights must be a dict {{tf1 name: array}}, got {type(weights)}")
    out = {}
    for name, value in weights.items():
        array = np.asarray(value)
        if not np.issubdtype(array.dtype, np.number):
            raise ValueError(f"compare: weights[{name!r}] is not numeric (dtype {array.dtype})")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"compare: weights[{name!r}] holds non-finite values")
        out[name.split(":")[0]] = array.astype(dtype) if dtype is not None else array
    return out


def _placeholder_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", key).lstrip("_./-") or "input"


def _results(value: Any, side: str) -> dict[str, Any]:
    """``{"loss": ..., other outputs...}`` from what a user function returned."""
    if isinstance(value, Mapping):
        if "loss" not in value:
            raise ValueError(f"compare: {side} returned a dict without a 'loss' key "
                             f"(keys: {sorted(value)})")
        return dict(value)
    return {"loss": value}


# --------------------------------------------------------------------- compare
def compare(
    legacy_build: LegacyBuild | TF1Program,
    eager_fn: EagerFn | TF2Program,
    weights: Mapping[str, np.ndarray] | None = None,
    inputs: Mapping[str, np.ndarray] | None = None,
    steps: int = 3,
    optimizer: Any = ("adam", {}),
    name_map: Mapping[str, str] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    dtype: str | None = None,
    context: str = "",
    input_dtypes: Mapping[str, str] | None = None,
    **program_options: Any,
) -> ParityReport:
    """Climb the parity ladder between a TF1 loss builder and its TF2 migration.

    Given a :class:`~pgtwin.parity.programs.TF1Program` and a :class:`~pgtwin.parity.programs.TF2Program`
    (the user's code as written), this is
    :func:`pgtwin.parity.code_parity.compare_programs`: ``compare(tf1, tf2, batch, steps=3)``,
    the third argument then being the inputs (or ``inputs=batch, weights=...``), and
    ``init=`` its option. Otherwise it is the function contract of the module docstring:

    Args:
      legacy_build: builds the TF1 loss from placeholders (see the module docstring).
      eager_fn: computes the same loss from the harness's ``tf.Variable``\\ s.
      weights: numpy values of every trainable TF1 variable, keyed by TF1 name; None: the
        values the TF1 graph's own initializers give (seed them in ``legacy_build``).
      inputs: numpy arrays fed to both sides (a leading batch dimension, made dynamic on
        the TF1 side); integer arrays keep their dtype (actions).
      steps: optimizer steps on the same inputs before the weights rung (0: no such rung).
      optimizer: a spec ``("adam"|"sgd", kwargs)`` built identically on both sides, or the
        user's pair ``(make_tf1_optimizer, make_keras_optimizer)``; see
        :func:`optimizer_factories`.
      name_map: ``{tf1 name: tf2 name}`` for variables renamed in the migration; a TF1
        name absent from it keeps its name.
      rtol, atol: tolerances of every numeric row (``|a - b| <= atol + rtol * max(|a|, |b|)``
        elementwise); None: by dtype and rung (``DEFAULT_TOLERANCES``).
      dtype: ``float32``/``float64`` to cast the float weights and inputs to (None: as given;
        the TF1 variables must be created in the matching dtype, e.g. from ``obs.dtype``).
      context: a label put in every row (e.g. the test's name).
      input_dtypes: ``{input key: dtype}`` for the placeholders the harness makes (what the
        old code declared, e.g. ``{"actions": "int32", "returns": "float32"}``); the arrays
        are cast as ``feed_dict`` casts. Unlisted keys: the array's dtype (after ``dtype``).

    Returns:
      A :class:`pgtwin.parity.ladder.ParityReport`; ``report.first_failure`` names the first rung
      and item where the two part. If the variables cannot be matched (missing, extra or
      misshapen weights, a name ``eager_fn`` asks for that nothing maps to) the report
      stops at the variables rung.
    """
    if is_program_pair(legacy_build, eager_fn):
        batch, start = (inputs, weights) if inputs is not None else (weights, None)
        return compare_programs(legacy_build, eager_fn, batch, steps=steps, name_map=name_map,
                                weights=start, rtol=rtol, atol=atol, context=context,
                                optimizer=None if optimizer == ("adam", {}) else optimizer,
                                **program_options)
    if program_options:
        raise TypeError(f"compare: {sorted(program_options)} are options of TF1Program/"
                        "TF2Program comparisons only")
    require_eager("compare")
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"compare: steps must be an int >= 0, got {steps!r}")
    if dtype is not None and dtype not in DEFAULT_TOLERANCES:
        raise ValueError(f"compare: dtype must be None, 'float32' or 'float64', got {dtype!r}")
    inputs = _check_inputs(inputs, dtype)
    weights = None if weights is None else _check_weights_dict(weights, dtype)
    legacy = _LegacySide(legacy_build, inputs, input_dtypes or {})
    try:
        return _climb(legacy, eager_fn, inputs, weights, steps, optimizer,
                      dict(name_map or {}), rtol, atol, context)
    finally:
        legacy.close()


def _climb(legacy: _LegacySide, eager_fn: EagerFn, inputs: dict[str, np.ndarray],
           weights: dict[str, np.ndarray] | None, steps: int, optimizer: Any,
           name_map: dict[str, str], rtol: float | None, atol: float | None,
           context: str) -> ParityReport:
    """The ladder of :func:`compare` once the TF1 graph is built (see its arguments)."""
    report = ParityReport()
    var_dtype = legacy.dtype()
    ctx = ", ".join(x for x in (context, var_dtype) if x)
    tol = {rung: (rtol if rtol is not None else r, atol if atol is not None else a)
           for rung, (r, a) in tolerances(var_dtype).items()}
    if weights is None:  # the TF1 initializers' values
        weights = legacy.values()
    report.rows.extend(_weights_rows(legacy.shapes, weights, ctx))
    report.rows.extend(_name_map_rows(legacy.shapes, name_map, ctx))
    if not report.ok:
        return report
    legacy.load(weights)
    eager_names = {n: name_map.get(n, n) for n in legacy.shapes}
    loaded = legacy.values()
    eager = _EagerSide(eager_fn, inputs, {
        eager_names[n]: tf.Variable(loaded[n], name=eager_names[n]) for n in legacy.shapes})

    legacy_out = legacy.run()
    legacy_grads = legacy.gradients()
    eager_out = eager.run()
    report.rows.extend(_variable_rows(legacy, eager, eager_names, eager_out is None,
                                      legacy_grads, ctx))
    if eager_out is None:  # eager_fn asked for a variable that does not exist
        return report
    report.rows.extend(output_rows(legacy_out, eager_out, *tol["outputs"], ctx))
    report.add(compare_arrays("loss", "loss", legacy_out["loss"], eager_out["loss"],
                              *tol["loss"], ctx))
    eager_grads = eager.gradients()
    forward_ok = all(r.ok for r in report.rows if r.rung in ("outputs", "loss"))
    report.rows.extend(gradient_rows(legacy_grads, {old: eager_grads[new] for old, new
                                                    in eager_names.items()},
                                     *tol["gradients"], ctx, forward_ok))
    if steps:
        report.rows.extend(_restated_weights_rung(legacy, eager, eager_names, steps,
                                                  optimizer, var_dtype, tol["weights"],
                                                  ctx, report.ok, step_scaled=atol is None))
    return report


def _restated_weights_rung(legacy: _LegacySide, eager: _EagerSide,
                           eager_names: dict[str, str], steps: int, optimizer: Any,
                           dtype: str, tol: tuple[float, float], ctx: str,
                           ok_so_far: bool, step_scaled: bool = True) -> list[Row]:
    """Both optimizers (restated from ``optimizer``) read back, then the weights per step
    (``step_scaled``: the weights' atol capped by each variable's step).

    Only a drift that nothing earlier explains (``ok_so_far``) gets the float32-rounding
    hint of a plain TF1 Adam in float64.
    """
    make_tf1, make_keras = optimizer_factories(optimizer, dtype)
    tf1_opt = legacy.set_optimizer(make_tf1)
    keras_opt = eager.set_optimizer(make_keras)
    tf1_settings = tf1_optimizer(legacy.train_op, legacy.session, legacy.feed)
    keras_settings = keras_optimizer(keras_opt)
    rows = optimizer_rows(*tf1_settings, *keras_settings,
                          (type(tf1_opt).__name__, type(keras_opt).__name__), ctx)
    rounded = dtype == "float64" and rounded_to_float32(tf1_settings[1], keras_settings[1])
    hint = float32_rounding(tf1_settings[0], tf1_settings[1], keras_settings[1]) \
        if ok_so_far and all(r.ok for r in rows) and rounded else ""
    return rows + _weight_rows(legacy, eager, eager_names, steps, *tol, ctx, hint,
                               step_scaled)


def assert_parity(*args, **kwargs) -> ParityReport:
    """:func:`compare`, failing the calling test with the report's table where they part.

    For a user's pytest suite: ``assert_parity(build_tf1_loss, tf2_loss, weights, batch,
    name_map=NAME_MAP)``. Returns the report when every rung passes.
    """
    report = compare(*args, **kwargs)
    if not report.ok:
        raise AssertionError("TF1 and TF2 code disagree\n" + report.to_table())
    return report


# ---------------------------------------------------------------- the two sides
class _LegacySide:
    """The TF1 graph: placeholders, the user's loss, ``tf.gradients``, one Session."""

    def __init__(self, build: LegacyBuild, inputs: dict[str, np.ndarray],
                 input_dtypes: Mapping[str, str]):
        self.graph = tf.Graph()
        with self.graph.as_default(), tf1_variables(), eager_guard():
            tf1.set_random_seed(GRAPH_SEED)
            self.placeholders = {
                key: tf1.placeholder(tf.as_dtype(input_dtypes.get(key, a.dtype)),
                                     [None, *a.shape[1:]] if a.ndim else [],
                                     name=_placeholder_name(key))
                for key, a in inputs.items()}
            try:
                built = build(dict(self.placeholders))
            except (TypeError, ValueError) as err:
                if "type" not in str(err):
                    raise
                declared = {k: p.dtype.name for k, p in self.placeholders.items()}
                raise TypeError(
                    f"legacy_build failed on the harness's placeholders, whose dtypes come "
                    f"from the inputs {declared}: {str(err).rstrip('.')}. Declare the dtypes "
                    "your TF1 code "
                    "gave its placeholders with input_dtypes={'returns': 'float32', ...} "
                    "(the arrays are cast as feed_dict casts them), or hand over your own "
                    "placeholders with pgtwin.parity.programs.TF1Program") from err
            self.fetches = _results(built, "legacy_build")
            for key, t in self.fetches.items():
                if not isinstance(t, tf.Tensor) or t.graph is not self.graph:
                    raise ValueError(f"compare: legacy_build's {key!r} is not a tensor of its "
                                     f"graph (got {type(t).__name__})")
            self.variables = {v.name.split(":")[0]: v for v in tf1.trainable_variables()}
            if not self.variables:
                raise ValueError("compare: legacy_build created no trainable variables")
            grads = tf.gradients(self.fetches["loss"], list(self.variables.values()))
            self.grads = dict(zip(self.variables, grads))
            self._assign = Assigner(self.variables)
            self._init = tf1.global_variables_initializer()
        self.shapes = {n: tuple(v.shape.as_list()) for n, v in self.variables.items()}
        self.session = tf1.Session(graph=self.graph, config=op_by_op_config())
        self.session.run(self._init)
        self.feed = {self.placeholders[k]: cast_feed(k, a, self.placeholders[k])
                     for k, a in inputs.items()}
        self.train_op = None

    def dtype(self) -> str:
        dtypes = {v.dtype.base_dtype.name for v in self.variables.values()}
        floats = sorted(d for d in dtypes if d in DEFAULT_TOLERANCES)
        if len(floats) != 1:
            raise ValueError(f"compare: the TF1 variables have dtypes {sorted(dtypes)}; "
                             "expected all float32 or all float64")
        return floats[0]

    def load(self, weights: dict[str, np.ndarray]) -> None:
        self._assign.run(self.session, weights)

    def values(self) -> dict[str, np.ndarray]:
        return dict(zip(self.variables, self.session.run(list(self.variables.values()))))

    def run(self) -> dict[str, np.ndarray]:
        return self.session.run(self.fetches, self.feed)

    def gradients(self) -> dict[str, np.ndarray | None]:
        present = {n: g for n, g in self.grads.items() if g is not None}
        values = self.session.run(present, self.feed) if present else {}
        return {n: values.get(n) for n in self.grads}

    def set_optimizer(self, make: Callable[[], Any]) -> Any:
        opt, self.train_op = restated_step(self.graph, self.session, make, self.grads,
                                           self.variables)
        return opt

    def step(self) -> None:
        self.session.run(self.train_op, self.feed)

    def close(self) -> None:
        if hasattr(self, "session"):
            self.session.close()


class _EagerSide:
    """The TF2 side: the user's function on the harness's variables, under a GradientTape."""

    def __init__(self, fn: EagerFn, inputs: dict[str, np.ndarray], variables: dict[str, tf.Variable]):
        self.fn = fn
        self.inputs = {k: tf.constant(a) for k, a in inputs.items()}
        self.variables = variables
        self.recording = RecordingVariables(variables)
        self.watched: list[tf.Variable] = []
        self.optimizer = None

    def _call(self) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor | None]]:
        with tf.GradientTape() as tape:
            out = _results(self.fn(self.recording, dict(self.inputs)), "eager_fn")
        self.watched = list(tape.watched_variables())
        grads = tape.gradient(out["loss"], list(self.variables.values()))
        return out, dict(zip(self.variables, grads))

    def run(self) -> dict[str, np.ndarray] | None:
        """The outputs as numpy, or None when ``eager_fn`` asked for an unknown variable."""
        try:
            out, self._grads = self._call()
        except Exception as err:  # noqa: BLE001  (re-raised unless it is ours)
            name = _unknown_variable(err)
            if name is None:
                raise
            # Recorded here too: inside a tf.function the mapping is a rebuilt copy.
            if name not in self.recording.unknown:
                self.recording.unknown.append(name)
            return None
        return {k: np.asarray(v) for k, v in out.items()}

    def gradients(self) -> dict[str, np.ndarray | None]:
        return {n: None if g is None else np.asarray(g) for n, g in self._grads.items()}

    def set_optimizer(self, make: Callable[[], Any]) -> Any:
        self.optimizer = make()
        return self.optimizer

    def step(self) -> None:
        _, grads = self._call()
        pairs = [(g, self.variables[n]) for n, g in grads.items() if g is not None]
        if pairs:
            self.optimizer.apply_gradients(pairs)

    def values(self) -> dict[str, np.ndarray]:
        return {n: v.numpy() for n, v in self.variables.items()}


def _unknown_variable(err: Exception) -> str | None:
    """The name of an :class:`UnknownVariableError`, also when autograph re-raised it.

    A ``tf.function`` turns exceptions raised while tracing into a ``StagingError`` that
    only keeps the original message, so the name is read back from that message.
    """
    if isinstance(err, UnknownVariableError):
        return err.name
    match = _UNKNOWN.search(str(err))
    return match.group(1) if match else None


# ------------------------------------------------------------------------- rungs
def _weights_rows(shapes: dict[str, tuple], weights: dict[str, np.ndarray], ctx: str) -> list[Row]:
    """Rows for TF1 variables without a value, values without a variable, wrong shapes."""
    rows = []
    for name, shape in shapes.items():
        if name not in weights:
            rows.append(Row("variables", name, float("inf"), float("inf"), False,
                            f"TF1 variable {shape} has no value in weights", ctx))
        elif tuple(weights[name].shape) != shape:
            rows.append(Row("variables", name, float("inf"), float("inf"), False,
                            f"shape: TF1 variable {shape}, weights {tuple(weights[name].shape)}",
                            ctx))
    for name in weights:
        if name not in shapes:
            close = difflib.get_close_matches(name, list(shapes), n=1)
            rows.append(Row("variables", name, float("inf"), float("inf"), False,
                            "in weights but legacy_build created no such trainable variable"
                            + (f" (did you mean {close[0]!r}?)" if close else ""), ctx))
    return rows


def _name_map_rows(shapes: dict[str, tuple], name_map: dict[str, str], ctx: str) -> list[Row]:
    """Rows for name_map keys that name no TF1 variable and TF2 names given twice."""
    rows = []
    for old, new in name_map.items():
        if old not in shapes:
            close = difflib.get_close_matches(old, list(shapes), n=1)
            rows.append(Row("variables", f"{old} -> {new}", float("inf"), float("inf"), False,
                            "name_map key is not a TF1 variable"
                            + (f" (did you mean {close[0]!r}?)" if close else ""), ctx))
    targets: dict[str, list[str]] = {}
    for old in shapes:
        targets.setdefault(name_map.get(old, old), []).append(old)
    for new, olds in targets.items():
        if len(olds) > 1:
            rows.append(Row("variables", new, float("inf"), float("inf"), False,
                            f"TF1 variables {olds} all map to this TF2 name", ctx))
    return rows


def _variable_rows(legacy: _LegacySide, eager: _EagerSide, eager_names: dict[str, str],
                   aborted: bool, legacy_grads: Mapping[str, Any], ctx: str) -> list[Row]:
    """Causes first (variables eager_fn made itself), then one row per TF1 variable.

    A TF1 variable the TF1 loss does not reach (no gradient) and ``eager_fn`` does not
    read (the critic of an actor-critic built in the same graph) is "not compared".
    """
    rows = []
    ours = {id(v) for v in eager.variables.values()}
    strays = [v for v in eager.watched if id(v) not in ours]
    for v in strays:
        rows.append(Row("variables", v.name.split(":")[0], float("inf"), float("inf"), False,
                        "eager_fn used a variable the harness did not create (a Keras model on "
                        "its own variables?): it keeps its own initial value, not `weights`. "
                        "Read the variables from `variables`, or hand over the model itself "
                        "with pgtwin.parity.programs.TF2Program", ctx))
    read = {id(v) for v in eager.watched}
    unread = [n for n in legacy.variables if id(eager.variables[eager_names[n]]) not in read]
    identity = [n for n in legacy.variables if eager_names[n] == n]
    unmapped_note = f"TF1 names without a name_map entry: {identity}" if identity else ""
    values = legacy.values()
    for name in legacy.variables:
        new = eager_names[name]
        item = name if new == name else f"{name} -> {new}"
        # The values themselves: both sides were loaded from `weights` (a dtype slip shows here).
        row = compare_arrays("variables", item, values[name], eager.variables[new].numpy(),
                             0.0, 0.0, ctx)
        if row.ok and name in unread and not aborted:
            if legacy_grads.get(name) is None:
                row = Row("variables", item, 0.0, 0.0, True,
                          "not compared: neither loss reads it", ctx)
            elif strays:
                row = Row("variables", item, row.max_abs, row.max_rel, False,
                          f"eager_fn never read {new!r}, because it used variables of its own "
                          "(rows above)", ctx)
            else:
                row = Row("variables", item, row.max_abs, row.max_rel, False,
                          f"eager_fn never read {new!r}: a name it does not use? "
                          + unmapped_note, ctx)
        rows.append(row)
    shapes = legacy.shapes
    for name in dict.fromkeys(eager.recording.unknown):
        same_kind = [n for n in (unread or list(legacy.variables)) if kind(n) == kind(name)]
        close = difflib.get_close_matches(name, same_kind, n=1, cutoff=0.0)
        if close:
            advice = f"map {close[0]!r} {shapes[close[0]]} to it in name_map? "
        elif kind(name) == "bias":
            advice = ("no TF1 bias is left to map to it: if the TF1 layer has no bias, the "
                      "migration's layer should not have one either (use_bias=False). ")
        else:
            advice = ""
        rows.append(Row("variables", name, float("inf"), float("inf"), False,
                        "eager_fn asked for it but no TF1 variable is named or mapped so; "
                        + advice + unmapped_note, ctx))
    return rows


def _weight_rows(legacy: _LegacySide, eager: _EagerSide, eager_names: dict[str, str],
                 steps: int, rtol: float, atol: float, ctx: str, hint: str = "",
                 step_scaled: bool = True) -> list[Row]:
    """Weights after each step; the rows of the first step where they part, else the last.

    ``hint`` is added to failing rows as their note (a known cause of drift).
    ``step_scaled`` (the default tolerances): each variable's ``atol`` is at most
    :func:`~pgtwin.parity.weights_rung.step_atol` of its step, as ``pgtwin compare``'s
    (a fixed 1e-4 would pass a whole step at a learning rate of 1e-4).
    """
    for step in range(1, steps + 1):
        a0, b0 = legacy.values(), eager.values()
        legacy.step()
        eager.step()
        a, b = legacy.values(), eager.values()
        where = ", ".join(x for x in (ctx, f"step {step}/{steps}") if x)
        rows = [compare_arrays("weights", name, a[name], b[eager_names[name]], rtol,
                               step_atol(atol, largest_change(
                                   (a0[name], a[name]),
                                   (b0[eager_names[name]], b[eager_names[name]])))
                               if step_scaled else atol, where)
                for name in legacy.variables]
        if not all(r.ok for r in rows):
            return [r if r.ok or not hint else Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                                                   hint, r.context) for r in rows]
    return rows
