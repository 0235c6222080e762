"""Each twin's analytic gradient against float64 central differences (``tf.test.compute_gradient``).

The loss is seen as a function of one variable at a time, ``f(x) = agent.loss_value(batch)``
with that variable set to ``x``, through the agent's public methods only. Its gradient is
declared (``tf.custom_gradient``) as the agent's own analytic one, ``agent.gradients(batch)``:
for the legacy twin that is the graph's ``tf.gradients`` result fetched from its session,
for the eager twin the ``GradientTape`` result of its ``tf.function``. ``compute_gradient``
then sets that "theoretical" Jacobian beside central differences of the same session or
function's loss, so each twin is checked against its own forward pass, not the other twin.
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.specs import PolicySpec, init_weights
from pgtwin.twins import IMPLS, agent_class

from tests.synthetic_batches import random_batch

SPECS = {
    "categorical_mlp": PolicySpec("categorical", (4,), 3, hidden=(3,)),
    "gaussian_tanh_mlp": PolicySpec("gaussian", (3,), 2, hidden=(3,), squash="tanh",
                                    action_low=(-2, -2), action_high=(2, 2)),
    "gaussian_sigmoid_lstm": PolicySpec("gaussian", (3, 3), 2, torso="lstm", hidden=(2, 2),
                                        squash="sigmoid", action_low=(0, 0),
                                        action_high=(1, 1)),
}
# Every term of the loss: normalised returns, a mean baseline, an entropy bonus.
CONFIG = ReinforceConfig(dtype="float64", gamma=0.9, baseline="mean", entropy_coef=0.05,
                         num_envs=2, num_steps=4)
DELTA = 1e-5
# Central differences err by ~DELTA^2 f''' / 6 plus rounding ~1e-16 / DELTA.
RTOL, ATOL = 1e-6, 1e-9


def loss_of_variable(agent, batch, name, base):
    """``f(x)``: the agent's loss with variable ``name`` set to ``x`` (others at ``base``)."""

    @tf.custom_gradient
    def f(x):
        value = x.numpy()
        agent.set_weights({**base, name: value})
        loss = agent.loss_value(batch)

        def grad(dy, variables=None):
            agent.set_weights({**base, name: value})
            dx = dy * agent.gradients(batch)[name]
            # The eager agent's variables are read inside f, but they are not inputs of f.
            return (dx, [None] * len(variables)) if variables else dx

        return tf.constant(loss, tf.float64), grad

    return f


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_analytic_gradient_matches_central_differences(impl, spec):
    # Larger-than-default weights (seed 1, head scaled up) so no gradient is tiny.
    base = init_weights(spec, 1, dtype=CONFIG.dtype)
    base["policy/head/kernel"] = base["policy/head/kernel"] * 100.0
    batch = random_batch(spec, CONFIG.num_steps, CONFIG.num_envs, seed=2)
    agent = agent_class(impl)(spec, CONFIG, base)
    try:
        for name, value in base.items():
            f = loss_of_variable(agent, batch, name, base)
            (theoretical,), (numerical,) = tf.test.compute_gradient(f, [tf.constant(value)],
                                                                   delta=DELTA)
            assert np.abs(theoretical).max() > 1e-3, f"{name}: a vacuous check (zero gradient)"
            np.testing.assert_allclose(theoretical, numerical, rtol=RTOL, atol=ATOL,
                                       err_msg=f"{impl} {name}")
    finally:
        agent.close()
