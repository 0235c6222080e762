"""REINFORCE on ``tf.distribute``: each replica learns from its own rollouts, the strategy all-reduces.

Under ``tf.distribute.MirroredStrategy`` (devices of one process) or
``tf.distribute.MultiWorkerMirroredStrategy`` (processes or hosts, configured by
``TF_CONFIG``) every replica feeds the update its own batch, collected from its own envs.
The update is, up to float rounding, the single-device update of ``eager/agent.py`` on the
concatenation of all replicas' batches. So every quantity that is a mean over the global
batch is built from all-reduced sums and divided only afterwards, never averaged per replica
(replicas can hold different numbers of valid steps)::

    count   = allreduce_sum(sum_i valid_i)                          global valid steps
    mean_R  = allreduce_sum(sum_i valid_i R_i) / count              return normalisation, 'mean'
    var_R   = allreduce_sum(sum_i valid_i (R_i - mean_R)^2) / count
    b*      = allreduce_sum(sum_i valid_i s_i R_i)
              / allreduce_sum(sum_i valid_i s_i)                    'optimal_scalar', s_i = ||g_i||^2
    w_i     = valid_i / count                                       loss weights
    grad    = allreduce_sum(d/dtheta sum_{i in replica} w_i A_i log pi_i)   the global gradient

The global gradient is then clipped (``max_grad_norm``), checked for finiteness (the same
verdict on every replica, since all hold the same reduced values) and applied by the Keras
optimizer on every replica's copy of the variables.
"""
from __future__ import annotations

import importlib
from typing import Any, Sequence

import numpy as np
import tensorflow as tf

from pgtwin_core import policy_inputs
from pgtwin_core.advantages import flat_returns
from pgtwin_core.baselines import EPISODIC
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec

from eager.agent import ReinforceAgent

SUM = tf.distribute.ReduceOp.SUM

# pgtwin_core.returns.normalize's default eps, which pgtwin_core.advantages.flat_returns uses.
NORMALIZE_EPS = 1e-8

DISTRIBUTED_BASELINES = ("none", "mean", "optimal_scalar", "optimal_scalar_episodic",
                         "optimal_per_param", "optimal_time")
