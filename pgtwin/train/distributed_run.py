"""A training run under ``tf.distribute``: the single-process run's files, sharded checkpoints,
``--resume``, and a bounded exit when a worker is lost.

It reads as ``pgtwin.train.run``, whose pieces it reuses (settings, ``run.json``,
``episodes.csv``, TensorBoard scalars, the final ``weights.npz`` and learning curve, the
checkpoint files of an agent and of a rollout): collect (every local replica, in parallel)
-> all-reduced update -> gather every replica's finished episodes -> log (the chief) ->
stop? -> checkpoint (every worker its shard, ``pgtwin.train.checkpoint_shards``).

Files under ``settings.logdir``, which every worker must see (a shared filesystem, as
TensorFlow's ``BackupAndRestore`` assumes)::

    run.json, episodes.csv, tb/, learning_curve.png, weights.npz   the chief (worker 0) only
    cluster.json                      strategy, workers and replicas (a resume must match)
    checkpoints/worker_K/update_N/    worker K's shard of checkpoint N

``episodes.csv`` has a ``worker`` column; ``env_index`` is the global env index
``replica * num_envs + i`` and ``env_steps`` the global counter, so the rows are those a
single process stepping all ``R * num_envs`` envs would log (same order, same numbers).

Every decision that could differ between workers (refusing to start, which checkpoint
to resume, when to stop) is taken from values every worker holds (gathered by a
collective), so all workers enter the same collectives and leave together.
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from pgtwin_core.envs import make_vec_env
from pgtwin_core.errors import EnvStepError
from pgtwin_core.loop import skip_reason
from pgtwin_core.parallel_rollout import ReplicaCollector
from pgtwin_core.specs import spec_for_env
from pgtwin.train import checkpoint_shards, checkpoints, env_snapshot, run_checkpoint, worker_health
from pgtwin.train.distributed import (
    iterate_distributed_training, replica_env_seed, replica_rng,
)
from pgtwin.train.episode_log import DISTRIBUTED_COLUMNS, EpisodeLog
from pgtwin.train.resume_command import resume_command
from pgtwin.train.run_lock import RunLock, RunLockError
from pgtwin.train.skipped_updates import first_skip_message, stall_message
from pgtwin.train.run import (
    RunResult, RunSettings, TrainingError, check_same_settings, import_env_module,
    reward_threshold, run_paths, write_final_files, write_settings,
)

CLUSTER = "cluster.json"


@dataclass(frozen=True)
class ClusterShape:
    """What a distributed run's checkpoints are cut to: a resume needs the same."""

    strategy: str
    """``mirrored`` or ``multi-worker``."""
    num_workers: int
    """Processes (one per host, usually)."""
    num_replicas: int
    """Replicas over all workers (each owns ``num_envs`` envs)."""
    cpu_replicas: int | None = None
    """Logical CPU devices per worker (``--cpu-replicas``); None: the real devices."""

    def __str__(self) -> str:
        """As the command line says it: ``--strategy mirrored --cpu-replicas 2 (1 worker, 2
        replicas)``."""
        cpu = "" if self.cpu_replicas is None else f" --cpu-replicas {self.cpu_replicas}"
        return (f"--strategy {self.strategy}{cpu} ({self.num_workers} worker"
                f"{'s' if self.num_workers != 1 else ''}, {self.num_replicas} replica"
                f"{'s' if self.num_replicas != 1 else ''})")


def cluster_path(logdir: str) -> str:
    """Where a distributed run records its :class:`ClusterShape`."""
    return os.path.join(logdir, CLUSTER)


def is_distributed_run(logdir: str) -> bool:
    """Whether ``logdir`` holds a run trained under a strategy."""
    return os.path.isfile(cluster_path(logdir))


def read_cluster(logdir: str) -> ClusterShape:
    """The :class:`ClusterShape` a distributed run in ``logdir`` was started with."""
    with open(cluster_path(logdir)) as f:
        return ClusterShape(**json.load(f))


