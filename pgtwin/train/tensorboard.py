"""TensorBoard scalars for a training run, written the same way for both twins.

The scalars are numpy/Python numbers computed by the run loop, so the legacy twin (whose
graph lives in its own ``tf.Graph``) and the eager twin log identically through one eager
``tf.summary`` file writer. Steps are env-steps, as in CleanRL and Stable-Baselines3.

``tf.summary.scalar`` lives in the ``tensorboard`` package, which ``tensorflow-cpu`` does
not install; the events are written with core TF's ``tf.summary.write`` and the metadata
``tensorboard.summary.scalar`` attaches (plugin ``scalars``, float32 scalar tensor), so
they read as ordinary scalars in TensorBoard without making it a dependency of training.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

LOSS_METRICS = ("loss", "grad_norm", "entropy")
"""Update metrics logged under ``losses/``; the others go under ``train/``."""


def update_scalars(metrics: Mapping[str, Any], episode_returns: np.ndarray,
                   episode_lengths: np.ndarray, window_mean: float | None, env_steps: int,
                   wall_s: float) -> dict[str, float | None]:
    """The scalars a training run logs after one update, by tag.

    Args:
      metrics: the agent's update metrics: loss terms under ``losses/``, the rest
        (baseline value, applied, ...) under ``train/``; array-valued ones are left out.
      episode_returns, episode_lengths: float/int ``[E]``, the episodes that finished in
        the update's rollout (their means are ``charts/episode_*``; none when E = 0).
      window_mean: the mean return of the stopping window (None: no episode yet).
      env_steps, wall_s: the run's counters, for ``charts/env_steps_per_s``.
    """
    scalars: dict[str, float | None] = {
        ("losses/" if k in LOSS_METRICS else "train/") + k: float(v)
        for k, v in metrics.items() if isinstance(v, (int, float, bool, np.number))}
    if len(episode_returns):
        scalars["charts/episode_return"] = float(np.mean(episode_returns))
        scalars["charts/episode_length"] = float(np.mean(episode_lengths))
    scalars["charts/mean_return_window"] = window_mean
    scalars["charts/env_steps_per_s"] = (env_steps / wall_s) if wall_s > 0 else None
    return scalars


class ScalarWriter:
    """Writes ``{tag: value}`` scalars to an event file under ``logdir``."""

    def __init__(self, logdir: str):
        import tensorflow as tf  # the tool layer may import TF; kept local for CLI start-up

        from tensorflow.core.framework import summary_pb2

        self._tf = tf
        self._writer = tf.summary.create_file_writer(logdir)
        self._metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
        ).SerializeToString()
        self.logdir = logdir

    def write(self, step: int, scalars: Mapping[str, float]) -> None:
        """One value per tag at ``step``; ``None`` and non-finite values are skipped."""
        with self._writer.as_default(step=int(step)):
            for tag, value in scalars.items():
                if value is not None and math.isfinite(float(value)):
                    self._tf.summary.write(tag, self._tf.constant(float(value), self._tf.float32),
                                           metadata=self._metadata)

    def flush(self) -> None:
        """Push buffered events to disk."""
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()
