"""Causes for output and loss rows that part with no note of their own, each found by
reading TF1's graph or by running one side again (a replay):

* :func:`rounded_note`: TF1's graph rounds float64 to float32 on the way (the gap is that);
* :func:`count_note`: the two values are a quotient of two of the batch's counts apart
  (one side's mean divides by another count);
* :func:`ignored_mask_rows`: TF1 run again with a 0/1 input all ones gives the TF2 value
  (the TF2 side leaves a mask out);
* :func:`mask_fill_rows`: an output that parts only where a 0/1 input is 0 (a mask filled
  with another value: -1e9, the dtype's lowest, -inf), and the NaN a -inf fill makes
  downstream (0 x -inf in p log p);
* :func:`padded_step_note`: an output ``[B, T, ...]`` that parts only past each sequence's
  length (a recurrent layer's padded steps);
* :func:`input_multiple_note`: an output a multiple of a fed input apart (a damping term
  on one side only).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import tensorflow as tf

from pgtwin.parity.graph_walk import upstream_ops
from pgtwin.parity.ladder import LOSS_VALUES_PREFIX, NON_FINITE_PREFIX, Row, compare_arrays
from pgtwin.parity.loss_hints import count_ratio, divisor_note
from pgtwin.parity.tf1_side import TF1Side

ROUNDING = 1e-5
"""The largest relative gap that TF1's own float32 rounding in a float64 graph explains."""

ROUNDED_PREFIX = "TF1's graph rounds float64 to float32 on the way"
"""How :func:`rounded_note` starts."""


def rounded_note(row: Row, tf1_tensor: tf.Tensor | None) -> str:
    """For a float64 row that parts by less than :data:`ROUNDING`, where TF1's graph casts
    float64 to float32 on the way to ``tf1_tensor`` (``tf.compat.v1.losses`` compute their
    weighted loss in float32 whatever the graph's dtype): that rounding, not the port, is
    the gap; '' otherwise."""
    if tf1_tensor is None or row.ok or row.max_rel > ROUNDING:
        return ""
    casts = float32_casts(tf1_tensor)
    if not casts:
        return ""
    return (f"{ROUNDED_PREFIX} ({', '.join(casts[:2])}"
            f"{', ...' if len(casts) > 2 else ''}; tf.compat.v1.losses compute their weighted "
            "loss in float32 whatever the graph's dtype): a gap this small is that rounding, "
            "not the port. Round the same way on the TF2 side (cast to float32 there and "
            "back), or compare in float32")


def float32_casts(tf1_tensor: tf.Tensor) -> list[str]:
    """The names of the casts from float64 to float32 that ``tf1_tensor`` is computed
    through (``tf.compat.v1.losses``' weighted loss, in float32 whatever the graph's
    dtype)."""
    return [op.name for op in upstream_ops(tf1_tensor) if op.type == "Cast"
            and op.get_attr("SrcT") == tf.float64 and op.get_attr("DstT") == tf.float32]


def count_note(what: str, a: float, b: float, counts: Mapping[int, str], rtol: float,
               tf1_tensor: tf.Tensor | None) -> str:
    """Where ``b / a`` (TF2's value over TF1's) is the quotient of two of the batch's
    ``counts`` (``loss_hints.batch_counts``): each side's mean divides by another count;
    '' otherwise. ``what``: how the note starts (``the TF2 loss is TF1's``)."""
    pair = None if a == 0.0 else count_ratio(b / a, counts, max(rtol, 1e-6) * 10)
    if pair is None:
        return ""
    return f"{what} x {pair[0]}/{pair[1]}: {divisor_note(*pair, counts, tf1_tensor)}"


