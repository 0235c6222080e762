"""Taking and applying a gradient safely, the TF1 way: every update path of the graph twin
builds its step from these two.

``checked_gradients`` refuses a loss that does not reach every variable (numpy log-probs
have no gradient: docs/update_paths.md, Seed 000) instead of handing back None or zeros;
``guarded_apply`` applies only finite gradients of a finite loss, so a NaN never enters the
weights or the optimizer state and the step is reported as skipped. Mirrors
``eager/gradient_step.py``.
"""
from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from pgtwin_core.errors import DisconnectedGradientError

from pgtwin.mode_agnostic.step_guard import all_finite


class GivenGradientApply(NamedTuple):
    """A guarded optimizer step fed its gradients: ``placeholders`` by canonical variable
    name (each the variable's shape and dtype), the ``op`` to run and the scalar bool
    ``applied`` it is guarded by (``guarded_apply``)."""

    placeholders: dict[str, tf.Tensor]
    op: tf.Operation
    applied: tf.Tensor


def checked_gradients(loss: tf.Tensor, variables: dict[str, tf.Variable]) -> list[tf.Tensor]:
    """``tf.gradients(loss, variables)``, raising ``DisconnectedGradientError`` on any None."""
    grads = tf.gradients(loss, list(variables.values()))
    missing = [name for name, g in zip(variables, grads) if g is None]
    if missing:
        raise DisconnectedGradientError(missing)
    return grads


def guarded_apply(optimizer: tf.compat.v1.train.Optimizer, variables: dict[str, tf.Variable],
                  grads: list[tf.Tensor], loss: tf.Tensor, max_grad_norm: float | None,
                  allowed: tf.Tensor | None = None) -> tuple[tf.Operation, tf.Tensor]:
    """An op applying ``grads`` (clipped to ``max_grad_norm`` if set) to ``variables`` with
    ``optimizer``, only when ``loss`` and every gradient are finite (and ``allowed``, a
    scalar bool, if given).

    Returns ``(op, applied)``: ``applied`` is the scalar bool the op is guarded by.
    """
    finite = all_finite(grads, loss, allowed)
    if max_grad_norm is not None:
        grads, _ = tf.clip_by_global_norm(grads, max_grad_norm)
    pairs = list(zip(grads, variables.values()))
    # Slots are made outside the cond so that the branch only reads and writes them; TF1's
    # optimizers have no public call for it.
    optimizer._create_slots(list(variables.values()))  # noqa: SLF001 (TensorFlow's own)
    optimizer._prepare()  # noqa: SLF001 (TensorFlow's own)
    op = tf.cond(finite, lambda: tf.group(optimizer.apply_gradients(pairs)), lambda: tf.no_op())
    return op, finite
