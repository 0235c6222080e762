"""Training the eager twin under ``tf.distribute``: one process per machine, one replica per device.

    strategy = make_strategy("mirrored", cpu_replicas=2)        # or "multi-worker" (TF_CONFIG)
    result = train_distributed("CartPole-v1", strategy, updates=50, seed=0)

Each replica owns ``config.num_envs`` envs and its own action-sampling generator. Env j of
the global run (replica ``r = j // num_envs``) is seeded ``seed + j``, so the replicas'
envs together replay one ``make_vec_env(env_id, R * num_envs, seed)`` in the sync and
async modes, and no two replicas see the same episodes. The loop reads as
``pgtwin_core.loop``: collect (per local replica) -> update (all-reduced) -> log.

Run as a module for one worker of a multi-worker job (see docs/scaling.md)::

    TF_CONFIG='{"cluster": {"worker": ["host0:12345", "host1:12345"]},
                "task": {"type": "worker", "index": 0}}' \\
    python -m pgtwin.train.distributed --strategy multi-worker --env CartPole-v1
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from pgtwin_core.config import DTYPES, OPTIMIZERS, ReinforceConfig
from pgtwin_core.envs import make_vec_env
from pgtwin_core.parallel_rollout import COLLECTIONS, ReplicaCollector
from pgtwin_core.rollout import Batch, RolloutState
from pgtwin_core.specs import spec_for_env
from pgtwin.train.settings import RunSettings, WORKER_OVERRIDES, worker_config

STRATEGIES = ("mirrored", "multi-worker")


def make_strategy(name: str, cpu_replicas: int | None = None, devices: Sequence[str] | None = None,
                  worker_timeout: float | None = None):
    """A ``tf.distribute`` strategy by name.

    Args:
      name: ``mirrored`` (the devices of this process) or ``multi-worker``
        (``MultiWorkerMirroredStrategy`` over the processes listed in ``TF_CONFIG``).
      cpu_replicas: split this process's CPU into that many logical devices, one replica
        each (for machines without accelerators, and for tests). Must run before anything
        else initialises TensorFlow's devices.
      devices: explicit device names for ``mirrored`` (default: every GPU, else the CPU).
      worker_timeout: ``multi-worker`` only: seconds after which a lost or stuck peer ends
        this worker's collectives (``pgtwin.train.worker_health``); None: TF's defaults.

    Raises:
      ValueError: unknown ``name``, a bad ``cpu_replicas``, ``multi-worker`` without a
        valid ``TF_CONFIG``, or devices already initialised when ``cpu_replicas`` is set.
    """
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}: choose one of {STRATEGIES}")
    if cpu_replicas is not None and (isinstance(cpu_replicas, bool)
                                     or int(cpu_replicas) != cpu_replicas or cpu_replicas < 1):
        raise ValueError(f"cpu_replicas must be an integer >= 1, got {cpu_replicas!r}")
    if name == "multi-worker":
        check_tf_config(os.environ.get("TF_CONFIG"))
    import tensorflow as tf

    if cpu_replicas is not None:
        cpu = tf.config.list_physical_devices("CPU")[0]
        try:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * int(cpu_replicas))
        except RuntimeError as err:
            raise ValueError(
                f"cpu_replicas={cpu_replicas}: TensorFlow's devices are already initialised "
                f"in this process ({err}); create the strategy before any other TF work"
            ) from err
        if name == "mirrored" and devices is None:
            devices = [f"/cpu:{i}" for i in range(int(cpu_replicas))]
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices)
    if worker_timeout is None:
        return tf.distribute.MultiWorkerMirroredStrategy()
    from pgtwin.train import worker_health

    worker_health.configure(worker_timeout)
    return tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=worker_health.communication_options(worker_timeout))


def check_tf_config(raw: str | None) -> dict[str, Any]:
    """Parse ``TF_CONFIG`` for a multi-worker run; ValueError saying what is wrong with it."""
    if not raw:
        raise ValueError(
            "strategy 'multi-worker' needs the TF_CONFIG environment variable, e.g. "
            '{"cluster": {"worker": ["host0:12345", "host1:12345"]}, '
            '"task": {"type": "worker", "index": 0}}'
        )
    try:
        tf_config = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(f"TF_CONFIG is not valid JSON ({err}): {raw!r}") from err
    workers = tf_config.get("cluster", {}).get("worker")
    task = tf_config.get("task", {})
    if not isinstance(workers, list) or not workers:
        raise ValueError(f"TF_CONFIG has no cluster.worker list: {raw!r}")
    index = task.get("index")
    if task.get("type") not in ("worker", "chief") or not isinstance(index, int) \
            or not 0 <= index < len(workers) + (task.get("type") == "chief"):
        raise ValueError(
            f"TF_CONFIG task must be {{'type': 'worker', 'index': 0..{len(workers) - 1}}}, "
            f"got {task!r}"
        )
    return tf_config


def replica_env_seed(seed: int, replica_id: int, num_envs: int) -> int:
    """Base env seed of global replica ``replica_id``: its env i is seeded ``seed + replica_id * num_envs + i``."""
    return seed + replica_id * num_envs


def replica_rng(seed: int, replica_id: int) -> np.random.Generator:
    """The action-sampling generator of global replica ``replica_id`` (independent streams)."""
    return np.random.default_rng([seed, replica_id])


def concat_batches(batches: Sequence[Batch]) -> Batch:
    """The batches of several replicas (same T) as one batch over all their envs.

    Envs are concatenated in order (``[T, N_0 + N_1 + ...]``); finished episodes are listed
    in rollout order (step, then env). This is the global batch a distributed update is
    equivalent to.
    """
    batches = list(batches)
    if not batches:
        raise ValueError("concat_batches: no batches given")
    steps = {b.num_steps for b in batches}
    if len(steps) != 1:
        raise ValueError(f"concat_batches: batches have different lengths T {sorted(steps)}")
    on_envs = lambda name: np.concatenate([getattr(b, name) for b in batches], axis=1)  # noqa: E731
    # Finished episodes are listed in rollout order, step t then env (what
    # pgtwin_core.baselines.segments matches them against), so replicas' lists interleave.
    keys, offset, total = [], 0, sum(b.num_envs for b in batches)
    for b in batches:
        ends = np.flatnonzero(((b.terminated | b.truncated) & b.valid).reshape(-1))
        keys.append(ends // b.num_envs * total + offset + ends % b.num_envs)
        offset += b.num_envs
    keys = np.concatenate(keys)
    lengths = np.concatenate([b.episode_lengths for b in batches])
    order = (np.argsort(keys, kind="stable") if keys.size == lengths.size
             else np.arange(lengths.size))  # a hand-made batch may list no episodes
    return Batch(
        obs=on_envs("obs"), actions=on_envs("actions"), rewards=on_envs("rewards"),
        terminated=on_envs("terminated"), truncated=on_envs("truncated"),
        log_probs=on_envs("log_probs"), valid=on_envs("valid"),
        next_obs=np.concatenate([b.next_obs for b in batches], axis=0),
        episode_returns=np.concatenate([b.episode_returns for b in batches])[order],
        episode_lengths=lengths[order],
        params=None if any(b.params is None for b in batches) else on_envs("params"),
        env_steps=sum(b.env_steps for b in batches),
    )


@dataclass(frozen=True)
class DistributedIteration:
    """What one pass of the distributed loop produced in this process."""

    update: int
    """1-based count of updates done, this one included."""
    batches: list[Batch]
    """This process's batches, one per local replica."""
    metrics: dict[str, Any]
    """The update's metrics (global: the same on every worker)."""
    states: list[RolloutState]
    """The local replicas' rollout states after the batches."""
    wall_s: float
    """Seconds since the loop started."""

    @property
    def local_env_steps(self) -> int:
        """Env steps taken so far by this process's replicas."""
        return sum(s.env_steps for s in self.states)


