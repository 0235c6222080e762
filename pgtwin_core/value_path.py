"""``baseline='value'``: the update path of a learned, state- and time-dependent baseline
(no TensorFlow here; each twin passes its ``ValueNet``).

"REINFORCE with baseline" (Williams 1992; Sutton & Barto 13.4; TF-Agents'
``ReinforceAgent(value_network=...)``): ``A_i = d_i (G_i - V(s_i, tau_i)) / s``
(``pgtwin_core.advantages``), V fitted by its own optimizer to the reward-to-go G on the
valid steps, standardised by the fitted batch's mean and std (which the net keeps to scale
V back: ``pgtwin_core.value_spec``): ``0.5 sum_i w_i (z_i - (G_i - m) / sd)^2``,
``config.value_fit_steps`` full-batch steps per update. ``config.value_fit``:

    after    A from the net fitted on the earlier batches, then one fit on this batch: the
             baseline is independent of this batch's actions, the estimate unbiased
    before   one fit on this batch, then A from it: closer to this batch's G, and correlated
             with it (docs/baselines.md measures both)

With ``config.gae_lambda`` (GAE, Schulman et al. 2016) the advantage is
``pgtwin_core.gae.lambda_advantages`` of the net's V instead: the value of the state after
a time-limit truncation (in gymnasium's next-step autoreset, ``batch.obs[t + 1]``, the input
of the ignored autoreset step) and after the rollout's cut (``batch.next_obs``) is V there,
at the time feature of the step after, and the targets G become the lambda-returns A + V,
computed with the net as it stands when they are needed: ``before`` fits on the targets of
the earlier net, then takes A from the fitted one; ``after`` takes A, trains the policy and
fits on A + V. Both twins run this same numpy code on their nets' V.

``loss_value`` and ``gradients`` use the net as it stands (they fit nothing: a diagnostic
must not move the training state).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from pgtwin_core import policy_inputs
from pgtwin_core.advantages import TrainInputs, training_inputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.episode_time import episode_steps
from pgtwin_core.gae import lambda_advantages
from pgtwin_core.returns import discounted_returns
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec
from pgtwin_core.update_path import Grads, PolicyFn, WeightedLoss
from pgtwin_core.value_spec import time_feature


class ValueNet(Protocol):
    """A twin's value network with its own optimizer (``{legacy_graph,eager}/value_net.py``).
    Arrays are flat ``[B, ...]`` of ``config.dtype``."""

    def predict(self, obs: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """V ``[B]``."""

    def fit_step(self, obs, tau, targets, weights) -> tuple[float, bool]:
        """One guarded optimizer step on the value loss at standardised ``targets``:
        ``(loss before it, applied)``."""

    def set_target_stats(self, mean: float, std: float) -> None:
        """Set the statistics V is scaled back with (``value/return_mean``, ``_std``)."""

    def loss_and_gradients(self, obs, tau, targets, weights) -> tuple[float, Grads]:
        """The value loss and its gradient by weight name (nothing applied)."""

    def get_weights(self) -> dict[str, np.ndarray]:
        """Weights by canonical name (``value/dense_0/kernel`` ...)."""

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load weights."""


class ValueInputs:
    """What the value net is fed for one batch, flat time-major, in ``config.dtype``."""

    def __init__(self, batch: Batch, config: ReinforceConfig, spec: PolicySpec,
                 reward_to_go: np.ndarray):
        dtype = config.dtype
        valid = batch.valid.reshape(-1)
        self.obs = policy_inputs.as_obs(spec, batch.obs.reshape(-1, *batch.obs.shape[2:]),
                                        "batch.obs", dtype=dtype)
        """``[B, *obs_shape]``."""
        self.tau = time_feature(batch, config).reshape(-1).astype(dtype)
        """``[B]``: the time feature (``pgtwin_core.value_spec``)."""
        self.targets = np.where(batch.valid, reward_to_go, 0.0).reshape(-1).astype(dtype)
        """``[B]``: G, the raw reward-to-go; 0 on autoreset steps."""
        self.weights = (valid / valid.sum()).astype(dtype)
        """``[B]``: ``valid / num_valid``."""

    def standardised(self) -> tuple[float, float, tuple[np.ndarray, ...]]:
        """``(m, sd, (obs, tau, y, weights))``: the targets' mean and std over the valid steps
        (sd = 1 for constant targets) and a ``ValueNet``'s loss arguments at
        ``y = (G - m) / sd`` (0 on autoreset steps)."""
        valid = self.weights > 0
        g = self.targets.astype(np.float64)
        mean = float(g[valid].mean())
        std = float(np.sqrt(np.mean(np.square(g[valid] - mean))))
        std = std if std > 0 else 1.0
        y = np.where(valid, (g - mean) / std, 0.0).astype(self.targets.dtype)
        return mean, std, (self.obs, self.tau, y, self.weights)


