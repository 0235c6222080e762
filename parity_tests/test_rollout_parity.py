"""The rollouts of both twins, at the benchmark's size: the same actions for the same seed.

The eager twin's rollout calls its XLA-compiled forward pass (``eager.policy_call``), which
agrees with the graph twin's Session to a few ulps, not bit for bit; the sampled actions
must still be the same: the categorical ones exactly, the Gaussian ones within the
ladder's ``TRAJECTORY_ATOL``. Four rollouts of 64 envs x 32 steps in a row (the state
carried over, as training does), from the same weights, env seed and sampling generator.
"""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin.parity.twin_parity import POLICY_KINDS, RTOL, TRAJECTORY_ATOL
from pgtwin.twins import IMPLS, agent_class
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.rollout import collect
from pgtwin_core.specs import init_weights

NUM_ENVS, NUM_STEPS, ROLLOUTS = 64, 32, 4


@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("kind_name", ("categorical_mlp", "gaussian_tanh_mlp"))
def test_both_twins_sample_the_same_actions(kind_name, dtype):
    kind = POLICY_KINDS[kind_name]
    spec = kind.spec()
    weights = init_weights(spec, 0, dtype=dtype)
    agents = [agent_class(impl)(spec, ReinforceConfig(dtype=dtype), weights=weights)
              for impl in IMPLS]
    envs = [kind.make_envs(NUM_ENVS, seed=0) for _ in agents]
    try:
        runs = [[] for _ in agents]
        for run, agent, env in zip(runs, agents, envs):
            rng, state = np.random.default_rng(0), None
            for _ in range(ROLLOUTS):
                batch, state = collect(env, agent.rollout_policy(), spec, NUM_STEPS, rng, state)
                run.append(batch)
        for i, (g, e) in enumerate(zip(*runs)):
            where = f"{kind_name} {dtype}, rollout {i}"
            if spec.is_discrete:
                np.testing.assert_array_equal(g.actions, e.actions, err_msg=where)
            else:
                np.testing.assert_allclose(g.actions, e.actions, rtol=0,
                                           atol=TRAJECTORY_ATOL[dtype], err_msg=where)
            np.testing.assert_allclose(g.params, e.params, rtol=RTOL[dtype],
                                       atol=RTOL[dtype], err_msg=where)
            np.testing.assert_array_equal(g.valid, e.valid, err_msg=where)
    finally:
        for agent in agents:
            agent.close()
        for env in envs:
            env.close()
