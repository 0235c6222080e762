"""The outputs and loss rows of one forward pass of both programs, each that parts told its
likely cause: what ``pgtwin compare`` reports after the variables, and what
``convert-checkpoint --tf2 --tf1`` checks the restored model against.

The notes come from :mod:`pgtwin.parity.output_notes` (a batch-norm epsilon or an activation
that differs, a random forward pass) and :mod:`pgtwin.parity.loss_hints` (a loss a count
apart, a regulariser only one side adds, a softmax applied twice).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import tensorflow as tf

from pgtwin.parity.flatten_order import flatten_order_hint
from pgtwin.parity.graph_walk import upstream_ops
from pgtwin.parity.ladder import LOSS_VALUES_PREFIX, Row, compare_arrays
from pgtwin.parity.loss_hints import (batch_counts, count_ratio, divisor_note, minimised_hint,
                                      ratio_hint, regularization_hint, softmax_hint, term_hint,
                                      untested_reduction_note)
from pgtwin.parity.output_notes import with_layer_hints, with_randomness
from pgtwin.parity.parity_rows import output_rows
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side


def forward_rows(legacy: TF1Side, eager: TF2Side, legacy_out: Mapping[str, np.ndarray],
                 eager_out: Mapping[str, np.ndarray], fed: Mapping[str, np.ndarray],
                 tol: Mapping[str, tuple[float, float]], ctx: str) -> list[Row]:
    """The ``outputs`` rows (the TF1 program's outputs against the TF2 program's: where the
    TF2 program names none, those of its loss's results that TF1 names) and the ``loss``
    row, with their notes. ``tol``: ``parity_rows.tolerances``' ``outputs`` and ``loss``."""
    if eager.program.outputs is None:
        eager_out = {k: v for k, v in eager_out.items() if k in legacy_out}
    rows = output_rows(legacy_out, eager_out, *tol["outputs"], ctx,
                       sides=("TF1Program", "TF2Program"))
    rows = with_layer_hints(_with_key_notes(rows, legacy_out, eager_out, eager, ctx), legacy,
                            eager)
    if any(not r.ok and not r.note for r in rows):
        hint = flatten_order_hint(legacy, eager, legacy_out, *tol["outputs"])
        rows = [r if r.ok or r.note or not hint else
                Row(r.rung, r.item, r.max_abs, r.max_rel, False, hint, r.context) for r in rows]
    rows = [_rounded_row(r, legacy.outputs.get(r.item)) if not r.ok and not r.note else r
            for r in rows]
    counts = batch_counts(fed)
    rows = [_scalar_count_row(r, legacy_out, eager_out, counts, tol["outputs"][0], legacy)
            if not r.ok and not r.note else r for r in rows]
    loss = loss_row(legacy, legacy_out["loss"], eager_out["loss"], fed, *tol["loss"], ctx)
    rows, loss = _ignored_mask_rows(rows + [loss], legacy, eager_out, fed, tol["outputs"])
    agreed = sorted(r.item for r in rows if r.ok)
    rows = [_parts_past(r, agreed) if not r.ok and not r.note and agreed else r for r in rows]
    if not loss.ok and rows and len(agreed) == len(rows) and \
            loss.note.startswith(LOSS_VALUES_PREFIX):
        loss = Row(loss.rung, loss.item, loss.max_abs, loss.max_rel, False,
                   f"{loss.note}. The outputs agree ({', '.join(agreed)}), so the gap is in "
                   "what each loss computes from them and the inputs: name the tensors in "
                   "between in TF1Program.outputs (returns, advantages, log-probabilities) and "
                   "return them from the TF2 loss under the same keys to see which parts",
                   ctx)
    rows.append(loss)
    untested = untested_reduction_note(legacy, fed) if loss.ok else ""
    if untested:
        rows.append(Row("loss", "nonzero weights", 0.0, 0.0, True, untested, ctx))
    return with_randomness(rows, legacy, eager, legacy_out, eager_out)


def _with_key_notes(rows: list[Row], legacy_out: Mapping[str, np.ndarray],
                    eager_out: Mapping[str, np.ndarray], eager: TF2Side, ctx: str) -> list[Row]:
    """``rows`` with an output only one side has told apart by why: a key of
    ``TF2Program.outputs`` the TF2 loss does not return (a failing row of its own: nothing
    else would show it, the TF1 side not asking for it either), and a TF1 key the TF2 loss
    returns but ``TF2Program.outputs`` leaves out, or does not return at all."""
    asked, returned = eager.program.outputs, eager.returned
    keys = f"its keys: {', '.join(returned) or 'none but loss'}"
    out = []
    for r in rows:
        if r.ok or r.item not in legacy_out or r.item in eager_out:
            out.append(r)
        elif r.item in returned:
            out.append(Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                           f"the TF2 loss returns {r.item!r}, but TF2Program.outputs "
                           f"({', '.join(asked or ())}) leaves it out: list it there, or "
                           "leave outputs None (every key TF1Program.outputs has)", ctx))
        else:
            out.append(Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                           f"TF1Program.outputs has {r.item!r}, and the TF2 loss returns no "
                           f"such key ({keys}): return it from the loss under that name",
                           ctx))
    for key in asked or ():
        if key != "loss" and key not in returned and key not in legacy_out:
            out.append(Row("outputs", key, float("inf"), float("inf"), False,
                           f"TF2Program.outputs asks for {key!r}, and the TF2 loss returns "
                           f"no such key ({keys}): return it from the loss, or take it out "
                           "of TF2Program.outputs", ctx))
    return out


