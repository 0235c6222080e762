"""Sums of numpy arrays over every replica of a ``tf.distribute`` strategy, outside ``tf.function``.

The episodic estimator reduces its per-episode sums this way (``StrategySums``, its reduce
hook under a strategy), and a distributed training run gathers every replica's finished
episodes and agrees on the checkpoint to resume from. Each is one ``strategy.reduce(SUM)``: a collective over every
replica of every worker, so every worker must call it, in the same order, with arrays of
the same shapes.

A value that belongs to one replica is gathered by a SUM of one-hot slots: replica ``r``
writes it into slot ``r`` of a zero vector. ``x + 0.0 == x`` exactly, so float64 values
(returns, counts below 2^53) arrive bit for bit.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

SUM = tf.distribute.ReduceOp.SUM


def sum_over_replicas(strategy: tf.distribute.Strategy, replica_ids: Sequence[int],
                      local: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """The sums over all replicas of each of a list of arrays, in one collective.

    Args:
      strategy: the run's strategy.
      replica_ids: global ids of this process's replicas, in local order.
      local: ``local[k]`` is local replica k's list of arrays (any shapes; the same
        shapes on every replica and worker).

    Returns: the list of float64 global sums, shaped as the inputs.
    """
    shapes = [np.shape(x) for x in local[0]]
    # One trailing zero: an all-reduce of an empty tensor crashes MultiWorkerMirroredStrategy's
    # ring (segfault in TF 2.21), and a batch that finished no episode gathers nothing.
    packed = {rid: np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in parts]
                                  + [np.zeros(1)])
              for rid, parts in zip(replica_ids, local)}
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(packed[ctx.replica_id_in_sync_group]))
    flat = strategy.reduce(SUM, values, axis=None).numpy()
    out, start = [], 0
    for shape in shapes:
        size = int(np.prod(shape, dtype=np.int64))
        out.append(flat[start:start + size].reshape(shape))
        start += size
    return out


def by_replica(strategy: tf.distribute.Strategy, replica_ids: Sequence[int],
               values: Sequence[float]) -> np.ndarray:
    """float64 ``[num_replicas]``: each replica's value (``values[k]`` of local replica k) in
    its own slot, known to every worker."""
    num_replicas = int(strategy.num_replicas_in_sync)
    local = []
    for rid, v in zip(replica_ids, values):
        slots = np.zeros(num_replicas)
        slots[rid] = v
        local.append([slots])
    return sum_over_replicas(strategy, replica_ids, local)[0]


def rows_by_replica(strategy: tf.distribute.Strategy, replica_ids: Sequence[int],
                    rows: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Every replica's float64 rows ``[M_r, C]`` (M_r may differ), known to every worker.

    Two collectives: the row counts (one-hot slots), then the rows, each replica writing
    its own block of a zero ``[sum_r M_r, C]`` array.

    Returns: ``[M_r, C]`` per global replica r, in replica order.
    """
    width = int(np.shape(rows[0])[1])
    counts = by_replica(strategy, replica_ids, [np.shape(r)[0] for r in rows]).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    local = []
    for rid, r in zip(replica_ids, rows):
        block = np.zeros((int(starts[-1]), width))
        block[starts[rid]:starts[rid + 1]] = r
        local.append([block])
    joined = sum_over_replicas(strategy, replica_ids, local)[0]
    return [joined[starts[r]:starts[r + 1]] for r in range(len(counts))]


class StrategySums:
    """``pgtwin_core.baselines.ReplicaSums`` under a strategy: ``sum_over_replicas`` and a max
    from ``by_replica`` (each a collective every worker joins).

    Args:
      strategy: the run's strategy; replica_ids: this process's replicas' global ids.
    """

    def __init__(self, strategy: tf.distribute.Strategy, replica_ids: Sequence[int]):
        self.strategy, self.replica_ids = strategy, tuple(replica_ids)
        self.num_replicas = int(strategy.num_replicas_in_sync)

    def sum(self, local: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
        return sum_over_replicas(self.strategy, self.replica_ids, local)

    def max(self, local: Sequence[float]) -> float:
        return float(by_replica(self.strategy, self.replica_ids, local).max())