def scalar_count_note(row: Row, legacy_out: Mapping[str, np.ndarray],
                      eager_out: Mapping[str, np.ndarray], counts: Mapping[int, str],
                      rtol: float, legacy: TF1Side) -> str:
    """:func:`count_note` for a scalar output row (a port's pg divided by the 64 rows where
    TF1's tf.compat.v1.losses divide by the 54 nonzero weights); '' for another row."""
    a, b = legacy_out.get(row.item), eager_out.get(row.item)
    if a is None or b is None or np.size(a) != 1 or np.size(b) != 1:
        return ""
    return count_note(f"TF2Program's {row.item!r} is TF1Program's", float(np.ravel(a)[0]),
                      float(np.ravel(b)[0]), counts, rtol, legacy.outputs.get(row.item))


def ignored_mask_rows(rows: list[Row], legacy: TF1Side, eager_out: Mapping[str, np.ndarray],
                      fed: Mapping[str, np.ndarray], tol: tuple[float, float]) -> list[Row]:
    """``rows``, those that part with no cause told where TF1 run again with a 0/1 input (a
    mask) replaced by ones gives the TF2 value: the TF2 side leaves that input out there (a
    value loss without its mask)."""
    silent = [r for r in rows if not r.ok and (not r.note
                                               or r.note.startswith(LOSS_VALUES_PREFIX))]
    masks = [k for k, v in fed.items() if np.ndim(v) >= 1 and np.size(v)
             and np.asarray(v).dtype.kind == "f" and np.isin(v, (0, 1)).all()
             and not np.all(np.asarray(v) == 1)]
    for key in masks if silent else []:
        replayed = legacy.run({key: np.ones_like(fed[key])})
        for r in silent:
            if r.item in replayed and r.item in eager_out and compare_arrays(
                    r.rung, r.item, replayed[r.item], eager_out[r.item], *tol, "").ok:
                what = "loss" if r.item == "loss" else repr(r.item)
                note = (f"the TF2 {what} is TF1's with inputs[{key!r}] all ones: the TF2 side "
                        f"leaves {key!r} out of it (a padded step counted as a real one, a "
                        f"forbidden action's logit left in): use {key!r} there as TF1 does")
                rows = [Row(x.rung, x.item, x.max_abs, x.max_rel, False, note, x.context)
                        if x is r else x for x in rows]
    return rows


def _fill_note(row: Row, a: np.ndarray, b: np.ndarray, fed: Mapping[str, np.ndarray]
               ) -> tuple[str, bool]:
    """``(note, TF2 fills with -inf)`` where ``a`` and ``b`` (TF1's and TF2's values of an
    output) differ only where a 0/1 input of their shape is 0; ``("", False)`` otherwise."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    for key, mask in fed.items():
        mask = np.asarray(mask)
        if mask.shape != a.shape or a.shape != b.shape or mask.dtype.kind != "f" \
                or not np.isin(mask, (0, 1)).all():
            continue
        differ = ~np.isclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=True)
        if differ.any() and np.all(mask[differ] == 0):
            fill1, fill2 = a[differ].flat[0], b[differ].flat[0]
            inf = bool(np.isneginf(b[differ]).any())
            return (f"{row.item!r} parts only where inputs[{key!r}] is 0 ({int(differ.sum())} "
                    f"entries: TF1 {fill1:.4g}, TF2 {fill2:.4g}): the same mask with another "
                    "fill value. What reads it through a softmax agrees while both fills are "
                    "far below the other entries"
                    + ("; but a -inf fill makes NaN wherever a probability of 0 multiplies "
                       "it (0 x -inf in an entropy's p log p): use a finite fill (-1e9, "
                       "dtype.min) or tf.where(mask > 0, log_p, 0) there" if inf else ""),
                    inf)
    return "", False


def input_multiple_note(row: Row, a: np.ndarray | None, b: np.ndarray | None,
                        fed: Mapping[str, np.ndarray]) -> str:
    """Where ``b - a`` (TF2's value of an output less TF1's) is ``c`` times a fed float
    input of its shape, all of it (to 1e-4 of its largest entry): a term ``c * input`` on
    one side only, or twice (a damping ``cg_damping * tangent`` in a Fisher-vector
    product); '' otherwise."""
    if row.ok or a is None or b is None or np.shape(a) != np.shape(b) or np.size(a) < 2:
        return ""
    d = np.asarray(b, np.float64) - np.asarray(a, np.float64)
    for key, x in fed.items():
        x = np.asarray(x)
        if x.shape != d.shape or x.dtype.kind != "f" or not np.any(x):
            continue
        x = x.astype(np.float64)
        c = float(d.ravel() @ x.ravel()) / float(x.ravel() @ x.ravel())
        if c and np.max(np.abs(d - c * x)) <= 1e-4 * np.max(np.abs(d)):
            return (f"TF2's {row.item!r} is TF1's {'+' if c > 0 else '-'} {abs(c):.4g} x "
                    f"inputs[{key!r}], all of it: a term {abs(c):.4g} * inputs[{key!r}] "
                    "on one side only, or counted twice (a damping term such as "
                    "cg_damping * tangent in a Fisher-vector product)")
    return ""


PADDED = "parts only at the padded steps"
"""How :func:`padded_step_note` goes on after the output's name."""


