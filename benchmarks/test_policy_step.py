"""Group 1, the policy step: observations -> distribution parameters -> sampled actions.

What a rollout pays once per env step, for one observation and for a vector of 64 (the
CartPole-v1 categorical MLP). Sampling is the shared numpy code (``pgtwin_core.sampling``), the
same in every variant; what differs is the call into TensorFlow. Besides the three variants,
``function_plain`` calls the ``tf.function`` the ordinary way (``fn(obs).numpy()``), to show
what the rollout's direct call (``eager/policy_call.py``) saves.
"""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin_core import policy_inputs, sampling
from benchmarks.conftest import agent_for, eager_mode, label, obs_batch

KIND = "categorical_mlp"
PLAIN = "function_plain"


def params_fn(agent, variant: str):
    """The variant's numpy observations -> numpy params call."""
    if variant in ("graph", "function"):
        return agent.dist_params  # the rollout's path in both twins
    # ``eager`` (inside run_functions_eagerly) and ``function_plain``: the tf.function itself.
    return lambda obs: agent._dist_params_fn(policy_inputs.as_obs(agent.spec, obs, dtype=agent.config.dtype)).numpy()


@pytest.mark.parametrize("num_obs", [1, 64])
@pytest.mark.parametrize("variant", ["graph", "eager", "function", PLAIN])
def test_policy_step(benchmark, variant, num_obs):
    agent = agent_for(variant, KIND)
    obs = obs_batch(agent.spec, agent.config.dtype, num_obs)
    rng = np.random.default_rng(0)
    call = params_fn(agent, variant)

    def step():
        return sampling.sample(agent.spec, call(obs), rng)

    benchmark.group = f"policy step: {num_obs} obs (CartPole-v1)"
    label(benchmark, variant, num_obs=num_obs)
    with eager_mode(variant):
        reference = agent.dist_params(obs)
        # The same forward pass everywhere (op by op may round differently from a graph).
        np.testing.assert_allclose(call(obs), reference, rtol=1e-5, atol=1e-6)
        actions, _ = benchmark(step)
    assert actions.shape == (num_obs,)
