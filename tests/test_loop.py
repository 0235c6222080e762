"""Tests for ``pgtwin_core.loop.iterate_training`` with a tiny numpy agent (no TensorFlow)."""
from __future__ import annotations

import itertools

import numpy as np

from pgtwin_core.advantages import training_inputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.loop import iterate_training
from tests.fixed_length_env import SPEC, fixed_length_vec


class NumpyAgent:
    """The loop's Agent protocol in numpy: ``update`` counts itself, and the policy it
    hands out afterwards always picks action 1 (so a stale policy would be visible)."""

    def __init__(self, num_steps: int):
        self.spec = SPEC
        self.config = ReinforceConfig(num_envs=2, num_steps=num_steps, normalize_returns=False)
        self.updates = 0
        self.batches = []

    def rollout_policy(self):
        bias = 0.0 if self.updates == 0 else 1000.0  # after the first update: action 1

        def policy_fn(obs):
            return np.tile([0.0, bias], (obs.shape[0], 1))
        return policy_fn

    def update(self, batch):
        inputs = training_inputs(batch, self.config, self.spec)
        self.updates += 1
        self.batches.append(batch)
        return {"loss": float(-np.sum(inputs.weights * inputs.advantages)), "applied": True,
                "seen": self.updates}


def test_iterations_count_updates_and_env_steps():
    agent = NumpyAgent(num_steps=5)
    envs = fixed_length_vec(lengths=(3, 3))
    its = list(itertools.islice(iterate_training(agent, envs, np.random.default_rng(0)), 3))
    assert [it.update for it in its] == [1, 2, 3]
    # N = 2 envs x T = 5 steps per update; autoreset steps count as env steps.
    assert [it.batch.env_steps for it in its] == [10, 20, 30]
    assert [it.metrics["seen"] for it in its] == [1, 2, 3]
    assert all(it.batch is b for it, b in zip(its, agent.batches))
    assert all(it.state is its[0].state for it in its)  # one state carried through
    assert its[-1].state.env_steps == 30
    walls = [it.wall_s for it in its]
    assert walls[0] >= 0 and walls == sorted(walls)
    # Episodes of 3 end at global steps 2, 6, 10, 14: one per env in the first two
    # batches (0-4, 5-9), two in the third (10-14); every one has its full return 3.
    assert [it.batch.episode_returns.tolist() for it in its] == [[3.0] * 2, [3.0] * 2, [3.0] * 4]
    # The policy is asked for again after each update.
    assert not np.all(its[0].batch.actions == 1)
    assert np.all(its[1].batch.actions == 1) and np.all(its[2].batch.actions == 1)


def test_resume_from_a_state_and_update_count():
    agent = NumpyAgent(num_steps=4)
    envs = fixed_length_vec(lengths=(3, 3))
    first = next(iterate_training(agent, envs, np.random.default_rng(1)))
    resumed = iterate_training(agent, envs, np.random.default_rng(2), state=first.state,
                               start_update=first.update + 9)
    its = list(itertools.islice(resumed, 2))
    assert [it.update for it in its] == [11, 12]
    assert [it.batch.env_steps for it in its] == [16, 24]
    # T = 4 with episodes of 3: V V V I each batch, so every batch holds one episode per env.
    assert all(it.batch.valid[:, 0].tolist() == [True, True, True, False] for it in its)
