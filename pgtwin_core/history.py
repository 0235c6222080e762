"""A vector-env wrapper that turns each observation into a window of the last K observations."""
from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space


class HistoryWindow(gymnasium.vector.VectorWrapper):
    """Observations become the last ``history`` observations of each env, oldest first.

    The wrapped env's observation float [N, *obs_shape] becomes float [N, K, *obs_shape]
    (same dtype) with ``window[:, -1]`` the current observation and ``window[:, -2]`` the
    one before it. Rows from before the start of the current episode are zeros.

    Episode boundaries follow gymnasium's NEXT_STEP autoreset: if env i reported
    ``terminated | truncated`` at step t, the step call at t+1 returns env i's reset
    observation (and ignores its action), so at t+1 env i's window restarts as zeros with
    the reset observation in the last row. ``reset()`` restarts every window (with
    ``options["reset_mask"]`` only the masked ones).

    Works on any vector env with a Box observation space, including gymnasium's
    hand-vectorised ones (e.g. ``CartPoleVectorEnv``), because it only looks at the batched
    ``obs``, ``terminated`` and ``truncated`` arrays.
    """

    def __init__(self, env: gymnasium.vector.VectorEnv, history: int) -> None:
        super().__init__(env)
        if int(history) != history or history < 1:
            raise ValueError(f"history must be an integer >= 1, got {history!r}")
        single = env.single_observation_space
        if not isinstance(single, spaces.Box):
            raise ValueError(f"HistoryWindow needs a Box observation space, got {single}")
        self.history = int(history)
        reps = (self.history,) + (1,) * len(single.shape)
        # The zero padding must lie inside the space, hence the bounds widened to include 0.
        low = np.tile(np.minimum(single.low, 0)[None], reps)
        high = np.tile(np.maximum(single.high, 0)[None], reps)
        self.single_observation_space = spaces.Box(low=low, high=high, dtype=single.dtype)
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)
        self._window = np.zeros((env.num_envs, self.history) + single.shape, dtype=single.dtype)
        # Which envs ended on the previous step, i.e. return a reset observation on the next.
        self._prev_done = np.zeros(env.num_envs, dtype=np.bool_)

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset the wrapped env; returns windows [N, K, *obs_shape] zero but for the last row."""
        # Read the mask before the wrapped env pops it from ``options``.
        mask = None if options is None else options.get("reset_mask")
        obs, info = self.env.reset(seed=seed, options=options)
        rows = slice(None) if mask is None else np.asarray(mask, dtype=np.bool_)
        self._window[rows] = 0
        self._window[rows, -1] = obs[rows]
        self._prev_done[rows] = False
        return self._window.copy(), info

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step the wrapped env and slide every window by one; see the class docstring."""
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        # numpy buffers overlapping slice assignments, so this shift is safe in place.
        self._window[:, :-1] = self._window[:, 1:]
        self._window[self._prev_done, :-1] = 0
        self._window[:, -1] = obs
        self._prev_done = np.logical_or(terminated, truncated)
        return self._window.copy(), rewards, terminated, truncated, info
