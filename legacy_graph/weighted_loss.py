"""The REINFORCE loss of a graph agent run on given inputs: the ``WeightedLoss`` of the TF1 twin.

The ops are the agent's own (``legacy_graph/agent.py``: placeholders ``obs``, ``actions``,
``advantages``, ``weights``, then the loss, its gradients and the guarded train step);
this is how every update path runs them: fed numpy, through the session, the train step by
a callable fixed once (``legacy_graph/policy_call.py``) without ``Session.run``'s per-call
parsing. Mirrors ``eager/weighted_loss.py``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

from pgtwin_core.advantages import TrainInputs

from legacy_graph.policy_call import direct_callable


class WeightedLoss:
    """``pgtwin_core.update_path.WeightedLoss`` over a graph agent's ops (one replica).

    Args:
      agent: a ``legacy_graph.agent.ReinforceAgent`` whose graph is built (its public ops).
    """

    def __init__(self, agent):
        self._session, self._variables, self._np_dtype = (agent.session, agent.variables,
                                                          agent.config.dtype)
        self._placeholders = (agent.obs_ph, agent.actions_ph, agent.advantages_ph,
                              agent.weights_ph)
        self._ops = agent
        self._train_call = direct_callable(
            agent.session, [agent.loss, agent.grad_norm, agent.entropy, agent.applied],
            list(self._placeholders), targets=[agent.train_op])

    def feed(self, inputs: TrainInputs) -> dict[tf.Tensor, np.ndarray]:
        """The feed of the agent's batch placeholders."""
        values = (inputs.obs, inputs.actions, inputs.advantages, inputs.weights)
        return dict(zip(self._placeholders, values))

    def _run(self, fetches, replicas: Sequence[TrainInputs]):
        (inputs,) = replicas
        return self._session.run(fetches, self.feed(inputs))

    def loss(self, replicas: Sequence[TrainInputs]) -> float:
        return float(self._run(self._ops.loss, replicas))

    def loss_and_entropy(self, replicas: Sequence[TrainInputs]) -> tuple[float, float]:
        loss, entropy = self._run([self._ops.loss, self._ops.entropy], replicas)
        return float(loss), float(entropy)

    def gradients(self, replicas: Sequence[TrainInputs]) -> dict[str, np.ndarray]:
        return dict(zip(self._variables, self._run(self._ops.grads, replicas)))

    def train(self, replicas: Sequence[TrainInputs]) -> tuple[float, float, float, bool]:
        (inputs,) = replicas
        loss, norm, ent, applied = self._train_call(
            inputs.obs, inputs.actions, inputs.advantages, inputs.weights)
        return float(loss), float(norm), float(ent), bool(applied)

    def apply(self, grads: dict[str, np.ndarray]) -> bool:
        step = self._ops.given_gradient_apply()
        feed = {step.placeholders[n]: np.asarray(grads[n], self._np_dtype)
                for n in self._variables}
        applied, _ = self._session.run([step.applied, step.op], feed)
        return bool(applied)
