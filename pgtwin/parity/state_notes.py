"""Why a state pair (moving statistics) parts, read from the two sides' updates.

At the first step where they part, both sides moved the same statistic from (nearly) the
same value with the same batch, so the updates themselves say what differs:

* ``m <- momentum m + (1 - momentum) batch``: the ratio of the two updates is
  ``(1 - momentum_TF1) / (1 - momentum_Keras)``, which gives TF1's momentum from the Keras
  layer's;
* a copy moved towards its source (a target network's soft update
  ``t <- tau w + (1 - tau) t``) moves by ``tau (w - t)``: from the same ``w`` and ``t``,
  two rates give updates that are one common factor apart, ``tau_TF2 / tau_TF1``;
* TF1's fused batch norm moves the variance with the unbiased batch variance
  (``n / (n - 1)`` times the biased one) and Keras 3 with the biased one. Then
  ``d1 - d2 = (d2 + (1 - momentum) before) / (n - 1)``, so ``n`` comes out of the updates;
  a whole ``n`` (the batch's rows) says it is Bessel's correction, which no setting
  removes.
"""
from __future__ import annotations

import numpy as np

from pgtwin.parity.ladder import common_factor

_TINY = 1e-12


def momentum_note(d1: np.ndarray, d2: np.ndarray, keras_momentum: float) -> str:
    """The note when the two updates ``d1`` (TF1) and ``d2`` (Keras) are those of different
    momentums, else ''."""
    moved = np.abs(d2) > _TINY
    if not moved.any():
        return ""
    ratio = float(np.median(d1[moved] / d2[moved]))
    tf1_momentum = 1.0 - ratio * (1.0 - keras_momentum)
    if abs(tf1_momentum - keras_momentum) <= 1e-4 or not 0.0 <= tf1_momentum < 1.0:
        return ""
    return (f"TF1's update is that of momentum {tf1_momentum:.4g} (its decay), the Keras "
            f"layer's momentum is {keras_momentum:g}: build it with momentum="
            f"{tf1_momentum:.4g}")


def bessel_note(before: np.ndarray, d1: np.ndarray, d2: np.ndarray,
                keras_momentum: float) -> str:
    """The note when a moving variance's two updates differ by Bessel's correction over a
    whole number of rows, else ''."""
    apart = np.abs(d1 - d2) > _TINY
    if not apart.any():
        return ""
    rows = 1.0 + (d2[apart] + (1.0 - keras_momentum) * before[apart]) / (d1 - d2)[apart]
    n = float(np.median(rows))
    if n < 2 or abs(n - round(n)) > 0.01 * n or np.ptp(rows) > 0.01 * n:
        return ""
    return (f"TF1's fused batch norm moves the variance with the unbiased batch variance "
            f"(n / (n - 1), here n = {round(n)} rows) and Keras with the biased one, so the "
            "moving variance parts by (1 - momentum) var / (n - 1) a step whatever the "
            "settings: not a migration mistake, but the inference outputs differ by it")


def copy_rate_note(d1: np.ndarray, d2: np.ndarray, assigner: str = "",
                   rounding: tuple[float, float] = (0.0, 0.0)) -> str:
    """The note when TF2's update ``d2`` of a state variable is TF1's ``d1`` times one common
    factor other than 1, as two soft updates of a target network at different rates are;
    else ''. "One factor": what is left is within 1e-3 of ``d2``'s norm plus the updates'
    own rounding, ``rounding`` = (TF1's, TF2's) machine epsilon times the norm of the values
    after the step (a float32 kernel of |w| ~ 0.3 moved by 0.005 (w - t) is a few ulps a
    step). ``assigner``: TF1's assign op."""
    if np.linalg.norm(d1) <= _TINY:
        return ""
    guess = common_factor(d1, d2, 1.0)  # the factor, to scale TF1's rounding by
    if guess is None:
        return ""
    c = common_factor(d1, d2, 1e-3, 2.0 * (rounding[1] + abs(guess) * rounding[0]))
    if c is None or abs(c - 1.0) <= 1e-3 or c < 1e-2:  # ~0: TF2 did not move it, no rate
        return ""
    where = f" (TF1 runs it in {assigner})" if assigner else ""
    return (f"TF2's update of this state variable is {c:.4g}x TF1's, all of it: a copy moved "
            f"towards its source at another rate, as a target network's soft update t <- tau "
            f"w + (1 - tau) t with TF2's tau {c:.4g}x TF1's{where}: give both the same tau")


EMA_SHADOW = ("an ExponentialMovingAverage's average: Keras' use_ema keeps another one (it "
              "copies the weights at its first step, where TF1's average starts from their "
              "initial values and moves by 1 - decay a step): keep the average in variables "
              "of the TF2 model, updated after apply_gradients (avg.assign(decay * avg + "
              "(1 - decay) * w))")
"""What an unpaired TF1 ``ExponentialMovingAverage`` shadow variable, and a Keras
``use_ema`` beside one, are told."""
