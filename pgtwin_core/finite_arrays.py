"""Finite arrays, checked where they enter: the first bad entry named, and a cast that
overflows told apart from a value that was never finite."""
from __future__ import annotations

import numpy as np


def cast_finite(arr: np.ndarray, dtype: str, name: str, fix: str) -> np.ndarray:
    """``arr`` as ``dtype``, every entry finite before and after the cast.

    A finite float64 value past float32's range (3.4e38) would become inf in the cast and
    then be reported as "not finite", blaming the env for what the dtype did; it is named
    as what it is, with ``fix`` (how to bring the values into range) and float64.
    """
    with np.errstate(over="ignore"):
        cast = arr.astype(dtype, copy=False)
    finite = np.isfinite(cast)  # one pass, as before the cast's own check: the hot path
    if finite.all():
        return cast
    idx = np.unravel_index(int(np.argmin(finite)), arr.shape)
    if not np.isfinite(arr[idx]):
        check_finite(arr, name)  # the original's first non-finite entry
    where = ", ".join(str(int(i)) for i in idx)
    raise ValueError(f"{name}[{where}] = {arr[idx]} is finite but past {dtype}'s range "
                     f"(+-{np.finfo(dtype).max:.3g}): {fix}, or train in float64 "
                     "(--dtype float64)")


def check_finite(arr: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` naming the first non-finite entry of ``arr``."""
    finite = np.isfinite(arr)
    if not finite.all():
        idx = np.unravel_index(int(np.argmin(finite)), arr.shape)
        where = ", ".join(str(int(i)) for i in idx)
        raise ValueError(f"{name}[{where}] = {arr[idx]} is not finite")
