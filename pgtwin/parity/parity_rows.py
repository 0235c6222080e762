"""Rows of the outputs and gradients rungs, and the default tolerances, for user code.

Shared by both contracts of the migration harness: :func:`pgtwin.parity.compare`'s
function pair and :func:`pgtwin.parity.code_parity.compare_programs`' program pair.
"""
from __future__ import annotations

import os

from collections.abc import Mapping

import numpy as np

from pgtwin_core.errors import DisconnectedGradientError
from pgtwin.parity.ladder import FOLLOWS_PREFIX, Row, common_factor, compare_arrays

#: Default ``(rtol, atol)`` by the variables' dtype and rung (``None``: every other rung).
#: float32: graph and eager run the same kernels, but Grappler may fuse ops and change the
#: last bits; Adam then amplifies those on elements whose gradient is near epsilon, hence
#: the weights rung's atol of 1e-4, which still sees Keras' epsilon 1e-7 vs TF1's 1e-8.
#: float64 is the exact check. The measurements are in docs/migration.md ("Tolerances").
DEFAULT_TOLERANCES = {
    "float32": {None: (1e-5, 1e-6), "weights": (1e-5, 1e-4)},
    "float64": {None: (1e-10, 1e-12)},
}


def tolerances(dtype: str) -> dict[str, tuple[float, float]]:
    """``{rung: (rtol, atol)}`` for the numeric rungs, from ``DEFAULT_TOLERANCES``."""
    table = DEFAULT_TOLERANCES[dtype]
    return {rung: table.get(rung, table[None]) for rung in ("outputs", "loss", "gradients", "weights")}


def output_rows(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], rtol: float,
                atol: float, ctx: str, sides: tuple[str, str] = ("legacy_build", "eager_fn")
                ) -> list[Row]:
    """One row per output key but ``loss``; a key only one side returns fails."""
    rows = []
    for key in dict.fromkeys([*a, *b]):
        if key == "loss":
            continue
        if key not in a or key not in b:
            side = sides[0] if key in a else sides[1]
            rows.append(Row("outputs", key, float("inf"), float("inf"), False,
                            f"only {side} returns it", ctx))
        else:
            row = compare_arrays("outputs", key, a[key], b[key], rtol, atol, ctx)
            note = "" if row.ok else _output_hint(key, a[key], b[key], sides)
            if note:
                row = Row(row.rung, row.item, row.max_abs, row.max_rel, False, note, ctx)
            rows.append(row)
    return rows


def _output_hint(key: str, a: np.ndarray, b: np.ndarray, sides: tuple[str, str]) -> str:
    """Why two outputs that part may differ, read from their values; '' if nothing says."""
    if _probabilities(b) and not _probabilities(a):
        return (f"{sides[1]}'s {key!r} are probabilities (every row sums to 1), {sides[0]}'s "
                "are not: a softmax activation on the model's last layer? Keep the logits and "
                "put the softmax in the loss, as TF1 does")
    if _rows_alike(b) and not _rows_alike(a):
        return (f"every row of {sides[1]}'s {key!r} is the same, {sides[0]}'s are not: the "
                "layers before the output pass nothing on (a Dropout given keep_prob as its "
                "rate drops everything at keep_prob 1; a ReLU dead on every input?)")
    offset = _common_offset(a, b)
    if offset is None and np.size(a) == 1 and np.size(b) == 1:  # one number: only a known
        gap = float(np.ravel(b)[0]) - float(np.ravel(a)[0])   # constant tells anything
        offset = gap if _gaussian_constant(gap) else None
    if offset is not None:
        return (f"{sides[1]}'s {key!r} is {sides[0]}'s {'+' if offset > 0 else '-'} "
                f"{abs(offset):.4g}, all of it: a constant term on one side only"
                f"{_gaussian_constant(offset)}")
    counted = _gaussian_counts(a, b)
    if counted:
        return (f"{sides[1]}'s {key!r} is {sides[0]}'s {counted}: the Gaussian "
                "log-density's constant, per dimension each row's density covers (a "
                "parametrized action's parameters, a mask over dimensions), left out on one "
                "side or counted on the other")
    standardised = _standardised_note(key, a, b, sides)
    if standardised:
        return standardised
    # any two single numbers are one factor apart: it tells something from two or more
    factor = common_factor(a, b, 1e-4) if np.size(a) > 1 else None
    bessel = None if factor is None else _bessel(factor, np.shape(a))
    if bessel:
        return (f"{sides[1]}'s {key!r} is {factor:.4g}x {sides[0]}'s, all of it: "
                f"{bessel}")
    count = None if factor is None else _count_factor(factor)
    if count:
        k, mean_side = count
        return (f"{sides[1]}'s {key!r} is {factor:.4g}x {sides[0]}'s, all of it "
                f"({'1/' if mean_side == 1 else ''}{k}): a mean over {k} values where "
                f"{sides[1 - mean_side]} sums them (a log-probability over {k} action heads "
                f"or action dimensions, {k} terms), or an input or layer scaled by "
                f"{'1/' if mean_side == 1 else ''}{k} on one side only")
    if factor is not None and abs(factor - 1.0) > 1e-4:
        return (f"{sides[1]}'s {key!r} is {factor:.4g}x {sides[0]}'s, all of it: an input "
                "scaled on one side only (observations divided by 255, a normalisation), or "
                "a scale in one side's layers")
    return ""


