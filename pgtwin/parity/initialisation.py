"""The initialisation rung: do both sides draw each variable's first values alike?

Every other rung loads both sides with the same weights, so a migration that changed an
initialiser (Keras' ``glorot_uniform`` where TF1 used ``truncated_normal(stddev=0.1)``)
passes them all and still trains differently from the first step. This rung compares the
*distributions*: the TF1 initializer is run several times (its draws pooled), the TF2
model's own initial values are one draw, and

* a constant on either side (zeros, ones) must be the same constant on the other;
* otherwise two tests on the pooled values, with mean, std and range shown: a two-sample
  Kolmogorov-Smirnov test (any change of shape or place) and a test of the variance
  ratio (most initialiser mistakes change the scale; ``log(s2^2 / s1^2)`` is about normal
  with variance ``(kappa - 1)(1/n1 + 1/n2)``, ``kappa`` the kurtosis of the TF1 draws,
  1.8 for a uniform and 3 for a normal), which sees a scale change on layers of a few
  dozen weights. A p-value below ``alpha / 2`` in either (``alpha`` 1e-3: a rung tests
  many variables) marks the row.

A state variable TF1's program starts as an exact copy of a trained one (a target network
its ``__init__`` syncs from the online one) must start as a copy of that variable's partner
on the TF2 side too (:func:`copy_rows`): every later rung loads TF1's values into both
sides, so a port that forgets the first sync would pass them all.

By default a marked row is a warning (initial values are random; the user may have meant
it); ``init="fail"`` makes it a failure.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from pgtwin.parity.ladder import Row

INIT_MODES = ("warn", "fail", "off")
"""What a differing initial value does: a warning row, a failing row, or no rung."""

ALPHA = 1e-3


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """``sup_x |F_a(x) - F_b(x)|`` of the two samples' empirical CDFs."""
    a, b = np.sort(np.ravel(a)), np.sort(np.ravel(b))
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / a.size
    fb = np.searchsorted(b, grid, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


def ks_pvalue(d: float, n: int, m: int) -> float:
    """Asymptotic two-sample KS p-value ``Q_KS((sqrt(ne) + 0.12 + 0.11/sqrt(ne)) d)``.

    ``ne = n m / (n + m)``; ``Q_KS(x) = 2 sum_k (-1)^(k-1) exp(-2 k^2 x^2)`` (Numerical
    Recipes' form of Kolmogorov's distribution), clipped to [0, 1].
    """
    en = math.sqrt(n * m / (n + m))
    x = (en + 0.12 + 0.11 / en) * d
    if x < 1e-3:
        return 1.0
    total = sum(2 * (-1) ** (k - 1) * math.exp(-2 * k * k * x * x) for k in range(1, 101))
    return float(min(max(total, 0.0), 1.0))


def variance_ratio_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value that samples ``a`` and ``b`` have the same variance.

    ``z = log(var b / var a) / sqrt((kappa - 1)(1/n_a + 1/n_b))`` with ``kappa`` the
    kurtosis of ``a`` (the delta method: ``Var(log s^2) ~ (kappa - 1) / n``).
    """
    a, b = np.ravel(a), np.ravel(b)
    va, vb = a.var(), b.var()
    if va == 0 or vb == 0:
        return 1.0 if va == vb else 0.0
    kappa = float(np.mean((a - a.mean()) ** 4) / va ** 2)
    z = math.log(vb / va) / math.sqrt(max(kappa - 1, 1e-3) * (1 / a.size + 1 / b.size))
    return math.erfc(abs(z) / math.sqrt(2))


def _stats(x: np.ndarray) -> str:
    return f"mean {x.mean():.3g} std {x.std():.3g} range [{x.min():.3g}, {x.max():.3g}]"


def initial_value_row(item: str, tf1_draws: np.ndarray, tf2_value: np.ndarray, fail: bool,
                      context: str, tf1_kind: str = "", tf2_kind: str = "",
                      alpha: float = ALPHA) -> Row:
    """A row comparing TF1's initial-value distribution with the TF2 model's first values.

    Args:
      item: the row's item (``"tf1 name -> tf2 name"``).
      tf1_draws: ``[draws, *shape]`` values of TF1's initializer, float. Draws that repeat
        one another (a seeded, stateless initializer gives the same values every run) are
        one draw: pooled, they would count as independent and shrink the p-values.
      tf2_value: ``[*shape]`` the TF2 variable's own initial value.
      fail: whether a difference fails the row (else it is a warning: ok, noted).
      tf1_kind, tf2_kind: what made each side's values, where readable.
    """
    a = np.asarray(tf1_draws, np.float64)
    a = np.unique(a.reshape(len(a), -1), axis=0) if a.ndim > 1 and len(a) > 1 else a
    b = np.asarray(tf2_value, np.float64)
    makers = " vs ".join(x for x in (f"TF1 {tf1_kind}" if tf1_kind else "",
                                     f"TF2 {tf2_kind}" if tf2_kind else "") if x)
    makers = f" ({makers})" if makers else ""
    const_a, const_b = np.ptp(a) == 0, np.ptp(b) == 0
    if const_a or const_b:
        # float32 rounding of a constant (0.1) is the same constant, not another one
        same = const_a and const_b and bool(np.isclose(a.flat[0], b.flat[0], rtol=1e-6,
                                                        atol=0.0))
        diff = 0.0 if same else float(np.max(np.abs(a.mean() - b)))
        note = "" if same else (
            f"initial values differ: TF1 {_stats(a)}, TF2 {_stats(b)}{makers}: "
            "one side starts from a constant, the other does not (or another constant)")
        return _marked("initialisation", item, diff, same, note, fail, context)
    d = ks_statistic(a, b)
    p = ks_pvalue(d, a.size, b.size)
    p_scale = variance_ratio_pvalue(a, b)
    families = tf1_family(tf1_kind), tf2_family(tf2_kind)
    if None not in families and families[0] != families[1]:
        return _marked("initialisation", item, d, False, (
            f"initial values come from another kind of distribution: TF1 draws from a "
            f"{families[0]} ({tf1_kind}), TF2 from a {families[1]} ({tf2_kind}), which the "
            f"tests on {b.size} values may not tell apart (KS D={d:.3f}, p={p:.2g}; std "
            f"ratio {b.std() / a.std():.3g}, p={p_scale:.2g}; TF1 {_stats(a)}, TF2 "
            f"{_stats(b)}): give the TF2 layer the TF1 initializer, "
            f"{KERAS_FOR_FAMILY[families[0]]} with TF1's settings (kernel_initializer=..., "
            "bias_initializer=...)"), fail, context)
    same = min(p, p_scale) >= alpha / 2
    # one kind on both sides (Glorot's uniform against TF1's glorot_uniform_initializer,
    # read as RandomUniform): a p under alpha / 2 may be chance, about once in 1 / p tests
    chance = (f"; both draw from a {families[0]}, so this may be chance (a p of "
              f"{min(p, p_scale):.1e} comes about once in {1 / max(min(p, p_scale), 1e-300):.0f} "
              "such tests): compare again with another seed, and check the initializers' "
              "scale (Glorot's limit sqrt(6 / (fan_in + fan_out)), a stddev)"
              ) if None not in families else ""
    note = (f"no difference found: KS D={d:.3f} (the max_abs column), p={p:.2g}; std ratio "
            f"{b.std() / a.std():.3g}, p={p_scale:.2g}") if same else (
        f"initial values come from another distribution (KS D={d:.3f}, p={p:.1e}; "
        f"std ratio {b.std() / a.std():.3g}, p={p_scale:.1e}): "
        f"TF1 {_stats(a)}, TF2 {_stats(b)}{makers}" + (chance or
                                                       "; give the TF2 layer the TF1 "
                                                       "initializer (kernel_initializer=..., "
                                                       "bias_initializer=...)"))
    return _marked("initialisation", item, d, same, note, fail, context)


KERAS_FOR_FAMILY = {"normal": "keras.initializers.RandomNormal(mean, stddev)",
                    "truncated normal": "keras.initializers.TruncatedNormal(mean, stddev)",
                    "uniform": "keras.initializers.RandomUniform(minval, maxval) (or "
                               "GlorotUniform, HeUniform, as TF1 scaled it)",
                    "orthogonal matrix": "keras.initializers.Orthogonal(gain)"}
"""The Keras initializer that draws from each kind of distribution."""


def tf1_family(kind: str) -> str | None:
    """The kind of distribution of TF1's initializer ops ``kind`` (``initializer_kind``:
    op types joined by ``+``), or None where it is not one kind."""
    ops = kind.split("+") if kind else []
    if "Qr" in ops:  # an orthogonal initializer: the Q of a normal matrix
        return "orthogonal matrix"
    found = set()
    for op in ops:
        found.add("truncated normal" if "TruncatedNormal" in op else
                  "uniform" if "Uniform" in op else
                  "normal" if "Normal" in op else None)
    return found.pop() if len(found) == 1 and None not in found else None


_KERAS_FAMILIES = {"RandomNormal": "normal", "TruncatedNormal": "truncated normal",
                   "RandomUniform": "uniform", "GlorotUniform": "uniform",
                   "HeUniform": "uniform", "LecunUniform": "uniform",
                   "GlorotNormal": "truncated normal", "HeNormal": "truncated normal",
                   "LecunNormal": "truncated normal", "Orthogonal": "orthogonal matrix"}
"""Keras' initializers by class name and the kind they draw from (its ``*Normal`` variance
scalings draw from a truncated normal, as TF1's did)."""

