"""Per-environment defaults of ``pgtwin train``: one table, one row per known env.

Any value given on the command line overrides the row; envs not in the table get
``GENERIC``. The stopping threshold is not here: it is the gymnasium spec's
``reward_threshold`` (CartPole-v1: 475), and envs without one train for ``total_steps``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvDefaults:
    """Hyperparameters ``pgtwin train`` uses for an env unless told otherwise."""

    num_envs: int = 16
    """Parallel environments N."""
    num_steps: int = 128
    """Rollout length T per update."""
    learning_rate: float = 1e-2
    """Adam step size."""
    gamma: float = 0.99
    """Discount."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden sizes (for ``--torso lstm`` the first is the LSTM's units)."""
    history: int = 8
    """Observation window K for ``--torso lstm`` (the MLP sees one observation)."""
    baseline: str = "none"
    """One of ``pgtwin_core.config.BASELINES``."""
    normalize_returns: bool = True
    """Standardise returns over the batch."""
    entropy_coef: float = 0.0
    """Entropy bonus weight."""
    max_grad_norm: float | None = None
    """Global gradient-norm clip, or None."""
    total_steps: int = 1_000_000
    """Env-step budget (``--steps``)."""
    checkpoint_every: int = 25
    """Updates between checkpoints (``--checkpoint-every``)."""

    def replace(self, **changes) -> "EnvDefaults":
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)


GENERIC = EnvDefaults()

DEFAULTS: dict[str, EnvDefaults] = {
    # Tuned for wall time to solve (docs/cartpole.md). A rollout cuts CartPole's
    # up-to-500-step episodes without bootstrapping, so the last ~1/(1 - gamma) steps of
    # each batch see truncated returns: gamma = 0.97 keeps that tail short against T = 128,
    # where 0.95 learns balance faster but cannot see the cart drifting off the track (the
    # stalls of 0.95 end at the x limit). 128 envs make a policy call serve 128 env steps.
    # Seeds 0-19 x both twins: 40/40 solved (mean of 100 >= 475), median ~250k env steps,
    # 38/40 within 800k, worst 2.2M.
    "CartPole-v1": EnvDefaults(num_envs=128, num_steps=128, learning_rate=2.5e-2, gamma=0.97,
                               total_steps=3_000_000, checkpoint_every=25),
    # 200-step episodes: T = 200 sees whole episodes; no reward_threshold, so it runs
    # for the budget.
    "Pendulum-v1": EnvDefaults(num_envs=16, num_steps=200, learning_rate=3e-3,
                               total_steps=1_000_000, checkpoint_every=25),
    # 168-step (one week) episodes; reward is in currency units. T = 169: the 168 steps
    # and gymnasium's autoreset step, so every batch holds each env's whole week (the
    # episodic baselines use complete episodes only; at T = 168 the weeks drift across
    # batch edges and most batches would hold none).
    "BatteryArbitrage-v0": EnvDefaults(num_envs=16, num_steps=169, learning_rate=3e-3,
                                       total_steps=500_000, checkpoint_every=25),
}


def defaults_for(env_id: str) -> EnvDefaults:
    """The row for ``env_id`` (a ``module:Id`` form looks up ``Id``), else ``GENERIC``."""
    return DEFAULTS.get(env_id.rsplit(":", 1)[-1], GENERIC)


def for_episodic_baseline(row: EnvDefaults, max_episode_steps: int | None) -> EnvDefaults:
    """``row`` with a rollout long enough for the episodic baselines' complete episodes.

    ``optimal_scalar_episodic``, ``optimal_per_param`` and ``optimal_time`` use only episodes
    that start and end inside the batch; a batch without one is skipped. An env mid-episode
    at the batch's start completes its next episode within ``2 x max_episode_steps`` steps,
    so T is raised to that (CartPole-v1: 1,000) and N lowered to keep about the same batch
    (CartPole-v1: 16 envs). Measured with CartPole-v1's row and seed 0 (graph twin,
    ``baseline_memory`` 0.9): at T = 128 ``optimal_scalar_episodic`` / ``optimal_time``
    skipped 83 / 9 of 184 updates and did not solve in 3M env steps; at 16 x 1,000 they
    solved at 304k / 288k, skipping none (at the default memory 0.5: 272k / 320k).
    ``max_episode_steps`` None (no time limit known): ``row`` unchanged.
    """
    if max_episode_steps is None or row.num_steps >= 2 * max_episode_steps:
        return row
    num_steps = 2 * max_episode_steps
    return row.replace(num_steps=num_steps,
                       num_envs=max(1, row.num_envs * row.num_steps // num_steps))

