"""Where each step of a batch stands in its episode: the step index t and its discount gamma^t.

GPOMDP (``ReinforceConfig.gpomdp``) weights step t's term by gamma^t and the value baseline
(``baseline='value'``) takes t as an input, both with t counted from the episode's *real*
first step, also when that step was in an earlier batch: the rollout records it
(``Batch.episode_steps``). A hand-made batch without that record counts from the batch's
first step (its earlier steps are unknown), which is exact for every episode that starts
inside the batch.
"""
from __future__ import annotations

import numpy as np

from pgtwin_core.rollout import Batch


def episode_steps(batch: Batch) -> np.ndarray:
    """int64 ``[T, N]``: t, each step's index in its episode; -1 on autoreset steps.

    ``batch.episode_steps`` when the rollout recorded it, else counted from the batch's
    first step (module doc). Raises ``ValueError`` if a recorded array has another shape
    than ``batch.valid`` or disagrees with it (an index on an autoreset step, or -1 on a
    valid one).
    """
    valid = np.asarray(batch.valid, bool)
    if batch.episode_steps is not None:
        steps = np.asarray(batch.episode_steps, np.int64)
        if steps.shape != valid.shape:
            raise ValueError(f"batch.episode_steps has shape {steps.shape} but batch.valid "
                             f"has shape {valid.shape}")
        if np.any((steps >= 0) != valid):
            t, n = np.argwhere((steps >= 0) != valid)[0]
            raise ValueError(f"batch.episode_steps[{t}, {n}] = {steps[t, n]} disagrees with "
                             f"batch.valid[{t}, {n}] = {valid[t, n]} (-1 marks autoreset steps)")
        return steps
    ended = (np.asarray(batch.terminated, bool) | np.asarray(batch.truncated, bool)) & valid
    steps = np.full(valid.shape, -1, np.int64)
    running = np.zeros(valid.shape[1], np.int64)
    for t in range(valid.shape[0]):
        steps[t] = np.where(valid[t], running, -1)
        running = np.where(ended[t] | ~valid[t], 0, running + valid[t])
    return steps


def step_discounts(batch: Batch, gamma: float) -> np.ndarray:
    """float64 ``[T, N]``: gamma^t at each valid step (t from :func:`episode_steps`), 0 on
    autoreset steps: GPOMDP's weight of step t's term."""
    steps = episode_steps(batch)
    return np.where(steps >= 0, float(gamma) ** np.maximum(steps, 0).astype(np.float64), 0.0)