class ValueBaselinePath:
    """``pgtwin_core.update_path.UpdatePath`` of ``baseline='value'`` (module doc).

    Args:
      config, spec: the agent's.
      weighted: the twin's ``WeightedLoss`` (the policy's loss and step).
      value_net: the twin's ``ValueNet``, built in the agent.
      policy: the rollout's ``policy_fn`` (the agent's ``dist_params``).
    """

    memory = None

    def __init__(self, config: ReinforceConfig, spec: PolicySpec, weighted: WeightedLoss,
                 value_net: ValueNet, policy: PolicyFn):
        self.config, self.spec, self.weighted = config, spec, weighted
        self.value_net, self._policy = value_net, policy
        self.checkpointed = {"value": value_net}
        """The path's own training state for the agent's ``tf.train.Checkpoint`` (eager twin;
        the legacy ``Saver`` holds every variable of the graph)."""

    def rollout_policy(self) -> PolicyFn:
        return self._policy

    def _prepared(self, batch: Batch) -> tuple[np.ndarray, ValueInputs]:
        """``(G, inputs)``: the Monte-Carlo reward-to-go ``[T, N]`` and the net's inputs
        with G as targets (with ``gae_lambda``: the lambda-returns of the net as it stands)."""
        if batch.num_valid == 0:  # the message training_inputs gives, before any fit
            training_inputs(batch, self.config, self.spec)
        if self.config.gae_lambda is None:
            g = discounted_returns(batch.rewards, batch.terminated, batch.truncated,
                                   self.config.gamma)  # as flat_returns: the same bits
            return g, ValueInputs(batch, self.config, self.spec, g)
        fed = ValueInputs(batch, self.config, self.spec, np.zeros(batch.rewards.shape))
        g, _ = self._lambda_returns(batch, fed)
        fed.targets = np.where(batch.valid, g, 0.0).reshape(-1).astype(fed.targets.dtype)
        return g, fed

    def _lambda_returns(self, batch: Batch, fed: ValueInputs) -> tuple[np.ndarray, np.ndarray]:
        """``(A + V, V)``, float64 ``[T, N]``: GAE's lambda-returns and the values they were
        built from, with the net as it stands (module doc)."""
        c = self.config
        shape = batch.rewards.shape
        v = self.value_net.predict(fed.obs, fed.tau).astype(np.float64).reshape(shape)
        # The state after step t: obs[t + 1] (after a truncation, the autoreset step's
        # input is the episode's last observation), next_obs after the last step; valued at
        # the time feature of the step after t. Only where the recursion reads it.
        cut = np.asarray(batch.truncated, bool).copy()
        cut[-1] |= ~np.asarray(batch.terminated[-1], bool)
        cut &= np.asarray(batch.valid, bool)
        bootstrap = np.zeros(shape)
        if cut.any():
            after = np.concatenate([batch.obs[1:], batch.next_obs[np.newaxis]])[cut]
            steps = episode_steps(batch)[cut] + 1
            tau = (steps / float(c.value_horizon) if c.value_horizon else np.zeros(steps.shape))
            obs = policy_inputs.as_obs(self.spec, after, "batch.obs (bootstrap)", dtype=c.dtype)
            bootstrap[cut] = self.value_net.predict(obs, tau.astype(c.dtype)).astype(np.float64)
        a = lambda_advantages(batch.rewards, v, batch.terminated, batch.truncated, c.gamma,
                              c.gae_lambda, bootstrap)
        return a + v, v

    def _policy_inputs(self, batch: Batch, g: np.ndarray, fed: ValueInputs) -> TrainInputs:
        if self.config.gae_lambda is not None:  # A from the net as it stands now
            g, v = self._lambda_returns(batch, fed)
            return training_inputs(batch, self.config, self.spec, g, baseline=v)
        v = self.value_net.predict(fed.obs, fed.tau).astype(np.float64).reshape(g.shape)
        return training_inputs(batch, self.config, self.spec, g, baseline=v)

    def fit(self, fed: ValueInputs) -> tuple[float, float, bool]:
        """Set the net's statistics to this batch's, then ``config.value_fit_steps`` guarded
        steps on the standardised targets: ``(loss before, loss after, all applied)``, in
        standardised units."""
        mean, std, args = fed.standardised()
        self.value_net.set_target_stats(mean, std)
        first, applied = None, True
        for _ in range(self.config.value_fit_steps):
            loss, ok = self.value_net.fit_step(*args)
            first = loss if first is None else first
            applied = applied and ok
        after, _ = self.value_net.loss_and_gradients(*args)
        return first, after, applied

    def fit_on(self, batch: Batch) -> tuple[float, float, bool]:
        """Fit the value net on ``batch`` alone (the policy untouched), as an update would:
        ``(loss before, loss after, all steps applied)``. For measurements at a fixed policy
        (``pgtwin.measure.baseline_variance``)."""
        return self.fit(self._prepared(batch)[1])

    def inputs(self, batch: Batch) -> TrainInputs:
        """The policy's inputs on ``batch`` with the net as it stands (nothing fitted)."""
        g, fed = self._prepared(batch)
        return self._policy_inputs(batch, g, fed)

    def loss_value(self, batch: Batch) -> float:
        return self.weighted.loss([self.inputs(batch)])

    def gradients(self, batch: Batch) -> Grads:
        return self.weighted.gradients([self.inputs(batch)])

    def update(self, batch: Batch) -> dict[str, Any]:
        g, fed = self._prepared(batch)
        if self.config.value_fit == "before":
            fitted = self.fit(fed)
        inputs = self._policy_inputs(batch, g, fed)
        loss, norm, ent, applied = self.weighted.train([inputs])
        if self.config.value_fit == "after":
            fitted = self.fit(fed)  # on G (with gae_lambda: A + V of the net before it)
        value_before, value_after, value_applied = fitted
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                "applied": bool(applied), "value_loss": value_before,
                "value_loss_after_fit": value_after, "value_applied": value_applied}


def value_path(agent, weighted: WeightedLoss, value_net: Callable[[], ValueNet]
               ) -> ValueBaselinePath:
    """The value path of ``agent`` (its public ``config``, ``spec``, ``dist_params``) over
    the twin's ``weighted`` loss and ``value_net()``."""
    return ValueBaselinePath(agent.config, agent.spec, weighted, value_net(), agent.dist_params)
