"""Observation normalisation: a running mean and variance per feature, applied before the policy.

With ``ReinforceConfig.obs_norm`` the training loop (``pgtwin_core.loop.iterate_training``)
feeds the policy ``clip((obs - mean) / sqrt(var + eps), -clip, clip)`` instead of ``obs``,
and trains on the same normalised observations (they are what the actions were sampled
from). It is numpy, outside both twins, so the graph and the eager twin see bit-identical
inputs by construction.

When the statistics move: they are frozen for a whole rollout (every policy call of batch k
uses the statistics of batches 0..k-1), the batch's observations are normalised with those
same statistics, and only then are the batch's raw observations (its valid steps, those
that belong to an episode) merged in. So the update differentiates exactly the function
the actions were sampled from; the next rollout sees the new statistics. The first
rollout sees mean 0, variance 1 (the identity but for the clip).

The statistics are part of the run's state: ``state()`` / ``load_state()`` round-trip them
exactly (float64), the run's checkpoint holds them (``obs_norm.npz``), and the final
weights come with them (``obs_norm.npz`` beside ``weights.npz``): a policy trained on
normalised observations must be fed normalised observations.
"""
from __future__ import annotations

import numpy as np

from pgtwin_core.rollout import Batch, PolicyFn

EPS = 1e-8
"""Added to the variance before the square root (a constant feature gives 0, not NaN)."""


def normalized_dtype(raw: np.dtype) -> np.dtype:
    """The dtype normalised observations are kept in: the raw observations' own where it is
    a float dtype (a float32 env stays float32), else float64. Normalised values are
    fractions and signed: cast back to an env's uint8 or int32 they were truncated to
    whole numbers, a negative one wrapped around to 255."""
    raw = np.dtype(raw)
    return raw if raw.kind == "f" else np.dtype(np.float64)


class ObsNormalizer:
    """Per-feature running mean and variance over the last observation axis.

    Args:
      obs_dim: features per observation (the last axis; a ``[K, obs_dim]`` history window
        is normalised feature by feature, the window's zero padding included).
      clip: normalised values are clipped to ``[-clip, clip]``.
    """

    def __init__(self, obs_dim: int, clip: float = 10.0):
        self.clip = float(clip)
        self.count = 0.0
        """Observations merged so far (float64, as the merge formula uses it)."""
        self.mean = np.zeros(obs_dim)
        """float64 ``[obs_dim]``."""
        self.var = np.ones(obs_dim)
        """float64 ``[obs_dim]``: the population variance of what was merged (1 before any)."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """``clip((obs - mean) / sqrt(var + EPS))``, float64, shape of ``obs`` ``[..., obs_dim]``."""
        z = (np.asarray(obs, dtype=np.float64) - self.mean) / np.sqrt(self.var + EPS)
        return np.clip(z, -self.clip, self.clip)

    def update(self, obs: np.ndarray) -> None:
        """Merge ``obs`` ``[M, ..., obs_dim]`` (every row counts) into the statistics.

        The parallel-variance merge (Chan, Golub and LeVeque 1979) of the running
        ``(count, mean, var)`` with the batch's: exact for any split of the same data up to
        rounding, and stable for large counts.
        """
        x = np.asarray(obs, dtype=np.float64).reshape(-1, self.mean.shape[0])
        n = float(x.shape[0])
        if n == 0:
            return
        b_mean, b_var = x.mean(axis=0), x.var(axis=0)
        total = self.count + n
        delta = b_mean - self.mean
        m2 = self.var * self.count + b_var * n + delta * delta * self.count * n / total
        self.mean = self.mean + delta * n / total
        self.var = m2 / total
        self.count = total

    def wrap(self, policy_fn: PolicyFn) -> PolicyFn:
        """``policy_fn`` fed normalised observations (the statistics as they are now), in
        :func:`normalized_dtype`: the values :meth:`normalized_batch` stores, so the update
        trains on exactly what the actions were sampled from."""
        return lambda obs: policy_fn(self(obs).astype(normalized_dtype(np.asarray(obs).dtype)))

    def normalized_batch(self, batch: Batch) -> Batch:
        """``batch`` with ``obs`` and ``next_obs`` normalised with the current statistics
        (in :func:`normalized_dtype`), the rest unchanged."""
        import dataclasses

        dtype = normalized_dtype(batch.obs.dtype)
        return dataclasses.replace(batch, obs=self(batch.obs).astype(dtype),
                                   next_obs=self(batch.next_obs).astype(dtype))

    def state(self) -> dict[str, np.ndarray]:
        """The statistics as arrays (for ``np.savez``)."""
        return {"count": np.float64(self.count), "mean": self.mean.copy(),
                "var": self.var.copy(), "clip": np.float64(self.clip)}

    def load_state(self, state: dict[str, np.ndarray], where: str) -> None:
        """Put :meth:`state`'s arrays back; ``where`` names the file in errors.

        Raises:
          ValueError: missing arrays, a feature count or clip that differs from this
            normaliser's, or non-finite values.
        """
        missing = [k for k in ("count", "mean", "var", "clip") if k not in state]
        if missing:
            raise ValueError(f"{where}: observation statistics lack {missing}")
        mean, var = np.asarray(state["mean"], np.float64), np.asarray(state["var"], np.float64)
        if mean.shape != self.mean.shape or var.shape != self.var.shape:
            raise ValueError(f"{where}: observation statistics for {mean.shape[-1:]} features; "
                             f"this run's observations have {self.mean.shape[0]}")
        if float(state["clip"]) != self.clip:
            raise ValueError(f"{where}: saved with obs_norm_clip={float(state['clip'])}, this "
                             f"run has {self.clip}")
        if not (np.isfinite(mean).all() and np.isfinite(var).all() and (var >= 0).all()):
            raise ValueError(f"{where}: observation statistics are not finite")
        self.count, self.mean, self.var = float(state["count"]), mean, var


def observed(batch: Batch) -> np.ndarray:
    """The raw observations of ``batch``'s valid steps, ``[M, *obs_shape]`` (what
    :meth:`ObsNormalizer.update` merges: an autoreset step's observation is the previous
    episode's last, which belongs to no step that is trained on)."""
    return batch.obs[batch.valid]