def loss_row(legacy: TF1Side, a: np.ndarray, b: np.ndarray, fed: Mapping[str, np.ndarray],
             rtol: float, atol: float, ctx: str) -> Row:
    """The loss row, with the likely mistake as its note when the two part."""
    row = compare_arrays("loss", "loss", a, b, rtol, atol, ctx)
    if row.ok or np.shape(a) != () or np.shape(b) != ():
        return row
    precision = _precision_hint(np.asarray(a).dtype, np.asarray(b).dtype)
    counts = batch_counts(fed)
    a, b = float(a), float(b)
    sizes = [s for x in fed.values() for s in np.shape(x)[:2]]
    sizes += [int(np.prod(np.shape(x)[:2])) for x in fed.values() if np.ndim(x) >= 2]
    hint = (precision or _rounded_row(row, legacy.loss).note
            or minimised_hint(legacy, b, max(rtol, 1e-6) * 10)
            or ratio_hint(a, b, sizes, max(rtol, 1e-6) * 10)
            or regularization_hint(legacy, a, b)
            or softmax_hint(legacy, b, max(rtol, 1e-6) * 10, a)
            or _count_hint("the TF2 loss is TF1's", a, b, counts, rtol, legacy.loss)
            or term_hint(legacy, a, b, max(rtol, 1e-6) * 10, counts))
    digits = next((n for n in range(6, 18) if f"{a:.{n}g}" != f"{b:.{n}g}"), 17)
    return Row(row.rung, row.item, row.max_abs, row.max_rel, False,
               hint or f"{LOSS_VALUES_PREFIX}{a:.{digits}g}, TF2 loss {b:.{digits}g}", ctx)


def _count_hint(what: str, a: float, b: float, counts: Mapping[int, str], rtol: float,
                tf1_tensor: tf.Tensor | None) -> str:
    """Where ``b / a`` is the quotient of two of the batch's counts (``loss_hints.
    batch_counts``): each side's mean divides by another count; '' otherwise."""
    pair = None if a == 0.0 else count_ratio(b / a, counts, max(rtol, 1e-6) * 10)
    if pair is None:
        return ""
    return f"{what} x {pair[0]}/{pair[1]}: {divisor_note(*pair, counts, tf1_tensor)}"


def _precision_hint(tf1_dtype: np.dtype, tf2_dtype: np.dtype) -> str:
    """Where the TF2 loss comes back in a narrower float than TF1's: it was computed there
    (a Keras loss under ``floatx`` float32 in a float64 comparison: a fit port's loss parted
    by 1e-7 relative, and the note pointed at the loss's code); '' otherwise."""
    if tf1_dtype.kind != "f" or tf2_dtype.kind != "f" or tf2_dtype.itemsize >= tf1_dtype.itemsize:
        return ""
    return (f"the TF2 loss is {tf2_dtype.name} where TF1's is {tf1_dtype.name}: it was computed "
            f"in {tf2_dtype.name} (Keras computes a compiled or built-in loss in "
            f"keras.config.floatx(), float32 unless set, whatever its inputs' dtype): call "
            f"keras.config.set_floatx({tf1_dtype.name!r}) before the model is built, or "
            "compute the loss from the model's outputs yourself")


ROUNDING = 1e-5
"""The largest relative gap that TF1's own float32 rounding in a float64 graph explains."""


