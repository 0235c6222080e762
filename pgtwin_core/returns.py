"""Reward-to-go for REINFORCE, and the normalisation applied to it before the loss.

Both twins (``legacy_graph`` and ``eager``) feed the same numpy returns into their losses,
so the returns are computed once here, in float64, outside TensorFlow; they carry no
gradient by construction.

Layout is time-major throughout: ``[T]`` for one environment, ``[T, N]`` for ``N``
parallel environments stepped in lock-step.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["NORMALIZE_EPS", "discounted_returns", "normalize", "return_scale", "unit_scale"]

NORMALIZE_EPS = 1e-8
"""``normalize``'s default eps (the distributed agent's all-reduced normalisation uses it too)."""


def _index_text(index: tuple[int, ...]) -> str:
    """``"2, 1"`` for a 2-D index, ``"2"`` for a 1-D one.

    The form a user types to look the entry up (``rewards[2, 1]``), not numpy's tuple repr.
    """
    return ", ".join(str(int(i)) for i in index)


def _check_shape(
    array: np.ndarray, expected_shape: tuple[int, ...], name: str, ref_name: str
) -> None:
    """Raises ValueError unless ``array`` has exactly the shape of ``ref_name``.

    Exact equality, not broadcast-compatibility: a ``[T]`` flag array broadcast against
    ``[T, N]`` rewards would silently give every env the same episode boundaries.
    """
    if array.shape != tuple(expected_shape):
        raise ValueError(
            f"{name} has shape {array.shape} but {ref_name} has shape {tuple(expected_shape)}"
        )


def _check_finite(array: np.ndarray, name: str, where: np.ndarray | None = None) -> None:
    """Raises ValueError naming the first (C-order) non-finite entry of ``array``.

    If ``where`` (bool, shape of ``array``) is given, only those entries are checked: the
    others are padding that never reaches the result.
    """
    bad = ~np.isfinite(array)
    if where is not None:
        bad &= where
    if bad.any():
        index = tuple(np.argwhere(bad)[0])
        raise ValueError(
            f"{name}[{_index_text(index)}] is {array[index]} (non-finite); "
            f"{int(bad.sum())} non-finite entries in total"
        )


def _check_not_both(a: np.ndarray, b: np.ndarray, a_name: str, b_name: str) -> None:
    """Raises ValueError at the first step where both flags are set.

    gymnasium never reports both for one step; if a caller does, whether to bootstrap there
    is ambiguous, so refuse rather than silently pick one.
    """
    both = a & b
    if both.any():
        index = tuple(np.argwhere(both)[0])
        raise ValueError(
            f"{a_name} and {b_name} are both set at [{_index_text(index)}]; "
            "a step ends an episode in at most one way"
        )


def _as_flags(
    flags: ArrayLike, name: str, shape: tuple[int, ...], ref_name: str
) -> np.ndarray:
    """``flags`` as a bool array, after checking it has the shape of ``ref_name``."""
    flags = np.asarray(flags)
    _check_shape(flags, shape, name, ref_name)
    # `!= 0` so that 0/1 integer or float flags (as some vector envs return) read as bools.
    return flags != 0


def discounted_returns(
    rewards: ArrayLike,
    terminated: ArrayLike,
    truncated: ArrayLike,
    gamma: float,
    bootstrap: ArrayLike | None = None,
) -> np.ndarray:
    """Discounted reward-to-go within each episode (Monte-Carlo returns, Williams 1992).

    For every step t, with ``r_t = rewards[t]`` and ``v_tp1 = bootstrap[t]``::

        G_t = r_t                     if terminated[t]          (true end: nothing follows)
        G_t = r_t + gamma * v_tp1     if truncated[t]           (time limit: value of s_t+1)
        G_t = r_t + gamma * v_tp1     if t == T-1, not ended    (rollout cut mid-episode)
        G_t = r_t + gamma * G_{t+1}   otherwise                 (episode continues)

    With gamma = 0 this is ``rewards``; with gamma = 1 and no bootstrap it is the
    undiscounted sum of the rewards left in the episode.

    Args:
        rewards: float array ``[T]`` or ``[T, N]`` (time-major); r_t, the reward of step t.
            Finite.
        terminated: bool array, shape of ``rewards``; the episode truly ended at step t.
        truncated: bool array, shape of ``rewards``; the episode was cut by a time limit at
            step t. Never set together with ``terminated`` at the same step.
        gamma: python float in [0, 1]; the discount per step.
        bootstrap: optional float array, shape of ``rewards``; v_tp1, the value estimate of
            the state reached after step t. Read only where ``truncated[t]`` and at
            t = T-1 of an episode still running; ignored elsewhere. Default: zeros.

    Returns:
        float64 array, shape of ``rewards``: G_t. Plain numpy, so it carries no gradient.
        T = 0 gives an empty array.

    Raises:
        ValueError: naming the argument (and the first bad index) if ``rewards`` is not
            1-D or 2-D, another array's shape differs from that of ``rewards``, ``gamma`` is
            non-finite or outside [0, 1], ``rewards`` or ``bootstrap`` holds a non-finite
            value, or ``terminated`` and ``truncated`` are both set at one step.
    """
    r_t, ends_t, tail_t = episode_ends(rewards, terminated, truncated, bootstrap, gamma=gamma)
    gamma = float(gamma)
    g_t = np.empty(r_t.shape, dtype=np.float64)
    # One reverse pass over T; each row is a vector over the N environments.
    g_tp1 = np.zeros(r_t.shape[1:], dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(r_t.shape[0] - 1, -1, -1):
            g_tp1 = r_t[t] + gamma * np.where(ends_t[t], tail_t[t], g_tp1)
            g_t[t] = g_tp1
    _check_overflow(g_t, r_t)
    return g_t


def _check_overflow(g_t: np.ndarray, r_t: np.ndarray) -> None:
    """Finite rewards whose discounted sums pass float64's range (1.8e308) are named as
    such, not as an "x" of some later function that meets the inf."""
    bad = ~np.isfinite(g_t)
    if bad.any():
        index = tuple(np.argwhere(bad)[0])
        raise ValueError(
            f"the discounted return at [{_index_text(index)}] overflows float64 (the rewards "
            f"reach {np.max(np.abs(r_t)):.3g}): scale the rewards down in the env (e.g. "
            "gymnasium.wrappers.TransformReward)")


def episode_ends(
    rewards: ArrayLike,
    terminated: ArrayLike,
    truncated: ArrayLike,
    bootstrap: ArrayLike | None,
    **rates: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The checked inputs of a backward recursion over time-major episodes
    (:func:`discounted_returns`, ``pgtwin_core.gae.lambda_advantages``).

    Args: as :func:`discounted_returns`; ``rates``: the recursion's decays by name
    (``gamma=...``, ``lambda_=...``), each a python float in [0, 1].

    Returns:
        ``(r_t, ends_t, tail_t)``: the rewards as float64 ``[T]`` or ``[T, N]``; bool
        ``ends_t``, the episode does not go on inside the array after step t (a true end,
        a time limit, or the last row of an episode still running, which the rollout
        length cut and which bootstraps exactly like a time limit); float64 ``tail_t``,
        what follows such a step: 0 after a true end, ``bootstrap[t]`` after a cut.

    Raises:
        ValueError: naming the argument (and the first bad index), as
            :func:`discounted_returns` lists.
    """
    r_t = np.asarray(rewards, dtype=np.float64)
    if r_t.ndim not in (1, 2):
        raise ValueError(
            f"rewards must be 1-D [T] or 2-D [T, N] (time-major), got shape {r_t.shape}"
        )
    shape = r_t.shape
    terminated_t = _as_flags(terminated, "terminated", shape, "rewards")
    truncated_t = _as_flags(truncated, "truncated", shape, "rewards")
    if bootstrap is None:
        v_tp1 = np.zeros(shape, dtype=np.float64)
    else:
        v_tp1 = np.asarray(bootstrap, dtype=np.float64)
        _check_shape(v_tp1, shape, "bootstrap", "rewards")
    for name, rate in rates.items():
        rate = float(rate)
        if not (math.isfinite(rate) and 0.0 <= rate <= 1.0):
            raise ValueError(f"{name} must be a finite number in [0, 1], got {rate}")
    _check_finite(r_t, "rewards")
    _check_finite(v_tp1, "bootstrap")
    _check_not_both(terminated_t, truncated_t, "terminated", "truncated")
    cut_t = truncated_t.copy()
    if shape[0]:
        cut_t[-1] |= ~terminated_t[-1]
    return r_t, terminated_t | cut_t, np.where(cut_t, v_tp1, 0.0)


