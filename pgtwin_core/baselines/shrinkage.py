"""Shrinkage of a leave-one-out ratio baseline towards the leave-one-out mean.

``optimal_scalar_episodic`` and ``optimal_per_param`` subtract a ratio ``b^(-e)`` fitted on the
other episodes; where the population-optimal baseline equals the mean (docs/baselines.md:
BatteryArbitrage and CartPole at their initial policies) the ratio's estimation noise is
all it adds. ``ReinforceConfig.baseline_shrinkage`` = lambda mixes it with the mean of the
same other episodes (and memory), one lambda for all the elements of an episode::

    b_shrunk^(-e) = (1 - lambda) b^(-e) + lambda m^(-e)

Both terms are independent of episode e, so any lambda that is (a constant, or ``auto``,
which is computed from the other episodes only) keeps ``E[g_e b^(-e)] = 0``: no bias.

``auto`` (James-Stein, positive part). Write ``b = m + d``. To first order the excess
variance a baseline adds to episode e's term is ``sum_h E[n_h] E[(b_h - b*_h)^2]``
(``n = ||g_e||^2`` for the scalar form, one element; ``n_h = g_eh^2`` per element), so the
best common multiple of the estimated ``d_hat = b - m`` to keep is
``sum_h nbar_h d_h^2 / sum_h nbar_h (d_h^2 + Var d_hat_h)``, i.e. ``lambda = sum_h nbar_h
Var d_hat_h / sum_h nbar_h E[d_hat_h^2]``, one lambda per episode pooled over the elements
(a lambda per element rests on ~10 squared scores each: noisier, docs/baselines.md),
estimated as::

    lambda^(-e) = min(1, sum_h nbar_h V_h^(-e) / sum_h nbar_h d_hat_h^(-e)^2)
    V_h^(-e) = sum_{e' != e} z_e'h^2 / ((k - 1) c^(-e))
    z_e'h = (n_e'h / nbar_h) (R_e' - b_h^(-e)) - (R_e' - m^(-e))

the linearisation of ``d_hat`` (``d_hat - d ~ mean of z``), with ``k = E - 1`` the batch's
other episodes (their sum: the variance is estimated on this batch), ``c = M_count + E - 1``
the count the ratio rests on (memory included; the decayed count, which overstates the
variance a little: towards the mean), ``nbar = (M_den + sum_{e' != e} n_e') / c``. Fewer
than 2 other episodes give lambda = 1 (no variance estimate: the mean). With n independent
of R and ``b* = mean``, ``Var d_hat ~ CV^2(n) Var(R) / c``: the issue-15 theory.
``sum z^2`` is expanded into others-sums of ``n^2 R^2, n^2, R^2, n^2 R, n R^2, n R, n, R``
(R centred on the batch's mean return first: the expansion's terms then stay near the
size of the result). The TensorFlow twin of these formulas is
``pgtwin/mode_agnostic/episodic_baselines.py``; tests/test_shrinkage.py checks both against
a direct double loop.
"""
from __future__ import annotations

import numpy as np

from pgtwin_core.config import SHRINKAGE_AUTO as AUTO


def shrunk(b: np.ndarray, mean: np.ndarray, lam) -> np.ndarray:
    """``(1 - lam) b + lam mean`` (broadcast): the shrunk baseline."""
    return (1.0 - lam) * b + lam * mean


def auto_lambda(sums: dict[str, np.ndarray], b: np.ndarray, mean: np.ndarray,
                nbar_num: np.ndarray, count: float, others: float,
                centre: float) -> np.ndarray:
    """``[E, 1]``: ``lambda^(-e)`` (module doc) of each episode, pooled over the K elements.

    Args:
      sums: the batch's other episodes' sums (``[E, K]``, R's ``[E, 1]``), R centred on
        ``centre``: ``n2r2, n2, r2, n2r, nr2, nr, n, r``.
      b, mean: ``b^(-e)`` ``[E, K]`` and ``m^(-e)`` ``[E, 1]`` (raw units, memory included).
      nbar_num: ``M_den + sum_{e' != e} n_e'`` ``[E, K]``.
      count: ``c = M_count + E - 1``; others: ``k = E - 1``.
      centre: the constant R is centred on (the batch's mean return).
    """
    if others < 2:
        return np.ones_like(b)
    a = np.where(nbar_num > 0, count / np.where(nbar_num > 0, nbar_num, 1.0), 0.0)
    bc, mc = b - centre, mean - centre
    zz = (a * a * sums["n2r2"] + a * a * bc * bc * sums["n2"] + sums["r2"] + mc * mc * others
          - 2.0 * a * a * bc * sums["n2r"] - 2.0 * a * sums["nr2"]
          + 2.0 * a * (mc + bc) * sums["nr"] - 2.0 * a * bc * mc * sums["n"]
          - 2.0 * mc * sums["r"])
    v = np.maximum(zz, 0.0) / ((others - 1.0) * count)
    nbar = nbar_num / count
    noise = np.sum(nbar * v, axis=-1, keepdims=True)
    signal = np.sum(nbar * (b - mean) ** 2, axis=-1, keepdims=True)
    return np.where(noise >= signal, 1.0, noise / np.where(noise >= signal, 1.0, signal))


def episode_terms(n: np.ndarray, r: np.ndarray, centre: float) -> dict[str, np.ndarray]:
    """Each episode's terms of :func:`auto_lambda`'s sums: ``n [E, K]``, ``r [E, 1]`` raw."""
    rc = r - centre
    return {"n2r2": n * n * rc * rc, "n2": n * n, "r2": rc * rc, "n2r": n * n * rc,
            "nr2": n * rc * rc, "nr": n * rc, "n": n, "r": rc}
