"""The eager twin's loss and per-step baselines under ``tf.distribute``, from all-reduced sums.

Under ``tf.distribute.MirroredStrategy`` (devices of one process) or
``MultiWorkerMirroredStrategy`` (processes or hosts, ``TF_CONFIG``) every replica feeds the
update its own batch. The update is, up to float rounding, the single-device update on the
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
optimizer on every replica's copy of the variables. The episodic baselines run the shared
``pgtwin_core.baselines.EpisodicUpdate`` over ``AllReducedLoss`` with the all-reduce of
``eager.collectives.StrategySums`` as its reduce hook.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import tensorflow as tf

from pgtwin_core.advantages import TrainInputs
from pgtwin_core.returns import NORMALIZE_EPS
from pgtwin_core.rollout import Batch

from pgtwin.mode_agnostic.per_sample import read_weights
from pgtwin.mode_agnostic.step_guard import all_finite

from eager.gradient_step import apply_pairs
from eager.per_sample import sq_norms
from eager.weighted_loss import WeightedLoss, batch_args

SUM = tf.distribute.ReduceOp.SUM


def replica_values(strategy: tf.distribute.Strategy, replica_ids: Sequence[int],
                   arrays: Sequence[Sequence[np.ndarray]]):
    """Per-replica tensors from ``arrays[k]``, local replica k's numpy arrays."""
    by_id = dict(zip(replica_ids, arrays))
    return strategy.experimental_distribute_values_from_function(
        lambda ctx: tuple(tf.constant(a) for a in by_id[ctx.replica_id_in_sync_group]))


class AllReducedLoss:
    """``pgtwin_core.update_path.WeightedLoss`` over every replica: the loss, its gradients and
    entropy summed over replicas (the weights already global), and the apply of a global
    gradient on every replica's copy.

    Args:
      strategy, replica_ids: the agent's strategy and its local replicas' global ids.
      weighted: the agent's ``WeightedLoss`` (its traceable loss runs inside each replica).
    """

    def __init__(self, strategy: tf.distribute.Strategy, replica_ids: Sequence[int],
                 weighted: WeightedLoss):
        self.strategy, self.replica_ids, self.weighted = strategy, tuple(replica_ids), weighted
        self.loss_fn = tf.function(self._distributed_loss, reduce_retracing=True)
        self.apply_fn = tf.function(self._distributed_apply)

    def _distributed_loss(self, obs, actions, advantages, weights):
        return self.strategy.run(self._replica_loss, args=(obs, actions, advantages, weights))

    def _replica_loss(self, obs, actions, advantages, weights):
        ctx = tf.distribute.get_replica_context()
        loss, grads, entropy = self.weighted.loss_and_grads(obs, actions, advantages, weights)
        return ctx.all_reduce(SUM, loss), ctx.all_reduce(SUM, grads), ctx.all_reduce(SUM, entropy)

    def _distributed_apply(self, grads):
        self.strategy.run(self._replica_apply, args=(grads,))

    def _replica_apply(self, grads):
        """Clip the (already reduced) global gradient and apply it on this replica's copy.

        Keras optimizers under ``tf.distribute`` SUM-all-reduce whatever each replica hands
        them. The gradient here is already global (the norm and the finite check needed
        it), so replica 0 hands it over and the others hand zeros: the sum is the global
        gradient exactly (``g + 0 == g``), not ``num_replicas`` times it.
        """
        w = self.weighted
        if w.config.max_grad_norm is not None:
            grads, _ = tf.clip_by_global_norm(grads, w.config.max_grad_norm)
        first = tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group, 0)
        shares = [tf.where(first, g, tf.zeros_like(g)) for g in grads]
        apply_pairs(w.optimizer, list(zip(shares, w.variables.values())))

    def trace_counts(self) -> dict[str, int]:
        """How often the apply step has been traced."""
        return {"distributed_apply": self.apply_fn.experimental_get_tracing_count()}

    # ------------------------------------------------------------ WeightedLoss
    def _reduced(self, replicas: Sequence[TrainInputs]):
        """``(loss, grads list, entropy)``, numpy, summed over every replica."""
        values = replica_values(self.strategy, self.replica_ids,
                                [batch_args(x) for x in replicas])
        loss, grads, entropy = self.loss_fn(*values)
        first = lambda v: self.strategy.experimental_local_results(v)[0].numpy()  # noqa: E731
        return first(loss), [first(g) for g in grads], first(entropy)

    def loss(self, replicas: Sequence[TrainInputs]) -> float:
        return float(self._reduced(replicas)[0])

    def loss_and_entropy(self, replicas: Sequence[TrainInputs]) -> tuple[float, float]:
        loss, _, entropy = self._reduced(replicas)
        return float(loss), float(entropy)

    def gradients(self, replicas: Sequence[TrainInputs]) -> dict[str, np.ndarray]:
        return dict(zip(self.weighted.variables, self._reduced(replicas)[1]))

    def train(self, replicas: Sequence[TrainInputs]) -> tuple[float, float, float, bool]:
        loss, grads, entropy = self._reduced(replicas)
        grads = dict(zip(self.weighted.variables, grads))
        norm = float(np.sqrt(sum(np.sum(np.square(g, dtype=np.float64)) for g in grads.values())))
        applied = bool(np.isfinite(loss)) and self.apply(grads)
        return float(loss), norm, float(entropy), applied

    def apply(self, grads: dict[str, np.ndarray]) -> bool:
        """Apply the given *global* gradients on every replica; False (skipped) if non-finite.

        Every worker must pass the same values (as after ``gradients``).
        """
        values = [np.asarray(grads[n], self.weighted.config.dtype) for n in self.weighted.variables]
        if not all(np.isfinite(v).all() for v in values):
            return False
        mirrored = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: [tf.constant(v) for v in values])
        self.apply_fn(mirrored)
        return True


