"""Checkpoints of a distributed run: one shard per worker, complete only when all are.

Layout under a run's ``checkpoints/``::

    worker_00000/update_00000040/   worker 0's shard of update 40 (the chief's)
      manifest.json                 as every pgtwin checkpoint: size + sha256 of each file
      agent/                        model and optimizer state (the chief only: the
      baseline_memory.npz           variables are mirrored, the same on every worker)
      replica_00000/env.pkl         each local replica's vector env (when it pickles)
      replica_00000/rollout.npz     ... and rollout state
      state.json                    each local replica's sampling generator, the run's
                                    counters and stopping window, the settings
    worker_00001/update_00000040/   worker 1's shard: its replicas' envs, rollouts, generators

Each shard is written atomically by ``pgtwin.train.checkpoints.write_checkpoint`` into its
worker's own root, and nothing is pruned until every worker has written its shard of the
update (a collective barrier): so the previous complete checkpoint exists on every worker
at every instant. On resume every worker verifies its own shards and the workers agree on
the newest update whose shard verified on all of them (:func:`agree`).
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Sequence

import numpy as np

from pgtwin_core.rollout import RolloutState
from pgtwin.train import checkpoints, run_checkpoint


def shard_root(root: str, worker: int) -> str:
    """Worker ``worker``'s checkpoint root under the run's ``checkpoints/`` dir ``root``."""
    return os.path.join(root, f"worker_{worker:05d}")


def replica_dir(shard: str, replica: int) -> str:
    """Where global replica ``replica``'s env and rollout state live in a shard."""
    return os.path.join(shard, f"replica_{replica:05d}")


def write_shard(root: str, worker: int, update: int, agent: Any | None,
                replicas: Sequence[tuple[int, Any, RolloutState, np.random.Generator]],
                env_bytes: Sequence[bytes | None], progress: run_checkpoint.Progress,
                settings: dict[str, Any]) -> checkpoints.Checkpoint:
    """Write worker ``worker``'s shard of update ``update``.

    Nothing is pruned here: ``checkpoints.prune`` runs once every worker's shard is written.

    Args:
      root: the run's ``checkpoints/`` dir.
      agent: the agent whose model and optimizer state the shard holds (the chief), or None.
      replicas: ``(global replica id, envs, rollout state, sampling generator)`` per local
        replica; ``env_bytes`` their env snapshots (None: the env cannot be pickled).
    """
    def fill(directory: str) -> None:
        if agent is not None:
            run_checkpoint.save_agent(directory, agent)
        for (rid, _, state, _), data in zip(replicas, env_bytes):
            run_checkpoint.save_rollout(replica_dir(directory, rid), state, data)
        doc = {"progress": progress.__dict__, "worker": worker,
               "rngs": {str(rid): rng.bit_generator.state for rid, _, _, rng in replicas},
               "env": "reseed" if any(b is None for b in env_bytes) else "snapshot",
               "settings": settings}
        with open(os.path.join(directory, "state.json"), "w") as f:
            json.dump(doc, f, indent=1)

    meta = {"worker": worker, "replica_ids": [rid for rid, *_ in replicas],
            "env_steps": progress.env_steps, "episodes": progress.episodes}
    return checkpoints.write_checkpoint(shard_root(root, worker), update, fill, meta, keep=None)


def usable_shards(root: str, worker: int) -> tuple[dict[int, checkpoints.Checkpoint],
                                                   list[tuple[str, str]], list[str]]:
    """Worker ``worker``'s shards: ``(verified by update, [(path, reason)] refused,
    unfinished writes removed)``."""
    mine = shard_root(root, worker)
    removed = checkpoints.clean_temporaries(mine)
    good, refused = {}, []
    for update, path in checkpoints.list_checkpoints(mine):
        try:
            good[update] = checkpoints.verify(path)
        except checkpoints.CheckpointError as err:
            refused.append((path, str(err)))
    return good, refused, removed


def agree(updates: set[int], gather: Callable[[int], Sequence[int]]) -> int | None:
    """The newest update in every worker's ``updates`` (None: no common one).

    Every worker calls this at once; ``gather(x)`` is a collective returning every
    worker's ``x``. Each round every worker proposes its newest update not above the
    smallest proposal so far; proposals only fall, and when all are equal that update
    verified everywhere.
    """
    proposal = max(updates, default=-1)
    while True:
        seen = list(gather(proposal))
        low = min(seen)
        if low == max(seen):
            return None if low < 0 else low
        proposal = max((u for u in updates if u <= low), default=-1)


def load_shard(path: str) -> dict[str, Any]:
    """``state.json`` of a (verified) shard."""
    return run_checkpoint.load_state(path)


def restore_replica(shard: str, doc: dict[str, Any], replica: int, fresh_envs: Any,
                    rng: np.random.Generator, env_steps: int, seed: int
                    ) -> tuple[Any, RolloutState]:
    """Global replica ``replica``'s ``(envs, state)`` from its worker's shard, ``rng`` in place.

    ``env_steps``: that replica's own env-step count; ``seed``: its base env seed (a
    reseeded resume resets its envs from it).
    """
    rng.bit_generator.state = doc["rngs"][str(replica)]
    progress = run_checkpoint.Progress(**doc["progress"])
    return run_checkpoint.restore_rollout(replica_dir(shard, replica), doc["env"], fresh_envs,
                                          env_steps, seed, progress.update)
