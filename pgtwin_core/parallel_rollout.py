"""Several vector envs collected at once, one thread each: the replicas of one process.

Under ``tf.distribute.MirroredStrategy`` one process holds several replicas, each with its
own vector env, action generator and rollout state. Collecting them one after another
leaves the policy call of one replica waiting on the env steps of the others. Here each
replica's :func:`pgtwin_core.rollout.collect` runs in its own thread: the policy call (a
TensorFlow op, which releases the GIL) of one overlaps the env steps of another.

Each thread touches only its own env, generator and state, and the policy is a pure
function of the observations, so the batches are bit for bit those of sequential
collection (tested); only the wall-clock time differs.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from pgtwin_core.rollout import Batch, PolicyFn, RolloutState, collect
from pgtwin_core.specs import PolicySpec

COLLECTIONS = ("parallel", "sequential")
"""How the replicas of one process collect: a thread each, or one after another."""


class ReplicaCollector:
    """Collects one batch per replica, in parallel threads or in sequence.

    Args:
      envs: one vector env per local replica.
      mode: ``parallel`` (a thread per replica; one replica collects in the caller's
        thread) or ``sequential``.

    Raises:
      ValueError: an unknown ``mode``.
    """

    def __init__(self, envs: Sequence, mode: str = "parallel"):
        if mode not in COLLECTIONS:
            raise ValueError(f"unknown collection {mode!r}: choose one of {COLLECTIONS}")
        self.envs = list(envs)
        self.mode = mode
        self._pool = (ThreadPoolExecutor(max_workers=len(self.envs),
                                         thread_name_prefix="replica-collect")
                      if mode == "parallel" and len(self.envs) > 1 else None)

    def collect(self, policy: PolicyFn, spec: PolicySpec, num_steps: int,
                rngs: Sequence[np.random.Generator],
                states: Sequence[RolloutState | None]) -> tuple[list[Batch], list[RolloutState]]:
        """``(batches, states)``: one ``[T, N]`` batch and next state per replica, in order."""
        jobs = list(zip(self.envs, rngs, states))
        if self._pool is None:
            done = [collect(env, policy, spec, num_steps, rng, state) for env, rng, state in jobs]
        else:
            futures = [self._pool.submit(collect, env, policy, spec, num_steps, rng, state)
                       for env, rng, state in jobs]
            done = [f.result() for f in futures]
        return [b for b, _ in done], [s for _, s in done]

    def close(self) -> None:
        """Stop the threads (the envs are the caller's to close)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
