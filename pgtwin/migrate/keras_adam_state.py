"""Adam's per-variable state (m, v) and step count inside a Keras optimizer.

Keras 3 and ``tf_keras`` keep m and v in lists indexed by the variable's position in the
list the optimizer was built on; the legacy ``tf_keras`` optimizer keeps them as named
slots. None has a public API for them, so this module is the one place that reaches in.
TF1's ``AdamOptimizer`` and Keras' ``Adam`` take the same step from the same state
(``lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)``, ``var -= lr_t m / (sqrt(v) + eps)``), with
Keras' ``iterations`` = the TF1 step count t (:func:`pgtwin.migrate.tf1_checkpoint.adam_step_count`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def is_keras_adam(optimizer: Any) -> bool:
    """True for Keras 3's and ``tf_keras``' ``Adam`` (new and legacy) without AMSGrad.

    AdamW is not TF1 Adam (it decays the weights), and AMSGrad keeps a third slot that TF1
    does not have.
    """
    if type(optimizer).__name__ != "Adam" or not hasattr(optimizer, "iterations"):
        return False
    return not bool(optimizer.get_config().get("amsgrad", False))


def _legacy(optimizer: Any) -> bool:
    return hasattr(optimizer, "get_slot") and not hasattr(optimizer, "_momentums")


def build_optimizer(optimizer: Any, variables: Sequence[Any]) -> None:
    """Create a Keras optimizer's slots (Adam's m, v) for ``variables``, unless it is built.

    Keras 3 and ``tf_keras`` index the slots by the position in ``variables``, so it must
    be the list the user's train step passes to ``apply_gradients``
    (``model.trainable_variables``).
    """
    if _legacy(optimizer):
        optimizer._create_all_weights(list(variables))  # noqa: SLF001
    elif not getattr(optimizer, "built", False):
        optimizer.build(list(variables))


def adam_slots(optimizer: Any, variable: Any) -> tuple[Any, Any]:
    """``(m, v)``, the built optimizer's slot variables for ``variable`` (a Keras 3 variable or tf.Variable)."""
    if _legacy(optimizer):
        return optimizer.get_slot(variable, "m"), optimizer.get_slot(variable, "v")
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        index = optimizer._get_variable_index(variable)  # noqa: SLF001
    else:  # tf_keras' new optimizer
        index = optimizer._index_dict[optimizer._var_key(variable)]  # noqa: SLF001
    return optimizer._momentums[index], optimizer._velocities[index]  # noqa: SLF001
