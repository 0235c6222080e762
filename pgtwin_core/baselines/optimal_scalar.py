"""The per-step optimal scalar baseline ``b*`` (Greensmith, Bartlett & Baxter 2004), in numpy.

The twins compute it in TensorFlow from ghost norms (``pgtwin.mode_agnostic.scalar_baseline``);
this is the reference their tests and the variance measurement check it against.
"""
from __future__ import annotations

import numpy as np


def optimal_scalar_baseline(sq_norms: np.ndarray, returns: np.ndarray,
                            weights: np.ndarray | None = None) -> float:
    """``b* = sum w ||g||^2 R / sum w ||g||^2``; the mean ``sum w R / sum w`` if all scores are 0.

    The b minimising ``sum_i w_i ||g_i||^2 (R_i - b)^2``, the second moment of the estimate
    (Greensmith, Bartlett & Baxter 2004, Theorem 13 for its per-sample form).

    Args:
      sq_norms: float ``[M]``, ``||g_i||^2 >= 0``.
      returns: float ``[M]``, R_i.
      weights: float ``[M]`` >= 0 with a positive sum; ones if None.
    """
    n, r = np.asarray(sq_norms, np.float64), np.asarray(returns, np.float64)
    w = np.ones_like(r) if weights is None else np.asarray(weights, np.float64)
    if not (n.shape == r.shape == w.shape and n.ndim == 1):
        raise ValueError(f"sq_norms {n.shape}, returns {r.shape} and weights {w.shape} must "
                         "be vectors of one length")
    den = np.sum(w * n)
    return float(np.sum(w * n * r) / den) if den > 0 else float(np.sum(w * r) / np.sum(w))
