"""From a rollout ``Batch`` to the flat arrays a REINFORCE update is fed.

Both twins train on exactly these arrays, so any difference between them is in the
TensorFlow code, never in the data. The per-step weight ``w_i = valid_i / num_valid``
turns the loss into a mean over the steps that belong to an episode::

    G_i = reward-to-go                (pgtwin_core.returns.discounted_returns)
    s   = std_valid(G) + eps          if config.normalize_returns, else 1 (the scale only:
                                      NOT centred, so baseline "none" subtracts nothing)
    b_i = mean_valid(G)               baseline "mean"
        = b_t^(-e)                    "time_mean" (pgtwin_core.baselines.time_mean)
        = V(s_i, t_i)                 "value" (given by the value path: ``baseline=``)
        = 0                           "none" (the optimal baselines are the twins' job:
                                      they need per-sample gradients)
    d_i = gamma^t_i                   if config.gpomdp (t from the episode's start), else 1
    R_i = G_i / s;  A_i = d_i (G_i - b_i) / s
    loss = -sum_i w_i * A_i * log pi(a_i|s_i) - entropy_coef * sum_i w_i * H_i
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pgtwin_core import policy_inputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.episode_time import step_discounts
from pgtwin_core.returns import discounted_returns, return_scale, unit_scale
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
    """``[B]``: R_i, the reward-to-go (divided by its std if normalised); 0 on invalid steps."""
    advantages: np.ndarray
    """``[B]``: A_i, the returns less the non-gradient baseline; 0 on invalid steps."""
    weights: np.ndarray
    """``[B]``: ``valid_i / num_valid``, summing to 1."""

    @property
    def batch_size(self) -> int:
        """B."""
        return self.weights.shape[0]


def flat_returns(batch: Batch, config: ReinforceConfig,
                 reward_to_go: np.ndarray | None = None,
                 normalize: bool | None = None) -> np.ndarray:
    """Reward-to-go ``[T, N]`` float64, divided by its std over the valid steps if
    ``normalize`` (default ``config.normalize_returns``; not centred:
    ``pgtwin_core.returns.unit_scale``); 0 off them.

    ``reward_to_go``: the batch's ``discounted_returns`` ``[T, N]`` if the caller has them
    already (the episodic estimator computes them once per batch). ``normalize=False`` takes
    the raw returns without building a config that says so (``ReinforceConfig.replace``
    validates every field, on every update, for nothing here).
    """
    returns = reward_to_go
    if returns is None:
        returns = discounted_returns(batch.rewards, batch.terminated, batch.truncated,
                                     config.gamma)
    if config.normalize_returns if normalize is None else normalize:
        return unit_scale(returns, mask=batch.valid)
    return np.where(batch.valid, returns, 0.0)


TIME_MAJOR = ("obs", "actions", "rewards", "terminated", "truncated", "valid")
"""The ``Batch`` arrays whose leading axes are ``[T, N]``."""


def check_time_major(batch: Batch) -> None:
    """Raise ``ValueError`` naming each ``[T, N]`` array of ``batch`` whose leading axes are
    not the ``[T, N]`` most of them share (a rewards array built ``[N, T]``, a flattened
    one), before the arrays are flattened together and a later check blames another."""
    leads = {name: tuple(np.shape(getattr(batch, name))[:2]) for name in TIME_MAJOR}
    counts = {lead: list(leads.values()).count(lead) for lead in leads.values()}
    common = max(counts, key=counts.get)
    odd = [name for name, lead in leads.items() if lead != common]
    if odd:
        shapes = ", ".join(f"batch.{n} has shape {np.shape(getattr(batch, n))}" for n in odd)
        raise ValueError(f"{shapes}; the batch's other time-major arrays "
                         f"({', '.join(n for n in TIME_MAJOR if n not in odd)}) start with "
                         f"[T, N] = {list(common)}: every one must (time first, then envs)")


def training_inputs(batch: Batch, config: ReinforceConfig, spec: PolicySpec,
                    reward_to_go: np.ndarray | None = None,
                    baseline: np.ndarray | None = None) -> TrainInputs:
    """The arrays an update is fed, in ``config.dtype``, validated at this boundary.

    ``reward_to_go``: as ``flat_returns``'s, computed here if None. ``baseline``: float
    ``[T, N]`` b_i in the reward-to-go's raw units, from a learned baseline (the value
    path); None takes ``config.baseline``'s numpy one (module doc).

    Raises ``ValueError`` for a batch with no valid step (nothing to learn from), and for
    observations or actions that do not fit ``spec`` (``pgtwin_core.policy_inputs``: wrong
    shape, non-finite entries, categorical actions out of range), naming ``batch.obs`` or
    ``batch.actions`` and the first bad index.
    """
    check_time_major(batch)
    if batch.num_valid == 0:
        raise ValueError(
            f"batch has no valid step (T={batch.num_steps}, N={batch.num_envs}): "
            + ("it has no step" if batch.num_steps == 0 else "every step was an autoreset step")
        )
    dtype = config.dtype
    valid = batch.valid.reshape(-1)
    raw = flat_returns(batch, config, reward_to_go, normalize=False)
    scale = return_scale(raw, mask=batch.valid) if config.normalize_returns else 1.0
    if baseline is None:
        baseline = numpy_baseline(batch, config, raw)
    returns = raw.reshape(-1) / scale
    advantages = np.where(valid, (raw - baseline).reshape(-1) / scale, 0.0)
    if config.gpomdp:
        advantages = advantages * step_discounts(batch, config.gamma).reshape(-1)
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


def numpy_baseline(batch: Batch, config: ReinforceConfig, reward_to_go: np.ndarray
                   ) -> np.ndarray | float:
    """b in raw units (``[T, N]`` or a scalar) of the baselines computed here in numpy:
    ``mean`` (over the valid steps), ``time_mean``, else 0 (module doc).

    ``reward_to_go``: float64 ``[T, N]`` raw, 0 off the valid steps.
    """
    if config.baseline == "mean":
        values = reward_to_go[batch.valid]
        # As normalize: the summed mean of a constant can miss it by an ulp; use the value.
        return values.min() if values.min() == values.max() else values.mean()
    if config.baseline == "time_mean":
        from pgtwin_core.baselines.time_mean import time_mean_baseline  # imports this module
        return time_mean_baseline(batch, reward_to_go, config.gamma)
    return 0.0
