"""The optimizer each side really runs, and its hyperparameters, compared by name.

TF1: read from the user's ``train_op`` itself, so no optimizer object is needed: the
``Apply*`` / ``ResourceApply*`` ops it runs name the kind (``ApplyAdam``), and their inputs
(``lr``, ``beta1``, ``beta2``, ``epsilon``, ``momentum``, ``rho``) are evaluated in the
Session, feeds included (a learning-rate placeholder). Keras 3 and ``tf_keras`` (new and
legacy optimizers): read through ``get_config()``. Both are put in Keras' terms
(``learning_rate, beta_1, beta_2, epsilon, momentum, nesterov, rho, centered, amsgrad,
weight_decay``) so one table compares them; a setting one side lacks counts as 0.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin.parity.graph_walk import ASSIGN_OPS, is_gradient_op, upstream_ops
from pgtwin.parity.ladder import Row

tf1 = tf.compat.v1

#: TF1 apply op (without ``Resource``/``Sparse``) -> (kind, {op input: Keras name}).
_TF1_OPS = {
    "ApplyAdam": ("adam", {"lr": "learning_rate", "beta1": "beta_1", "beta2": "beta_2",
                           "epsilon": "epsilon"}),
    "ApplyGradientDescent": ("sgd", {"alpha": "learning_rate"}),
    "ApplyMomentum": ("sgd", {"lr": "learning_rate", "momentum": "momentum"}),
    "ApplyKerasMomentum": ("sgd", {"lr": "learning_rate", "momentum": "momentum"}),
    "ApplyRMSProp": ("rmsprop", {"lr": "learning_rate", "rho": "rho", "momentum": "momentum",
                                 "epsilon": "epsilon"}),
    "ApplyCenteredRMSProp": ("rmsprop", {"lr": "learning_rate", "rho": "rho",
                                         "momentum": "momentum", "epsilon": "epsilon"}),
    "ApplyAdagrad": ("adagrad", {"lr": "learning_rate"}),
    "ApplyAdagradV2": ("adagrad", {"lr": "learning_rate", "epsilon": "epsilon"}),
}
#: Keras class name (lower case) -> kind.
_KERAS_KINDS = {"adam": "adam", "adamw": "adamw", "sgd": "sgd", "rmsprop": "rmsprop",
                "adagrad": "adagrad", "nadam": "nadam", "adamax": "adamax"}
#: Settings compared; the others in get_config are reported only when set.
_COMPARED = ("learning_rate", "beta_1", "beta_2", "epsilon", "momentum", "nesterov", "rho",
             "centered", "amsgrad", "weight_decay")
#: TF1's RMSPropOptimizer (and ``ApplyRMSProp``) against Keras' RMSprop: what differs beyond
#: the settings compared. Keras 3 and ``tf_keras``' RMSprop put epsilon inside the square
#: root, as TF1 does (``sqrt(ms + epsilon)``); ``tf_keras.optimizers.legacy.RMSprop`` adds it
#: outside (``sqrt(ms) + epsilon``) when its momentum is 0.
RMSPROP_START = ("TF1's RMSPropOptimizer starts its mean square (its 'rms' slot) at 1.0 and "
                 "Keras' RMSprop starts its velocities at 0: build the Keras optimizer on the "
                 "variables (optimizer.build(variables)) and assign ones to its velocity "
                 "variables before the first step")
RMSPROP_LEGACY_EPSILON = ("tf_keras' legacy RMSprop with momentum 0 adds epsilon outside the "
                          "square root (TF1 inside): use tf_keras.optimizers.RMSprop or "
                          "keras.optimizers.RMSprop")


def apply_kind(op_type: str) -> str | None:
    """The apply op's kind without ``Resource``/``Sparse`` (``ApplyAdam``), or None for an
    op that applies no gradient."""
    base = op_type.replace("Resource", "").replace("Sparse", "")
    return base if base in _TF1_OPS else None


def gradient_input(apply_op: tf.Operation) -> tf.Tensor | None:
    """The gradient an apply op applies: its ``grad`` input (``delta`` in
    ``ApplyGradientDescent``), or None if it has neither."""
    args = [a.name for a in apply_op.op_def.input_arg]
    for name in ("grad", "delta"):
        if name in args:
            return apply_op.inputs[args.index(name)]
    return None


def tf1_stepped(train_op: Any) -> dict[tf.Operation, str]:
    """``{variable op: optimizer kind}`` of every variable an ``Apply*`` op of ``train_op``
    updates (``"adam"``, ``"sgd"`` ...), read from the graph alone."""
    start = train_op.op if isinstance(train_op, tf.Tensor) else train_op
    return {op.inputs[0].op: _TF1_OPS[apply_kind(op.type)][0] for op in upstream_ops(start)
            if apply_kind(op.type)}


def tf1_step_races(train_op: Any) -> list[tuple[str, str]]:
    """``(written, read for)`` variable names where an apply op of ``train_op`` writes a
    variable that another apply op's gradient, or an assign op's value, reads, and neither
    is ordered before the other (no control dependency): TF1 then runs the read before or
    after the write as it pleases (SAC's three minimize ops grouped bare: the actor's
    gradient reads the Q weights the critic's step writes; ``tf.group(minimize,
    ema.apply(weights))``: the average reads the weights its step writes)."""
    start = train_op.op if isinstance(train_op, tf.Tensor) else train_op
    ops = list(upstream_ops(start))
    applies = [op for op in ops if apply_kind(op.type)]
    readers = {op: gradient_input(op) for op in applies}
    readers.update({op: op.inputs[1] for op in ops
                    if op.type in ASSIGN_OPS and len(op.inputs) > 1})
    readers = {op: t for op, t in readers.items() if t is not None}
    before = {op: set(upstream_ops(op)) for op in readers}
    races = []
    for writer in applies:
        target = writer.inputs[0].op
        for other, read in readers.items():
            if other is writer or writer in before[other]:
                continue
            # an assign's value is read through its data inputs only: Adam's beta powers
            # are assigned under control dependencies on the steps, not from the weights
            reads = [o for o in upstream_ops(read, control=bool(apply_kind(other.type)))
                     if not apply_kind(o.type) and any(t.op is target for t in o.inputs)]
            if any(r not in before[writer] for r in reads):
                races.append((target.name, other.inputs[0].op.name))
    return races


def _rate_ops(train_op: Any) -> Iterator[tf.Operation]:
    """The ops the learning rates of ``train_op``'s apply ops are computed from (each rate's
    own op first), a rate's ops once per apply op that reads it."""
    start = train_op.op if isinstance(train_op, tf.Tensor) else train_op
    for op in upstream_ops(start):
        if not apply_kind(op.type):
            continue
        args = [a.name for a in op.op_def.input_arg]
        for name in {"lr", "alpha"} & set(args):
            yield from upstream_ops(op.inputs[args.index(name)])


