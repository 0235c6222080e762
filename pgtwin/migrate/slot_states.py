"""TF1 optimizers' slots as a Keras optimizer's state (convert-checkpoint): ``Momentum`` into
``SGD``, ``RMSProp`` into ``RMSprop``. (Adam's, with its step count, is ``keras_adam_state``.)

**Momentum.** The two keep different quantities. TF1 accumulates gradients and scales the
accumulator by the current rate: ``a <- mu a + g; w <- w - lr a`` (Nesterov: ``w <- w - lr
(g + mu a)``, with the new a). Keras' SGD keeps the step itself: ``m <- mu m - lr g; w <- w +
m`` (Nesterov: ``w <- w + mu m - lr g``). With ``m = -lr a`` the next step of each is the
other's, exactly, for the rate lr of that step; lr is the Keras optimizer's rate at the
iterations written (TF1's at its ``global_step``, where the schedules agree; the settings
rows say where they do not). A later step where a schedule changes the rate parts by design
(``pgtwin.parity.learning_rates.MOMENTUM_RATE_CHANGE``).

**RMSProp.** The same rule on both sides (Keras 3's ``RMSprop.update_step`` and TF1's
``ApplyRMSProp``): ``ms <- rho ms + (1 - rho) g^2``, centered also ``mg <- rho mg + (1 - rho)
g`` and ``ms - mg^2`` for ms below; ``inc = lr g / sqrt(ms + eps)``; with momentum ``mom <- mu
mom + inc; w <- w - mom``, else ``w <- w - inc``. So ms, mg and mom are copied as they are.
TF1 names the slots ``<var>/RMSProp`` (ms), then ``RMSProp_1`` and ``RMSProp_2`` in creation
order: mom, or mg then mom when centered.

Keras 3 and ``tf_keras`` keep these in lists indexed by the variable's position in the list
the optimizer was built on; the legacy ``tf_keras`` optimizer as named slots. None has a
public API for them, so this module reaches in, as ``keras_adam_state`` does for Adam.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

Slots = Mapping[str, Mapping[str, np.ndarray]]
"""``{TF1 variable: {slot suffix: value}}``, as the checkpoint holds them."""


def _keras_slot(optimizer: Any, variable: Any, attribute: str, legacy_name: str) -> Any:
    """The built Keras optimizer's slot ``attribute`` (a list) for ``variable``."""
    if hasattr(optimizer, "get_slot") and not hasattr(optimizer, attribute):  # legacy
        return optimizer.get_slot(variable, legacy_name)
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        index = optimizer._get_variable_index(variable)  # noqa: SLF001
    else:  # tf_keras' new optimizer
        index = optimizer._index_dict[optimizer._var_key(variable)]  # noqa: SLF001
    return getattr(optimizer, attribute)[index]


def _settings(optimizer: Any) -> dict[str, Any]:
    return dict(optimizer.get_config()) if hasattr(optimizer, "get_config") else {}


class MomentumState:
    """TF1 ``MomentumOptimizer``'s accumulators for a Keras ``SGD`` with momentum."""

    kind = "momentum"
    suffixes = ("Momentum",)

    def __init__(self, slots: Mapping[str, Mapping[str, np.ndarray]]):
        self.slots = slots

    @classmethod
    def read(cls, slots: Slots, names: list[str], optimizer: Any) -> "MomentumState | None":
        """The state of ``names``, where each has exactly TF1 Momentum's one slot and the
        Keras optimizer is an SGD with momentum; else None."""
        if type(optimizer).__name__ != "SGD" or not _settings(optimizer).get("momentum"):
            return None
        if any(set(slots.get(n, {})) != set(cls.suffixes) for n in names):
            return None
        return cls({n: slots[n] for n in names})

    def written(self, optimizer: Any, variable: Any, name: str, rate: float
                ) -> list[tuple[str, Any, np.ndarray]]:
        """``(label, Keras slot, value)`` to write for TF1 variable ``name``."""
        a = np.asarray(self.slots[name]["Momentum"], np.float64)
        return [(f"{name}/Momentum -> momentum",
                 _keras_slot(optimizer, variable, "momentums", "momentum"), -rate * a)]

    def step(self, weights: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray],
             settings: Mapping[str, float]) -> dict[str, np.ndarray]:
        """The weights after TF1's next step from this state (float64 numpy)."""
        mu, rate = settings["momentum"], settings["learning_rate"]
        out = {}
        for name, g in grads.items():
            a = mu * np.asarray(self.slots[name]["Momentum"], np.float64) + g
            out[name] = np.asarray(weights[name], np.float64) - rate * (
                g + mu * a if settings.get("nesterov") else a)
        return out