def cluster_resume_command(settings: RunSettings, shape: ClusterShape) -> str:
    """The command that resumes the run (on every worker, each with its ``TF_CONFIG``)."""
    command = resume_command(settings.logdir, settings.env_module)
    if shape.num_workers > 1:
        return f"restart all {shape.num_workers} workers, each with its TF_CONFIG: {command}"
    return command


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def train_under_strategy(settings: RunSettings, strategy, strategy_name: str,
                         resume: bool = False, collection: str = "parallel",
                         cpu_replicas: int | None = None,
                         say: Callable[[str], None] = _stderr) -> RunResult:
    """Run (or continue) a training run of the eager twin under ``strategy``.

    Every worker calls this with the same settings. ``settings.config.num_envs`` is per
    replica; the global batch is ``num_replicas * num_envs * num_steps`` steps.
    ``cpu_replicas``: what ``strategy`` was made with (recorded, so a resume matches).

    Raises:
      TrainingError: as ``pgtwin.train.run.train`` (no checkpoint to resume, a logdir
        already holding a run, changed settings), or a cluster unlike the checkpointed one.
      worker_health.WorkerLostError: a peer died or stopped answering mid-run.
    """
    import tensorflow as tf

    from eager.distributed import DistributedReinforceAgent

    if settings.env_module:
        import_env_module(settings.env_module)
    if settings.deterministic:
        tf.config.experimental.enable_op_determinism()
    config = settings.config
    probe = make_vec_env(settings.env_id, 1, settings.seed, settings.history,
                         vectorization="sync")
    spec = spec_for_env(probe, settings.torso, settings.hidden)
    probe.close()
    agent = DistributedReinforceAgent(spec, config, seed=settings.seed, strategy=strategy)
    envs = [make_vec_env(settings.env_id, config.num_envs,
                         replica_env_seed(settings.seed, r, config.num_envs), settings.history)
            for r in agent.replica_ids]
    run = _DistributedRun(settings, strategy_name, cpu_replicas, agent, envs, say)
    lock = None
    try:
        if run.chief:  # one writer per run directory, as for a single-process run
            os.makedirs(settings.logdir, exist_ok=True)
            try:
                lock = RunLock(settings.logdir).acquire()
            except RunLockError as err:
                raise TrainingError(str(err)) from err
        if resume:
            run.resume()
        else:
            run.start()
        return run.loop(ReplicaCollector(run.envs, collection))
    finally:
        run.close()
        if lock is not None:
            lock.release()


def episode_rows(blocks: Sequence[np.ndarray], workers: Sequence[int], update: int,
                 num_envs: int, num_steps: int, wall_s: float, first: int) -> list[tuple]:
    """``episodes.csv`` rows (:data:`DISTRIBUTED_COLUMNS`) of one update, from every replica.

    Args:
      blocks: per global replica r, float64 ``[E_r, 4]``: rollout step t, local env i,
        return and length of each episode it finished (``_finished``).
      workers: the worker of each replica.
      update: the 1-based update; ``first``: the number of episodes logged before it.

    The global env index is ``r * num_envs + i`` and the env-step counter at the end of
    step t is ``((update - 1) * T + t + 1) * R * num_envs``; rows are ordered by step, then
    global env, as ``pgtwin.train.episode_log.finished_episodes`` orders one process's envs.
    """
    width = len(blocks) * num_envs
    rows = [(int(t), r * num_envs + int(i), ret, int(length), workers[r])
            for r, block in enumerate(blocks) for t, i, ret, length in block]
    rows.sort(key=lambda row: (row[0], row[1]))
    return [(first + k, update, ((update - 1) * num_steps + t + 1) * width, worker, env,
             float(ret), length, round(float(wall_s), 4))
            for k, (t, env, ret, length, worker) in enumerate(rows)]


def _finished(batch) -> np.ndarray:
    """float64 ``[E, 4]`` (step, env, return, length) of the episodes ``batch`` finished, in
    ``collect``'s order (step, then env)."""
    steps, envs = np.nonzero(batch.terminated | batch.truncated)
    if len(steps) != len(batch.episode_returns):
        raise ValueError(f"batch has {len(steps)} episode ends but "
                         f"{len(batch.episode_returns)} episode returns")
    return np.stack([steps, envs, batch.episode_returns, batch.episode_lengths],
                    axis=1).astype(np.float64).reshape(-1, 4)


