"""Dead-gradient tests (trfl style): the data a loss is built from gets no gradient.

Returns, the advantages made from them, the actions and the per-step weights are data:
``reinforce_loss`` must give them no gradient, while every policy variable does get one.
The loss and the forward pass are one copy (``pgtwin.mode_agnostic``); what differs, and is
checked here for each twin, is how the gradient is taken and what "no gradient" looks like
there (TF1: ``tf.gradients`` is ``[None]``; TF2: ``tape.gradient`` is None on the explicitly
watched tensor), over each twin's own variables (``get_variable`` and a ``tf.Module``).
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.specs import PolicySpec, init_weights
from pgtwin.mode_agnostic import distributions, forward_pass
from pgtwin.mode_agnostic.loss import reinforce_loss

SPECS = {
    "categorical_mlp": PolicySpec("categorical", (4,), 3, hidden=(5,)),
    "gaussian_sigmoid_mlp": PolicySpec("gaussian", (3,), 2, hidden=(5,), squash="sigmoid",
                                       action_low=(0, 0), action_high=(1, 1)),
    "gaussian_lstm": PolicySpec("gaussian", (4, 3), 2, torso="lstm", hidden=(3,),
                                squash="tanh", action_low=(-1, -1), action_high=(1, 1)),
}
DTYPE = "float64"  # the loss and its data, both twins
B = 5
ENTROPY_COEF = 0.01


def _data(spec):
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((B, *spec.obs_shape))
    actions = (rng.integers(0, spec.action_size, B) if spec.is_discrete
               else rng.standard_normal((B, spec.action_size)))
    return obs, actions, rng.standard_normal(B), np.full(B, 1.0 / B)


specs = pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())


@specs
def test_legacy_loss_gives_data_no_gradient(spec):
    from legacy_graph import network
    tf1 = tf.compat.v1
    obs, actions, returns, weights = _data(spec)
    with tf.Graph().as_default():
        variables = network.create_variables(spec, DTYPE)
        obs_ph = tf1.placeholder(tf.float64, obs.shape)
        actions_ph = tf1.placeholder(tf.int64 if spec.is_discrete else tf.float64, actions.shape)
        returns_ph = tf1.placeholder(tf.float64, [B])
        weights_ph = tf1.placeholder(tf.float64, [B])
        advantages = returns_ph - tf.reduce_mean(returns_ph)  # a baseline made of the data
        params = forward_pass.dist_params(spec, variables, obs_ph)
        loss = reinforce_loss(distributions.log_prob(spec, params, actions_ph), advantages,
                              weights_ph, distributions.entropy(spec, params), ENTROPY_COEF)
        dead = tf.gradients(loss, [returns_ph, advantages, actions_ph, weights_ph])
        live = tf.gradients(loss, list(variables.values()))
    assert dead == [None, None, None, None]
    assert all(g is not None for g in live)


@specs
def test_eager_loss_gives_data_no_gradient(spec):
    from eager import network
    obs, actions, returns, weights = (tf.constant(x) for x in _data(spec))
    variables = network.PolicyVariables(spec, init_weights(spec, 0, dtype=DTYPE)).variables_by_name
    with tf.GradientTape(persistent=True) as tape:
        watched = [returns, weights] + ([] if spec.is_discrete else [actions])
        tape.watch(watched)  # an int64 action tensor cannot be watched: it carries nothing
        advantages = returns - tf.reduce_mean(returns)
        tape.watch(advantages)
        params = forward_pass.dist_params(spec, variables, obs)
        loss = reinforce_loss(distributions.log_prob(spec, params, actions), advantages,
                              weights, distributions.entropy(spec, params), ENTROPY_COEF)
    assert tape.gradient(loss, returns) is None
    assert tape.gradient(loss, advantages) is None
    assert tape.gradient(loss, weights) is None
    if not spec.is_discrete:
        assert tape.gradient(loss, actions) is None
    assert all(g is not None for g in tape.gradient(loss, list(variables.values())))


@specs
def test_legacy_agent_placeholders_get_no_gradient(spec):
    from legacy_graph.agent import ReinforceAgent
    agent = ReinforceAgent(spec, ReinforceConfig(dtype="float64", entropy_coef=ENTROPY_COEF))
    try:
        with agent.graph.as_default():
            dead = tf.gradients(agent.loss, [agent.advantages_ph, agent.actions_ph,
                                             agent.weights_ph])
        assert dead == [None, None, None]
        assert all(g is not None for g in agent.grads)
    finally:
        agent.close()