def tf1_rate_reads(train_op: Any,
                   kinds: tuple[str, ...] = ("VarHandleOp", "VariableV2", "Variable")
                   ) -> set[str]:
    """The names of the variables (or the ops of other ``kinds``: ``("Placeholder",)`` for
    a rate the training loop feeds) the learning rates of ``train_op``'s apply ops are
    computed from (``{"global_step"}`` for ``exponential_decay(lr, global_step, ...)``)."""
    return {o.name for o in _rate_ops(train_op) if o.type in kinds}


TF1_SCHEDULES = {
    "PolynomialDecay": ("polynomial_decay", "PolynomialDecay",
                        "decay_steps, end_learning_rate, power and cycle"),
    "ExponentialDecay": ("exponential_decay", "ExponentialDecay",
                         "decay_steps, decay_rate and staircase"),
    "PiecewiseConstant": ("piecewise_constant", "PiecewiseConstantDecay", "boundaries and values"),
    "CosineDecay": ("cosine_decay", "CosineDecay", "decay_steps and alpha"),
    "InverseTimeDecay": ("inverse_time_decay", "InverseTimeDecay",
                         "decay_steps, decay_rate and staircase"),
}
"""The name scope a ``tf.compat.v1.train`` schedule builds its ops in -> ``(its name, the
Keras schedule that computes the same rate, the settings the two share)``
(``natural_exp_decay`` builds under ``ExponentialDecay`` too)."""


