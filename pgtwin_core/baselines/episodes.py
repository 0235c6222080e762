"""A rollout batch cut into episodes: the segments of consecutive valid steps of each env.

Flat index ``i = t * N + n`` (time-major), as in ``pgtwin_core.advantages``. The episodic
baselines use only *complete* episodes, whose first and last steps are both in the batch (an
episode cut at the start lacks the scores of its earlier steps, one cut at the end its later
rewards; either would bias ``g_e R_e``; docs/baselines.md, Decisions). Whether a segment
starting at ``t = 0`` is a whole episode is read off ``batch.episode_lengths`` (the rollout
counts every episode from its real first step).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pgtwin_core.returns import discounted_returns
from pgtwin_core.rollout import Batch


@dataclass(frozen=True)
class Segments:
    """The runs of consecutive valid steps of each env in a batch, numbered env by env.

    ``B = T * N``, flat time-major; ``S`` segments. A segment is a whole episode, or the part
    of one that the batch edges cut.
    """

    ids: np.ndarray
    """int64 ``[B]``: segment of each step; -1 on autoreset steps (which belong to none)."""
    time: np.ndarray
    """int64 ``[B]``: l, steps since the segment's first step; -1 on autoreset steps."""
    lengths: np.ndarray
    """int64 ``[S]``: steps in each segment."""
    complete: np.ndarray
    """bool ``[S]``: the segment is a whole episode (first and last step in the batch)."""
    returns: np.ndarray
    """float64 ``[S]``: the reward-to-go at the segment's first step (``sum_l gamma^l r_l``
    over its steps: the discounted episode return for a complete one)."""
    discounted_rewards: np.ndarray
    """float64 ``[B]``: ``a_l r_l = gamma^l r_l``; 0 on autoreset steps."""

    @property
    def num_episodes(self) -> int:
        """E, the number of complete episodes."""
        return int(self.complete.sum())

    def episode_ids(self) -> np.ndarray:
        """int64 ``[B]``: index (0..E-1, in segment order) of each step's complete episode, else -1."""
        index = np.where(self.complete, np.cumsum(self.complete) - 1, -1)
        return np.where(self.ids >= 0, index[np.maximum(self.ids, 0)], -1)

    def episode_order(self) -> np.ndarray:
        """int64 ``[M]``: the flat indices of the complete episodes' steps, episode after
        episode, each in time order (the row order the episodic formulas expect).

        Segments are numbered env by env in time order, so sorting the complete episodes'
        steps by segment sorts them by episode; the sort is stable, which keeps each
        episode's steps in flat (time-major) order, its time order."""
        # An autoreset step's id of -1 reads the last segment's flag; `ids >= 0` masks it.
        used = np.flatnonzero(self.complete[self.ids] & (self.ids >= 0))
        return used[np.argsort(self.ids[used], kind="stable")]


