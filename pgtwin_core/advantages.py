"""From a rollout ``Batch`` to the flat arrays a REINFORCE update is fed.

Both twins train on exactly these arrays, so any difference between them is in the
TensorFlow code, never in the data. The per-step weight ``w_i = valid_i / num_valid``
turns the loss into a mean over the steps that belong to an episode::

    R_i = G_i                         (pgtwin_core.returns.discounted_returns)
    R_i = normalize(R_i over valid)   if config.normalize_returns
    A_i = R_i - mean_valid(R)         if config.baseline == "mean"
    A_i = R_i                         otherwise (the optimal baselines are the twins' job:
                                      they need per-sample gradients)
    loss = -sum_i w_i * A_i * log pi(a_i|s_i) - entropy_coef * sum_i w_i * H_i
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pgtwin_core import policy_inputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.returns import discounted_returns, normalize
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec


@dataclass(frozen=True)
class TrainInputs:
    """Flat (time-major, ``i = t * N + n``) arrays of one update; B = T * N."""

    obs: np.ndarray
    """``[B, *obs_shape]`` of ``config.dtype``."""
    actions: np.ndarray
    """int64 ``[B]`` or ``[B, action_dim]`` of ``config.dtype``."""
    returns: np.ndarray
    """``[B]``: R_i, the (possibly normalised) reward-to-go; 0 on invalid steps."""
    advantages: np.ndarray
    """``[B]``: A_i, the returns less the non-gradient baseline; 0 on invalid steps."""
    weights: np.ndarray
    """``[B]``: ``valid_i / num_valid``, summing to 1."""

    @property
    def batch_size(self) -> int:
        """B."""
        return self.weights.shape[0]


def flat_returns(batch: Batch, config: ReinforceConfig,
                 reward_to_go: np.ndarray | None = None) -> np.ndarray:
    """Reward-to-go ``[T, N]`` float64, normalised over valid steps if configured; 0 off them.

    ``reward_to_go``: the batch's ``discounted_returns`` ``[T, N]`` if the caller has them
    already (the episodic estimator computes them once per batch).
    """
    returns = reward_to_go
    if returns is None:
        returns = discounted_returns(batch.rewards, batch.terminated, batch.truncated,
                                     config.gamma)
    if config.normalize_returns:
        return normalize(returns, mask=batch.valid)
    return np.where(batch.valid, returns, 0.0)


def training_inputs(batch: Batch, config: ReinforceConfig, spec: PolicySpec,
                    reward_to_go: np.ndarray | None = None) -> TrainInputs:
    """The arrays an update is fed, in ``config.dtype``, validated at this boundary.

    ``reward_to_go``: as ``flat_returns``'s, computed here if None.

    Raises ``ValueError`` for a batch with no valid step (nothing to learn from), and for
    observations or actions that do not fit ``spec`` (``pgtwin_core.policy_inputs``: wrong
    shape, non-finite entries, categorical actions out of range), naming ``batch.obs`` or
    ``batch.actions`` and the first bad index.
    """
    if batch.num_valid == 0:
        raise ValueError(
            f"batch has no valid step (T={batch.num_steps}, N={batch.num_envs}): "
            "every step was an autoreset step"
        )
    dtype = config.dtype
    valid = batch.valid.reshape(-1)
    returns = flat_returns(batch, config, reward_to_go).reshape(-1)
    advantages = returns
    if config.baseline == "mean":
        advantages = np.where(valid, returns - returns[valid].mean(), 0.0)
    obs = policy_inputs.as_obs(spec, batch.obs.reshape(-1, *batch.obs.shape[2:]), "batch.obs",
                               dtype=dtype)
    actions = policy_inputs.as_actions(spec, batch.actions.reshape(-1, *batch.actions.shape[2:]),
                                       valid.shape[0], "batch.actions", dtype=dtype)
    return TrainInputs(
        obs=obs,
        actions=actions,
        returns=returns.astype(dtype),
        advantages=advantages.astype(dtype),
        weights=(valid / valid.sum()).astype(dtype),
    )