def padded_step_note(row: Row, a: np.ndarray | None, b: np.ndarray | None,
                     fed: Mapping[str, np.ndarray]) -> str:
    """Where ``a`` and ``b`` (TF1's and TF2's values of a ``[B, T, ...]`` output) differ only
    at the padded steps of an integer input of sequence lengths ``[B]`` (``t >= length``):
    the recurrent layer's outputs there (``dynamic_rnn`` writes zeros, a masked Keras RNN
    repeats the last output: a faithful port failed on them); '' otherwise."""
    if row.ok or a is None or b is None or np.ndim(a) < 2 or np.shape(a) != np.shape(b):
        return ""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    steps = a.shape[1]
    for key, lengths in fed.items():
        lengths = np.asarray(lengths)
        if lengths.shape != a.shape[:1] or lengths.dtype.kind not in "iu" \
                or lengths.min(initial=0) < 0 or lengths.max(initial=0) > steps \
                or lengths.min(initial=steps) >= steps:
            continue
        real = np.arange(steps)[None, :] < lengths[:, None]
        real = real.reshape(real.shape + (1,) * (a.ndim - 2)) & np.ones(a.shape, bool)
        differ = ~np.isclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=True)
        if differ.any() and not differ[real].any():
            return (f"{row.item!r} {PADDED}, t >= inputs[{key!r}] "
                    f"({int(differ.sum())} entries; the real steps agree): a recurrent "
                    "layer's outputs there differ. tf.compat.v1.nn.dynamic_rnn writes zeros "
                    "past a sequence's length, and a Keras RNN given a mask repeats the last "
                    "output unless built with zero_output_for_mask=True (keras.layers.RNN, "
                    "LSTM, GRU). A loss that masks those steps does not see it; to make the "
                    "rows agree, give the Keras layer zero_output_for_mask=True")
    return ""


def mask_fill_rows(rows: list[Row], legacy_out: Mapping[str, np.ndarray],
                   eager_out: Mapping[str, np.ndarray], fed: Mapping[str, np.ndarray]
                   ) -> list[Row]:
    """``rows``, an output row that parts only where a 0/1 input is 0 told so
    (:func:`_fill_note`), and, where TF2 fills with -inf, the rows whose TF2 values hold
    NaN that TF1's do not told where it comes from."""
    filled = None  # the output TF2 fills with -inf
    out = []
    for r in rows:
        bare = not r.note or r.note.startswith(NON_FINITE_PREFIX)  # a count is no cause
        note, inf = ("", False) if r.ok or not bare or r.item not in legacy_out or \
            r.item not in eager_out else _fill_note(r, legacy_out[r.item], eager_out[r.item],
                                                    fed)
        filled = filled or (r.item if inf else None)
        out.append(Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                       note + (f" ({r.note})" if r.note else ""), r.context) if note else r)
    if filled is None:
        return out
    return [Row(r.rung, r.item, r.max_abs, r.max_rel, False,
                f"TF2's {r.item!r} is NaN where TF1's is not: {filled!r} is -inf where the mask "
                f"is 0 (see its row), and 0 x -inf is NaN (an entropy's p log p): use a finite "
                "fill (-1e9, dtype.min) or tf.where(mask > 0, log_p, 0) where probabilities "
                "multiply it", r.context)
            if not r.ok and r.item in eager_out and r.item in legacy_out
            and np.isnan(np.asarray(eager_out[r.item], np.float64)).any()
            and not np.isnan(np.asarray(legacy_out[r.item], np.float64)).any() else r
            for r in out]


