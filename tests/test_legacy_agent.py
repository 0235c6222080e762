"""The legacy (TF1 graph) twin's own checks; mirrored test for test in ``test_eager_agent.py``.

Shared behaviour (hand-derived numbers, bad input, non-finite updates) is in ``test_agents.py``.
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from legacy_graph.agent import ReinforceAgent
from legacy_graph.gradient_step import checked_gradients
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.errors import DisconnectedGradientError
from pgtwin_core.specs import PolicySpec

from tests.agent_workout import call_every_method

SPEC = PolicySpec("gaussian", (3,), 2, hidden=(8, 8))
OBS = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
ACTIONS = np.linspace(-0.5, 0.5, 8).reshape(4, 2)


@pytest.fixture(scope="module")
def agent():
    agent = ReinforceAgent(SPEC, ReinforceConfig(num_envs=1, num_steps=4), seed=0)
    yield agent
    agent.close()


def test_checked_gradients_refuses_a_loss_built_from_numpy_log_probs(agent):
    # Seed 000's bug: log-probs fetched as numpy during the rollout and the loss built from
    # them afterwards has no path to any weight. It must raise, naming every variable.
    numpy_log_probs = agent.log_prob(OBS, ACTIONS)
    with agent.graph.as_default():
        loss = -tf.reduce_sum(tf.constant(numpy_log_probs) * agent.advantages_ph)
        with pytest.raises(DisconnectedGradientError) as err:
            checked_gradients(loss, agent.variables)
    assert err.value.variables == list(agent.variables)
    for name in agent.variables:
        assert repr(name) in str(err.value)


def test_checked_gradients_names_exactly_the_missing_variables(agent):
    with agent.graph.as_default():
        head = agent.variables["policy/head/kernel"]
        partial = tf.reduce_sum(tf.matmul(agent.obs_ph[:, :1] * 0.0 + 1.0, head[:1]))
        with pytest.raises(DisconnectedGradientError) as err:
            checked_gradients(partial, agent.variables)
        connected = checked_gradients(tf.reduce_sum(agent.params), agent.variables)
    assert err.value.variables == [n for n in agent.variables if n != "policy/head/kernel"]
    assert len(connected) == len(agent.variables)
    assert all(g is not None for g in connected)


def test_no_retrace_after_warmup():
    # The TF1 analogue of a retrace is a graph that grows: after one call of everything,
    # finalize the graph; calls with other batch sizes must then add no op.
    agent = ReinforceAgent(SPEC, ReinforceConfig(num_envs=1, num_steps=4), seed=0)
    try:
        call_every_method(agent, 4, seed=0)
        ops = len(agent.graph.get_operations())
        agent.graph.finalize()
        for batch_size in (1, 7, 32):
            call_every_method(agent, batch_size, seed=batch_size)
        assert len(agent.graph.get_operations()) == ops
    finally:
        agent.close()
