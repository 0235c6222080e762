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

from pgtwin.parity.graph_walk import upstream_ops
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
    # a failing row with a cause of its own (a constant added after an activation) explains
    # the rows it feeds better than a count of activations, which the port may call itself
    told = any(not r.ok and r.note for r in rows)
    hint = batch_norm_hint(tf1_batch_norm_epsilons(legacy.loss),
                           keras_batch_norm_epsilons(eager.layers())) or (
        "" if told else _activation_hint(rows, legacy, eager)) or _mode_hint(legacy, eager)
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
    if moved[0].startswith("TF1Program"):
        note = "; ".join(x for x in (note, _tf1_sample_note(legacy)) if x)
    return [r if r.ok else Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                               "; ".join(x for x in (note, r.note) if x), r.context)
            for r in rows]


SAMPLE_OPS = frozenset({"Multinomial", "StatelessMultinomial", "RandomStandardNormal",
                        "StatelessRandomNormalV2", "TruncatedNormal", "RandomUniformInt"})
"""TF1 ops that draw a sample (an action, a Gaussian's noise); dropout's ``RandomUniform``
is left out, its note says what to feed."""
_PASS_ON = frozenset({"Squeeze", "Reshape", "Identity", "Cast", "ExpandDims"})
"""Ops that pass a sample on unchanged in value: the tensor a loop feeds is often after
them (``tf.squeeze(tf.random.categorical(logits, 1))``)."""


def _tf1_sample_note(legacy: TF1Side) -> str:
    """The sampling ops TF1's loss reads that no feed replaces, each with the tensor that
    holds its sample as the loss reads it, and how to feed it; '' where there is none."""
    fed = {t.op for t in legacy.placeholders.values()}
    found = []
    for op in upstream_ops(legacy.loss, control=False, stop=lambda o: o in fed):
        if op.type in SAMPLE_OPS and op not in fed:
            held = op.outputs[0]
            while len(held.consumers()) == 1 and held.consumers()[0].type in _PASS_ON:
                held = held.consumers()[0].outputs[0]
            found.append(held.name)
    if not found:
        return ""
    return (f"TF1's loss reads the sample {', '.join(found)} (drawn in the graph, fed by "
            "nothing): feed it the batch's actions or noise as the training loop does (a "
            f"feed may replace any tensor: TF1Program.feeds={{..., 'KEY': '{found[0]}'}})")


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
            "all), so the steps cannot agree; compare with the dropout off on both sides: "
            "call the model with training=False in the train step given to TF2Program, and "
            "leave TF1's keep_prob at 1.0 (its default, or fed 1.0))")
