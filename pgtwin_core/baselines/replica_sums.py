"""The reduce hook of the episodic estimator: sums over replicas, identity on one device.

Every episodic baseline is a ratio of sums over the complete episodes of the GLOBAL batch.
The estimator (``pgtwin_core.baselines.estimator``) computes each replica's partial sums
and hands them to a ``ReplicaSums``; on one device that is the identity (``ONE_DEVICE``),
under ``tf.distribute`` an all-reduce across every replica of every worker
(``eager.collectives.StrategySums``). The single-device estimate is the one-replica case.
"""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np


class ReplicaSums(Protocol):
    """Sums over all replicas of arrays each local replica holds.

    Every worker calls ``sum`` and ``max`` in the same order with arrays of the same
    shapes (they are collectives under a strategy).
    """

    num_replicas: int
    """Replicas over all workers."""

    def sum(self, local: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
        """``local[k]``: local replica k's list of arrays; returns their float64 sums over
        every replica, shaped as the inputs."""

    def max(self, local: Sequence[float]) -> float:
        """The largest of every replica's value (``local[k]``: local replica k's)."""


class OneDevice:
    """``ReplicaSums`` of a single replica: every sum is the replica's own value, unchanged
    (no float operation, so the one-device estimate keeps its bits)."""

    num_replicas = 1

    def sum(self, local: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
        (own,) = local
        return list(own)

    def max(self, local: Sequence[float]) -> float:
        (own,) = local
        return own


ONE_DEVICE = OneDevice()