def iterate_distributed_training(
    agent, envs: Sequence, rngs: Sequence[np.random.Generator],
    states: Sequence[RolloutState | None] | None = None, start_update: int = 0,
    collector: ReplicaCollector | None = None,
) -> Iterator[DistributedIteration]:
    """Yield one :class:`DistributedIteration` per update, forever.

    Args:
      agent: an ``eager.distributed.DistributedReinforceAgent``.
      envs, rngs: one vector env and one generator per local replica (``agent.replica_ids``).
      states: rollout states to continue from (None: reset the envs).
      start_update: updates already done (a resumed run's count).
      collector: how the local replicas collect (default: in parallel threads over
        ``envs``); the caller closes it.
    """
    states = list(states) if states is not None else [None] * len(envs)
    if not len(envs) == len(rngs) == len(states) == len(agent.replica_ids):
        raise ValueError(
            f"need one env, rng and state per local replica ({len(agent.replica_ids)}), got "
            f"{len(envs)} envs, {len(rngs)} rngs, {len(states)} states"
        )
    own = collector is None
    collector = ReplicaCollector(envs) if own else collector
    start = time.perf_counter()
    update = start_update
    try:
        while True:
            batches, states = collector.collect(agent.rollout_policy(), agent.spec,  # collect
                                                agent.config.num_steps, rngs, states)
            metrics = agent.update(batches)                              # all-reduced update
            update += 1
            yield DistributedIteration(update, batches, metrics, list(states),
                                       time.perf_counter() - start)      # log
    finally:
        if own:
            collector.close()