class RMSPropState:
    """TF1 ``RMSPropOptimizer``'s mean square (and mean gradient, momentum) for a Keras
    ``RMSprop`` of the same kind (centered or not)."""

    kind = "rmsprop"

    def __init__(self, slots: Mapping[str, Mapping[str, np.ndarray]], centered: bool):
        self.slots, self.centered = slots, centered
        self.suffixes = self.suffixes_of(centered)

    @staticmethod
    def suffixes_of(centered: bool) -> tuple[str, ...]:
        """TF1's slot suffixes: ms, then mom, or mg and mom when centered."""
        return ("RMSProp", "RMSProp_1", "RMSProp_2")[:3 if centered else 2]

    @classmethod
    def read(cls, slots: Slots, names: list[str], optimizer: Any) -> "RMSPropState | None":
        """The state of ``names``, where each has exactly TF1 RMSProp's slots for the Keras
        ``RMSprop``'s ``centered``; else None."""
        if type(optimizer).__name__ != "RMSprop":
            return None
        centered = bool(_settings(optimizer).get("centered"))
        if any(set(slots.get(n, {})) != set(cls.suffixes_of(centered)) for n in names):
            return None
        return cls({n: slots[n] for n in names}, centered)

    def _parts(self, name: str) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """``(ms, mg or None, mom)`` of TF1 variable ``name``."""
        own = self.slots[name]
        if self.centered:
            return own["RMSProp"], own["RMSProp_1"], own["RMSProp_2"]
        return own["RMSProp"], None, own["RMSProp_1"]

    def written(self, optimizer: Any, variable: Any, name: str, rate: float
                ) -> list[tuple[str, Any, np.ndarray]]:
        """``(label, Keras slot, value)`` to write for TF1 variable ``name`` (copies)."""
        ms, mg, mom = self._parts(name)
        out = [(f"{name}/RMSProp -> velocity",
                _keras_slot(optimizer, variable, "_velocities", "rms"), ms)]
        if mg is not None:
            out.append((f"{name}/RMSProp_1 -> average_gradient",
                        _keras_slot(optimizer, variable, "_average_gradients", "mg"), mg))
        if _settings(optimizer).get("momentum"):
            out.append((f"{name}/{self.suffixes[-1]} -> momentum",
                        _keras_slot(optimizer, variable, "_momentums", "momentum"), mom))
        return out

    def step(self, weights: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray],
             settings: Mapping[str, float]) -> dict[str, np.ndarray]:
        """The weights after TF1's next step from this state (float64 numpy)."""
        rho, rate, eps = settings["rho"], settings["learning_rate"], settings["epsilon"]
        mu = settings.get("momentum", 0.0)
        out = {}
        for name, g in grads.items():
            ms, mg, mom = (None if x is None else np.asarray(x, np.float64)
                           for x in self._parts(name))
            ms = rho * ms + (1.0 - rho) * g * g
            denominator = ms + eps
            if mg is not None:
                mg = rho * mg + (1.0 - rho) * g
                denominator = ms - mg * mg + eps
            inc = rate * g / np.sqrt(denominator)
            step = mu * mom + inc if mu else inc
            out[name] = np.asarray(weights[name], np.float64) - step
        return out


STATES = (MomentumState, RMSPropState)
"""The slot states tried, in order, for a converted optimizer that is not Adam."""


def read_slot_state(slots: Slots, names: list[str], optimizer: Any
                    ) -> MomentumState | RMSPropState | None:
    """The first of :data:`STATES` that ``slots`` hold for every one of ``names`` and that
    ``optimizer`` (a built Keras optimizer, or None) takes; else None."""
    if optimizer is None:
        return None
    return next((s for s in (cls.read(slots, names, optimizer) for cls in STATES)
                 if s is not None), None)