def segments(batch: Batch, gamma: float, reward_to_go: np.ndarray | None = None) -> Segments:
    """Cut ``batch`` into segments and mark the complete episodes (module doc).

    Args:
      batch: the rollout batch ``[T, N]``.
      gamma: the discount of ``Segments.returns`` and ``discounted_rewards``.
      reward_to_go: float64 ``[T, N]``, ``discounted_returns`` of the batch if the caller
        has it already (the episodic estimator computes it once per batch); computed here
        from the valid steps if None. On a complete episode's steps both are the same bits:
        nothing outside the episode reaches its reward-to-go.

    Raises ``ValueError`` if ``batch.episode_lengths`` does not list one length per episode
    end in the batch, in rollout order, or disagrees with a segment started inside the batch.
    An empty ``episode_lengths`` (a hand-made batch) counts only the segments started inside
    the batch as whole episodes.
    """
    valid = np.asarray(batch.valid, bool)
    num_steps, num_envs = valid.shape
    if not valid.any():
        raise ValueError(f"batch has no valid step (T={num_steps}, N={num_envs}): no episode")
    ended = (np.asarray(batch.terminated, bool) | np.asarray(batch.truncated, bool)) & valid
    after_boundary = np.zeros_like(valid)
    after_boundary[1:] = ended[:-1] | ~valid[:-1]
    starts = valid & after_boundary
    starts[0] |= valid[0]
    # Env-major order makes every segment a contiguous run, numbered by a cumulative sum.
    starts_em, valid_em = starts.T.reshape(-1), valid.T.reshape(-1)
    first = np.flatnonzero(starts_em)
    ids_em = np.where(valid_em, np.cumsum(starts_em) - 1, -1)
    time_em = np.where(valid_em, np.arange(valid_em.size) - first[np.maximum(ids_em, 0)], -1)
    lengths = np.bincount(ids_em[valid_em], minlength=first.size).astype(np.int64)

    complete = _complete(batch, ended, first, ids_em, lengths)

    to_tm = lambda a: a.reshape(num_envs, num_steps).T.reshape(-1)  # noqa: E731
    rewards = np.where(valid, np.asarray(batch.rewards, np.float64), 0.0)
    if reward_to_go is None:
        reward_to_go = discounted_returns(rewards, batch.terminated & valid,
                                          batch.truncated & valid, gamma)
    time = to_tm(time_em)
    # gamma^l from a table of the T powers (the same ``power`` on the same operands as
    # ``gamma ** time``, once per step index instead of once per step); an autoreset
    # step's reward is 0 already, so its time of -1 may read gamma^0.
    powers = np.power(float(gamma), np.arange(num_steps, dtype=np.float64))
    return Segments(
        ids=to_tm(ids_em), time=time, lengths=lengths, complete=complete,
        returns=np.asarray(reward_to_go).T.reshape(-1)[first],
        discounted_rewards=powers[np.maximum(time, 0)] * rewards.reshape(-1),
    )


def _complete(batch: Batch, ended: np.ndarray, first: np.ndarray, ids_em: np.ndarray,
              lengths: np.ndarray) -> np.ndarray:
    """bool ``[S]``: the segments that are whole episodes. An episode end in the batch (in
    rollout order: t, then env) is matched to ``batch.episode_lengths``; a segment started
    inside the batch is whole by construction, one from t = 0 if its recorded length fits.

    Args: ``ended`` bool ``[T, N]`` (valid steps that end an episode); ``first`` int64 ``[S]``
    (env-major index of each segment's first step); ``ids_em`` int64 ``[N * T]`` (segment of
    each env-major step); ``lengths`` int64 ``[S]``.
    """
    num_steps, num_envs = ended.shape
    end_steps = np.flatnonzero(ended.reshape(-1))
    recorded = np.asarray(batch.episode_lengths, np.int64)
    if recorded.size == 0:
        # A hand-made batch that records no lengths: a segment from t = 0 may have begun
        # before the batch, so only segments started inside it count as whole episodes.
        recorded = np.full(end_steps.shape, -1, np.int64)
    elif recorded.shape != end_steps.shape:
        raise ValueError(
            f"batch.episode_lengths has {recorded.size} entries but the batch ends "
            f"{end_steps.size} episodes (terminated | truncated on valid steps)")
    to_em = lambda i: (i % num_envs) * num_steps + i // num_envs  # noqa: E731
    ended_ids = ids_em[to_em(end_steps)]
    inside = (first[ended_ids] % num_steps) > 0  # started after a boundary in the batch
    bad = inside & (lengths[ended_ids] != recorded) & (recorded >= 0)
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(
            f"batch.episode_lengths[{k}] = {recorded[k]} but the episode of env "
            f"{end_steps[k] % num_envs} ending at step {end_steps[k] // num_envs} has "
            f"{lengths[ended_ids[k]]} steps in the batch")
    complete = np.zeros(first.size, bool)
    complete[ended_ids] = inside | (lengths[ended_ids] == recorded)
    return complete