def tf1_schedules(train_op: Any) -> list[str]:
    """The scopes of :data:`TF1_SCHEDULES` that the learning rates of ``train_op``'s apply
    ops are computed in, in the order found."""
    scopes = dict.fromkeys(o.name.split("/")[0] for o in _rate_ops(train_op))
    return [s for s in scopes if s in TF1_SCHEDULES]


def tf1_optimizer(train_op: Any, session: Any, feed: Mapping | None = None,
                  variables: Any = None) -> tuple[str, dict[str, float]]:
    """``(kind, settings)`` of the optimizer ops ``train_op`` runs (``("none", {})`` if none).

    ``variables``: only the apply ops that update these (the compared ones) are read, so a
    critic's optimizer in the same ``train_op`` is left out. When the ops read disagree
    (two optimizers on the compared variables) the kind is ``"mixed: ..."``
    (:func:`tf1_settings_by_variable` tells them apart).
    """
    found = {}
    for kind, settings in _apply_settings(train_op, session, feed, variables).values():
        found[tuple(sorted(settings.items())) + (kind,)] = (kind, settings)
    if not found:
        return "none", {}
    if len(found) > 1:
        kinds = sorted({k for k, _ in found.values()})
        return "mixed: " + ", ".join(kinds), {}
    return next(iter(found.values()))


def tf1_settings_by_variable(train_op: Any, session: Any, feed: Mapping | None,
                             variables: Mapping[str, Any]
                             ) -> dict[str, tuple[str, dict[str, float]]]:
    """``{name: (kind, settings)}`` of the apply op that updates each of ``variables``
    (name -> variable) in ``train_op``: per variable, where two optimizers step them (an
    actor's and a critic's, each with its own learning rate). A variable no apply op
    updates is left out."""
    ops = {v.op: name for name, v in variables.items()}
    return {ops[op.inputs[0].op]: found
            for op, found in _apply_settings(train_op, session, feed, variables.values()).items()}


def _apply_settings(train_op: Any, session: Any, feed: Mapping | None, variables: Any
                    ) -> dict[tf.Operation, tuple[str, dict[str, float]]]:
    """``{apply op: (kind, settings)}`` for the ``Apply*`` ops ``train_op`` runs (on
    ``variables`` only, unless None), their inputs evaluated with ``feed``."""
    start = train_op.op if isinstance(train_op, tf.Tensor) else train_op
    targets = {v.op for v in variables} if variables is not None else set()
    out = {}
    for op in upstream_ops(start):
        base = apply_kind(op.type)
        if base is None or (variables is not None and op.inputs[0].op not in targets):
            continue
        kind, names = _TF1_OPS[base]
        args = [a.name for a in op.op_def.input_arg]
        tensors = {names[a]: op.inputs[i] for i, a in enumerate(args) if a in names}
        values = session.run(tensors, dict(feed or {}))
        settings = {k: float(np.asarray(v)) for k, v in values.items()}
        if base == "ApplyCenteredRMSProp":
            settings["centered"] = 1.0
        if "use_nesterov" in op.node_def.attr:
            settings["nesterov"] = float(op.get_attr("use_nesterov"))
        out[op] = (kind, settings)
    return out


def tf1_adam_moments(train_op: Any, graph: tf.Graph, variables: Mapping[str, Any]
                     ) -> dict[str, Any]:
    """``{name: Adam's first-moment slot variable}`` for each of ``variables`` (name ->
    variable) that ``train_op`` updates by ``(Resource)ApplyAdam``: the apply op's second
    input, whatever the optimizer's name made of the slot's (``W/Adam``, ``W/pi_adam``)."""
    start = train_op.op if isinstance(train_op, tf.Tensor) else train_op
    names = {v.op: name for name, v in variables.items()}
    with graph.as_default():
        slots = {v.op: v for v in tf1.global_variables()}
    out = {}
    for op in upstream_ops(start):
        if apply_kind(op.type) == "ApplyAdam" and op.inputs[0].op in names \
                and op.inputs[1].op in slots:
            out[names[op.inputs[0].op]] = slots[op.inputs[1].op]
    return out