_SCALING_FAMILIES = {"uniform": "uniform", "truncated_normal": "truncated normal",
                     "normal": "truncated normal", "untruncated_normal": "normal"}


def tf2_family(kind: str) -> str | None:
    """The kind of distribution of a Keras initializer written ``Class({config})``
    (``TF2Side.initializer_of``), or None where it is not known."""
    name = kind.split("(")[0]
    if name == "VarianceScaling":
        for key, family in _SCALING_FAMILIES.items():
            if f"'distribution': '{key}'" in kind:
                return family
        return None
    return _KERAS_FAMILIES.get(name)


def _marked(rung: str, item: str, diff: float, same: bool, note: str, fail: bool,
            context: str) -> Row:
    """The row: a pass (with ``note``, what was measured), else a failure or a warning."""
    if same:
        return Row(rung, item, diff, 0.0, True, note, context)
    if fail:
        return Row(rung, item, diff, float("inf"), False, note, context)
    return Row(rung, item, diff, float("inf"), True, "WARNING " + note, context)


def copy_rows(tf1_weights: Mapping[str, np.ndarray], tf1_state: Mapping[str, np.ndarray],
              tf2_weights: Mapping[str, np.ndarray], tf2_state: Mapping[str, np.ndarray],
              pairs: Mapping[str, str], state_pairs: Mapping[str, str], fail: bool,
              context: str) -> list[Row]:
    """One row per state pair whose TF1 value starts as an exact copy of a trained TF1
    variable that is not constant: the TF2 state must start as a copy of that variable's
    TF2 partner. ``*_weights`` / ``*_state``: each side's initial values by name;
    ``pairs`` / ``state_pairs``: ``{TF1 name: TF2 name}``."""
    rows = []
    for a, b in state_pairs.items():
        value = np.asarray(tf1_state[a])
        source = next((n for n, w in tf1_weights.items() if n in pairs
                       and np.shape(w) == value.shape and np.ptp(w) > 0
                       and np.array_equal(w, value)), None)
        if source is None:
            continue
        partner = pairs[source]
        same = np.shape(tf2_weights[partner]) == np.shape(tf2_state[b]) and bool(
            np.array_equal(tf2_weights[partner], tf2_state[b]))
        apart = 0.0 if same else float(np.max(np.abs(np.asarray(tf2_weights[partner], np.float64)
                                                     - np.asarray(tf2_state[b], np.float64))))
        note = (f"starts as a copy of {source} -> {partner} on both sides" if same else
                f"TF1's program starts {a} as a copy of {source} (its build copies it, as a "
                f"target network's first sync) and the TF2 one does not start {b} as a copy "
                f"of {partner} (they differ by up to {apart:.3g}): copy it once built "
                "(target.set_weights(online.get_weights())); the later rungs load TF1's "
                "values into both sides, so only this row can see it")
        rows.append(_marked("initialisation", f"{a} -> {b}: initial copy", apart, same, note,
                            fail, context))
    return rows
