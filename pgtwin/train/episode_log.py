"""The CSV of finished episodes: one row per episode, in the order they finished.

Columns: ``episode`` (0-based, consecutive), ``update`` (the update whose rollout finished
it), ``env_steps`` (the run's env-step counter at the step it ended), ``env_index`` (which
of the N envs), ``return`` (undiscounted), ``length`` (steps) and ``wall_s`` (training
seconds at the end of that update). Floats are written with ``repr``, so reading the log
back gives the exact float64 returns.

A distributed run (``pgtwin.train.distributed_run``) writes one log for all workers, with a
``worker`` column before ``env_index`` (:data:`DISTRIBUTED_COLUMNS`), ``env_index`` being
the env's global index ``replica * num_envs + i``.

Resuming truncates the log to the episodes the checkpoint had counted, so episodes logged
after the checkpoint (and replayed by the resumed run) appear once.
"""
from __future__ import annotations

import csv
import os

import numpy as np

from pgtwin_core.rollout import Batch

COLUMNS = ("episode", "update", "env_steps", "env_index", "return", "length", "wall_s")
DISTRIBUTED_COLUMNS = ("episode", "update", "env_steps", "worker", "env_index", "return",
                       "length", "wall_s")
_INT_COLUMNS = {"episode", "update", "env_steps", "worker", "env_index", "length"}


def finished_episodes(batch: Batch, update: int, wall_s: float, first: int) -> list[tuple]:
    """Rows for the episodes that finished in ``batch``, numbered from ``first``.

    ``collect`` appends finished episodes step by step, and within a step by env index,
    which is the order ``np.nonzero`` gives for the time-major done mask, so the rows line
    up with ``batch.episode_returns``.
    """
    steps, envs = np.nonzero(batch.terminated | batch.truncated)
    if len(steps) != len(batch.episode_returns):
        raise ValueError(f"batch has {len(steps)} episode ends but "
                         f"{len(batch.episode_returns)} episode returns")
    n = batch.num_envs
    ends = batch.env_steps - (batch.num_steps - 1 - steps) * n
    return [(first + k, update, int(ends[k]), int(envs[k]), float(batch.episode_returns[k]),
             int(batch.episode_lengths[k]), round(float(wall_s), 4))
            for k in range(len(steps))]


class EpisodeLog:
    """Appends rows to ``path``.

    Args:
      path: the CSV file.
      keep: ``None`` starts a new log (overwriting ``path``); an int resumes one, keeping
        its first ``keep`` episodes and dropping the rest.
      columns: the header (:data:`COLUMNS`, or :data:`DISTRIBUTED_COLUMNS`).

    Raises:
      ValueError: resuming a log that is missing, has another header, or holds fewer than
        ``keep`` complete episodes.
    """

    def __init__(self, path: str, keep: int | None = None,
                 columns: tuple[str, ...] = COLUMNS):
        self.path = path
        if keep is None:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._file = open(path, "w", newline="")
            csv.writer(self._file, lineterminator="\n").writerow(columns)
            self.count = 0
        else:
            _truncate(path, keep, columns)
            self._file = open(path, "a", newline="")
            self.count = keep
        self._writer = csv.writer(self._file, lineterminator="\n")

    def append(self, rows: list[tuple]) -> None:
        """Write ``rows`` (from :func:`finished_episodes`) and flush them to the OS, so a
        reader (or a killed run's successor) sees every update's episodes."""
        self._writer.writerows(rows)
        self._file.flush()
        self.count += len(rows)

    def sync(self) -> None:
        """Flush to disk (before a checkpoint counts these rows)."""
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Flush and close; the file is closed even when the flush fails (which raises)."""
        if not self._file.closed:
            try:
                self.sync()
            finally:
                self._file.close()


def _truncate(path: str, keep: int, columns: tuple[str, ...] = COLUMNS) -> None:
    """Rewrite ``path`` with its header and first ``keep`` rows (atomically)."""
    if not os.path.isfile(path):
        raise ValueError(f"episode log {path} is missing; the checkpoint counted {keep} "
                         "episodes in it")
    with open(path, newline="") as f:
        lines = f.read().split("\n")
    if not lines or tuple(lines[0].split(",")) != columns:
        raise ValueError(f"episode log {path} does not start with the header {','.join(columns)}")
    # A row cut short by a kill has fewer fields; only complete rows count.
    rows = [line for line in lines[1:] if line.count(",") == len(columns) - 1]
    if len(rows) < keep:
        raise ValueError(f"episode log {path} holds {len(rows)} complete episodes but the "
                         f"checkpoint counted {keep}")
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        f.write("\n".join([lines[0], *rows[:keep]]) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_episodes(path: str) -> dict[str, np.ndarray]:
    """The log as columns: int64 arrays, and float64 for ``return`` and ``wall_s``
    (a distributed run's log has the ``worker`` column too)."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = tuple(next(reader))
        if header not in (COLUMNS, DISTRIBUTED_COLUMNS):
            raise ValueError(f"episode log {path} has header {header}, expected {COLUMNS} "
                             f"or {DISTRIBUTED_COLUMNS}")
        rows = [r for r in reader if len(r) == len(header)]
    cols = list(zip(*rows)) if rows else [()] * len(header)
    return {name: np.asarray(col, dtype=np.int64 if name in _INT_COLUMNS else np.float64)
            for name, col in zip(header, cols)}
