"""Notes for the outputs and loss rows that part, from what the two forward passes show.

Causes the values alone cannot name, each checked only when a row has parted:

* a batch-normalisation epsilon that differs, or batch normalisation run in another mode
  on each side (:mod:`pgtwin.parity.layer_hints`);
* a forward pass that is random: run again on the same inputs and weights it gives other
  values (dropout left on: each side draws its own masks, so no rung can agree);
* a train step that is random where the loss is not: the Keras model holds dropout layers
  that the loss calls with ``training=False`` and the train step with ``training=True``.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pgtwin.parity.ladder import Row
from pgtwin.parity.layer_hints import (activation_hint, batch_norm_hint, batch_norm_mode_hint,
                                       keras_activations, keras_batch_norm_epsilons,
                                       moving_statistics, tf1_activations,
                                       tf1_batch_norm_epsilons)
from pgtwin.parity.model_state import variable_ops
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side, underlying


def with_layer_hints(rows: list[Row], legacy: TF1Side, eager: TF2Side) -> list[Row]:
    """Output rows that part, and say nothing yet, given the layers' settings that differ
    (:mod:`pgtwin.parity.layer_hints`)."""
    if all(r.ok or r.note for r in rows):
        return rows
    hint = batch_norm_hint(tf1_batch_norm_epsilons(legacy.loss),
                           keras_batch_norm_epsilons(eager.layers())) or _activation_hint(
        rows, legacy, eager) or _mode_hint(legacy, eager)
    return [r if r.ok or r.note or not hint else
            Row(r.rung, r.item, r.max_abs, r.max_rel, False, hint, r.context) for r in rows]


def _activation_hint(rows: list[Row], legacy: TF1Side, eager: TF2Side) -> str:
    """:func:`pgtwin.parity.layer_hints.activation_hint` on the two sides' counts, unless an
    output that agrees is computed through every activated layer the loss is: then the
    layers' activations are not what parts (a Keras model that squashes its mean with
    ``tf.tanh`` in ``call``, where TF1 wrote ``tf.tanh(x @ w + b)``: counted on TF1's side
    only)."""
    counted = tf1_activations(legacy.loss)
    agreeing = [legacy.outputs[r.item] for r in rows if r.ok and r.item in legacy.outputs]
    if any(tf1_activations(t) == counted for t in agreeing):
        return ""
    return activation_hint(counted, keras_activations(eager.layers(), {
        id(underlying(v)) for v in [*eager.variables.values(), *eager.state.values()]}))


def _mode_hint(legacy: TF1Side, eager: TF2Side) -> str:
    """:func:`pgtwin.parity.layer_hints.batch_norm_mode_hint` on the two sides: TF1's moving
    statistics and those its loss reads, the Keras ``BatchNormalization`` layers and the
    statistics one call of the TF2 loss moves."""
    tf1_moving = moving_statistics(list(legacy.state))
    if not tf1_moving or not any(type(x).__name__ == "BatchNormalization"
                                 for x in eager.layers()):
        return ""
    reached = variable_ops([legacy.loss])
    tf1_read = [n for n in tf1_moving if legacy.state[n].op in reached]
    return batch_norm_mode_hint(tf1_moving, tf1_read, moving_statistics(eager.moved_by_loss()))


def with_randomness(rows: list[Row], legacy: TF1Side, eager: TF2Side,
                     legacy_out: Mapping[str, np.ndarray], eager_out: Mapping[str, np.ndarray]
                     ) -> list[Row]:
    """``rows`` (outputs and loss), their failures noted as random where a side's forward
    pass gives other values when run again on the same inputs and weights (dropout left on:
    the two sides draw different masks, so no rung can agree)."""
    if all(r.ok for r in rows):
        return rows
    moved = []
    for side, first, again in (("TF1Program", legacy_out, legacy.run()),
                               ("TF2Program", eager_out, eager.run()[0])):
        with np.errstate(invalid="ignore"):  # NaN in both runs (inf - inf): not random
            apart = max((float(np.nanmax(np.abs(np.asarray(first[k], np.float64)
                                                - np.asarray(again[k], np.float64)),
                                         initial=0.0))
                         for k in first if k in again), default=0.0)
        if apart > 0:
            moved.append(f"{side} ({apart:.3g})")
    if not moved:
        return rows
    note = (f"{' and '.join(moved)} gave other values when run again on the same inputs and "
            "weights: the forward pass is random (dropout on: keep_prob < 1 or "
            "training=True; or a sampled op), so the two sides cannot agree. Feed the batch "
            "that turns it off (keep_prob 1.0 / is_training False where dropout is all it "
            "does), or, for a sampled op (a Gaussian policy's tf.random_normal noise), make "
            "the noise an input both sides are fed, as the comparison needs one computation")
    return [r if r.ok else Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                               "; ".join(x for x in (note, r.note) if x), r.context)
            for r in rows]


def random_step_note(eager: TF2Side) -> str:
    """The note for train steps that part where the Keras model holds dropout (or noise)
    layers with a rate above 0, else '': the loss compared on the earlier rungs may call
    them in inference mode while the train step draws masks TF1 cannot draw alike."""
    found = [f"{layer.name} (rate {float(getattr(layer, 'rate', 0) or 0):g})"
             for layer in eager.layers()
             if any(k in type(layer).__name__ for k in ("Dropout", "Noise"))
             and float(getattr(layer, "rate", getattr(layer, "stddev", 0)) or 0) > 0]
    if not found:
        return ""
    return (f"the Keras model holds {', '.join(found)}: a train step that calls it with "
            "training=True draws dropout masks TF1's train_op does not draw alike (or at "
            "all), so the steps cannot agree; compare with the dropout off on both sides "
            "(rate 0, keep_prob 1.0)")
