"""The ``cached`` update path, the TF1 way: an unrolled T-step graph run with ``partial_run``.

Mirrors ``eager/cached.py``. The recompute path samples a rollout with T small
``Session.run``s of the batched ``params`` op, then feeds all T*N observations back for one
big forward and backward pass. Here the rollout *is* the forward pass of the update:

* one graph, built lazily in the agent's ``tf.Graph``, with a placeholder ``obs_t [N, ...]``
  and its own copy of the forward pass ``params_t`` per step t (static T and N from the
  config, i.e. the rollout unrolled), followed by the loss on ``concat(params_t)`` and
  ``tf.gradients``;
* ``Session.partial_run_setup`` opens one run of that graph per rollout; each rollout step is
  a ``partial_run`` that feeds ``obs_t`` and fetches ``params_t``; the update is the last
  ``partial_run``: it feeds actions, advantages and weights and fetches the loss, gradients
  and metrics while the train op (a target of the run) applies them. The executor keeps
  every step's activations alive between the calls, so the backward pass uses them and no
  op of the forward pass runs twice.

Weights are read when the run is set up (at the start of the rollout), as the rollout uses
them. Entropy bonus, gradient clipping and the non-finite skip are the same as every path's
(``legacy_graph/gradient_step.py``), so both paths apply exactly the same update.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin_core.advantages import TrainInputs
from pgtwin_core.recording import RecordedSteps, recorded_inputs
from pgtwin_core.rollout import Batch

from pgtwin.mode_agnostic import distributions, forward_pass
from pgtwin.mode_agnostic.loss import reinforce_loss

from legacy_graph.gradient_step import checked_gradients, guarded_apply
from legacy_graph.policy_call import partial_step
from legacy_graph.weighted_loss import WeightedLoss

tf1 = tf.compat.v1


class CachedPath:
    """The ``UpdatePath`` (``pgtwin_core.update_path``) of ``update_path='cached'``: the
    unrolled rollout graph of one agent, and the recording of its latest rollout.

    Args:
      agent: a ``legacy_graph.agent.ReinforceAgent`` with ``config.update_path='cached'``.
      weighted: its ``WeightedLoss`` (``loss_value`` recomputes the loss from the batch).
    """

    memory = None

    def __init__(self, agent, weighted: WeightedLoss):
        self.agent, self._weighted = agent, weighted
        self.num_steps, self.num_envs = agent.config.num_steps, agent.config.num_envs
        with agent.graph.as_default(), tf.name_scope("cached"):
            self._build()
        self.pending: RolloutRecording | None = None

    def _build(self) -> None:
        agent, spec, dtype = self.agent, self.agent.spec, self.agent.config.dtype
        n, b = self.num_envs, self.num_steps * self.num_envs
        self.obs_phs = [tf1.placeholder(dtype, [n, *spec.obs_shape], name=f"obs_{t}")
                        for t in range(self.num_steps)]
        self.step_params = [forward_pass.dist_params(spec, agent.variables, obs)
                            for obs in self.obs_phs]
        params = tf.concat(self.step_params, axis=0)  # [T*N, P], row i = t*N + n
        act_shape = [b] if spec.is_discrete else [b, spec.action_size]
        self.actions_ph = tf1.placeholder(tf.int64 if spec.is_discrete else dtype, act_shape,
                                          name="actions")
        self.advantages_ph = tf1.placeholder(dtype, [b], name="advantages")
        self.weights_ph = tf1.placeholder(dtype, [b], name="weights")
        # False for gradients(): the run must still end (it owns the step activations),
        # so the train op is kept from applying by a NaN loss, which its guard skips.
        self.apply_ph = tf1.placeholder(tf.bool, [], name="apply")

        entropies = distributions.entropy(spec, params)
        self.loss = reinforce_loss(distributions.log_prob(spec, params, self.actions_ph),
                                   self.advantages_ph, self.weights_ph, entropies,
                                   agent.config.entropy_coef)
        self.entropy = tf.reduce_sum(self.weights_ph * entropies)
        self.grads = checked_gradients(self.loss, agent.variables)
        self.grad_norm = tf.linalg.global_norm(self.grads)
        gated_loss = tf.where(self.apply_ph, self.loss, tf.constant(np.nan, dtype))
        self.train_op, self.applied = guarded_apply(agent.optimizer, agent.variables, self.grads,
                                                    gated_loss, agent.config.max_grad_norm)
        # A partial run may return its last fetches before a target op has run (the next
        # rollout would read half-updated weights: docs/update_paths.md), so every final
        # fetch waits for it.
        with tf.control_dependencies([self.train_op]):
            self.final_fetches = [tf.identity(x) for x in
                                  [self.loss, self.grad_norm, self.entropy, self.applied]]
            self.final_fetches.append([tf.identity(g) for g in self.grads])

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
        *_, grads = recording.finish(inputs, apply=False)
        return dict(zip(self.agent.variables, grads))

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step on the recorded ``batch``; the same metrics as recompute's."""
        recording = self.pending
        inputs = recorded_inputs(self.agent, recording, batch)
        loss, norm, ent, applied, _ = recording.finish(inputs, apply=True)
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                "applied": bool(applied)}


class RolloutRecording:
    """One open ``partial_run`` of the unrolled graph: the ``policy_fn`` of one rollout.

    Call it with observations ``[N, *obs_shape]`` once per step, T times; it returns the
    distribution parameters ``[N, num_params]`` (numpy, for sampling only: the gradient
    path stays inside the session run).
    """

    def __init__(self, cached: CachedPath):
        self.cached = cached
        agent = cached.agent
        self.steps = RecordedSteps(agent.spec, cached.num_steps, cached.num_envs,
                                   agent.get_weights(), dtype=agent.config.dtype)
        feeds = [*cached.obs_phs, cached.actions_ph, cached.advantages_ph, cached.weights_ph,
                 cached.apply_ph]
        self.handle = agent.session.partial_run_setup(
            [*cached.step_params, *cached.final_fetches, cached.train_op], feeds)
        self.step = partial_step(agent.session, self.handle)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        t = self.steps.count
        obs = self.steps.add(obs)
        return self.step(self.cached.obs_phs[t], self.cached.step_params[t], obs)

    def finish(self, inputs: TrainInputs, apply: bool) -> list:
        """Feed the update's inputs and end the run: ``[loss, grad_norm, entropy, applied,
        grads]``; the train op runs too (and applies only if ``apply`` and all finite)."""
        c = self.cached
        self.steps.consumed = True
        return self.cached.agent.session.partial_run(self.handle, c.final_fetches, {
            c.actions_ph: inputs.actions, c.advantages_ph: inputs.advantages,
            c.weights_ph: inputs.weights, c.apply_ph: apply})

    def discard(self) -> None:
        """End an unfinished run without applying anything, so the session frees its state."""
        c, spec, dtype = self.cached, self.cached.agent.spec, self.cached.agent.config.dtype
        for t in range(self.steps.count, c.num_steps):
            self.step(c.obs_phs[t], c.step_params[t],
                      np.zeros((c.num_envs, *spec.obs_shape), dtype))
        b = c.num_steps * c.num_envs
        actions = (np.zeros(b, np.int64) if spec.is_discrete
                   else np.zeros((b, spec.action_size), dtype))
        zeros = np.zeros(b, dtype)
        self.finish(TrainInputs(obs=None, actions=actions, returns=zeros, advantages=zeros,
                                weights=zeros), apply=False)
