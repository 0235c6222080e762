"""Taking and applying a gradient safely, the TF2 way: every update path of the eager twin
builds its step from these.

``checked_gradients`` refuses a loss that does not reach every variable (numpy log-probs
have no gradient: docs/update_paths.md, Seed 000) instead of handing back None or zeros;
``guarded_apply`` applies only finite gradients of a finite loss, so a NaN never enters the
weights or the optimizer state and the step is reported as skipped. Mirrors
``legacy_graph/gradient_step.py``.
"""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from pgtwin_core.errors import DisconnectedGradientError

from pgtwin.mode_agnostic.step_guard import all_finite


def checked_gradients(tape: tf.GradientTape, loss: tf.Tensor,
                      variables: dict[str, tf.Variable]) -> list[tf.Tensor]:
    """``tape.gradient(loss, variables)``, raising ``DisconnectedGradientError`` on any None."""
    grads = tape.gradient(loss, list(variables.values()))
    missing = [name for name, g in zip(variables, grads) if g is None]
    if missing:
        raise DisconnectedGradientError(missing)
    return grads


def apply_pairs(optimizer: tf.keras.optimizers.Optimizer,
                pairs: Sequence[tuple[tf.Tensor, tf.Variable]]) -> tf.Tensor:
    """``optimizer.apply_gradients(pairs)``; True (the value of ``guarded_apply``'s branch)."""
    optimizer.apply_gradients(pairs)
    return tf.constant(True)


def guarded_apply(optimizer: tf.keras.optimizers.Optimizer, variables: dict[str, tf.Variable],
                  grads: list[tf.Tensor], loss: tf.Tensor, max_grad_norm: float | None,
                  allowed: tf.Tensor | None = None) -> tf.Tensor:
    """Apply ``grads`` (clipped to ``max_grad_norm`` if set) to ``variables`` with
    ``optimizer`` only when ``loss`` and every gradient are finite (and ``allowed``, a scalar
    bool, if given); returns that bool."""
    finite = all_finite(grads, loss, allowed)
    if max_grad_norm is not None:
        grads, _ = tf.clip_by_global_norm(grads, max_grad_norm)
    pairs = list(zip(grads, variables.values()))
    tf.cond(finite, lambda: apply_pairs(optimizer, pairs), lambda: tf.constant(False))
    return finite