FILL_SCALE = 1e5
"""The least |TF1 loss| at which actions a mask forbids are taken to reach it through the
mask's fill (-1e9 over a batch's rows is far above it; a loss of 1 is far below)."""


def forbidden_actions(fed: Mapping[str, np.ndarray], tf1_loss: np.ndarray
                      ) -> tuple[str, str, np.ndarray] | None:
    """``(actions key, mask key, rows)`` where an integer input of actions ``[N]`` takes, in
    some rows, an action that a 0/1 input ``[N, K]`` (legal actions) marks 0, and TF1's
    loss is of the fill's scale or not finite: a batch recorded with a bug; None otherwise
    (a finite, small loss: no fill reaches it, so the 0/1 input is of another kind, a
    parametrized action's parameter mask)."""
    loss = np.asarray(tf1_loss, np.float64)
    if np.size(loss) == 1 and np.isfinite(loss) and abs(float(loss)) < FILL_SCALE:
        return None
    for a_key, actions in fed.items():
        actions = np.asarray(actions)
        if actions.ndim != 1 or actions.dtype.kind not in "iu":
            continue
        for m_key, mask in fed.items():
            mask = np.asarray(mask)
            if mask.ndim != 2 or mask.shape[0] != actions.size or mask.dtype.kind != "f" \
                    or not np.isin(mask, (0, 1)).all() or actions.min(initial=0) < 0 \
                    or actions.max(initial=0) >= mask.shape[1]:
                continue
            rows = np.flatnonzero(mask[np.arange(actions.size), actions] == 0)
            if rows.size:
                return a_key, m_key, rows
    return None


def _forbidden_where(found: tuple[str, str, np.ndarray]) -> str:
    a_key, m_key, rows = found
    shown = ", ".join(str(int(i)) for i in rows[:5]) + (", ..." if rows.size > 5 else "")
    return (f"inputs[{a_key!r}] takes actions that inputs[{m_key!r}] marks 0 in {rows.size} "
            f"rows ({shown})")


def masked_action_note(found: tuple[str, str, np.ndarray] | None) -> str:
    """The warning for :func:`forbidden_actions`' rows: their log-probabilities are the
    mask's fill and outweigh the rest of the loss, alike on both sides where both fill
    alike, so no rung sees them; '' where there are none."""
    if found is None:
        return ""
    return (f"WARNING {_forbidden_where(found)}: the batch holds actions the mask forbids "
            "(recorded with a bug?). Their log-probability is the mask's fill (-1e9, the "
            "dtype's lowest, -inf), which outweighs the rest of the loss")


def forbidden_loss_note(found: tuple[str, str, np.ndarray], a: float, b: float) -> str:
    """The loss row's note where the loss parts on a batch with :func:`forbidden_actions`:
    those rows' log-probabilities are each side's mask fill and outweigh the rest, so the
    gap says how the fills differ, not which term (a helper's port with a -inf fill and a
    clipped log-probability was told "a term left out")."""
    return (f"{_forbidden_where(found)}, and the loss takes their log-probabilities, each "
            "side's mask fill, which outweigh the rest of it: the gap shows how the two fills "
            "differ (see the outputs rows), magnified. Compare on a batch without those rows "
            f"(TF1 loss {a:.6g}, TF2 loss {b:.6g})")