"""Baselines whose global statistics are all-reduced here; the episodic ones (averages over
complete episodes) in ``eager/distributed_baselines.py``."""


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
      ValueError: ``config.baseline`` not in ``DISTRIBUTED_BASELINES``; ``update_path``
        other than ``recompute``; ``optimal_scalar`` without ``eager.per_sample``'s norms.
    """

    def __init__(self, spec: PolicySpec, config: ReinforceConfig = ReinforceConfig(),
                 weights: dict[str, np.ndarray] | None = None, seed: int = 0,
                 strategy: tf.distribute.Strategy | None = None):
        if config.baseline not in DISTRIBUTED_BASELINES:
            raise ValueError(
                f"ReinforceConfig.baseline={config.baseline!r} is not supported under a "
                f"tf.distribute strategy; supported: {DISTRIBUTED_BASELINES}"
            )
        if config.update_path != "recompute":
            raise ValueError(
                f"ReinforceConfig.update_path={config.update_path!r} is not supported under a "
                "tf.distribute strategy (each replica recomputes its batch); use 'recompute'"
            )
        if config.baseline == "optimal_scalar":
            squared_score_norms_fn()  # fail now, not at the first update
        self.strategy = strategy if strategy is not None else tf.distribute.get_strategy()
        with self.strategy.scope():
            super().__init__(spec, config, weights, seed)
        ids = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: ctx.replica_id_in_sync_group)
        self.replica_ids: tuple[int, ...] = tuple(
            int(i) for i in self.strategy.experimental_local_results(ids))
        """Global ids (0 .. num_replicas - 1) of this process's replicas, in local order."""

    @property
    def num_replicas(self) -> int:
        """Replicas over all workers (``strategy.num_replicas_in_sync``)."""
        return int(self.strategy.num_replicas_in_sync)

    # ------------------------------------------------------------ functions
    def _build_functions(self) -> None:
        super()._build_functions()
        self._replica_grads_fn = tf.function(self._distributed_grads, reduce_retracing=True)
        self._replica_apply_fn = tf.function(self._distributed_apply)
        self._replica_loss_fn = tf.function(self._distributed_loss, reduce_retracing=True)
        self._episodic_update = None  # eager.distributed_baselines.DistributedEpisodic

    def trace_counts(self) -> dict[str, int]:
        """As ``ReinforceAgent.trace_counts``, plus the distributed gradient and apply steps."""
        counts = super().trace_counts()
        counts["distributed_grads"] = self._replica_grads_fn.experimental_get_tracing_count()
        counts["distributed_apply"] = self._replica_apply_fn.experimental_get_tracing_count()
        return counts

    def _distributed_grads(self, obs, actions, returns, valid):
        return self.strategy.run(self._replica_grads, args=(obs, actions, returns, valid))

    def _distributed_loss(self, obs, actions, advantages, weights):
        return self.strategy.run(self._replica_loss, args=(obs, actions, advantages, weights))

    def _replica_loss(self, obs, actions, advantages, weights):
        """``(loss, grads, entropy)`` of the weighted loss, summed over replicas (the weights
        are already global, ``1 / sum_e T_e``), for the episodic baselines."""
        ctx = tf.distribute.get_replica_context()
        loss, grads, entropy = self._loss_and_grads(obs, actions, advantages, weights)
        return ctx.all_reduce(SUM, loss), ctx.all_reduce(SUM, grads), ctx.all_reduce(SUM, entropy)

    def _episodic(self):
        """The episodic baselines' update (``eager/distributed_baselines.py``), built on use."""
        if self._episodic_update is None:
            from eager.distributed_baselines import DistributedEpisodic
            self._episodic_update = DistributedEpisodic(self)
        return self._episodic_update

    @property
    def baseline_memory(self):
        """The episodic baselines' earlier-batch sums, updated from the all-reduced sums (the
        same on every replica and worker); None for the other baselines."""
        return self._episodic().memory if self.config.baseline in EPISODIC else None

    def _local_batches(self, batches: Batch | Sequence[Batch]) -> list[Batch]:
        """One batch per local replica, as a list (checked)."""
        batches = [batches] if isinstance(batches, Batch) else list(batches)
        if len(batches) != len(self.replica_ids):
            raise ValueError(
                f"got {len(batches)} batches but this process holds {len(self.replica_ids)} "
                f"replicas (global ids {self.replica_ids}): pass one batch per local replica"
            )
        return batches

    def _distributed_apply(self, grads):
        self.strategy.run(self._replica_apply, args=(grads,))

    def _replica_grads(self, obs, actions, returns, valid):
        """One replica's share of the update, reduced over all replicas.

        Args (this replica's batch, B_r = T * N_r samples):
          obs: ``[B_r, *obs_shape]`` spec dtype; actions: int64 ``[B_r]`` or ``[B_r, d]``.
          returns: float64 ``[B_r]`` discounted reward-to-go, 0 on invalid steps (data).
          valid: float64 ``[B_r]`` 1.0 on steps that belong to an episode (data).

        Returns (identical on every replica): the global gradient (list, unclipped), the
        global loss, its entropy term, the global gradient norm, whether loss and gradient
        are finite, the global number of valid steps and the baseline value.
        """
        ctx = tf.distribute.get_replica_context()
        count = ctx.all_reduce(SUM, tf.reduce_sum(valid))
        if self.config.normalize_returns:
            returns = global_normalize(ctx, returns, valid, count)
        advantages, baseline = self._advantages(ctx, obs, actions, returns, valid, count)
        dtype = self.spec.dtype
        loss, grads, entropy = self._loss_and_grads(
            obs, actions, tf.cast(advantages, dtype), tf.cast(valid / count, dtype))
        grads = ctx.all_reduce(SUM, grads)
        loss, entropy = ctx.all_reduce(SUM, [loss, entropy])
        finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(g)) for g in grads]
                                        + [tf.math.is_finite(loss)]))
        return grads, loss, entropy, tf.linalg.global_norm(grads), finite, count, baseline

    def _advantages(self, ctx, obs, actions, returns, valid, count):
        """``(A [B_r] float64, baseline scalar float64)``: returns less the global baseline."""
        if self.config.baseline == "none":
            return returns, tf.constant(0.0, tf.float64)
        if self.config.baseline == "mean":
            baseline = ctx.all_reduce(SUM, tf.reduce_sum(valid * returns)) / count
        else:  # optimal_scalar
            baseline = self._optimal_scalar_baseline(ctx, obs, actions, returns, valid, count)
        return valid * (returns - baseline), baseline

    def _optimal_scalar_baseline(self, ctx, obs, actions, returns, valid, count):
        """``b* = sum_i s_i R_i / sum_i s_i`` over valid steps of all replicas, ``s_i = ||g_i||^2``.

        ``g_i = grad log pi(a_i|s_i)``: only the squared norms are needed, from
        ``eager.per_sample``. Numerator and denominator are all-reduced *before* dividing
        (a mean of per-replica b* would weight replicas wrongly). A zero denominator (every
        score zero, e.g. a deterministic policy) falls back to the mean baseline.
        """
        squares = tf.cast(squared_score_norms_fn()(self.spec, self.variables, obs, actions),
                          tf.float64) * valid
        num, den, total = ctx.all_reduce(
            SUM, [tf.reduce_sum(squares * returns), tf.reduce_sum(squares),
                  tf.reduce_sum(valid * returns)])
        return tf.where(den > 0, num / tf.where(den > 0, den, 1.0), total / count)

    def _replica_apply(self, grads):
        """Clip the (already reduced) global gradient and apply it on this replica's copy.

        Keras optimizers under ``tf.distribute`` SUM-all-reduce whatever each replica hands
        them. The gradient here is already global (the norm and the finite check needed
        it), so replica 0 hands it over and the others hand zeros: the sum is the global
        gradient exactly (``g + 0 == g``), not ``num_replicas`` times it.
        """
        if self.config.max_grad_norm is not None:
            grads, _ = tf.clip_by_global_norm(grads, self.config.max_grad_norm)
        first = tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group, 0)
        shares = [tf.where(first, g, tf.zeros_like(g)) for g in grads]
        self._apply_pairs(list(zip(shares, self.variables.values())))

    # --------------------------------------------------------------- inputs
    def replica_arrays(self, batch: Batch) -> tuple[np.ndarray, ...]:
        """One replica's flat (time-major) arrays ``(obs, actions, returns, valid)``.

        ``returns`` are the discounted reward-to-go, float64, *not* normalised (that needs
        the global statistics); ``valid`` is float64 0/1.
        """
        returns = flat_returns(batch, self.config.replace(normalize_returns=False))
        obs = batch.obs.reshape(-1, *batch.obs.shape[2:]).astype(self.spec.np_dtype, copy=False)
        actions = batch.actions.reshape(-1, *batch.actions.shape[2:])
        if not self.spec.is_discrete:
            actions = actions.astype(self.spec.np_dtype)
        policy_inputs.as_obs(self.spec, obs, "batch.obs")
        policy_inputs.as_actions(self.spec, actions, obs.shape[0], "batch.actions")
        return (obs, actions, returns.reshape(-1).astype(np.float64),
                batch.valid.reshape(-1).astype(np.float64))

    def _distribute(self, batches: Batch | Sequence[Batch]):
        """Per-replica tensors from one batch per local replica."""
        batches = self._local_batches(batches)
        arrays = {rid: self.replica_arrays(b) for rid, b in zip(self.replica_ids, batches)}

        def value_fn(ctx: tf.distribute.ValueContext):
            return tuple(tf.constant(a) for a in arrays[ctx.replica_id_in_sync_group])

        values = self.strategy.experimental_distribute_values_from_function(value_fn)
        return values

    def _reduced(self, batches):
        """Run the gradient step; its per-replica outputs plus the local values of the rest."""
        per_replica = self._replica_grads_fn(*self._distribute(batches))
        grads, *scalars = per_replica
        first = [self.strategy.experimental_local_results(s)[0] for s in scalars]
        return grads, first

    # --------------------------------------------------------------- update
    def loss_value(self, batches: Batch | Sequence[Batch]) -> float:
        """The REINFORCE loss of the global batch (no update)."""
        if self.config.baseline in EPISODIC:
            return self._episodic().loss_value(self._local_batches(batches))
        _, (loss, *_) = self._reduced(batches)
        return float(loss)

    def gradients(self, batches: Batch | Sequence[Batch]) -> dict[str, np.ndarray]:
        """The global gradient by variable name (all-reduced; unclipped, not applied)."""
        if self.config.baseline in EPISODIC:
            return self._episodic().gradients(self._local_batches(batches))
        grads, _ = self._reduced(batches)
        return {name: self.strategy.experimental_local_results(g)[0].numpy()
                for name, g in zip(self.variables, grads)}

    def update(self, batches: Batch | Sequence[Batch]) -> dict[str, Any]:
        """One optimizer step on the global batch; returns metrics (the same on every worker).

        Metrics: ``loss``, ``grad_norm`` (before clipping), ``entropy``, ``applied``,
        ``num_valid`` (global valid steps), ``baseline`` (0 for ``none``; in units of the
        normalised returns where those are normalised). A non-finite loss or gradient skips
        the step on every replica alike (``applied = False``), as does a global batch
        without a valid step. The episodic baselines add ``episodes`` (complete episodes
        of all replicas) and raise ``ValueError`` when there is none.
        """
        if self.config.baseline in EPISODIC:
            return self._episodic().update(self._local_batches(batches))
        grads, (loss, entropy, norm, finite, count, baseline) = self._reduced(batches)
        applied = bool(finite)
        if applied:  # the same verdict on every worker, so all or none enter the collective
            self._replica_apply_fn(grads)
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(entropy),
                "applied": applied, "num_valid": int(count), "baseline": float(baseline)}

    def apply_gradients(self, grads: dict[str, np.ndarray]) -> bool:
        """Apply the given *global* gradients on every replica; False (skipped) if non-finite.

        Every worker must pass the same values (as after ``gradients``).
        """
        values = [np.asarray(grads[n], self.spec.np_dtype) for n in self.variables]
        if not all(np.isfinite(v).all() for v in values):
            return False
        mirrored = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: [tf.constant(v) for v in values])
        self._replica_apply_fn(mirrored)
        return True


