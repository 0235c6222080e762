"""REINFORCE on ``tf.distribute``: each replica learns from its own rollouts, the strategy all-reduces.

``DistributedReinforceAgent`` is the eager agent with its variables and optimizer under a
strategy, and its update path chosen once as the single-device agent's is, with the
all-reduce as the difference: ``eager/all_reduced.py`` for ``none``, ``mean`` and
``optimal_scalar`` (the math is in its module doc), and the shared
``pgtwin_core.baselines.EpisodicUpdate`` over the all-reduced loss, with
``eager.collectives.StrategySums`` as the estimator's reduce hook, for the episodic
baselines. Either way the update is, up to float rounding, the single-device update on the
concatenation of all replicas' batches.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import tensorflow as tf

from pgtwin_core import policy_inputs
from pgtwin_core.advantages import flat_returns
from pgtwin_core.baselines import EpisodicUpdate
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec
from pgtwin_core.path_choice import path_kind

from eager.agent import ReinforceAgent
from eager.all_reduced import AllReducedLoss, AllReducedPath
from eager.collectives import StrategySums


class DistributedReinforceAgent(ReinforceAgent):
    """``eager.agent.ReinforceAgent`` whose variables and optimizer live under a strategy.

    Its variables are mirrored (one copy per replica, kept equal by the strategy); rollouts
    read the local copy (``dist_params``, ``rollout_policy`` as in the single-device agent).
    ``update``, ``gradients`` and ``loss_value`` take one batch per *local* replica (a single
    ``Batch`` where this process holds one replica, the usual multi-worker case) and act on
    the global batch of all replicas of all workers.

    Args:
      spec, config, weights, seed: as ``ReinforceAgent``. Every worker must pass the same
        ``weights``/``seed`` (``MultiWorkerMirroredStrategy`` also broadcasts worker 0's
        initial values).
      strategy: a ``tf.distribute.Strategy``; the current one (default: one device) if None.

    Raises:
      ValueError: ``update_path`` other than ``recompute``; ``natural_kl``; ``baseline``
        ``time_mean`` or ``value``, or ``gpomdp`` (not all-reduced yet: issue 15's
        estimators run on one device).
    """

    def __init__(self, spec: PolicySpec, config: ReinforceConfig = ReinforceConfig(),
                 weights: dict[str, np.ndarray] | None = None, seed: int = 0,
                 strategy: tf.distribute.Strategy | None = None):
        if config.update_path != "recompute":
            raise ValueError(
                f"ReinforceConfig.update_path={config.update_path!r} is not supported under a "
                "tf.distribute strategy (each replica recomputes its batch); use 'recompute'"
            )
        if config.natural_kl is not None:
            raise ValueError(
                f"ReinforceConfig.natural_kl={config.natural_kl!r} is not supported under a "
                "tf.distribute strategy yet (the Fisher's per-sample scores are not "
                "all-reduced); train it on one device, or set natural_kl to None")
        if config.baseline in ("time_mean", "value") or config.gpomdp:
            what = "gpomdp=True" if config.gpomdp else f"baseline={config.baseline!r}"
            raise ValueError(
                f"ReinforceConfig.{what} is not supported under a tf.distribute strategy yet "
                "(its statistics are not all-reduced); train it on one device, or use "
                "baseline 'none', 'mean', 'optimal_scalar' or an episodic one")
        self.strategy = strategy if strategy is not None else tf.distribute.get_strategy()
        ids = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: ctx.replica_id_in_sync_group)
        self.replica_ids: tuple[int, ...] = tuple(
            int(i) for i in self.strategy.experimental_local_results(ids))
        """Global ids (0 .. num_replicas - 1) of this process's replicas, in local order."""
        with self.strategy.scope():
            super().__init__(spec, config, weights, seed)

    @property
    def num_replicas(self) -> int:
        """Replicas over all workers (``strategy.num_replicas_in_sync``)."""
        return int(self.strategy.num_replicas_in_sync)

    def _update_path(self):
        """The all-reduced update path of ``self.config`` (module doc)."""
        self.all_reduced_loss = AllReducedLoss(self.strategy, self.replica_ids,
                                               self.weighted_loss)
        """The loss over every replica and the apply of a global gradient (``eager/all_reduced.py``)."""
        if path_kind(self.config) == "episodic":
            shapes = {n: tuple(v.shape) for n, v in self.variables.items()}
            return EpisodicUpdate(self.config, self.spec, self.all_reduced_loss,
                                  self.per_sample_gradients, self.dist_params,
                                  StrategySums(self.strategy, self.replica_ids), shapes,
                                  reports_num_valid=True)
        return AllReducedPath(self, self.all_reduced_loss)

    def trace_counts(self) -> dict[str, int]:
        """As ``ReinforceAgent.trace_counts``, plus the distributed gradient and apply steps."""
        grads = (self.update_path.trace_counts() if isinstance(self.update_path, AllReducedPath)
                 else {"distributed_grads": 0})
        return {**super().trace_counts(), **grads, **self.all_reduced_loss.trace_counts()}

    # --------------------------------------------------------------- inputs
    def _local_batches(self, batches: Batch | Sequence[Batch]) -> list[Batch]:
        """One batch per local replica, as a list (checked)."""
        batches = [batches] if isinstance(batches, Batch) else list(batches)
        if len(batches) != len(self.replica_ids):
            raise ValueError(
                f"got {len(batches)} batches but this process holds {len(self.replica_ids)} "
                f"replicas (global ids {self.replica_ids}): pass one batch per local replica"
            )
        return batches

    def replica_arrays(self, batch: Batch) -> tuple[np.ndarray, ...]:
        """One replica's flat (time-major) arrays ``(obs, actions, returns, valid)``.

        ``returns`` are the discounted reward-to-go, float64, *not* normalised (that needs
        the global statistics); ``valid`` is float64 0/1.
        """
        returns = flat_returns(batch, self.config, normalize=False)
        dtype = self.config.dtype
        obs = batch.obs.reshape(-1, *batch.obs.shape[2:]).astype(dtype, copy=False)
        actions = batch.actions.reshape(-1, *batch.actions.shape[2:])
        if not self.spec.is_discrete:
            actions = actions.astype(dtype)
        policy_inputs.as_obs(self.spec, obs, "batch.obs", dtype=dtype)
        policy_inputs.as_actions(self.spec, actions, obs.shape[0], "batch.actions", dtype=dtype)
        return (obs, actions, returns.reshape(-1).astype(np.float64),
                batch.valid.reshape(-1).astype(np.float64))

    # --------------------------------------------------------------- update
    def loss_value(self, batches: Batch | Sequence[Batch]) -> float:
        """The REINFORCE loss of the global batch (no update)."""
        return self.update_path.loss_value(self._local_batches(batches))

    def gradients(self, batches: Batch | Sequence[Batch]) -> dict[str, np.ndarray]:
        """The global gradient by variable name (all-reduced; unclipped, not applied)."""
        return self.update_path.gradients(self._local_batches(batches))

    def update(self, batches: Batch | Sequence[Batch]) -> dict[str, Any]:
        """One optimizer step on the global batch; returns metrics (the same on every worker).

        Metrics: ``loss``, ``grad_norm`` (before clipping), ``entropy``, ``applied``,
        ``num_valid`` (global valid steps), ``baseline`` (0 for ``none``; in units of the
        normalised returns where those are normalised). A non-finite loss or gradient skips
        the step on every replica alike (``applied = False``), as does a global batch
        without a valid step. The episodic baselines add ``episodes`` (complete episodes
        of all replicas); a global batch without one skips the update (``episodes = 0``).
        """
        return self.update_path.update(self._local_batches(batches))

    def apply_gradients(self, grads: dict[str, np.ndarray]) -> bool:
        """Apply the given *global* gradients on every replica; False (skipped) if non-finite.

        Every worker must pass the same values (as after ``gradients``).
        """
        return self.all_reduced_loss.apply(grads)
