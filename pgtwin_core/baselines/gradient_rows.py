"""Per-sample gradients as rows of one matrix ``[M, P]``, episode after episode.

The episodic baselines weigh every parameter element of every step's ``g_i = grad log
pi(a_i|s_i)``; side by side in one float64 matrix (rows in ``Segments.episode_order``), each
episode is a block of consecutive rows.
"""
from __future__ import annotations

import numpy as np

Grads = dict[str, np.ndarray]


def flatten(grads: Grads) -> np.ndarray:
    """float64 ``[M, P]``: every weight's per-sample gradient side by side (dict order)."""
    return np.concatenate([g.reshape(g.shape[0], -1) for g in grads.values()], axis=1,
                          dtype=np.float64)


def unflatten(values: np.ndarray, like: dict[str, tuple[int, ...]]) -> Grads:
    """Split the last axis of ``values [..., P]`` back into weights of ``like``'s names and
    per-sample shapes (``{name: shape}`` in ``flatten``'s order)."""
    out, start = {}, 0
    for name, shape in like.items():
        size = int(np.prod(shape, dtype=np.int64))
        out[name] = values[..., start:start + size].reshape(*values.shape[:-1], *shape)
        start += size
    return out


def cumsum_rows(x: np.ndarray) -> np.ndarray:
    """``np.cumsum(x, axis=0)`` for a C-ordered ``[R, P]``, a row at a time.

    numpy's axis-0 accumulate walks memory column by column; R contiguous row additions
    are much faster on these matrices (docs/baselines.md, Speed).
    """
    out = np.empty_like(x)
    out[0] = x[0]
    for r in range(1, x.shape[0]):
        np.add(out[r - 1], x[r], out=out[r])
    return out


def episode_blocks(lengths: np.ndarray) -> list[slice]:
    """The rows of each episode when rows are episode after episode (``Segments.episode_order``)."""
    ends = np.cumsum(lengths)
    return [slice(int(e - n), int(e)) for e, n in zip(ends, lengths)]


def episode_scores(grads: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``[E, P]``: ``g_e = sum_{t in e} g_t``, the per-episode scores (``[0, P]`` if E = 0).

    Args:
      grads: float ``[M, P]`` per-sample gradients, rows episode after episode
        (``Segments.episode_order``); lengths: int ``[E]``, T_e, summing to M.
    """
    blocks = episode_blocks(lengths)
    if not blocks:
        return np.zeros((0, grads.shape[1]))
    return np.stack([grads[block].sum(axis=0, dtype=np.float64) for block in blocks])