def _standardised_note(key: str, a: np.ndarray, b: np.ndarray, sides: tuple[str, str]) -> str:
    """Where one side's output is the other's standardised, ``(x - mean) / (std + eps)``
    over all its values, and the other's is not (returns normalised on one side only: the
    row otherwise said only that it parts past the logits); '' otherwise."""
    if np.size(a) < 3 or np.shape(a) != np.shape(b):
        return ""
    for x, y, side in ((a, b, 1), (b, a, 0)):
        ddof = _standardised_from(np.ravel(np.asarray(x, np.float64)),
                                  np.ravel(np.asarray(y, np.float64)))
        if ddof is not None:
            n = np.size(x)
            return (f"{sides[side]}'s {key!r} are {sides[1 - side]}'s standardised "
                    f"((x - mean) / std over its {n} values: mean 0, std 1"
                    f"{' with ddof=1' if ddof else ''}): {sides[1 - side]} leaves the "
                    "normalisation out. Normalise on both sides (the same mean, std and "
                    "epsilon) or on neither")
    return ""


def _standardised_from(x: np.ndarray, y: np.ndarray) -> int | None:
    """The ddof (0 or 1) where ``y`` is ``x`` standardised over all its values and ``x`` is
    not itself standardised, else None. ``y`` is compared to a positive multiple of
    ``x - mean(x)`` to 1e-4 of its largest value, and its std to 1 (or sqrt((n - 1) / n))
    to 1e-3, which leaves room for the epsilon code adds to the std (1e-8 .. 1e-4 of it)."""
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return None
    n = x.size
    stds = {0: 1.0, 1: float(np.sqrt((n - 1) / n))}  # a standardised array's, by ddof
    z = x - x.mean()
    zz = float(z @ z)
    if zz == 0.0 or (abs(x.mean()) <= 1e-3 * float(np.std(x)) and any(
            abs(float(np.std(x)) - s) <= 1e-3 for s in (*stds.values(), 1.0 / stds[1]))):
        return None  # x is standardised too (by another ddof: Bessel's note says so)
    c = float(z @ y) / zz
    if c <= 0.0 or float(np.max(np.abs(y - c * z))) > 1e-4 * float(np.max(np.abs(y))):
        return None
    return next((d for d, s in stds.items() if abs(float(np.std(y)) - s) <= 1e-3), None)


MAX_COUNT = 64
"""The largest k for which a factor k or 1/k between two outputs is told as a mean where the
other side sums (action heads, action dimensions, loss terms)."""


def _count_factor(factor: float) -> tuple[int, int] | None:
    """``(k, side that takes the mean)`` where ``factor`` (TF2's over TF1's) is ``1/k``
    (side 1, TF2, takes the mean) or ``k`` (side 0), for an integer ``2 <= k <=``
    :data:`MAX_COUNT`; else None."""
    if not np.isfinite(factor) or factor == 0.0:
        return None
    for value, side in ((1.0 / factor, 1), (factor, 0)):
        k = _whole(value, 2)
        if k:
            return k, side
    return None


