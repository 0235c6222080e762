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

from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin.parity.graph_walk import upstream_ops
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
#: Why a faithful migration still drifts, by kind.
_KNOWN_DIFFERENCES = {
    "rmsprop": "TF1's RMSProp starts its mean square at 1.0 and puts epsilon inside the "
               "square root; Keras starts at 0 and adds epsilon outside: the steps differ "
               "even with equal settings",
}


def _op_kind(op_type: str) -> str | None:
    base = op_type.replace("Resource", "").replace("Sparse", "")
    return base if base in _TF1_OPS else None


def tf1_optimizer(train_op: Any, session: Any, feed: Mapping | None = None,
                  variables: Any = None) -> tuple[str, dict[str, float]]:
    """``(kind, settings)`` of the optimizer ops ``train_op`` runs (``("none", {})`` if none).

    ``variables``: only the apply ops that update these (the compared ones) are read, so a
    critic's optimizer in the same ``train_op`` is left out. When the ops read disagree
    (two optimizers on the compared variables) the kind is ``"mixed: ..."``.
    """
    start = train_op.op if isinstance(train_op, tf.Tensor) else train_op
    targets = {v.op for v in variables} if variables is not None else set()
    applies = [op for op in upstream_ops(start) if _op_kind(op.type)
               and (variables is None or op.inputs[0].op in targets)]
    if not applies:
        return "none", {}
    found = {}
    for op in applies:
        base = _op_kind(op.type)
        kind, names = _TF1_OPS[base]
        args = [a.name for a in op.op_def.input_arg]
        tensors = {names[a]: op.inputs[i] for i, a in enumerate(args) if a in names}
        values = session.run(tensors, dict(feed or {}))
        settings = {k: float(np.asarray(v)) for k, v in values.items()}
        if base == "ApplyCenteredRMSProp":
            settings["centered"] = 1.0
        if "use_nesterov" in op.node_def.attr:
            settings["nesterov"] = float(op.get_attr("use_nesterov"))
        found[tuple(sorted(settings.items())) + (kind,)] = (kind, settings)
    if len(found) > 1:
        kinds = sorted({k for k, _ in found.values()})
        return "mixed: " + ", ".join(kinds), {}
    return next(iter(found.values()))


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
                   context: str) -> list[Row]:
    """Weights-rung rows: the kinds, then every setting either side has.

    Values are compared to a relative 1e-6: float32 storage changes a setting by < 6e-8
    relative, a different default (epsilon 1e-8 vs 1e-7) by far more. Gradient clipping
    (Keras ``clipnorm``...) is reported but not failed: TF1 code clips in the graph before
    the apply op, where this reader does not look. ``names`` are what to call the two
    optimizers in the notes (the TF1 class or apply op, the Keras class).
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
        informational = key in ("clipnorm", "global_clipnorm", "clipvalue", "use_ema")
        ok = rel <= 1e-6 or informational
        note = ""
        if rel > 1e-6:
            note = f"TF1 {key}={a:g}, {keras_name} {key}={b:g}"
            if key == "epsilon" and tf1_kind == "adam":
                note += " (Keras Adam defaults to epsilon=1e-7, TF1's AdamOptimizer to 1e-8: " \
                        "write epsilon=1e-8)"
            if informational:
                note += " (clipping: compared through the weights)"
        rows.append(Row("weights", f"optimizer.{key}", diff, rel, ok, note, context))
    if tf1_kind in _KNOWN_DIFFERENCES:
        rows.append(Row("weights", "optimizer.semantics", 0.0, 0.0, True,
                        _KNOWN_DIFFERENCES[tf1_kind], context))
    return rows


#: Why a float64 TF1 Adam drifts from Keras by ~1e-7 relative per step.
FLOAT32_ROUNDING = ("TF1's optimizer rounds its settings to float32 even in a float64 graph "
                    "(beta_2 = float32(0.999)) and Keras does not, a ~1e-7 relative drift "
                    "per step that is not your code's (legacy_graph.optimizers.KerasMatchedAdam "
                    "matches Keras)")


def rounded_to_float32(tf1_settings: Mapping[str, float],
                       keras_settings: Mapping[str, float]) -> bool:
    """True when some TF1 setting is the float32 rounding of the Keras one (not equal)."""
    return any(a != keras_settings[k] and a == float(np.float32(keras_settings[k]))
               for k, a in tf1_settings.items() if k in keras_settings)
