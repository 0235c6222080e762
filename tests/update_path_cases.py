"""Policies, configs and recorded rollouts shared by the update-path tests and parity tests.

A cached update can only train on the rollout its agent recorded, so every comparison
starts from a batch collected with a ``cached`` agent's ``rollout_policy()``; the recompute
agent (same weights) is then handed the very same batch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.envs import make_vec_env
from pgtwin_core.rollout import Batch, collect
from pgtwin_core.specs import PolicySpec, spec_for_env
from pgtwin.twins import agent_class


@dataclass(frozen=True)
class Case:
    """A policy kind on an env that fits it."""

    env_id: str
    torso: str = "mlp"
    history: int = 1
    hidden: tuple[int, ...] = (16, 16)


CASES = {
    "categorical_mlp": Case("CartPole-v1"),
    "gaussian_mlp": Case("Pendulum-v1"),  # tanh-squashed mean in [-2, 2], learned log-std
    "gaussian_lstm": Case("Pendulum-v1", torso="lstm", history=3, hidden=(8, 8)),
}

# T != N, so a batched pass over the T*N rows is told apart from a rollout step of N rows.
NUM_STEPS, NUM_ENVS = 5, 3


def config(path: str, dtype: str = "float64", **changes) -> ReinforceConfig:
    """A small config; ``entropy_coef > 0`` so the entropy bonus is part of every comparison.

    The mean baseline: Pendulum's uncentred returns (all negative) make the gradient a sum of
    large, nearly cancelling terms, whose float32 rounding (1.8e-4 of the Gaussian head's bias
    gradient) says nothing about the paths; ``none`` centred the returns until issue 15.
    """
    return ReinforceConfig(num_envs=NUM_ENVS, num_steps=NUM_STEPS, update_path=path,
                           dtype=dtype, entropy_coef=0.05, learning_rate=0.05,
                           baseline="mean").replace(**changes)


def envs_for(case: Case, seed: int = 0):
    """The case's vector env with ``NUM_ENVS`` envs."""
    return make_vec_env(case.env_id, NUM_ENVS, seed=seed, history=case.history)


def spec_for(case: Case) -> PolicySpec:
    """The case's policy spec (agents compute in their config's dtype)."""
    return spec_for_env(envs_for(case), torso=case.torso, hidden=case.hidden)


def agent(impl: str, case: Case, cfg: ReinforceConfig, seed: int = 1):
    """A fresh agent of twin ``impl`` with ``init_weights(spec, seed, dtype=cfg.dtype)``."""
    return agent_class(impl)(spec_for(case), cfg, seed=seed)


def recorded_batch(agent, envs, seed: int = 0, state=None) -> tuple[Batch, object]:
    """Collect ``NUM_STEPS`` steps of ``envs`` with ``agent.rollout_policy()``: ``(batch, state)``.

    The actions are sampled with ``default_rng(seed)``.
    """
    return collect(envs, agent.rollout_policy(), agent.spec, NUM_STEPS,
                   np.random.default_rng(seed), state)