@dataclass
class DistributedResult:
    """The outcome of :func:`train_distributed` in this process."""

    agent: Any
    """The trained ``DistributedReinforceAgent``."""
    updates: int
    """Updates done."""
    num_replicas: int
    """Replicas over all workers."""
    replica_ids: tuple[int, ...]
    """Global ids of this process's replicas."""
    local_env_steps: int
    """Env steps taken by this process's replicas."""
    wall_s: float
    """Seconds spent in the loop."""
    metrics: list[dict[str, Any]] = field(default_factory=list)
    """Each update's metrics."""
    episode_returns: list[float] = field(default_factory=list)
    """Undiscounted returns of the episodes this process's replicas finished."""

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary (no arrays)."""
        recent = self.episode_returns[-100:]
        return {
            "updates": self.updates, "num_replicas": self.num_replicas,
            "replica_ids": list(self.replica_ids), "local_env_steps": self.local_env_steps,
            "wall_s": round(self.wall_s, 3),
            "local_env_steps_per_s": round(self.local_env_steps / max(self.wall_s, 1e-9), 1),
            "local_episodes": len(self.episode_returns),
            "recent_mean_return": float(np.mean(recent)) if recent else None,
            "last_loss": self.metrics[-1]["loss"] if self.metrics else None,
        }


_TABLE = RunSettings(env_id="", impl="eager", config=ReinforceConfig(), logdir="")
"""The settings table's defaults (``pgtwin.train.settings``), read by ``train_distributed``."""


def train_distributed(
    env_id: str, strategy, updates: int, seed: int = 0,
    config: ReinforceConfig = ReinforceConfig(), torso: str = _TABLE.torso,
    hidden: tuple[int, ...] = _TABLE.hidden, history: int = _TABLE.history,
    vectorization: str = "auto",
    weights: dict[str, np.ndarray] | None = None, collection: str = "parallel",
) -> DistributedResult:
    """Train the eager twin for ``updates`` updates under ``strategy`` (see the module doc).

    Every worker of a multi-worker job calls this with the same arguments. The global batch
    per update is ``num_replicas * config.num_envs * config.num_steps`` steps.
    ``collection``: the local replicas collect in a thread each (``parallel``) or one
    after another (``sequential``); the batches are the same.
    """
    from eager.distributed import DistributedReinforceAgent

    if isinstance(updates, bool) or int(updates) != updates or updates < 1:
        raise ValueError(f"updates must be an integer >= 1, got updates={updates!r}")
    probe = make_vec_env(env_id, 1, seed=seed, history=history, vectorization="sync")
    spec = spec_for_env(probe, torso=torso, hidden=hidden)
    probe.close()
    agent = DistributedReinforceAgent(spec, config, weights=weights, seed=seed, strategy=strategy)
    envs = [make_vec_env(env_id, config.num_envs, replica_env_seed(seed, r, config.num_envs),
                         history=history, vectorization=vectorization)
            for r in agent.replica_ids]
    rngs = [replica_rng(seed, r) for r in agent.replica_ids]
    result = DistributedResult(agent, 0, agent.num_replicas, agent.replica_ids, 0, 0.0)
    collector = ReplicaCollector(envs, collection)
    try:
        for it in iterate_distributed_training(agent, envs, rngs, collector=collector):
            result.updates, result.wall_s = it.update, it.wall_s
            result.local_env_steps = it.local_env_steps
            result.metrics.append(it.metrics)
            for batch in it.batches:
                result.episode_returns.extend(batch.episode_returns.tolist())
            if it.update >= updates:
                break
    finally:
        collector.close()
        for env in envs:
            env.close()
    return result


def main(argv: list[str] | None = None) -> int:
    """One process (worker) of a distributed run; prints a JSON summary as the last line."""
    parser = argparse.ArgumentParser(
        prog="python -m pgtwin.train.distributed",
        description="Train the eager twin under tf.distribute (one call per worker).")
    parser.add_argument("--strategy", choices=STRATEGIES, default="mirrored")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-envs", type=int, default=None,
                        help=f"envs per replica (default {WORKER_OVERRIDES['num_envs']})")
    parser.add_argument("--num-steps", type=int, default=None,
                        help=f"rollout length T (default {WORKER_OVERRIDES['num_steps']})")
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default=None)
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--dtype", choices=DTYPES, default=None)
    parser.add_argument("--cpu-replicas", type=int, default=None,
                        help="split this process's CPU into N logical devices (one replica each)")
    parser.add_argument("--vectorization", choices=("auto", "vector", "sync", "async"),
                        default="auto")
    parser.add_argument("--collection", choices=COLLECTIONS, default="parallel",
                        help="local replicas collect in a thread each, or one after another")
    parser.add_argument("--save-weights", default=None, metavar="NPZ",
                        help="write the final weights (by canonical name) to this .npz")
    args = parser.parse_args(argv)
    try:
        config = worker_config({k: v for k, v in (
            ("num_envs", args.num_envs), ("num_steps", args.num_steps),
            ("learning_rate", args.learning_rate), ("optimizer", args.optimizer),
            ("baseline", args.baseline), ("dtype", args.dtype)) if v is not None})
        strategy = make_strategy(args.strategy, cpu_replicas=args.cpu_replicas)
        result = train_distributed(args.env, strategy, args.updates, seed=args.seed,
                                   config=config, vectorization=args.vectorization,
                                   collection=args.collection)
    except ValueError as err:
        parser.error(str(err))
    if args.save_weights:
        np.savez(args.save_weights, **result.agent.get_weights())
    print(json.dumps({"env": args.env, "strategy": args.strategy, **result.summary()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