def _whole(value: float, least: int) -> int | None:
    """``value`` as a whole number from ``least`` to :data:`MAX_COUNT`, where it is one to
    1e-4 of itself, else None."""
    k = round(value) if np.isfinite(value) else 0
    return k if least <= k <= MAX_COUNT and abs(value - k) <= 1e-4 * k else None


def _bessel(factor: float, shape: tuple[int, ...]) -> str:
    """Why an output normalised by a standard deviation is ``factor`` times the other's
    when that is Bessel's correction for one of its sizes n (``sqrt((n - 1) / n)`` or its
    inverse: one side divides by n - 1); '' otherwise."""
    sizes = sorted({int(s) for s in (*shape, int(np.prod(shape))) if s > 1})
    for n in sizes:
        for ratio, side in ((np.sqrt((n - 1) / n), 1), (np.sqrt(n / (n - 1)), 0)):
            if abs(factor - ratio) <= 1e-5 * ratio:
                return (f"sqrt({n - 1}/{n}){'' if side else ' inverted'}, Bessel's correction "
                        f"over its {n} values: one side divides a standard deviation by "
                        f"n - 1 = {n - 1} (ddof=1: torch.std, pandas' std, np.std(ddof=1)) "
                        f"and the other by n (np.std, tf.math.reduce_std, tf.nn.moments): "
                        "use the same on both")
    return ""


TF_KERAS_ITEM = "tf_keras"
"""The item of :func:`tf_keras_rows`' row."""


def tf_keras_rows(objects: list[str], ctx: str) -> list[Row]:
    """A passing row that names the TF2 side's tf_keras objects where
    ``TF_USE_LEGACY_KERAS=1`` is set: it makes ``tf.keras`` tf_keras for the whole
    process, so a port written with ``tf.keras`` ran, passed and is converted as tf_keras
    code (a helper's port then failed to restore its converted checkpoint into Keras 3's
    Adam); no row otherwise."""
    if not objects or os.environ.get("TF_USE_LEGACY_KERAS") != "1":
        return []
    return [Row("variables", TF_KERAS_ITEM, 0.0, 0.0, True,
                f"the TF2 side's {', '.join(objects)} are tf_keras': TF_USE_LEGACY_KERAS=1 "
                "(--legacy-keras) makes tf.keras tf_keras for the whole process, your TF2 "
                "code included, so it runs the same only with the variable set before "
                "TensorFlow is imported, and its checkpoints restore into tf_keras objects: "
                "write the port with import keras for Keras 3", ctx)]


HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))
"""The constant of a unit Gaussian's log-density, per dimension, that hand-written
log-probabilities leave out."""

GAUSSIAN_CONSTANTS = ((HALF_LOG_2PI, "0.5 log(2 pi), the Gaussian log-density's constant"),
                      (0.5 * float(np.log(2.0 * np.pi * np.e)),
                       "0.5 log(2 pi e), the Gaussian entropy's constant"))
"""The per-dimension constants hand-written Gaussian log-densities and entropies leave out."""


def _gaussian_constant(offset: float) -> str:
    """`` (2.838 is 2 x 0.5 log(2 pi e), ...)`` where ``offset`` is a whole number (1 to
    :data:`MAX_COUNT`) of one of :data:`GAUSSIAN_CONSTANTS` (per action dimension, times a coefficient of 1),
    to 1e-4 of it; '' otherwise."""
    for constant, what in GAUSSIAN_CONSTANTS:
        k = _whole(abs(offset) / constant, 1)
        if k:
            return f" ({abs(offset):.4g} is {k} x {what} per action dimension)"
    return ""


def _gaussian_counts(a: np.ndarray, b: np.ndarray) -> str:
    """``'- k x 0.5 log(2 pi) on every element (k from 1 to 2)'`` where ``b - a`` is, at
    every element, a whole multiple k >= 1 of :data:`HALF_LOG_2PI` of one sign and k is
    not the same everywhere (that is :func:`_common_offset`'s), else ''."""
    if np.size(a) < 2 or np.shape(a) != np.shape(b):
        return ""
    d = (np.asarray(b, np.float64) - np.asarray(a, np.float64)).ravel()
    if not np.all(np.isfinite(d)) or not (np.all(d > 0) or np.all(d < 0)):
        return ""
    k = np.abs(d) / HALF_LOG_2PI
    whole = np.round(k)
    if np.any(whole < 1) or np.any(whole > MAX_COUNT) or np.any(np.abs(k - whole) > 1e-4 * whole) \
            or whole.min() == whole.max():
        return ""
    return (f"{'+' if d[0] > 0 else '-'} k x 0.5 log(2 pi) on every element (k from "
            f"{int(whole.min())} to {int(whole.max())})")


