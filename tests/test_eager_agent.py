"""The eager (TF2) twin's own checks; mirrored test for test in ``test_legacy_agent.py``.

Shared behaviour (hand-derived numbers, bad input, non-finite updates) is in ``test_agents.py``.
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from eager.agent import ReinforceAgent
from eager.gradient_step import checked_gradients
from pgtwin.mode_agnostic import forward_pass
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.errors import DisconnectedGradientError
from pgtwin_core.specs import PolicySpec

from tests.agent_workout import call_every_method

SPEC = PolicySpec("gaussian", (3,), 2, hidden=(8, 8))
OBS = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
ACTIONS = np.linspace(-0.5, 0.5, 8).reshape(4, 2)
FUNCTIONS = ("dist_params", "log_prob", "loss", "train", "apply")


@pytest.fixture(scope="module")
def agent():
    agent = ReinforceAgent(SPEC, ReinforceConfig(num_envs=1, num_steps=4), seed=0)
    yield agent
    agent.close()


def test_checked_gradients_refuses_a_loss_built_from_numpy_log_probs(agent):
    # Seed 000's bug: log-probs fetched as numpy during the rollout and the loss built from
    # them afterwards has no path to any weight. It must raise, naming every variable.
    numpy_log_probs = agent.log_prob(OBS, ACTIONS)
    advantages = tf.constant([1.0, -1.0, 0.5, 0.0])
    with tf.GradientTape() as tape:
        loss = -tf.reduce_sum(tf.constant(numpy_log_probs) * advantages)
    with pytest.raises(DisconnectedGradientError) as err:
        checked_gradients(tape, loss, agent.variables)
    assert err.value.variables == list(agent.variables)
    for name in agent.variables:
        assert repr(name) in str(err.value)


def test_checked_gradients_names_exactly_the_missing_variables(agent):
    head = agent.variables["policy/head/kernel"]
    with tf.GradientTape() as tape:
        partial = tf.reduce_sum(tf.matmul(tf.ones([4, 1]), head[:1]))
    with pytest.raises(DisconnectedGradientError) as err:
        checked_gradients(tape, partial, agent.variables)
    with tf.GradientTape() as tape:
        params = forward_pass.dist_params(SPEC, agent.variables, tf.constant(OBS, tf.float32))
        connected_loss = tf.reduce_sum(params)
    connected = checked_gradients(tape, connected_loss, agent.variables)
    assert err.value.variables == [n for n in agent.variables if n != "policy/head/kernel"]
    assert len(connected) == len(agent.variables)
    assert all(g is not None for g in connected)


def test_no_retrace_after_warmup():
    # Input signatures with a dynamic batch axis: each tf.function traces once, whatever
    # the batch size of later calls.
    agent = ReinforceAgent(SPEC, ReinforceConfig(num_envs=1, num_steps=4), seed=0)
    try:
        call_every_method(agent, 4, seed=0)
        counts = agent.trace_counts()
        assert {f: counts[f] for f in FUNCTIONS} == {f: 1 for f in FUNCTIONS}
        for batch_size in (1, 7, 32):
            call_every_method(agent, batch_size, seed=batch_size)
        assert agent.trace_counts() == counts
    finally:
        agent.close()
