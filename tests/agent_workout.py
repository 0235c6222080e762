"""One call of every public method of an agent, for the no-retrace tests of both twins."""
from __future__ import annotations

import numpy as np

from tests.synthetic_batches import random_batch


def call_every_method(agent, batch_size: int, seed: int) -> None:
    """Call every method a training run uses, on a random batch of ``batch_size`` steps."""
    batch = random_batch(agent.spec, batch_size, 1, seed)
    obs, actions = batch.obs[:, 0], batch.actions[:, 0]
    agent.dist_params(obs)
    agent.log_prob(obs, actions)
    agent.loss_value(batch)
    agent.gradients(batch)
    assert agent.update(batch)["applied"]
    assert agent.apply_gradients({n: np.zeros(w.shape) for n, w in agent.get_weights().items()})
    agent.set_weights(agent.get_weights())
