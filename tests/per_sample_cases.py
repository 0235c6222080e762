"""Policies, inputs and episodic batches shared by the per-sample and baseline tests of both twins.

Kept in one place (trfl style) so that the graph-mode and eager tests, and the twin parity
tests, run on exactly the same specs, weights and data.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec

KINDS: dict[str, PolicySpec] = {
    # Small widths keep the loop reference cheap; each kind exercises a different head/torso.
    "categorical_mlp": PolicySpec("categorical", (4,), 3, hidden=(16, 8)),
    "gaussian_mlp": PolicySpec("gaussian", (3,), 2, hidden=(16,), activation="relu",
                               action_low=(0.0, 0.0), action_high=(1.0, 1.0), squash="sigmoid"),
    "categorical_lstm": PolicySpec("categorical", (3, 4), 2, torso="lstm", hidden=(8, 6)),
    "gaussian_lstm": PolicySpec("gaussian", (3, 2), 2, torso="lstm", hidden=(8,),
                                action_low=(-1.0, -1.0), action_high=(1.0, 1.0), squash="tanh"),
}
MLP_KINDS = ("categorical_mlp", "gaussian_mlp")
BATCH_SIZES = (1, 7, 256)


def random_weights(spec: PolicySpec, seed: int = 0, *,
                   dtype: str = "float32") -> dict[str, np.ndarray]:
    """Weights of ``dtype`` drawn N(0, 0.5^2), so every layer's gradient is far from 0
    (init_weights' head gain 0.01 would make the head's gradients tiny and the comparisons weak)."""
    rng = np.random.default_rng(seed)
    return {name: (0.5 * rng.standard_normal(shape)).astype(dtype)
            for name, shape in spec.weight_shapes().items()}


def random_inputs(spec: PolicySpec, batch_size: int, seed: int = 0, *,
                  dtype: str = "float32") -> tuple[np.ndarray, np.ndarray]:
    """``(obs [B, *obs_shape], actions)`` of ``dtype``: standard normal obs; uniform or
    N(0, 0.5^2) actions."""
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((batch_size, *spec.obs_shape)).astype(dtype)
    if spec.is_discrete:
        return obs, rng.integers(0, spec.action_size, batch_size)
    return obs, (0.5 * rng.standard_normal((batch_size, spec.action_size))).astype(dtype)


@dataclass(frozen=True)
class EpisodicBatch:
    """A batch whose episodes are known by construction, and which of them are whole."""

    batch: Batch
    episodes: list[list[int]]
    """Flat indices (``t * N + n``) of each complete episode's steps, in time order."""


def episodic_batch(spec: PolicySpec, num_steps: int, num_envs: int, seed: int,
                   mean_length: float = 4.0) -> EpisodicBatch:
    """A ``[T, N]`` batch laid out as ``pgtwin_core.rollout.collect`` lays one out.

    Every env starts a fresh episode at t = 0 (as after a reset). Episode lengths are
    geometric with mean ``mean_length``; an episode ends terminated or (one in three)
    truncated, and the step after an end is an autoreset step (``valid = False``, reward 0).
    The last episode of each env is cut by the batch edge unless it ends exactly at T - 1.
    ``batch.episode_lengths`` lists the finished episodes in rollout order (t, then env).
    """
    rng = np.random.default_rng(seed)
    t, n = num_steps, num_envs
    obs = rng.standard_normal((t, n, *spec.obs_shape))
    actions = (rng.integers(0, spec.action_size, (t, n)) if spec.is_discrete
               else 0.5 * rng.standard_normal((t, n, spec.action_size)))
    rewards = rng.standard_normal((t, n))
    valid = np.ones((t, n), bool)
    terminated = np.zeros((t, n), bool)
    truncated = np.zeros((t, n), bool)
    ends: list[tuple[int, int, int]] = []  # (t, env, length)
    episodes: list[tuple[int, int, list[int]]] = []  # (end t, env, indices)
    for env in range(n):
        step = 0
        while step < t:
            length = int(rng.geometric(1.0 / mean_length))
            last = step + length - 1
            if last >= t:
                break  # cut by the batch edge: not a complete episode
            (truncated if rng.random() < 1 / 3 else terminated)[last, env] = True
            ends.append((last, env, length))
            episodes.append((last, env, [s * n + env for s in range(step, last + 1)]))
            if last + 1 < t:
                valid[last + 1, env] = False
            step = last + 2
    rewards = np.where(valid, rewards, 0.0)
    ends.sort()
    episodes.sort(key=lambda e: (e[1], e[0]))  # env by env, in time order
    batch = Batch(
        obs=obs, actions=actions, rewards=rewards, terminated=terminated, truncated=truncated,
        log_probs=np.zeros((t, n)), valid=valid, next_obs=obs[-1],
        episode_returns=np.zeros(len(ends)),
        episode_lengths=np.array([length for _, _, length in ends], np.int64),
    )
    return EpisodicBatch(batch, [e[2] for e in episodes])
