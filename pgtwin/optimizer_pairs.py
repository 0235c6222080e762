"""The same optimizer on both sides: built from one spec, or the user's pair, then compared.

:func:`optimizer_factories` turns ``pgtwin.parity.compare``'s ``optimizer`` argument into a
``tf.compat.v1.train`` factory and a Keras factory. :func:`hyperparameter_rows` reads both
optimizers' hyperparameters back and reports each as a weights-rung row, so a different
default (Keras Adam's epsilon 1e-7 vs TF1's 1e-8) is named before any weight is compared;
:func:`rounding_hint` explains the one drift that is not a bug in the user's code.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from eager.optimizers import make_optimizer as make_keras_optimizer
from legacy_graph.optimizers import KerasMatchedAdam
from legacy_graph.optimizers import make_optimizer as make_tf1_optimizer
from pgtwin_core.config import ReinforceConfig
from pgtwin.ladder import Row

tf1 = tf.compat.v1

_SPEC_KEYS = {
    "learning_rate": "learning_rate",
    "beta1": "adam_beta1", "beta_1": "adam_beta1",
    "beta2": "adam_beta2", "beta_2": "adam_beta2",
    "epsilon": "adam_epsilon",
}


def optimizer_factories(optimizer: Any, dtype: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``(tf1 optimizer factory, keras optimizer factory)`` from ``compare``'s ``optimizer``.

    ``optimizer`` is either a spec ``(name, kwargs)`` with ``name`` in ``adam``/``sgd`` and
    kwargs among ``learning_rate, beta1 (beta_1), beta2 (beta_2), epsilon`` (missing ones
    take :class:`ReinforceConfig`'s values: lr 1e-2, betas 0.9/0.999, epsilon 1e-8, TF1's
    default), built by the twins' matched ``make_optimizer`` so both sides are identical to
    the last bit; or a pair of zero-argument callables ``(make_tf1_optimizer,
    make_keras_optimizer)``, the user's own, so that a mismatch between them is caught.
    """
    if (isinstance(optimizer, tuple) and len(optimizer) == 2
            and callable(optimizer[0]) and callable(optimizer[1])):
        return optimizer[0], optimizer[1]
    if not (isinstance(optimizer, tuple) and len(optimizer) == 2
            and isinstance(optimizer[0], str) and isinstance(optimizer[1], Mapping)):
        raise ValueError(
            "compare: optimizer must be a spec (name, kwargs) such as "
            "('adam', {'learning_rate': 1e-3}) or a pair of factories "
            f"(make_tf1_optimizer, make_keras_optimizer), got {optimizer!r}")
    name, kwargs = optimizer
    if name not in ("adam", "sgd"):
        raise ValueError(f"compare: optimizer spec name {name!r} is not 'adam' or 'sgd'")
    unknown = sorted(set(kwargs) - set(_SPEC_KEYS))
    if unknown:
        raise ValueError(f"compare: optimizer spec {name!r} has unknown keys {unknown} "
                         f"(known: {sorted(_SPEC_KEYS)})")
    config = ReinforceConfig(optimizer=name, dtype=dtype,
                             **{_SPEC_KEYS[k]: float(v) for k, v in kwargs.items()})
    return (lambda: make_tf1_optimizer(config, dtype)), (lambda: make_keras_optimizer(config))


def _tf1_hyperparameters(opt: Any, session: tf1.Session) -> tuple[str, dict[str, float]]:
    """The kind and hyperparameters of a ``tf.compat.v1.train`` optimizer (known kinds)."""
    def value(x):
        if callable(x):
            x = x()
        if isinstance(x, (tf.Tensor, tf.Variable)):
            x = session.run(x)
        return float(x)
    if isinstance(opt, tf1.train.AdamOptimizer):
        return "adam", {"learning_rate": value(opt._lr), "beta_1": value(opt._beta1),  # noqa: SLF001
                        "beta_2": value(opt._beta2), "epsilon": value(opt._epsilon)}  # noqa: SLF001
    if isinstance(opt, tf1.train.MomentumOptimizer):
        return "momentum", {"learning_rate": value(opt._learning_rate),  # noqa: SLF001
                            "momentum": value(opt._momentum)}  # noqa: SLF001
    if isinstance(opt, tf1.train.GradientDescentOptimizer):
        return "sgd", {"learning_rate": value(opt._learning_rate)}  # noqa: SLF001
    return type(opt).__name__, {}


def _keras_hyperparameters(opt: Any) -> tuple[str, dict[str, float]]:
    """The kind and hyperparameters of a Keras optimizer (Adam and SGD)."""
    lr = float(np.asarray(opt.learning_rate))
    extras = {"weight_decay": float(opt.weight_decay or 0.0)}
    if isinstance(opt, keras.optimizers.Adam):
        return "adam", {"learning_rate": lr, "beta_1": float(opt.beta_1),
                        "beta_2": float(opt.beta_2), "epsilon": float(opt.epsilon),
                        "amsgrad": float(opt.amsgrad), **extras}
    if isinstance(opt, keras.optimizers.SGD):
        kind = "momentum" if opt.momentum else "sgd"
        params = {"learning_rate": lr, **extras}
        if opt.momentum:
            params["momentum"] = float(opt.momentum)
        return kind, params
    return type(opt).__name__, {}


def hyperparameter_rows(tf1_opt: Any, keras_opt: Any, session: tf1.Session,
                        context: str) -> list[Row]:
    """Weights-rung rows for the two optimizers' kind and hyperparameters.

    Values are compared to a relative 1e-6: float32 storage of a hyperparameter changes it
    by < 6e-8 relative, a different default (epsilon 1e-8 vs 1e-7) by far more. Options
    Keras has and TF1 lacks (``amsgrad``, ``weight_decay``) count as 0 on the TF1 side.
    """
    kind1, hp1 = _tf1_hyperparameters(tf1_opt, session)
    kind2, hp2 = _keras_hyperparameters(keras_opt)
    if kind1 != kind2:
        return [Row("weights", "optimizer", float("inf"), float("inf"), False,
                    f"different optimizers: TF1 {type(tf1_opt).__name__} ({kind1}) vs "
                    f"Keras {type(keras_opt).__name__} ({kind2})", context)]
    rows = []
    for key in hp2:
        a, b = hp1.get(key, 0.0), hp2[key]
        diff = abs(a - b)
        rel = diff / max(abs(a), abs(b)) if max(abs(a), abs(b)) > 0 else 0.0
        ok = rel <= 1e-6
        note = "" if ok else f"TF1 {key}={a:g}, Keras {key}={b:g}" + (
            " (Keras Adam defaults to epsilon=1e-7, TF1's AdamOptimizer to 1e-8)"
            if key == "epsilon" else "")
        rows.append(Row("weights", f"optimizer.{key}", diff, rel, ok, note, context))
    return rows


def rounding_hint(tf1_opt: Any, dtype: str) -> str:
    """Why float64 weights may drift ~1e-7 relative with a plain TF1 Adam, or ''."""
    plain = (isinstance(tf1_opt, tf1.train.AdamOptimizer)
             and not isinstance(tf1_opt, KerasMatchedAdam)
             and not isinstance(tf1_opt._beta1, tf.Tensor))  # noqa: SLF001
    if dtype != "float64" or not plain:
        return ""
    return ("TF1 Adam rounds Python hyperparameters to float32 even in a float64 graph "
            "(beta_2 = float32(0.999)), Keras does not: ~1e-7 relative drift; "
            "legacy_graph.optimizers.KerasMatchedAdam matches Keras")