def global_normalize(ctx: tf.distribute.ReplicaContext, returns: tf.Tensor, valid: tf.Tensor,
                     count: tf.Tensor) -> tf.Tensor:
    """``pgtwin_core.returns.normalize(returns, mask=valid)`` over the valid steps of all replicas.

    ``(R - mean) / (std + eps)`` with the population std, both from all-reduced sums; a
    constant input (global min == max) gives zeros, as in ``normalize``.

    Args:
      returns: float64 ``[B_r]``, 0 on invalid steps (data). valid: float64 0/1 ``[B_r]``.
      count: float64 scalar, the global number of valid steps.

    Returns: float64 ``[B_r]``, 0 on invalid steps.
    """
    big = tf.constant(np.inf, tf.float64)
    is_valid = valid > 0
    lo_hi = tf.stack([tf.reduce_min(tf.where(is_valid, returns, big)),
                      -tf.reduce_min(tf.where(is_valid, -returns, big))])
    lo_hi = ctx.all_gather(lo_hi[tf.newaxis], axis=0)  # [num_replicas, 2]
    lo, hi = tf.reduce_min(lo_hi[:, 0]), tf.reduce_max(lo_hi[:, 1])
    # As normalize: the summed mean of a constant can miss it by an ulp; use the value.
    mean = tf.where(lo == hi, lo, ctx.all_reduce(SUM, tf.reduce_sum(valid * returns)) / count)
    var = ctx.all_reduce(SUM, tf.reduce_sum(valid * tf.square(returns - mean))) / count
    return valid * (returns - mean) / (tf.sqrt(var) + NORMALIZE_EPS)


def squared_score_norms_fn():
    """``eager.per_sample``'s per-sample squared gradient norms as ``fn(spec, variables, obs,
    actions) -> [B]``: ``||grad log pi(a_i|s_i)||^2`` over all variables (ghost norms for an
    MLP). Inside a replica the variables read are that replica's copies.

    Raises ValueError while that module (written alongside) does not provide them.
    """
    try:
        module = importlib.import_module("eager.per_sample")
    except ModuleNotFoundError as err:
        if err.name != "eager.per_sample":
            raise
        module = None
    sq_norms = getattr(module, "sq_norms", None)
    read_weights = getattr(module, "read_weights", None)
    if sq_norms is None or read_weights is None:
        raise ValueError(
            "baseline='optimal_scalar' under a strategy needs eager.per_sample.sq_norms and "
            "read_weights, which are not available"
        )
    return lambda spec, variables, obs, actions: sq_norms(spec, read_weights(variables), obs,
                                                          actions)