def _ignored_mask_rows(rows: list[Row], legacy: TF1Side, eager_out: Mapping[str, np.ndarray],
                       fed: Mapping[str, np.ndarray], tol: tuple[float, float]
                       ) -> tuple[list[Row], Row]:
    """``(output rows, loss row)`` of ``rows`` (the loss last), those that part with no cause
    told where TF1 run again with a 0/1 input (a mask) replaced by ones gives the TF2
    value: the TF2 side leaves that input out there (a value loss without its mask)."""
    silent = [r for r in rows if not r.ok and (not r.note
                                               or r.note.startswith(LOSS_VALUES_PREFIX))]
    masks = [k for k, v in fed.items() if np.ndim(v) >= 1 and np.size(v)
             and np.isin(v, (0, 1)).all() and not np.all(np.asarray(v) == 1)
             and np.asarray(v).dtype.kind == "f"]
    for key in masks if silent else []:
        replayed = legacy.run({key: np.ones_like(fed[key])})
        for r in silent:
            if r.item in replayed and r.item in eager_out and compare_arrays(
                    r.rung, r.item, replayed[r.item], eager_out[r.item], *tol, "").ok:
                what = "loss" if r.item == "loss" else repr(r.item)
                note = (f"the TF2 {what} is TF1's with inputs[{key!r}] all ones: the TF2 side "
                        f"leaves {key!r} out of it (a padded step counted as a real one): "
                        f"weight by {key!r} there as TF1 does")
                rows = [Row(x.rung, x.item, x.max_abs, x.max_rel, False, note, x.context)
                        if x is r else x for x in rows]
    return rows[:-1], rows[-1]


def _rounded_row(row: Row, tf1_tensor: tf.Tensor | None) -> Row:
    """A float64 row that parts by less than :data:`ROUNDING`, told where TF1's graph casts
    float64 to float32 on the way to ``tf1_tensor`` (``tf.compat.v1.losses`` compute their
    weighted loss in float32 whatever the graph's dtype): that rounding, not the port, is
    the gap; ``row`` unchanged otherwise."""
    if tf1_tensor is None or row.ok or row.max_rel > ROUNDING:
        return row
    casts = [op.name for op in upstream_ops(tf1_tensor) if op.type == "Cast"
             and op.get_attr("SrcT") == tf.float64 and op.get_attr("DstT") == tf.float32]
    if not casts:
        return row
    return Row(row.rung, row.item, row.max_abs, row.max_rel, False,
               f"TF1's graph rounds float64 to float32 on the way ({', '.join(casts[:2])}"
               f"{', ...' if len(casts) > 2 else ''}; tf.compat.v1.losses compute their "
               "weighted loss in float32 whatever the graph's dtype): a gap this small is that "
               "rounding, not the port. Round the same way on the TF2 side (cast to float32 "
               "there and back), or compare in float32", row.context)


def _scalar_count_row(row: Row, legacy_out: Mapping[str, np.ndarray],
                      eager_out: Mapping[str, np.ndarray], counts: Mapping[int, str],
                      rtol: float, legacy: TF1Side) -> Row:
    """A scalar output row that parts, told by :func:`_count_hint` where its two values are
    a quotient of the batch's counts apart (a port's pg divided by the 64 rows where TF1's
    tf.compat.v1.losses divide by the 54 nonzero weights); ``row`` unchanged otherwise."""
    a, b = legacy_out.get(row.item), eager_out.get(row.item)
    if a is None or b is None or np.size(a) != 1 or np.size(b) != 1:
        return row
    note = _count_hint(f"TF2Program's {row.item!r} is TF1Program's", float(np.ravel(a)[0]),
                       float(np.ravel(b)[0]), counts, rtol, legacy.outputs.get(row.item))
    return row if not note else Row(row.rung, row.item, row.max_abs, row.max_rel, False, note,
                                    row.context)


def _parts_past(row: Row, agreed: list[str]) -> Row:
    """An output row that parts with no cause of its own, told where it parts: past the
    outputs that agree (a surrogate loss whose log-probabilities and values agree)."""
    return Row(row.rung, row.item, row.max_abs, row.max_rel, False,
               f"{row.item!r} parts where {', '.join(repr(a) for a in agreed)} agree: the "
               f"code that computes {row.item!r} from those and the inputs differs (name its "
               "intermediate tensors as outputs on both sides to narrow it down)", row.context)