def _population_std(values: np.ndarray, mean: float) -> float:
    """``sqrt(mean((values - mean)^2))``; where the squares overflow (deviations past
    ~1e154), the same taken on the deviations divided by their largest, then scaled back,
    so that rewards of 1e200 normalise as rewards of 1 do (the plain form's inf std made
    every advantage 0). The plain form's bits wherever it is finite."""
    with np.errstate(over="ignore", invalid="ignore"):
        deviations = values - mean
        std = np.sqrt(np.mean(np.square(deviations)))
    if np.isfinite(std):
        return float(std)
    largest = np.max(np.abs(deviations))
    return float(largest * np.sqrt(np.mean(np.square(deviations / largest))))


def _counted(x: ArrayLike, eps: float, mask: ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    """``(x as float64, bool mask of the counted entries)``, after checking ``eps``, the
    mask's shape and that every counted entry is finite (``normalize``'s arguments)."""
    x = np.asarray(x, dtype=np.float64)
    eps = float(eps)
    if not (math.isfinite(eps) and eps >= 0.0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps}")
    if mask is None:
        counted = np.ones(x.shape, dtype=bool)
    else:
        counted = np.asarray(mask)
        _check_shape(counted, x.shape, "mask", "x")
        counted = counted != 0
    _check_finite(x, "x", where=counted)
    return x, counted


def normalize(
    x: ArrayLike, eps: float = NORMALIZE_EPS, mask: ArrayLike | None = None
) -> np.ndarray:
    """Standardises ``x`` to zero mean and unit standard deviation.

        out = (x - mean) / (std + eps)

    Applied to the returns before the policy-gradient loss so that the step size does not
    depend on the reward scale. ``std`` is the population standard deviation (ddof = 0).

    Args:
        x: float array of any shape; finite wherever it is counted (see ``mask``).
        eps: python float >= 0; keeps a constant input from dividing by zero.
        mask: optional bool array, shape of ``x``. If given, mean and std are taken over
            the entries where it is True only (real steps, not padding), and entries where
            it is False come back as 0 whatever they hold.

    Returns:
        float64 array, shape of ``x``. A constant input, or a mask with no True entry,
        gives zeros, never NaN.

    Raises:
        ValueError: if ``eps`` is negative or non-finite, ``mask``'s shape differs from
            ``x``'s, or a counted entry of ``x`` is non-finite (naming its index).
    """
    x, counted = _counted(x, eps, mask)

    out = np.zeros(x.shape, dtype=np.float64)
    values = x[counted]
    if values.size == 0:
        return out
    lo, hi = values.min(), values.max()
    # For a constant input the summed mean can miss the value by an ulp, which divided by
    # eps alone would leave ~1e-9 instead of 0 (and NaN with eps = 0); use the value itself.
    mean = lo if lo == hi else values.mean()
    std = _population_std(values, mean)
    if std + eps == 0.0:
        # Only reachable with eps = 0 on a constant input: every value is its mean.
        return out
    out[counted] = (values - mean) / (std + eps)
    return out


def return_scale(
    x: ArrayLike, eps: float = NORMALIZE_EPS, mask: ArrayLike | None = None
) -> float:
    """The divisor of ``normalize_returns``: ``std + eps`` of ``x``, or 1.0 for a constant.

    ``std`` is the population standard deviation (ddof = 0) over the counted entries,
    computed as :func:`normalize` computes it (the same bits). A constant input (or none
    counted) has no scale to remove: 1.0, where dividing by eps alone would multiply it by
    1e8.

    Args:
        x: float array of any shape; finite wherever it is counted (see ``mask``).
        eps: python float >= 0.
        mask: optional bool array, shape of ``x``; the std is over its True entries only.

    Raises:
        ValueError: as :func:`normalize`.
    """
    x, counted = _counted(x, eps, mask)
    values = x[counted]
    if values.size == 0 or values.min() == values.max():
        return 1.0
    std = _population_std(values, values.mean())
    return float(std + eps) if std + eps > 0 else 1.0


def unit_scale(
    x: ArrayLike, eps: float = NORMALIZE_EPS, mask: ArrayLike | None = None
) -> np.ndarray:
    """``x / return_scale(x)``: divided by its standard deviation, NOT centred; 0 off ``mask``.

    What ``normalize_returns`` does to the reward-to-go: the step size stops depending on
    the reward scale, while the baseline (``none``, ``mean``, ...) stays the only thing that
    shifts the returns, so ``baseline='none'`` really has none.

    Returns:
        float64 array, shape of ``x``.
    """
    scale = return_scale(x, eps, mask)
    x, counted = _counted(x, eps, mask)
    return np.where(counted, x / scale, 0.0)
