"""The ``cached`` update path, the TF2 way: the rollout's forward passes recorded on a tape.

Mirrors ``legacy_graph/cached.py``. The recompute path samples a rollout with T calls of the
batched ``tf.function`` forward pass, then feeds all T*N observations back for one big
forward and backward pass. Here the rollout *is* the forward pass of the update:

* every rollout step calls the agent's traced forward pass (the one ``dist_params`` runs)
  inside one ``GradientTape`` that is re-entered step by step (``with tape:`` per step, so
  nothing run between the steps is recorded) and keeps the ``params_t`` tensors;
* the update concatenates them (``[T*N, P]``, time-major like the batch), builds the loss
  from them and the batch's actions under the same tape, and ``tape.gradient`` runs the
  backward pass of each recorded step from the activations the tape kept. No forward op
  runs twice.

Entropy bonus, gradient clipping and the non-finite skip are the same as every path's
(``eager/gradient_step.py``), so both paths apply exactly the same update.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin_core.advantages import TrainInputs
from pgtwin_core.recording import RecordedSteps, recorded_inputs
from pgtwin_core.rollout import Batch

from pgtwin.mode_agnostic import distributions
from pgtwin.mode_agnostic.loss import reinforce_loss

from eager.gradient_step import checked_gradients
from eager.policy_call import SINGLE_THREADED
from eager.tracing import batch_signatures
from eager.weighted_loss import WeightedLoss


class CachedPath:
    """The ``UpdatePath`` (``pgtwin_core.update_path``) of ``update_path='cached'``: the
    loss-from-recorded-params functions of one agent, and its latest rollout recording.

    Args:
      agent: an ``eager.agent.ReinforceAgent`` with ``config.update_path='cached'``.
      weighted: its ``WeightedLoss`` (``loss_value`` recomputes the loss from the batch;
        the guarded apply).
      forward: the agent's traced forward pass ``obs [N, ...] -> params [N, P]``.
    """

    memory = None

    def __init__(self, agent, weighted: WeightedLoss,
                 forward: tf.types.experimental.GenericFunction):
        self.agent, self._weighted = agent, weighted
        self.num_steps, self.num_envs = agent.config.num_steps, agent.config.num_envs
        dtype = agent.config.dtype
        s = batch_signatures(agent.spec, dtype)
        params_sig = tf.TensorSpec([None, agent.spec.num_params], dtype)
        grad_sig = [tf.TensorSpec(v.shape, v.dtype) for v in agent.variables.values()]
        self.loss_fn = tf.function(self._loss, input_signature=[
            params_sig, s["actions"], s["vector"], s["vector"]])
        self.apply_fn = tf.function(weighted.guarded_apply, input_signature=[
            grad_sig, tf.TensorSpec([], dtype)])
        # The traced forward pass itself: calling the concrete function skips the argument
        # matching of a tf.function call (docs/update_paths.md).
        self.forward = forward.get_concrete_function()
        self.pending: RolloutRecording | None = None

    def _loss(self, params, actions, advantages, weights):
        """``(loss, entropy)`` from the distribution parameters ``params [B, P]`` (gradient)."""
        spec = self.agent.spec
        entropies = distributions.entropy(spec, params)
        loss = reinforce_loss(distributions.log_prob(spec, params, actions), advantages,
                              weights, entropies, self.agent.config.entropy_coef)
        return loss, tf.reduce_sum(weights * entropies)

    # ------------------------------------------------------------- rollout
    def rollout_policy(self) -> "RolloutRecording":
        """A new recording (the rollout's ``policy_fn``); an unfinished one is discarded."""
        if self.pending is not None and not self.pending.steps.consumed:
            self.pending.discard()
        self.pending = RolloutRecording(self)
        return self.pending

    # -------------------------------------------------------------- update
    def loss_value(self, batch: Batch) -> float:
        """The loss on ``batch``, recomputed (the recording is left for the update)."""
        return self._weighted.loss([self.agent.inputs(batch)])

    def gradients(self, batch: Batch) -> dict[str, np.ndarray]:
        """Gradient of the loss on the recorded ``batch`` (unclipped, not applied).

        Uses up the recording, as :meth:`update` does.
        """
        recording = self.pending
        inputs = recorded_inputs(self.agent, recording, batch)
        _, grads, _ = recording.finish(inputs)
        return {name: g.numpy() for name, g in zip(self.agent.variables, grads)}

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step on the recorded ``batch``; the same metrics as recompute's."""
        recording = self.pending
        inputs = recorded_inputs(self.agent, recording, batch)
        loss, grads, ent = recording.finish(inputs)
        applied = self.apply_fn(grads, loss)
        return {"loss": float(loss), "grad_norm": float(tf.linalg.global_norm(grads)),
                "entropy": float(ent), "applied": bool(applied)}


class RolloutRecording:
    """One open ``GradientTape`` over a rollout's forward passes: the ``policy_fn`` of a rollout.

    Call it with observations ``[N, *obs_shape]`` once per step, T times; it returns the
    distribution parameters ``[N, num_params]`` (numpy, for sampling only: the gradient
    path is the tensor the tape keeps).
    """

    def __init__(self, cached: CachedPath):
        self.cached = cached
        agent = cached.agent
        self.steps = RecordedSteps(agent.spec, cached.num_steps, cached.num_envs,
                                   agent.get_weights(), dtype=agent.config.dtype)
        self.tape = tf.GradientTape()
        self.params: list[tf.Tensor] = []

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        obs = tf.constant(self.steps.add(obs))
        # The single-threaded executor runs the step's few small ops in this thread, as the
        # recompute path's rollout call does (eager/policy_call.py); the tape still records.
        with self.tape, tf.experimental.function_executor_type(SINGLE_THREADED):
            params = self.cached.forward(obs)
        self.params.append(params)
        return params.numpy()

    def finish(self, inputs: TrainInputs) -> tuple[tf.Tensor, list[tf.Tensor], tf.Tensor]:
        """``(loss, grads, entropy)`` of the update's inputs, through the recorded passes."""
        self.steps.consumed = True
        with self.tape:
            params = tf.concat(self.params, axis=0)  # [T*N, P], row i = t*N + n
            loss, entropy = self.cached.loss_fn(params, inputs.actions, inputs.advantages,
                                                inputs.weights)
        # The backward pass is T small function calls too: same executor (docs/update_paths.md).
        with tf.experimental.function_executor_type(SINGLE_THREADED):
            grads = checked_gradients(self.tape, loss, self.cached.agent.variables)
        self.params.clear()  # the tape has released the activations; drop the outputs too
        return loss, grads, entropy

    def discard(self) -> None:
        """Drop an unfinished recording and the activations its tape holds."""
        self.steps.consumed = True
        self.params.clear()
        self.tape = None
