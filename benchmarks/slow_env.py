"""``PgtwinSlowCartPole-v0``: CartPole whose every step also burns ~0.5 ms of CPU.

It stands in for a CPU-heavy simulator, the case where stepping envs in worker processes
(``make_vec_env(..., vectorization="async")``) pays. It is registered by entry-point
*string*, so a worker process that builds it imports this module itself (whatever the
multiprocessing start method) instead of needing the parent's registry.
"""
from __future__ import annotations

import time

import gymnasium
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

ENV_ID = "PgtwinSlowCartPole-v0"
BUSY_S = 0.0005
"""CPU seconds spun per step (a busy loop, not a sleep: a sleep would free the core)."""


class SlowCartPole(CartPoleEnv):
    """``CartPole-v1`` dynamics and rewards; ``step`` spins the CPU for ``busy_s`` first."""

    def __init__(self, busy_s: float = BUSY_S, **kwargs):
        super().__init__(**kwargs)
        if not busy_s >= 0:
            raise ValueError(f"SlowCartPole: busy_s must be >= 0 seconds, got {busy_s!r}")
        self.busy_s = float(busy_s)

    def step(self, action):
        end = time.perf_counter() + self.busy_s
        while time.perf_counter() < end:
            pass
        return super().step(action)


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point="benchmarks.slow_env:SlowCartPole",
                       max_episode_steps=500, reward_threshold=475.0)