def keras_optimizer(optimizer: Any) -> tuple[str, dict[str, float]]:
    """``(kind, settings)`` of a Keras 3 or ``tf_keras`` optimizer, from ``get_config()``."""
    config = dict(optimizer.get_config())
    kind = _KERAS_KINDS.get(type(optimizer).__name__.lower(), type(optimizer).__name__)
    lr = config.get("learning_rate")
    if isinstance(lr, Mapping) or lr is None:  # a schedule: its value now
        lr = np.asarray(getattr(optimizer, "learning_rate", np.nan))
        lr = lr() if callable(lr) else lr
    settings = {"learning_rate": float(np.asarray(lr))}
    for key in _COMPARED[1:]:
        value = config.get(key)
        if isinstance(value, (bool, int, float, np.floating)) and value is not None:
            settings[key] = float(value)
    for key in ("clipnorm", "global_clipnorm", "clipvalue"):
        if config.get(key) is not None:
            settings[key] = float(config[key])
    if config.get("use_ema"):
        settings["use_ema"] = 1.0
    if kind == "sgd" and not settings.get("momentum"):
        settings.pop("nesterov", None)
    return kind, settings


def optimizer_rows(tf1_kind: str, tf1_settings: Mapping[str, float], keras_kind: str,
                   keras_settings: Mapping[str, float], names: tuple[str, str],
                   context: str, tf1_clip: tuple[str, str] | None = None,
                   tf1_clip_at: float | None = None) -> list[Row]:
    """Weights-rung rows: the kinds, then every setting either side has.

    Values are compared to a relative 1e-6: float32 storage changes a setting by < 6e-8
    relative, a different default (epsilon 1e-8 vs 1e-7) by far more. Gradient clipping:
    TF1 code clips in its graph before the apply op (``tf1_clip``, read by
    :func:`tf1_clipping`: what and the Keras setting that does the same), Keras in its
    optimizer (``clipnorm``...); a Keras clipping of another kind than TF1's fails (the
    weights show it only on a batch whose gradients are clipped), one TF1's graph shows no
    clipping op for warns, the same kind passes at the same threshold (``tf1_clip_at``,
    read by :func:`tf1_clip_thresholds`; where it is None, the thresholds are compared
    through the weights). ``names`` are what to call the two optimizers in the notes (the
    TF1 class or apply op, the Keras class).
    """
    tf1_name, keras_name = names
    if tf1_kind != keras_kind:
        return [Row("weights", "optimizer", float("inf"), float("inf"), False,
                    f"different optimizers: TF1 runs {tf1_name} ({tf1_kind}), the TF2 side "
                    f"has {keras_name} ({keras_kind})"
                    + (": TF1 Adam has no weight decay; use keras.optimizers.Adam"
                       if (tf1_kind, keras_kind) == ("adam", "adamw") else ""), context)]
    rows = []
    for key in dict.fromkeys([*tf1_settings, *keras_settings]):
        a, b = float(tf1_settings.get(key, 0.0)), float(keras_settings.get(key, 0.0))
        diff = abs(a - b)
        scale = max(abs(a), abs(b))
        rel = diff / scale if scale > 0 else 0.0
        if key in _CLIPS:
            rows.append(_clipping_row(key, b, tf1_clip, tf1_clip_at, keras_name, context))
            continue
        informational = key == "use_ema"
        ok = rel <= 1e-6 or informational
        note = ""
        if rel > 1e-6:
            note = f"TF1 {key}={a:g}, {keras_name} {key}={b:g}"
            if key == "epsilon" and tf1_kind == "adam":
                note += (f" (Keras Adam defaults to epsilon=1e-7, TF1's AdamOptimizer to 1e-8: "
                         f"write epsilon={_short(a)})")
            elif key not in ("nesterov", "amsgrad", "centered"):
                note += f"{WRITE}{key}={_short(a)}"
        rows.append(Row("weights", f"optimizer.{key}", diff, rel, ok, note, context))
    if tf1_clip is not None and not any(k in keras_settings for k in _CLIPS):
        at = "" if tf1_clip_at is None else f" at {tf1_clip_at:g}"
        setting = tf1_clip[1] + ("" if tf1_clip_at is None else f"={_short(tf1_clip_at)}")
        rows.append(Row("weights", "optimizer.clipping", 0.0, 0.0, True,
                        f"TF1 clips the gradients {tf1_clip[0]}{at} in its graph; the Keras "
                        f"optimizer does not clip (compared through the train steps: set "
                        f"{setting}, or clip them {tf1_clip[0]} in the TF2 train step, as "
                        "TF1 does)", context))
    return rows


