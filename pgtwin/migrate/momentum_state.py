"""TF1 ``MomentumOptimizer``'s accumulators as a Keras ``SGD``'s momentums (convert-checkpoint).

The two keep different quantities. TF1 accumulates gradients and scales the accumulator
by the current rate: ``a <- mu a + g; w <- w - lr a`` (Nesterov: ``w <- w - lr (g + mu
a)``, with the new a). Keras' SGD keeps the step itself: ``m <- mu m - lr g; w <- w + m``
(Nesterov: ``w <- w + mu m - lr g``). With ``m = -lr a`` the next step of each is the
other's, exactly, for the rate lr of that step; so the converter writes ``-lr a``, lr the
Keras optimizer's rate at the iterations written (TF1's at its ``global_step``, where the
schedules agree; the settings rows say where they do not). A later step where a schedule
changes the rate parts by design (``pgtwin.parity.learning_rates.MOMENTUM_RATE_CHANGE``).

Keras 3 and ``tf_keras`` keep the momentums in a list indexed by the variable's position
in the list the optimizer was built on; the legacy ``tf_keras`` optimizer as a slot named
``momentum``. None has a public API for them, so this module reaches in, as
``keras_adam_state`` does for Adam.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

SLOT = "Momentum"
"""The suffix of TF1's accumulator slot, ``<variable>/Momentum`` (the optimizer's default
name)."""


def is_keras_momentum_sgd(optimizer: Any) -> bool:
    """True for Keras 3's and ``tf_keras``' ``SGD`` with a momentum above 0."""
    if type(optimizer).__name__ != "SGD" or not hasattr(optimizer, "get_config"):
        return False
    return float(optimizer.get_config().get("momentum", 0.0) or 0.0) > 0.0


def momentum_slot(optimizer: Any, variable: Any) -> Any:
    """The built Keras SGD's momentum variable for ``variable``."""
    if hasattr(optimizer, "get_slot") and not hasattr(optimizer, "momentums"):  # legacy
        return optimizer.get_slot(variable, "momentum")
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        return optimizer.momentums[optimizer._get_variable_index(variable)]  # noqa: SLF001
    return optimizer.momentums[optimizer._index_dict[optimizer._var_key(variable)]]  # noqa: SLF001


def tf1_accumulators(slots: Mapping[str, Mapping[str, np.ndarray]],
                     names: list[str]) -> dict[str, np.ndarray] | None:
    """``{name: accumulator}`` when each of ``names`` has exactly one slot, TF1 Momentum's
    (``slots``: ``{variable: {suffix: value}}``), else None."""
    found = {}
    for name in names:
        own = slots.get(name, {})
        if set(own) != {SLOT}:
            return None
        found[name] = np.asarray(own[SLOT])
    return found


def tf1_momentum_step(weights: Mapping[str, np.ndarray], accumulators: Mapping[str, np.ndarray],
                      grads: Mapping[str, np.ndarray], rate: float, momentum: float,
                      nesterov: bool) -> dict[str, np.ndarray]:
    """The weights after one TF1 ``MomentumOptimizer`` step from these accumulators (float64
    numpy: the oracle of the converted optimizer's next step)."""
    out = {}
    for name, g in grads.items():
        a = momentum * np.asarray(accumulators[name], np.float64) + g
        step = g + momentum * a if nesterov else a
        out[name] = np.asarray(weights[name], np.float64) - rate * step
    return out
