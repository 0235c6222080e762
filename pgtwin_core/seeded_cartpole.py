"""Gymnasium's fast CartPole vector env, with one generator per env: env i is seeded ``seed + i``.

``CartPoleVectorEnv`` draws every env's initial state from one shared generator, so env i
does not start where ``gymnasium.make("CartPole-v1").reset(seed=seed + i)`` starts. This
subclass keeps the hand-vectorised physics (one numpy step for all N envs) and gives each
env its own generator, seeded as a single env's, for the first reset and every autoreset:
env i's k-th episode starts exactly where a single env seeded ``seed + i`` starts its k-th.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.utils import seeding

ENTRY_POINT = "pgtwin_core.seeded_cartpole:PerEnvSeededCartPoleVectorEnv"
REPLACES = "gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv"


class PerEnvSeededCartPoleVectorEnv(CartPoleVectorEnv):
    """``CartPoleVectorEnv`` whose env i draws its initial states from its own generator."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset all envs; with ``seed``, env i's generator is seeded ``seed + i``.

        Returns ``(obs float32 [N, 4], {})`` as the parent does.
        """
        super().reset(seed=seed, options=options)
        if seed is not None or not hasattr(self, "_env_rngs"):
            base = seed if seed is not None else int(self.np_random.integers(2**31))
            self._env_rngs = [seeding.np_random(base + i)[0] for i in range(self.num_envs)]
        for i in range(self.num_envs):
            self._redraw(i)
        return self.state.T.astype(np.float32), {}

    def step(self, action):
        """One step of every env; envs that ended last step restart from their own generator.

        The parent steps all envs (none pending, so its shared generator draws nothing);
        the pending envs' states are then redrawn and their transition blanked exactly as
        the parent's NEXT_STEP autoreset does (reward 0, both flags False).
        """
        pending = self.prev_done
        self.prev_done = np.zeros_like(pending)
        _, reward, terminated, truncated, info = super().step(action)
        if pending.any():
            for i in np.flatnonzero(pending):
                self._redraw(int(i))
            self.steps[pending] = 0
            reward[pending] = 0.0
            terminated[pending] = False
            truncated[pending] = False
            self.prev_done = terminated | truncated
        return self.state.T.astype(np.float32), reward, terminated, truncated, info

    def _redraw(self, i: int) -> None:
        # The same draw as CartPoleEnv.reset: uniform(low, high, size=(4,)).
        self.state[:, i] = self._env_rngs[i].uniform(low=self.low, high=self.high, size=(4,))
