"""Bookkeeping of a recorded rollout, for the ``cached`` update path of both twins.

With ``ReinforceConfig.update_path = 'cached'`` the forward passes a rollout runs to sample
its actions are kept (on a ``GradientTape`` in the eager twin, inside one
``Session.partial_run`` in the legacy twin) and the update differentiates through them
instead of feeding the batch's observations back for a second forward pass. That is only
correct when the batch being trained on *is* the rollout that was recorded, under the
weights it was recorded with. :class:`RecordedSteps` holds what is needed to check that, in
numpy, so both twins check it the same way and fail with the same message.
"""
from __future__ import annotations

import numpy as np

from pgtwin_core import policy_inputs
from pgtwin_core.advantages import TrainInputs
from pgtwin_core.errors import RecordingMismatchError
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec


class RecordedSteps:
    """The observations of one recorded rollout of ``num_steps`` steps by ``num_envs`` envs.

    Args:
      spec: the policy spec (observation shape).
      num_steps: T, from ``ReinforceConfig.num_steps``.
      num_envs: N, from ``ReinforceConfig.num_envs``.
      weights: the policy weights when recording started (numpy, by name); an update on the
        recording is refused if they have changed since.
      dtype: ``ReinforceConfig.dtype``, the observations' dtype.
    """

    def __init__(self, spec: PolicySpec, num_steps: int, num_envs: int,
                 weights: dict[str, np.ndarray], *, dtype: str):
        self.spec = spec
        self.dtype = dtype
        self.num_steps = num_steps
        self.num_envs = num_envs
        self.weights = {name: np.array(w, copy=True) for name, w in weights.items()}
        self.obs: list[np.ndarray] = []
        self.consumed = False

    @property
    def count(self) -> int:
        """Steps recorded so far."""
        return len(self.obs)

    def add(self, obs: np.ndarray) -> np.ndarray:
        """Validate and keep one step's observations ``[N, *obs_shape]``; returns them in
        ``dtype`` (a private copy: the env may reuse its buffer).

        Raises ``RecordingMismatchError`` past T steps, for a wrong N, or once consumed.
        """
        if self.consumed:
            raise RecordingMismatchError(
                "this rollout recording was already used by an update/gradients call; "
                "call agent.rollout_policy() again for the next rollout")
        if self.count >= self.num_steps:
            raise RecordingMismatchError(
                f"the rollout recording holds ReinforceConfig.num_steps={self.num_steps} steps "
                f"and was called for step {self.count}: with update_path='cached' a rollout "
                "must be exactly num_steps long (collect(..., num_steps=config.num_steps))")
        obs = np.array(policy_inputs.as_obs(self.spec, obs, dtype=self.dtype), copy=True)
        if obs.shape[0] != self.num_envs:
            raise RecordingMismatchError(
                f"the rollout recording got {obs.shape[0]} observations at step {self.count} but "
                f"ReinforceConfig.num_envs={self.num_envs}: with update_path='cached' the "
                "vector env must have config.num_envs envs")
        self.obs.append(obs)
        return obs

    def check_batch(self, batch_obs: np.ndarray, weights_now: dict[str, np.ndarray]) -> None:
        """Raise ``RecordingMismatchError`` unless ``batch_obs`` (flat ``[T*N, ...]``, time-major,
        in ``dtype``) is exactly the recorded rollout and the weights are those it ran with."""
        if self.consumed:
            raise RecordingMismatchError(
                "this rollout recording was already used by an update/gradients call: the "
                "cached path differentiates a rollout's forward passes once. Collect a new "
                "batch with agent.rollout_policy(), or use update_path='recompute'")
        if self.count != self.num_steps:
            raise RecordingMismatchError(
                f"the rollout recording holds {self.count} of ReinforceConfig.num_steps="
                f"{self.num_steps} steps: finish the rollout before updating")
        expected = self.num_steps * self.num_envs
        if batch_obs.shape[0] != expected:
            raise RecordingMismatchError(
                f"the batch holds {batch_obs.shape[0]} steps but the recorded rollout holds "
                f"T*N = {self.num_steps}*{self.num_envs} = {expected}: this batch was not "
                "collected with agent.rollout_policy()")
        recorded = np.concatenate(self.obs, axis=0)
        if not np.array_equal(recorded, batch_obs):
            i = int(np.argmax(np.any((recorded != batch_obs).reshape(expected, -1), axis=1)))
            raise RecordingMismatchError(
                f"batch.obs differs from the recorded rollout first at step t={i // self.num_envs}, "
                f"env n={i % self.num_envs}: this batch was not collected with the latest "
                "agent.rollout_policy() (update_path='cached' can only train on that rollout)")
        changed = [n for n, w in self.weights.items() if not np.array_equal(w, weights_now[n])]
        if changed:
            raise RecordingMismatchError(
                f"the weights {changed} changed between the rollout and the update (set_weights, "
                "restore, apply_gradients or another update ran in between): the recorded "
                "forward passes no longer belong to the current policy")


def recorded_inputs(agent, recording, batch: Batch) -> TrainInputs:
    """``agent.inputs(batch)``, once ``batch`` is known to be ``recording``'s rollout.

    Args:
      agent: either twin's ``ReinforceAgent`` (``inputs``, ``get_weights``).
      recording: the agent's latest rollout recording (anything with ``.steps``, a
        :class:`RecordedSteps`), or None if no rollout was recorded.
      batch: what the update was asked to train on.

    Raises ``RecordingMismatchError`` (see :meth:`RecordedSteps.check_batch`).
    """
    inputs = agent.inputs(batch)
    if recording is None:
        raise RecordingMismatchError(
            "update_path='cached' differentiates the rollout's own forward passes, but no "
            "rollout was recorded: collect the batch with agent.rollout_policy() first "
            "(pgtwin_core.loop.iterate_training does), or use update_path='recompute'")
    recording.steps.check_batch(inputs.obs, agent.get_weights())
    return inputs