WRITE = ": write "
"""How a settings row's note starts its fix (the value to write), which a note that names
another cause (optimizers swapped between networks, shared) leaves out."""


def settings_only(note: str) -> str:
    """A settings row's note without its fix: the two settings."""
    return note.split(WRITE)[0]


def _short(x: float) -> str:
    """``x`` as code would write it: ``1e-8``, ``1e-5``, ``0.001`` (not ``1e-08``)."""
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + m.group(1).replace("+", "") + m.group(2),
                  f"{x:g}")


_CLIPS = ("clipnorm", "global_clipnorm", "clipvalue")
"""Keras' gradient clipping settings."""


def _clipping_row(key: str, value: float, tf1_clip: tuple[str, str] | None,
                  tf1_clip_at: float | None, keras_name: str, context: str) -> Row:
    """The row of one Keras clipping setting against TF1's clipping (:func:`optimizer_rows`)."""
    item = f"optimizer.{key}"
    if tf1_clip is None:
        return Row("weights", item, 0.0, 0.0, True,
                   f"WARNING {keras_name} {key}={value:g}, and TF1's train_op runs no "
                   "tf.clip_by_* op: if TF1 does not clip, leave it out", context)
    what, setting = tf1_clip
    if key == setting and tf1_clip_at is None:
        return Row("weights", item, 0.0, 0.0, True,
                   f"TF1 clips {what} too (its threshold is compared through the weights)",
                   context)
    if key == setting:
        diff = abs(value - tf1_clip_at)
        rel = diff / max(abs(value), abs(tf1_clip_at), 1e-30)
        return Row("weights", item, diff, rel, rel <= 1e-6,
                   f"TF1 clips {what} at {tf1_clip_at:g} too" if rel <= 1e-6 else
                   f"TF1 clips the gradients {what} at {tf1_clip_at:g} in its graph and "
                   f"{keras_name} has {key}={value:g}: write {key}={_short(tf1_clip_at)}",
                   context)
    at = "" if tf1_clip_at is None else f"={_short(tf1_clip_at)}"
    return Row("weights", item, float("inf"), float("inf"), False,
               f"TF1 clips the gradients {what} in its graph and {keras_name} has "
               f"{key}={value:g}: use {setting}{at} (clipnorm clips each gradient by its own norm, "
               "global_clipnorm all of them together, as tf.clip_by_global_norm)", context)


def drift_hint(tf1_kind: str, optimizer: Any, stepped: bool = False) -> str:
    """What, beyond the settings :func:`optimizer_rows` compares, makes ``optimizer`` (the
    Keras one) step differently from TF1's optimizer of ``tf1_kind``: the note for weights
    that part ("" where nothing is known). RMSProp: the mean square's start, unless every
    velocity the Keras optimizer holds started at 1 (:func:`_velocities_started_at_one`;
    ``stepped``: read after the first step, for an optimizer the train step builds and
    sets then); epsilon's place in tf_keras' legacy RMSprop without momentum."""
    if tf1_kind != "rmsprop":
        return ""
    notes = []
    if not _velocities_started_at_one(optimizer, stepped):
        notes.append(RMSPROP_START)
    legacy = ".legacy." in type(optimizer).__module__  # tf_keras.src.optimizers.legacy.rmsprop
    if legacy and not float(optimizer.get_config().get("momentum") or 0.0):
        notes.append(RMSPROP_LEGACY_EPSILON)
    return "; ".join(notes)