class AllReducedPath:
    """The ``UpdatePath`` of the distributed agent for ``baseline`` none, mean, optimal_scalar.

    ``loss_value``, ``gradients`` and ``update`` take one batch per local replica (the
    agent checks them) and act on the global batch of all replicas of all workers.

    Args:
      agent: an ``eager.distributed.DistributedReinforceAgent`` (strategy, replica ids,
        ``replica_arrays``, ``dist_params``).
      loss: its ``AllReducedLoss``.
    """

    memory = None

    def __init__(self, agent, loss: AllReducedLoss):
        self._agent, self._loss = agent, loss
        self.spec, self.config, self.variables = agent.spec, agent.config, agent.variables
        self.grads_fn = tf.function(self._distributed_grads, reduce_retracing=True)

    def trace_counts(self) -> dict[str, int]:
        """How often the gradient step has been traced."""
        return {"distributed_grads": self.grads_fn.experimental_get_tracing_count()}

    def _distributed_grads(self, obs, actions, returns, valid):
        return self._loss.strategy.run(self._replica_grads, args=(obs, actions, returns, valid))

    def _replica_grads(self, obs, actions, returns, valid):
        """One replica's share of the update, reduced over all replicas.

        Args (this replica's batch, B_r = T * N_r samples):
          obs: ``[B_r, *obs_shape]`` of ``config.dtype``; actions: int64 ``[B_r]`` or ``[B_r, d]``.
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
        dtype = self.config.dtype
        loss, grads, entropy = self._loss.weighted.loss_and_grads(
            obs, actions, tf.cast(advantages, dtype), tf.cast(valid / count, dtype))
        grads = ctx.all_reduce(SUM, grads)
        loss, entropy = ctx.all_reduce(SUM, [loss, entropy])
        finite = all_finite(grads, loss)
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

        ``g_i = grad log pi(a_i|s_i)``: only the squared norms are needed
        (``eager.per_sample.sq_norms``, on this replica's copy of the weights). Numerator and
        denominator are all-reduced *before* dividing (a mean of per-replica b* would weight
        replicas wrongly). A zero denominator (every score zero, e.g. a deterministic
        policy) falls back to the mean baseline.
        """
        squares = tf.cast(sq_norms(self.spec, read_weights(self.variables), obs, actions),
                          tf.float64) * valid
        num, den, total = ctx.all_reduce(
            SUM, [tf.reduce_sum(squares * returns), tf.reduce_sum(squares),
                  tf.reduce_sum(valid * returns)])
        return tf.where(den > 0, num / tf.where(den > 0, den, 1.0), total / count)

    def _reduced(self, batches: Sequence[Batch]):
        """Run the gradient step; its per-replica gradients and the local values of the rest."""
        agent = self._agent
        values = replica_values(self._loss.strategy, self._loss.replica_ids,
                                [agent.replica_arrays(b) for b in batches])
        grads, *scalars = self.grads_fn(*values)
        first = [self._loss.strategy.experimental_local_results(s)[0] for s in scalars]
        return grads, first

    def rollout_policy(self):
        return self._agent.dist_params

    def loss_value(self, batches: Sequence[Batch]) -> float:
        _, (loss, *_) = self._reduced(batches)
        return float(loss)

    def gradients(self, batches: Sequence[Batch]) -> dict[str, np.ndarray]:
        grads, _ = self._reduced(batches)
        return {name: self._loss.strategy.experimental_local_results(g)[0].numpy()
                for name, g in zip(self.variables, grads)}

    def update(self, batches: Sequence[Batch]) -> dict[str, Any]:
        grads, (loss, entropy, norm, finite, count, baseline) = self._reduced(batches)
        applied = bool(finite)
        if applied:  # the same verdict on every worker, so all or none enter the collective
            self._loss.apply_fn(grads)
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(entropy),
                "applied": applied, "num_valid": int(count), "baseline": float(baseline)}


def global_normalize(ctx: tf.distribute.ReplicaContext, returns: tf.Tensor, valid: tf.Tensor,
                     count: tf.Tensor) -> tf.Tensor:
    """``pgtwin_core.returns.unit_scale(returns, mask=valid)`` over the valid steps of all replicas.

    ``R / (std + eps)`` with the population std from all-reduced sums, not centred (the
    baseline is what shifts the returns); a constant input (global min == max) is returned
    unscaled, as in ``unit_scale``.

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
    mean = ctx.all_reduce(SUM, tf.reduce_sum(valid * returns)) / count
    var = ctx.all_reduce(SUM, tf.reduce_sum(valid * tf.square(returns - mean))) / count
    scale = tf.where(lo == hi, tf.constant(1.0, tf.float64), tf.sqrt(var) + NORMALIZE_EPS)
    return valid * returns / scale
