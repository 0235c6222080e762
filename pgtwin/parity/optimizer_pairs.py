"""The same optimizer on both sides: built from one spec, or the user's pair.

:func:`optimizer_factories` turns ``pgtwin.parity.compare``'s ``optimizer`` argument into a
``tf.compat.v1.train`` factory and a Keras factory. What each side then runs is read back
and compared by :mod:`pgtwin.parity.optimizer_config`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


from eager.optimizers import make_optimizer as make_keras_optimizer
from legacy_graph.optimizers import make_optimizer as make_tf1_optimizer
from pgtwin_core.config import ReinforceConfig


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
