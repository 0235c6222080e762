"""Validation of what is fed to a policy: observations and actions, checked at the boundary.

Both twins call these before anything reaches TensorFlow, so a bad array fails with the
same message in both, naming the array and the first bad index instead of surfacing as a
shape error deep inside a graph.
"""
from __future__ import annotations

import numpy as np

from pgtwin_core.finite_arrays import cast_finite
from pgtwin_core.specs import PolicySpec


def _numeric(values, name: str) -> np.ndarray:
    """``values`` as a real numeric array, or ``ValueError`` naming ``name``: None, a ragged
    list or strings (numpy's own message names no array), complex numbers (a cast would
    drop the imaginary part silently), objects."""
    if values is None:
        raise ValueError(f"{name} is None; expected an array")
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{name} is not one numeric array ({err}): pass an array of one "
                         "shape, e.g. np.stack of the rows") from None
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"{name} has dtype {arr.dtype}; expected real numbers (an int or "
                         "float array)")
    return arr


def as_obs(spec: PolicySpec, obs: np.ndarray, name: str = "obs", *, dtype: str) -> np.ndarray:
    """``obs`` as a ``[B, *spec.obs_shape]`` array of ``dtype`` (``float32`` or ``float64``).

    Raises ``ValueError`` for a wrong shape, a non-numeric dtype, an empty batch or a
    non-finite entry (naming the first bad index).
    """
    arr = _numeric(obs, name)
    if arr.ndim != 1 + len(spec.obs_shape) or tuple(arr.shape[1:]) != spec.obs_shape:
        raise ValueError(
            f"{name} has shape {arr.shape}; expected [B, {', '.join(map(str, spec.obs_shape))}]"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch (B = 0)")
    return cast_finite(arr, dtype, name, "normalise the observations (pgtwin train "
                                         "--obs-norm) or scale them in the env")


def as_actions(spec: PolicySpec, actions: np.ndarray, batch_size: int,
               name: str = "actions", *, dtype: str) -> np.ndarray:
    """``actions`` as int64 ``[B]`` (categorical, each in ``[0, num_actions)``) or
    ``[B, action_dim]`` of ``dtype`` (gaussian, finite)."""
    arr = _numeric(actions, name)
    if spec.is_discrete:
        if arr.shape != (batch_size,):
            raise ValueError(f"{name} has shape {arr.shape}; expected [{batch_size}]")
        if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
            raise ValueError(f"{name} has dtype {arr.dtype}; expected integer action indices")
        bad = (arr < 0) | (arr >= spec.action_size)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(
                f"{name}[{i}] = {arr[i]} is out of range for a categorical policy with "
                f"{spec.action_size} actions (valid: 0..{spec.action_size - 1})"
            )
        return arr.astype(np.int64)
    if arr.shape != (batch_size, spec.action_size):
        raise ValueError(f"{name} has shape {arr.shape}; expected [{batch_size}, {spec.action_size}]")
    return cast_finite(arr, dtype, name, "scale the action space")


def as_vector(values: np.ndarray, batch_size: int, dtype: np.dtype, name: str) -> np.ndarray:
    """A finite ``[B]`` vector of ``dtype`` (advantages, weights)."""
    arr = _numeric(values, name)
    if arr.shape != (batch_size,):
        raise ValueError(f"{name} has shape {arr.shape}; expected [{batch_size}]")
    return cast_finite(arr, np.dtype(dtype).name, name, "scale them")