def _common_offset(a: np.ndarray, b: np.ndarray) -> float | None:
    """``d`` where ``b - a`` is one nonzero number d at every element (to 1e-4 of d, two
    elements or more), else None."""
    if np.size(a) < 2 or np.shape(a) != np.shape(b):
        return None
    d = np.asarray(b, np.float64) - np.asarray(a, np.float64)
    mean = float(np.mean(d))
    if not np.isfinite(mean) or abs(mean) <= 1e-6 * float(np.max(np.abs(a)) + 1e-30):
        return None
    return mean if float(np.max(np.abs(d - mean))) <= 1e-4 * abs(mean) else None


def _rows_alike(x: np.ndarray) -> bool:
    """True when ``x`` has two or more rows (its first axis) and all of them are equal."""
    x = np.asarray(x)
    return bool(x.ndim >= 1 and x.shape[0] > 1 and np.all(x == x[:1]))


def _probabilities(x: np.ndarray) -> bool:
    """True when ``x`` is ``[..., K]`` of rows in [0, 1] summing to 1 (a softmax's output)."""
    x = np.asarray(x, np.float64)
    return bool(x.ndim >= 1 and x.shape[-1] > 1 and np.all((x >= 0) & (x <= 1))
                and np.allclose(x.sum(axis=-1), 1.0, atol=1e-5))


DETACHED = ("the outputs and the loss agree and their gradients part: the two losses have "
            "the same value and another derivative, so a term is detached on one side "
            "(tf.stop_gradient, a value taken out of the tape with .numpy() or computed in "
            "numpy, a custom gradient) or attached where the other side detaches it")
"""The note of gradient rows that part where every output and the loss agreed."""

FOLLOWS_FORWARD = (f"{FOLLOWS_PREFIX} the outputs or loss that parted above: the loss's "
                   "gradient parts with them, so fix those first")
"""The note of gradient rows that part after an output or the loss parted."""


def gradient_rows(a: Mapping[str, np.ndarray | None], b: Mapping[str, np.ndarray | None],
                  rtol: float, atol: float, ctx: str, forward_ok: bool = False) -> list[Row]:
    """Per variable (both keyed by TF1 name); None on one side only fails.

    A gradient None on one side only is :class:`DisconnectedGradientError`'s diagnosis: a
    loss built from numpy values (log-probs stored during the rollout) has no path to the
    weights. None on both sides passes: the variable is in neither loss. ``forward_ok``:
    every output and the loss agreed, so a gradient that parts is :data:`DETACHED`'s case.
    """
    rows = []
    for side, mine, other in (("eager", b, a), ("TF1", a, b)):
        missing = [n for n in a if mine[n] is None and other[n] is not None]
        if missing:
            err = DisconnectedGradientError(missing, what=f"the {side} loss")
            rows.extend(Row("gradients", n, float("inf"), float("inf"), False,
                            f"{type(err).__name__} on the {side} side: gradient None, the loss "
                            "does not reach this variable (built from numpy values such as "
                            "log-probs stored during the rollout? a stop_gradient? a layer "
                            "that passes nothing on, such as a Dropout given keep_prob as its "
                            "rate?)", ctx)
                        for n in missing)
    failed = {r.item for r in rows}
    for name in a:
        if name in failed:
            continue
        if a[name] is None and b[name] is None:
            rows.append(Row("gradients", name, 0.0, 0.0, True,
                            "no gradient on either side (not in the loss)", ctx))
        else:
            row = compare_arrays("gradients", name, a[name], b[name], rtol, atol, ctx)
            if not row.ok and not row.note:
                row = Row(row.rung, row.item, row.max_abs, row.max_rel, False,
                          DETACHED if forward_ok else FOLLOWS_FORWARD, ctx)
            rows.append(row)
    order = list(a)
    return sorted(rows, key=lambda r: order.index(r.item))
