"""A batch's complete episodes laid out as a grid of chunks, for the TensorFlow episodic path.

The episodic baselines' heavy part (scores, sums, ratios, ascent) runs in TensorFlow, one
XLA computation per update (``pgtwin/mode_agnostic/episodic_baselines.py``); what stays here
is the integer bookkeeping: which steps are complete episodes, in which order, and where
each goes. The complete episodes' steps are cut into chunks of ``C`` consecutive steps of
one episode (the last chunk of an episode padded), one chunk a row of a ``[K, C]`` grid::

    grid cell (k, c)    step c of chunk k: the flat batch row it holds, or an empty cell
    chunk_episode[k]    the episode chunk k belongs to

A per-episode sum of per-step outer products ``sum_{t in e} a_t^T d_t`` is then one sum
of products per chunk over its ``[C, in]`` and ``[C, out]`` blocks followed by a segment sum over
``chunk_episode`` (no ``[B, in, out]`` tensor); at most ``C - 1`` empty cells per episode.
``optimal_time`` needs every step's score so far (psi) on a common time axis, so there each
episode is ONE chunk of ``C = H`` cells (H >= the longest episode, and the memory's horizon):
cell (e, l) is step l of episode e, empty cells after its end (psi frozen, r = 0: exactly
the padding of ``time_dependent``).

XLA compiles once per shape, so K, C (for ``optimal_time``) and the episode count E are
rounded up to ``pgtwin_core.row_buckets.bucket_size``: empty cells copy the first complete
step's observation and action (a finite log-probability) and carry mask 0, padded episodes
return 0 and have no step, so neither reaches any sum.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pgtwin_core import row_buckets
from pgtwin_core.baselines.estimator import cut_replica, no_episode_error, return_scale
from pgtwin_core.baselines.replica_sums import ONE_DEVICE
from pgtwin_core.rollout import Batch

CHUNK = 16
"""Steps per chunk for ``optimal_scalar_episodic`` and ``optimal_per_param``: the chunk
products' inner size, and at most 15 empty cells per episode."""


@dataclass(frozen=True)
class EpisodeLayout:
    """The arrays the TensorFlow episodic computation is fed (module doc); ``R = K * C``."""

    obs: np.ndarray
    """``[R, *obs_shape]`` (config dtype): the observation of each grid cell, row-major."""
    actions: np.ndarray
    """``[R]`` int64 or ``[R, action_dim]``: the action of each cell."""
    mask: np.ndarray
    """``[K, C]`` (config dtype): 1 on a complete episode's step, 0 on an empty cell."""
    chunk_episode: np.ndarray
    """int32 ``[K]``: the episode (0..E_b - 1) of each chunk (padded chunks: the last)."""
    returns: np.ndarray
    """``[E_b]`` (config dtype): R_e, raw (unnormalised); 0 for padded episodes."""
    discounted_rewards: np.ndarray
    """``[K, C]`` (config dtype): ``gamma^l r_l`` of each cell; 0 on empty cells."""
    num_episodes: int
    """E, the complete episodes (the rest of ``returns`` is padding)."""
    num_steps: int
    """``sum_e T_e``: the ascent is a mean per step of the complete episodes."""
    horizon: int
    """The longest complete episode (``optimal_time``'s H before the memory)."""
    scale: float
    """The std of the batch's reward-to-go (``normalize_returns``), else 1."""
    num_valid: int
    """Valid steps of the batch."""

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(K, C, E_b)``: what XLA compiles for."""
        return (*self.mask.shape, self.returns.shape[0])


def episode_layout(batch: Batch, config, spec, one_chunk_per_episode: bool,
                   min_horizon: int = 0, chunk: int = CHUNK) -> EpisodeLayout:
    """``batch``'s complete episodes as a grid of chunks (module doc).

    Args:
      batch: one device's rollout batch.
      config, spec: the agent's (gamma, normalize_returns, dtype).
      one_chunk_per_episode: ``optimal_time``'s layout (each episode one chunk of
        ``C = bucket(max(longest episode, min_horizon))`` cells); else chunks of ``chunk``.
      min_horizon: the memory's horizon (``optimal_time``), that C covers too.

    Raises ``NoCompleteEpisodeError`` when the batch holds no complete episode.
    """
    r = cut_replica(batch, config, spec)
    lengths = r.lengths
    num_episodes = int(lengths.size)
    if num_episodes == 0:
        raise no_episode_error(config, [r], batch, ONE_DEVICE)
    horizon = int(lengths.max())
    time = r.segments.time[r.used]  # step of each used row within its episode
    if one_chunk_per_episode:
        width = row_buckets.bucket_size(max(horizon, int(min_horizon)))
        chunks_per_episode = np.ones(num_episodes, np.int64)
    else:
        width = int(chunk)
        chunks_per_episode = -(-lengths // width)
    first_chunk = np.concatenate([[0], np.cumsum(chunks_per_episode)[:-1]])
    num_chunks = int(chunks_per_episode.sum())
    padded_chunks = (row_buckets.bucket_size(num_episodes) if one_chunk_per_episode
                     else row_buckets.bucket_size(num_chunks))
    padded_episodes = row_buckets.bucket_size(num_episodes)

    cell = (first_chunk[r.episode] + time // width) * width + time % width
    rows = np.full(padded_chunks * width, r.used[0], np.int64)
    rows[cell] = r.used
    dtype = config.dtype
    mask = np.zeros(padded_chunks * width, dtype)
    mask[cell] = 1
    ar = np.zeros(padded_chunks * width, dtype)
    ar[cell] = r.segments.discounted_rewards[r.used]
    chunk_episode = np.full(padded_chunks, padded_episodes - 1, np.int32)
    chunk_episode[:num_chunks] = np.repeat(np.arange(num_episodes), chunks_per_episode)
    returns = np.zeros(padded_episodes, dtype)
    returns[:num_episodes] = r.returns
    num_valid = int(r.reward_to_go.size)
    scale = (return_scale([r], num_valid, float(np.sum(r.reward_to_go)), ONE_DEVICE)
             if config.normalize_returns else 1.0)
    # np.take: the same rows as fancy indexing, by a plain copy per row instead of the
    # general indexing path (docs/benchmarks.md section 6, the twentieth session).
    return EpisodeLayout(
        obs=np.take(r.inputs.obs, rows, axis=0), actions=np.take(r.inputs.actions, rows, axis=0),
        mask=mask.reshape(padded_chunks, width), chunk_episode=chunk_episode, returns=returns,
        discounted_rewards=ar.reshape(padded_chunks, width), num_episodes=num_episodes,
        num_steps=int(lengths.sum()), horizon=horizon, scale=scale, num_valid=num_valid)