def velocities_built(optimizer: Any) -> bool:
    """Whether a Keras RMSprop holds its velocities yet (else its first step makes them)."""
    return _keras_velocities(optimizer) is not None


def _velocities_started_at_one(optimizer: Any, stepped: bool) -> bool:
    """Before any step: every velocity is 1. After the first (``stepped``):
    ``v_1 = rho v_0 + (1 - rho) g^2`` is at least ``rho`` everywhere where ``v_0 = 1``,
    and ``(1 - rho) g^2`` where ``v_0 = 0``, under ``rho`` unless ``|g|`` exceeds
    ``sqrt(rho / (1 - rho))`` (3 at rho 0.9, 10 at 0.99): such a zero start is missed."""
    velocities = _keras_velocities(optimizer)
    if velocities is None:
        return False
    if not stepped:
        return all(np.all(np.asarray(v) == 1) for v in velocities)
    rho = float(optimizer.get_config().get("rho", 0.9))
    return all(np.all(np.asarray(v) >= rho * (1 - 1e-6)) for v in velocities)


def _keras_velocities(optimizer: Any) -> list | None:
    """The mean-square accumulators a Keras RMSprop holds now, or None before it is built
    (it then makes them as zeros): Keras 3's and tf_keras' ``_velocities``, the legacy
    optimizer's ``rms`` slots."""
    velocities = getattr(optimizer, "_velocities", None)
    if velocities:
        return list(velocities)
    slots = getattr(optimizer, "_slots", None)
    if slots:
        return [per_var["rms"] for per_var in slots.values() if "rms" in per_var] or None
    return None


def float32_rounding(tf1_kind: str, tf1_settings: Mapping[str, float],
                     keras_settings: Mapping[str, float]) -> str:
    """Why a float64 TF1 optimizer drifts from Keras by ~1e-7 relative per step, naming a
    setting TF1 rounded to float32 (see :func:`rounded_to_float32`)."""
    key = _rounded_keys(tf1_settings, keras_settings)[0]
    return (f"TF1's optimizer rounds its settings to float32 even in a float64 graph ({key} = "
            f"float32({keras_settings[key]:g})) and Keras does not, a ~1e-7 relative drift per "
            "step that is not your code's"
            + (" (legacy_graph.optimizers.KerasMatchedAdam matches Keras)"
               if tf1_kind == "adam" else ""))


def rounded_to_float32(tf1_settings: Mapping[str, float],
                       keras_settings: Mapping[str, float]) -> bool:
    """True when some TF1 setting is the float32 rounding of the Keras one (not equal)."""
    return bool(_rounded_keys(tf1_settings, keras_settings))


def _rounded_keys(tf1_settings: Mapping[str, float],
                  keras_settings: Mapping[str, float]) -> list[str]:
    """The settings whose TF1 value is the float32 rounding of the Keras one (not equal)."""
    return [k for k, a in tf1_settings.items() if k in keras_settings
            and a != keras_settings[k] and a == float(np.float32(keras_settings[k]))]


_TF1_CLIPS = (("clip_by_global_norm", "by their global norm", "global_clipnorm"),
              ("clip_by_norm", "each by its own norm", "clipnorm"),
              ("clip_by_value", "by value", "clipvalue"))
"""TF1's clipping ops by name scope: what they clip, and the Keras setting that does the same."""


def tf1_clipping(train_op: Any, loss: Any = None, variables: Any = None
                 ) -> tuple[str, str] | None:
    """``(what TF1 clips, the Keras setting for it)`` when a clipping op's name scope lies on
    the path of a gradient into one of ``train_op``'s apply ops (``tf.clip_by_global_norm``
    between ``compute_gradients`` and ``apply_gradients``), else None.

    Only that path is walked (:func:`_gradient_path_ops`). ``variables``: only the apply ops
    that update these (one optimizer's, where a critic's gradients are clipped and an
    actor's are not), unless None."""
    names = [op.name for op in _gradient_path_ops(train_op, loss, variables)]
    for scope, what, setting in _TF1_CLIPS:
        if any(f"{scope}/" in name or name.startswith(scope) for name in names):
            return what, setting
    return None