class _DistributedRun:
    """One worker's segment of a distributed run (what :func:`train_under_strategy` threads
    through the loop)."""

    def __init__(self, settings: RunSettings, strategy_name: str, cpu_replicas: int | None,
                 agent, envs: list, say):
        self.settings, self.agent, self.envs, self.say = settings, agent, envs, say
        self.paths = run_paths(settings.logdir)
        per_worker = len(agent.replica_ids)
        self.worker = agent.replica_ids[0] // per_worker
        self.chief = self.worker == 0
        self.shape = ClusterShape(strategy_name, agent.num_replicas // per_worker,
                                  agent.num_replicas, cpu_replicas)
        self.workers = [r // per_worker for r in range(agent.num_replicas)]
        self.rngs = [replica_rng(settings.seed, r) for r in agent.replica_ids]
        self.states: list = [None] * len(envs)
        self.progress = run_checkpoint.Progress()
        self.recent = collections.deque(maxlen=settings.solve_window)
        self.threshold = reward_threshold(settings.env_id)
        self.log: EpisodeLog | None = None
        self.writer = None
        self.last_checkpoint: int | None = None
        """The newest update whose shards every worker has written (after the barrier)."""
        self.pending_checkpoint: int | None = None
        """An update whose shard this worker wrote, before the barrier confirmed the others."""
        self.resumed_from: str | None = None
        self.snapshotable = self._check_snapshot()

    def _check_snapshot(self) -> bool:
        return env_snapshot.snapshot_problem(self.envs, self.settings.deterministic) is None

    # ------------------------------------------------------------------ collectives
    def _gather(self, value: float) -> list[float]:
        """Every worker's ``value`` (one collective), by worker."""
        from eager import collectives

        slots = collectives.by_replica(self.agent.strategy, self.agent.replica_ids,
                                       [value] * len(self.agent.replica_ids))
        per_worker = len(self.agent.replica_ids)
        return [float(slots[w * per_worker]) for w in range(self.shape.num_workers)]

    def _all_ready(self, problem: str | None) -> None:
        """Raise on every worker if any worker has a ``problem`` (its own message here, the
        others name it): a worker that stopped alone would leave the others waiting."""
        failed = [w for w, bad in enumerate(self._gather(problem is not None)) if bad]
        if problem is not None:
            raise TrainingError(problem)
        if failed:
            raise TrainingError(f"worker(s) {failed} of {self.shape.num_workers} refused to "
                                "go on (their stderr says why); this worker stops too")

    # ------------------------------------------------------------------ start / resume
    def start(self) -> None:
        problem = None
        if (os.path.exists(self.paths["settings"])
                or os.path.exists(cluster_path(self.settings.logdir))):
            problem = (f"{self.settings.logdir} already holds a run: pass --resume to "
                       "continue it, or choose another --logdir")
        self._all_ready(problem)
        if self.chief:
            write_settings(self.paths, self.settings)
            _write_json(cluster_path(self.settings.logdir), asdict(self.shape))
            self.log = EpisodeLog(self.paths["episodes"], columns=DISTRIBUTED_COLUMNS)

    def resume(self) -> None:
        root, logdir = self.paths["checkpoints"], self.settings.logdir
        good, problem = {}, None
        try:
            saved = read_cluster(logdir)
            if saved != self.shape:
                problem = (f"cannot resume {logdir}: it was trained as {saved}, this cluster "
                           f"is {self.shape}; restart it with the same strategy, workers and "
                           f"replicas per worker ({cluster_path(logdir)})")
            else:
                good, refused, removed = checkpoint_shards.usable_shards(root, self.worker)
                for path in removed:
                    self.say(f"worker {self.worker}: removed the unfinished checkpoint write {path}")
                for path, reason in refused:
                    self.say(f"worker {self.worker}: refusing {reason}; moved it to "
                             f"{checkpoints.set_aside(path)}")
        except (OSError, ValueError, TypeError) as err:
            problem = f"cannot resume {logdir}: {cluster_path(logdir)}: {err}"
        self._all_ready(problem)
        update = checkpoint_shards.agree(set(good), lambda x: [int(v) for v in self._gather(x)])
        if update is None:
            raise TrainingError(
                f"no checkpoint in {root} is complete on all {self.shape.num_workers} "
                f"worker(s) (worker {self.worker} has {sorted(good) or 'none'})")
        for newer in sorted(u for u in good if u > update):
            # Written here but not by every worker before the failure: the resumed run
            # writes that update again.
            shutil.rmtree(good[newer].path)
            self.say(f"worker {self.worker}: removed {good[newer].path}, which is not "
                     "complete on every worker")
        mine = good[update]
        chief_shard = checkpoints.checkpoint_path(checkpoint_shards.shard_root(root, 0), update)
        problem = None
        try:
            doc = checkpoint_shards.load_shard(mine.path)
            check_same_settings(mine.path, doc["settings"], self.settings)
        except TrainingError as err:
            problem = str(err)
        self._all_ready(problem)
        self._restore(mine.path, chief_shard, doc)
        self.resumed_from = mine.path
        self.last_checkpoint = update
        how = ("exactly (env state restored)" if doc["env"] == "snapshot" else
               "with reseeded envs (this env's state cannot be checkpointed)")
        p = self.progress
        self.say(f"worker {self.worker}: resuming update {update}, the newest checkpoint "
                 f"complete on all {self.shape.num_workers} worker(s) ({mine.path}), {how}: "
                 f"env-step {p.env_steps}, {p.episodes} episodes logged")

    def _restore(self, mine: str, chief_shard: str, doc: dict[str, Any]) -> None:
        """Model and optimizer from the chief's shard; envs, rollouts, generators from this
        worker's; the counters (the same in every shard)."""
        run_checkpoint.restore_agent(chief_shard, self.agent)
        self.progress = run_checkpoint.Progress(**doc["progress"])
        c, p = self.settings.config, self.progress
        for k, rid in enumerate(self.agent.replica_ids):
            self.envs[k], self.states[k] = checkpoint_shards.restore_replica(
                mine, doc, rid, self.envs[k], self.rngs[k],
                p.update * c.num_envs * c.num_steps,
                replica_env_seed(self.settings.seed, rid, c.num_envs))
        self.recent.extend(p.recent_returns)
        if self.chief:
            try:
                self.log = EpisodeLog(self.paths["episodes"], keep=p.episodes,
                                      columns=DISTRIBUTED_COLUMNS)
            except ValueError as err:
                raise TrainingError(f"cannot resume {mine}: {err}") from err

    # ------------------------------------------------------------------ loop
    def _done(self) -> bool:
        return self.progress.done(self.settings.total_steps, self.settings.stop_at_threshold)

    def loop(self, collector: ReplicaCollector) -> RunResult:
        s, p = self.settings, self.progress
        if s.tensorboard and self.chief:
            from pgtwin.train.tensorboard import ScalarWriter
            self.writer = ScalarWriter(self.paths["tensorboard"])
        wall_offset = p.wall_s
        try:
            if not self._done():
                for it in iterate_distributed_training(self.agent, self.envs, self.rngs,
                                                       self.states, p.update, collector):
                    self.states = it.states
                    self._record(it, wall_offset + it.wall_s)                     # log
                    if self._stalled():
                        raise TrainingError(stall_message(
                            p.consecutive_skips, sum(p.consecutive_skips.values()))
                            + f"; {self._last_complete()}")
                    done = self._done()                                           # stop?
                    if s.checkpoint_every and (done or p.update % s.checkpoint_every == 0):
                        self._checkpoint()                                        # checkpoint
                    if done:
                        break
            self._finish_files()
            self._gather(0)  # every worker waits for the chief's final files
        except (ValueError, FloatingPointError, EnvStepError) as err:  # data or env: say where
            raise TrainingError(f"{s.env_id} (worker {self.worker}) failed during update "
                                f"{p.update + 1} after env-step {p.env_steps}: {err}; "
                                f"{self._last_complete()}") from err
        except Exception as err:  # noqa: BLE001 (only collective failures are translated)
            if not worker_health.is_collective_failure(err):
                raise
            raise self._lost(err) from err
        finally:
            collector.close()
        return self._result()

    def _stalled(self) -> bool:
        return self.progress.stalled(self.settings.max_consecutive_skips)

    def _last_complete(self) -> str:
        known = (f"checkpoint update {self.last_checkpoint} is complete on every worker"
                 if self.last_checkpoint is not None else "no checkpoint is known complete")
        if self.pending_checkpoint is not None:
            known += (f" (update {self.pending_checkpoint}, written here, is too if every "
                      "worker wrote its shard; --resume takes the newest complete on all)")
        return known

    def _lost(self, err: BaseException) -> worker_health.WorkerLostError:
        lost = worker_health.lost_worker(err, self.worker)
        who = f"worker {lost}" if lost is not None else "a worker"
        last = self._last_complete()
        return worker_health.WorkerLostError(
            f"{who} of {self.shape.num_workers} was lost during update {self.progress.update + 1} "
            f"({type(err).__name__}: {worker_health.reason(err)}); worker {self.worker} stops. "
            f"{last[0].upper()}{last[1:]}; to continue, "
            f"{cluster_resume_command(self.settings, self.shape)}", lost)

    def _record(self, it, wall: float) -> None:
        from eager import collectives

        p, c = self.progress, self.settings.config
        blocks = collectives.rows_by_replica(self.agent.strategy, self.agent.replica_ids,
                                             [_finished(b) for b in it.batches])
        rows = episode_rows(blocks, self.workers, it.update, c.num_envs, c.num_steps, wall,
                            p.episodes)
        returns = np.array([r[5] for r in rows])
        lengths = np.array([r[6] for r in rows])
        self.recent.extend(returns.tolist())
        p.update, p.wall_s = it.update, wall
        p.env_steps = it.update * self.agent.num_replicas * c.num_envs * c.num_steps
        p.episodes += len(rows)
        reason = skip_reason(it.metrics)  # the same verdict on every worker (global metrics)
        if p.count(reason):
            self.say(first_skip_message(reason, it.update, it.metrics, c.num_steps,
                                        c.baseline, self.settings.max_consecutive_skips))
        mean = float(np.mean(self.recent)) if self.recent else None
        p.mark_solved(mean, len(self.recent) == self.settings.solve_window, self.threshold, wall)
        if self.log is not None:
            self.log.append(rows)
        if self.writer is not None:
            from pgtwin.train.tensorboard import update_scalars
            self.writer.write(p.env_steps, update_scalars(it.metrics, returns, lengths, mean,
                                                          p.env_steps, wall))

    def _checkpoint(self) -> None:
        """Every worker writes its shard; once all have (a barrier), older ones are pruned."""
        p = self.progress
        p.recent_returns = list(self.recent)
        if self.log is not None:
            self.log.sync()
        if self.writer is not None:
            self.writer.flush()
        env_bytes = [env_snapshot.snapshot(e) if self.snapshotable else None for e in self.envs]
        replicas = list(zip(self.agent.replica_ids, self.envs, self.states, self.rngs))
        checkpoint_shards.write_shard(self.paths["checkpoints"], self.worker, p.update,
                                      self.agent if self.chief else None, replicas, env_bytes,
                                      p, self.settings.to_dict())
        self.pending_checkpoint = p.update
        self._gather(1)  # barrier: every worker's shard of this update is complete
        checkpoints.prune(checkpoint_shards.shard_root(self.paths["checkpoints"], self.worker),
                          self.settings.keep_checkpoints)
        self.last_checkpoint, self.pending_checkpoint = p.update, None

    def _finish_files(self) -> None:
        s = self.settings
        if self.chief:
            self.log.sync()
            write_final_files(self.paths, self.agent.get_weights(), s, self.threshold,
                              f"{s.env_id}, eager twin, {self.shape.strategy} x "
                              f"{self.shape.num_replicas} replicas, seed {s.seed}")

    def _result(self) -> RunResult:
        return RunResult.of(self.settings, self.progress,
                            float(np.mean(self.recent)) if self.recent else None,
                            self.threshold, self.resumed_from)

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
        if self.writer is not None:
            self.writer.close()
        for env in self.envs:
            env.close()


def _write_json(path: str, doc: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)
