"""The outputs and loss rows of one forward pass of both programs, each that parts told its
likely cause: what ``pgtwin compare`` reports after the variables, and what
``convert-checkpoint --tf2 --tf1`` checks the restored model against.

The notes come from :mod:`pgtwin.parity.output_notes` (a batch-norm epsilon or an activation
that differs, a random forward pass), :mod:`pgtwin.parity.loss_hints` (a loss a count
apart, a regulariser only one side adds, a softmax applied twice),
:mod:`pgtwin.parity.flatten_order` and :mod:`pgtwin.parity.row_causes` (replays and TF1's
own rounding).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from pgtwin.parity.flatten_order import flatten_order_hint
from pgtwin.parity.gaussian_notes import gaussian_note
from pgtwin.parity.ladder import LOSS_VALUES_PREFIX, NON_FINITE_PREFIX, Row, compare_arrays
from pgtwin.parity.loss_hints import (batch_counts, minimised_hint, ratio_hint,
                                      regularization_hint, softmax_hint, term_hint,
                                      untested_reduction_note)
from pgtwin.parity.nonfinite_origin import origin_note
from pgtwin.parity.output_notes import with_layer_hints, with_randomness
from pgtwin.parity.parity_rows import output_rows
from pgtwin.parity.row_causes import (PADDED, count_note, forbidden_actions,
                                      forbidden_loss_note, ignored_mask_rows,
                                      input_multiple_note, mask_fill_rows, masked_action_note,
                                      padded_step_note, rounded_note, scalar_count_note)
from pgtwin.parity.scalar_inputs import ignored_scalar_rows
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
    rows = mask_fill_rows(rows, legacy_out, eager_out, fed)
    rows = _told(rows, lambda r: padded_step_note(r, legacy_out.get(r.item),
                                                  eager_out.get(r.item), fed))
    rows = _told(rows, lambda r: input_multiple_note(r, legacy_out.get(r.item),
                                                     eager_out.get(r.item), fed))
    if any(_silent(r) for r in rows):  # one replay serves every row
        flattened = flatten_order_hint(legacy, eager, legacy_out, *tol["outputs"])
        rows = _told(rows, lambda r: flattened)
    counts = batch_counts(fed, legacy.placeholders)
    rows = _told(rows, lambda r: rounded_note(r, legacy.outputs.get(r.item)))
    rows = _told(rows, lambda r: scalar_count_note(r, legacy_out, eager_out, counts,
                                                   tol["outputs"][0], legacy))
    loss = loss_row(legacy, legacy_out["loss"], eager_out["loss"], fed, *tol["loss"], ctx)
    *rows, loss = ignored_mask_rows(rows + [loss], legacy, eager_out, fed, tol["outputs"])
    if not loss.ok and loss.note.startswith((LOSS_VALUES_PREFIX, NON_FINITE_PREFIX)):
        origin = origin_note(legacy, eager, legacy_out["loss"], eager_out["loss"])
        loss = _noted(loss, origin) if origin else loss
    agreed = sorted(r.item for r in rows if r.ok)
    if agreed:
        rows = _told(rows, lambda r: gaussian_note(r, legacy_out, eager_out, fed, agreed))
        rows = _told(rows, lambda r: _parts_past(r, agreed))
    if not loss.ok and rows and len(agreed) == len(rows) and \
            loss.note.startswith(LOSS_VALUES_PREFIX):
        loss = _noted(loss, f"{loss.note}. The outputs agree ({', '.join(agreed)}), so the gap "
                            "is in what each loss computes from them and the inputs: name the "
                            "tensors in between in TF1Program.outputs (returns, advantages, "
                            "log-probabilities) and return them from the TF2 loss under the "
                            "same keys to see which parts")
    found = forbidden_actions(fed, legacy_out["loss"])
    if found is not None and not loss.ok and np.size(legacy_out["loss"]) == 1:
        loss = _noted(loss, forbidden_loss_note(found, float(legacy_out["loss"]),
                                                float(eager_out["loss"])))
    if loss.ok:  # what parts only at padded steps the loss does not read: a warning
        rows = [Row(r.rung, r.item, r.max_abs, r.max_rel, True, f"WARNING {r.note}", r.context)
                if not r.ok and r.note.startswith(f"{r.item!r} {PADDED}") else r for r in rows]
    rows.append(loss)
    if found is not None:
        rows.append(Row("outputs", "masked actions", 0.0, 0.0, True,
                        masked_action_note(found), ctx))
    untested = untested_reduction_note(legacy, fed) if loss.ok else ""
    if untested:
        rows.append(Row("loss", "nonzero weights", 0.0, 0.0, True, untested, ctx))
    rows = with_randomness(rows, legacy, eager, legacy_out, eager_out)
    return rows + ignored_scalar_rows(legacy, eager, ctx)


def _silent(row: Row) -> bool:
    """A row that parts and says nothing yet."""
    return not row.ok and not row.note


def _noted(row: Row, note: str) -> Row:
    return Row(row.rung, row.item, row.max_abs, row.max_rel, False, note, row.context)


def _told(rows: list[Row], note_of: Callable[[Row], str]) -> list[Row]:
    """``rows``, each :func:`_silent` one given ``note_of(row)`` where that says something."""
    return [_noted(r, note) if _silent(r) and (note := note_of(r)) else r for r in rows]


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
    # a term's coefficient is read to the two losses' own rounding: float64's lets a 0.01
    # entropy bonus on a loss of 1000 be named (float32's floor, 1e-6, could not)
    floor = 1e-12 if np.asarray(a).dtype == np.asarray(b).dtype == np.float64 else 1e-6
    counts = batch_counts(fed, legacy.placeholders)
    a, b = float(a), float(b)
    sizes = [s for x in fed.values() for s in np.shape(x)[:2]]
    sizes += [int(np.prod(np.shape(x)[:2])) for x in fed.values() if np.ndim(x) >= 2]
    hint = (precision or rounded_note(row, legacy.loss)
            or minimised_hint(legacy, b, max(rtol, 1e-6) * 10)
            or ratio_hint(a, b, sizes, max(rtol, 1e-6) * 10)
            or regularization_hint(legacy, a, b)
            or softmax_hint(legacy, b, max(rtol, 1e-6) * 10, a)
            or count_note("the TF2 loss is TF1's", a, b, counts, rtol, legacy.loss)
            or term_hint(legacy, a, b, max(rtol, floor) * 10, counts))
    digits = next((n for n in range(6, 18) if f"{a:.{n}g}" != f"{b:.{n}g}"), 17)
    return Row(row.rung, row.item, row.max_abs, row.max_rel, False,
               hint or f"{LOSS_VALUES_PREFIX}{a:.{digits}g}, TF2 loss {b:.{digits}g}", ctx)


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


def _parts_past(row: Row, agreed: list[str]) -> str:
    """Where an output parts with no cause of its own: past the outputs that agree (a
    surrogate loss whose log-probabilities and values agree)."""
    return (f"{row.item!r} parts where {', '.join(repr(a) for a in agreed)} agree: the code "
            f"that computes {row.item!r} differs past what it shares with those (they may "
            "also be computed apart from it; name its intermediate tensors as outputs on both "
            "sides to narrow it down)")