def tf1_clip_thresholds(train_op: Any, loss: Any = None, variables: Any = None
                        ) -> list[tuple[tf.Tensor, float]]:
    """``[(tensor, sign)]``: each threshold of the clipping ops on the gradient paths
    (:func:`_gradient_path_ops`) times ``sign`` is the Keras setting that clips the same:
    ``clip_norm`` of ``tf.clip_by_norm`` (its ``Maximum``'s second input) and of
    ``tf.clip_by_global_norm`` (the ``mul`` that scales it), ``clip_value_max`` and
    ``-clip_value_min`` of ``tf.clip_by_value`` (Keras' ``clipvalue=v`` clips to [-v, v]).
    Read from the graph as TensorFlow 2.x's ``clip_ops`` builds them; tensors, not values,
    as a threshold may be a placeholder or a variable."""
    found = []
    for op in _gradient_path_ops(train_op, loss, variables):
        if op.type == "Maximum" and re.search(r"(^|/)clip_by_norm(_\d+)?/Maximum$", op.name):
            found.append((op.inputs[1], 1.0))
        elif op.type == "Mul" and re.search(r"(^|/)clip_by_global_norm(_\d+)?/mul$", op.name):
            found.append((op.inputs[0], 1.0))
        elif op.type == "Minimum" and re.search(r"(^|/)clip_by_value(_\d+)?/Minimum$", op.name):
            found.append((op.inputs[1], 1.0))
        elif op.type == "Maximum" and re.search(r"(^|/)clip_by_value(_\d+)?$", op.name):
            found.append((op.inputs[1], -1.0))
    return found


def _gradient_path_ops(train_op: Any, loss: Any = None, variables: Any = None
                       ) -> list[tf.Operation]:
    """The ops between the gradients and ``train_op``'s apply ops: from each apply op's
    ``grad`` input up to the gradient ops (``tf.gradients``' ``gradients/`` scope, an op's
    ``*_grad/`` scope), the variables and placeholders (a gradient buffer's holders) and,
    where ``loss`` (the TF1 loss tensor) is given, the ops the loss itself reads. A clip in
    the forward pass (``tf.log(tf.clip_by_value(probs, 1e-8, 1))``, a ``hard_sigmoid``)
    clips no gradient, and its own gradient ops are reached only through the gradient
    ops. ``variables``: only the apply ops that update these, unless None."""
    start = train_op.op if isinstance(train_op, tf.Tensor) else train_op
    targets = {v.op for v in variables} if variables is not None else None
    forward = set(upstream_ops(loss)) if loss is not None else set()

    def computes_gradients(op: tf.Operation) -> bool:
        return (op in forward or op.type in ("VarHandleOp", "VariableV2", "Placeholder")
                or is_gradient_op(op))

    found: dict[tf.Operation, None] = {}
    for op in upstream_ops(start):
        if not apply_kind(op.type) or (targets is not None and op.inputs[0].op not in targets):
            continue
        gradient = gradient_input(op)
        if gradient is not None:
            found.update((o, None) for o in upstream_ops(gradient, stop=computes_gradients)
                         if not computes_gradients(o))
    return list(found)


def clipping_hint(tf1_clip: tuple[str, str] | None, keras_settings: Mapping[str, float]) -> str:
    """The weights rows' note when the two sides clip differently, else ''."""
    keras = {k: v for k, v in keras_settings.items()
             if k in ("clipnorm", "global_clipnorm", "clipvalue") and v}
    if tf1_clip is None:
        return (f"the Keras optimizer clips ({', '.join(keras)}) and TF1's graph does not"
                if keras else "")
    what, setting = tf1_clip
    if setting in keras:
        return ""
    if keras:
        return (f"TF1 clips the gradients {what} in its graph and the Keras optimizer has "
                f"{', '.join(keras)}: use {setting} (clipnorm clips each gradient by its "
                "own norm, global_clipnorm all of them together, as tf.clip_by_global_norm)")
    return (f"TF1 clips the gradients {what} in its graph and the Keras optimizer does not "
            f"clip: set {setting}, or clip them {what} in the TF2 train step, as TF1 does")
