"""The training loop both twins share: collect -> returns -> update -> log, top to bottom.

It is TF-free: an agent is anything with ``spec``, ``config``, ``rollout_policy()`` and
``update(batch)`` (both twins' ``ReinforceAgent``). Returns are computed inside
``update`` from ``pgtwin_core.advantages``, so both twins train on identical arrays.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator, Protocol

import gymnasium as gym
import numpy as np

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.obs_normalizer import ObsNormalizer, observed
from pgtwin_core.rollout import Batch, PolicyFn, RolloutState, collect
from pgtwin_core.schedules import Schedules
from pgtwin_core.specs import PolicySpec


class Agent(Protocol):
    """What the loop needs of a twin's agent."""

    spec: PolicySpec
    config: ReinforceConfig

    def rollout_policy(self) -> PolicyFn: ...

    def update(self, batch: Batch) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Iteration:
    """What one pass of the loop produced."""

    update: int
    """1-based count of updates done, this one included."""
    batch: Batch
    """The rollout trained on (its finished episodes are ``batch.episode_returns``)."""
    metrics: dict[str, Any]
    """The agent's update metrics (loss, grad_norm, entropy, applied, ...)."""
    state: RolloutState
    """The rollout state after the batch (env-step counter included)."""
    wall_s: float
    """Seconds since the loop started."""

    @property
    def skipped(self) -> str | None:
        """Why this update was not applied (one of ``SKIP_REASONS``), None if it was."""
        return skip_reason(self.metrics)


NON_FINITE = "non_finite"
"""The loss or a gradient was NaN or infinite: the twins' guarded apply left every weight."""
NO_COMPLETE_EPISODE = "no_complete_episode"
"""An episodic baseline found no complete episode in the batch (``skipped_update_metrics``)."""
SKIP_REASONS = (NON_FINITE, NO_COMPLETE_EPISODE)


def skip_reason(metrics: dict[str, Any]) -> str | None:
    """Why an update with these metrics was skipped (``applied`` False), else None.

    Both twins report ``applied = False`` for a non-finite loss or gradient; the episodic
    baselines add ``episodes = 0`` when the batch held no complete episode.
    """
    if metrics.get("applied", True):
        return None
    return NO_COMPLETE_EPISODE if metrics.get("episodes") == 0 else NON_FINITE


def iterate_training(
    agent: Agent, envs: gym.vector.VectorEnv, rng: np.random.Generator,
    state: RolloutState | None = None, start_update: int = 0, *,
    schedules: Schedules | None = None, normalizer: ObsNormalizer | None = None,
) -> Iterator[Iteration]:
    """Yield one :class:`Iteration` per update, forever; the caller decides when to stop.

    ``schedules`` (``pgtwin_core.schedules``): the learning rate set before each update and
    the log-std floor projected after it, from the env steps taken before its rollout.
    ``normalizer`` (``pgtwin_core.obs_normalizer``): the policy sees, and the update trains
    on, normalised observations; the statistics take in each batch's raw observations
    after it is normalised (so they are frozen within a rollout). The yielded batch is the
    normalised one; ``state.obs`` stays raw.
    """
    start = time.perf_counter()
    update = start_update
    while True:
        steps_before = 0 if state is None else state.env_steps
        if schedules is not None and schedules.active:
            schedules.before_update(agent, steps_before)
        policy = agent.rollout_policy()
        if normalizer is not None:
            policy = normalizer.wrap(policy)
        batch, state = collect(envs, policy, agent.spec,
                               agent.config.num_steps, rng, state)      # collect
        if normalizer is not None:
            raw, batch = batch, normalizer.normalized_batch(batch)
            normalizer.update(observed(raw))
        metrics = agent.update(batch)                                    # returns + update
        if schedules is not None and schedules.active:
            schedules.after_update(agent, steps_before)
        update += 1
        yield Iteration(update, batch, metrics, state, time.perf_counter() - start)  # log
