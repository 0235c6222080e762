"""What a training run's checkpoint holds, and how it is put back.

A checkpoint is taken between two updates, where the whole run is a handful of objects:

* ``agent/``       the agent's own ``save``: weights and optimizer state (Adam moments and
                   step count; TF1 ``Saver`` or ``tf.train.Checkpoint``);
* ``env.pkl``      the vector env itself (``pgtwin.train.env_snapshot``): every sub-env's physics
                   state, step counter and generator, and the autoreset flags;
* ``rollout.npz``  the ``RolloutState``: current observations, which envs reset next, the
                   running episodes' partial returns and lengths;
* ``baseline_memory.npz``  the episodic baselines' earlier-batch sums
                   (``agent.baseline_memory``, ``pgtwin_core/baseline_memory.py``), when the
                   agent has one and it holds anything;
* ``obs_norm.npz`` the observation normaliser's running statistics (``obs_norm`` runs,
                   ``pgtwin_core/obs_normalizer.py``);
* ``state.json``   the action-sampling generator's ``bit_generator.state``, the counters
                   (updates, env steps, training seconds, episodes logged), the returns in
                   the stopping window, when the threshold was first reached, and the
                   settings that must not change on resume.

Restoring them all continues the run exactly: the next update samples the same actions in
the same env states as the uninterrupted run would, so (with deterministic TensorFlow ops)
the final weights are bit-identical. An env that cannot be pickled (``AsyncVectorEnv``,
render windows) is checkpointed without ``env.pkl``: on resume it is rebuilt and reset with
a seed derived from the run seed and the update, so the run continues correctly but not
identically (running, unfinished episodes are dropped; finished ones are all logged).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgtwin_core.obs_normalizer import ObsNormalizer
from pgtwin_core.rollout import RolloutState
from pgtwin.train import env_snapshot

AGENT_PREFIX = os.path.join("agent", "ckpt")
BASELINE_MEMORY = "baseline_memory.npz"
OBS_NORM = "obs_norm.npz"
RESEED_STRIDE = 1_000_003
"""Reseeded resume: envs reset with ``seed + RESEED_STRIDE * update`` (fresh episodes that
the first run's seeds ``seed + i`` for i < num_envs cannot collide with)."""


@dataclass
class Progress:
    """The run's counters and stopping window (JSON in ``state.json``)."""

    update: int = 0
    env_steps: int = 0
    wall_s: float = 0.0
    """Training-loop seconds so far, over every resumed segment."""
    first_iteration_s: float | None = None
    """Training-loop seconds of the run's first iteration (rollout and update): the twins
    trace their functions and XLA compiles them there, so a short run's rate is mostly it."""
    first_iteration_env_steps: int | None = None
    """Env steps of that first iteration."""
    episodes: int = 0
    """Finished episodes logged (rows in the episode CSV)."""
    recent_returns: list[float] = field(default_factory=list)
    """Returns of the last ``solve_window`` finished episodes, oldest first."""
    solved_at_update: int | None = None
    solved_at_env_steps: int | None = None
    solved_at_wall_s: float | None = None
    skipped_updates: int = 0
    """Updates skipped for any reason (``pgtwin_core.loop.SKIP_REASONS``)."""
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    """``skipped_updates`` by reason."""
    consecutive_skips: dict[str, int] = field(default_factory=dict)
    """The skips since the last applied update, by reason (``max_consecutive_skips``)."""

    def count(self, skipped: str | None) -> bool:
        """Count an update: applied (``skipped`` None) or skipped for reason ``skipped``.

        Returns True for the first skip of that reason in the run (the one explained).
        """
        if skipped is None:
            self.consecutive_skips = {}
            return False
        self.skipped_updates += 1
        self.skipped_by_reason[skipped] = self.skipped_by_reason.get(skipped, 0) + 1
        self.consecutive_skips[skipped] = self.consecutive_skips.get(skipped, 0) + 1
        return self.skipped_by_reason[skipped] == 1

    def stalled(self, limit: int) -> bool:
        """Whether the last ``limit`` updates were all skipped (``limit`` 0: never)."""
        return bool(limit) and sum(self.consecutive_skips.values()) >= limit

    def mark_solved(self, mean: float | None, window_full: bool, threshold: float | None,
                    wall: float) -> None:
        """Record the first update whose full window's ``mean`` return reached ``threshold``."""
        if (self.solved_at_update is None and threshold is not None and window_full
                and mean >= threshold):
            self.solved_at_update, self.solved_at_env_steps = self.update, self.env_steps
            self.solved_at_wall_s = wall

    def done(self, total_steps: int, stop_at_threshold: bool) -> bool:
        """Whether the budget is spent, or the run solved and stops there."""
        return self.env_steps >= total_steps or (stop_at_threshold
                                                 and self.solved_at_update is not None)


def save(directory: str, agent: Any, envs: Any, state: RolloutState,
         rng: np.random.Generator, progress: Progress, settings: dict[str, Any],
         env_bytes: bytes | None, normalizer: ObsNormalizer | None = None) -> None:
    """Write the run's checkpoint files into ``directory`` (a fresh dir).

    ``env_bytes`` is the env's snapshot, or None when it cannot be pickled;
    ``normalizer``'s statistics (``obs_norm`` runs) go to ``obs_norm.npz``.
    """
    save_agent(directory, agent)
    save_rollout(directory, state, env_bytes)
    if normalizer is not None:
        np.savez(os.path.join(directory, OBS_NORM), **normalizer.state())
    doc = {"progress": progress.__dict__, "rng": rng.bit_generator.state,
           "env": "snapshot" if env_bytes is not None else "reseed", "settings": settings}
    with open(os.path.join(directory, "state.json"), "w") as f:
        json.dump(doc, f, indent=1)


def save_agent(directory: str, agent: Any) -> None:
    """``agent/`` (weights, optimizer state) and ``baseline_memory.npz`` into ``directory``."""
    agent.save(os.path.join(directory, AGENT_PREFIX))
    # TF1's Saver also writes a "checkpoint" index naming the temp dir by absolute path;
    # restore uses the explicit prefix, so the stale index is left out.
    index = os.path.join(directory, "agent", "checkpoint")
    if os.path.exists(index):
        os.remove(index)
    memory = getattr(agent, "baseline_memory", None)
    if memory is not None and memory.state():
        np.savez(os.path.join(directory, BASELINE_MEMORY), **memory.state())


def save_rollout(directory: str, state: RolloutState, env_bytes: bytes | None) -> None:
    """``rollout.npz`` (the rollout state) and ``env.pkl`` (the env, when it pickles) into
    ``directory`` (created if missing)."""
    os.makedirs(directory, exist_ok=True)
    np.savez(os.path.join(directory, "rollout.npz"), obs=state.obs,
             needs_reset=state.needs_reset, episode_return=state.episode_return,
             episode_length=state.episode_length)
    if env_bytes is not None:
        with open(os.path.join(directory, "env.pkl"), "wb") as f:
            f.write(env_bytes)


def load_state(directory: str) -> dict[str, Any]:
    """``state.json`` of a (verified) checkpoint."""
    with open(os.path.join(directory, "state.json")) as f:
        return json.load(f)


def restore(directory: str, doc: dict[str, Any], agent: Any, fresh_envs: Any,
            rng: np.random.Generator, normalizer: ObsNormalizer | None = None,
            ) -> tuple[Any, RolloutState, Progress]:
    """Put a checkpoint back: agent, ``rng`` (and ``normalizer``'s statistics) in place;
    returns ``(envs, state, progress)``.

    ``fresh_envs`` is a newly made env of the run's id, seed and size (not yet reset).
    """
    restore_agent(directory, agent)
    if normalizer is not None:
        load_normalizer(directory, normalizer)
    rng.bit_generator.state = doc["rng"]
    progress = Progress(**doc["progress"])
    envs, state = restore_rollout(directory, doc["env"], fresh_envs, progress.env_steps,
                                  int(doc["settings"]["seed"]), progress.update)
    return envs, state, progress


def load_normalizer(directory: str, normalizer: ObsNormalizer) -> None:
    """Put ``obs_norm.npz`` of ``directory`` back into ``normalizer``.

    Raises ValueError naming the file when it is missing or does not fit.
    """
    path = os.path.join(directory, OBS_NORM)
    if not os.path.exists(path):
        raise ValueError(f"{path} is missing: the run normalises observations, and its "
                         "statistics are part of the checkpoint")
    with np.load(path) as z:
        normalizer.load_state({k: z[k] for k in z.files}, where=path)


def restore_agent(directory: str, agent: Any) -> None:
    """Put :func:`save_agent`'s files in ``directory`` back into ``agent``."""
    agent.restore(os.path.join(directory, AGENT_PREFIX))
    memory = getattr(agent, "baseline_memory", None)
    path = os.path.join(directory, BASELINE_MEMORY)
    if memory is not None:  # absent file: saved while empty (or before the memory existed)
        state = {}
        if os.path.exists(path):
            with np.load(path) as z:
                state = {k: z[k] for k in z.files}
        memory.load_state(state, where=path)


def restore_rollout(directory: str, env_mode: str, fresh_envs: Any, env_steps: int,
                    seed: int, update: int) -> tuple[Any, RolloutState]:
    """``(envs, state)`` from :func:`save_rollout`'s files in ``directory``.

    Args:
      env_mode: ``snapshot`` (``env.pkl`` was written) or ``reseed``: ``fresh_envs`` is
        reset with ``seed + RESEED_STRIDE * update``.
      fresh_envs: a newly made env of the run's id, seed and size (not yet reset).
      env_steps: the env-step counter the state continues from.
    """
    if env_mode == "snapshot":
        with open(os.path.join(directory, "env.pkl"), "rb") as f:
            envs = env_snapshot.restore(f.read(), fresh_envs)
        with np.load(os.path.join(directory, "rollout.npz")) as z:
            state = RolloutState(obs=z["obs"], needs_reset=z["needs_reset"],
                                 episode_return=z["episode_return"],
                                 episode_length=z["episode_length"],
                                 env_steps=env_steps)
    else:
        envs = fresh_envs
        state = RolloutState.start(envs, seed=seed + RESEED_STRIDE * update)
        state.env_steps = env_steps
    return envs, state
