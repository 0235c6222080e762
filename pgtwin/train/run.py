"""A complete training run: the shared loop plus stopping, logs, checkpoints and resume.

It reads top to bottom like ``pgtwin_core.loop.iterate_training``, which it drives: collect ->
update -> log the finished episodes (CSV, TensorBoard, progress bar) -> stop? ->
checkpoint. Both twins run through exactly this code; only ``impl`` differs.

Files under ``settings.logdir``::

    run.json               the settings (hyperparameters fixed for the run's lifetime)
    episodes.csv           one row per finished episode (``pgtwin.train.episode_log``)
    tb/                    TensorBoard scalars (``pgtwin.train.tensorboard``)
    checkpoints/update_N/  atomic checkpoints (``pgtwin.train.checkpoints``, ``pgtwin.train.run_checkpoint``)
    learning_curve.png     written at the end
    weights.npz            the final weights by canonical name
    obs_norm.npz           obs_norm runs: the observation statistics the weights expect

Stopping: when ``env_steps >= total_steps``, or (with ``stop_at_threshold``) when the mean
return of the last ``solve_window`` finished episodes reaches the gymnasium spec's
``reward_threshold``; the window must be full, so "solved" means what gymnasium's
leaderboards mean by it (CartPole-v1: mean >= 475 over 100 consecutive episodes).
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from pgtwin_core.envs import make_vec_env
from pgtwin_core.errors import EnvStepError, EnvValueError
from pgtwin_core.loop import iterate_training
from pgtwin_core.obs_normalizer import ObsNormalizer
from pgtwin_core.specs import spec_for_env
from pgtwin.train import checkpoints, env_snapshot, run_checkpoint
from pgtwin.train.episode_log import EpisodeLog, finished_episodes, read_episodes
from pgtwin.train.plots import Curve, save_learning_curves
from pgtwin.train.resume_command import resume_command
from pgtwin.train.run_lock import RunLock, RunLockError
from pgtwin.train.run_storage import StorageError, prepare_logdir, writing
from pgtwin.train.settings import RunSettings
from pgtwin.train.skipped_updates import first_skip_message, stall_message
from pgtwin.twins import agent_class

class TrainingError(RuntimeError):
    """The run cannot start, resume or continue; the message says why and what is intact."""


@dataclass(frozen=True)
class RunResult:
    """How a run ended."""

    env: str
    impl: str
    seed: int
    env_steps: int
    updates: int
    wall_s: float
    """Training-loop seconds (set-up excluded), summed over resumed segments."""
    final_mean_return: float | None
    """Mean return of the last ``solve_window`` finished episodes (None: none finished)."""
    solved: bool
    solved_at_env_steps: int | None
    solved_at_wall_s: float | None
    threshold: float | None
    logdir: str
    resumed_from: str | None = None
    resume_exact: bool = True
    """Whether the checkpoints hold the env state (False: a resume reseeds the envs, so it
    continues correctly but not identically; said on stderr when the run starts)."""
    skipped_updates: int = 0
    """Updates skipped (weights untouched), for any reason."""
    skipped_by_reason: dict[str, int] = dataclasses.field(default_factory=dict)
    """``skipped_updates`` by ``pgtwin_core.loop.SKIP_REASONS`` (``non_finite``,
    ``no_complete_episode``); reasons that never happened are absent."""
    first_iteration_s: float | None = None
    """Training-loop seconds of the run's first iteration, its tracing and XLA compiles
    included (``Progress.first_iteration_s``); None when no iteration ran."""
    first_iteration_env_steps: int | None = None
    """Env steps of that first iteration (N x T)."""

    def steady_env_steps_per_s(self) -> float | None:
        """Env steps per second after the first iteration, what a longer run approaches;
        None when the run had no second iteration."""
        if self.first_iteration_s is None or self.first_iteration_env_steps is None:
            return None
        seconds = self.wall_s - self.first_iteration_s
        steps = self.env_steps - self.first_iteration_env_steps
        return steps / seconds if steps > 0 and seconds > 0 else None

    def summary(self) -> dict[str, Any]:
        """The ``--json`` object."""
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, settings: RunSettings, progress: run_checkpoint.Progress,
           final_mean_return: float | None, threshold: float | None,
           resumed_from: str | None, resume_exact: bool = True) -> "RunResult":
        """How the run of ``settings`` ended, read off its ``progress`` (wall times to 0.1 ms)."""
        s, p = settings, progress
        return cls(
            env=s.env_id, impl=s.impl, seed=s.seed, env_steps=p.env_steps, updates=p.update,
            wall_s=round(p.wall_s, 4), final_mean_return=final_mean_return,
            solved=p.solved_at_update is not None, solved_at_env_steps=p.solved_at_env_steps,
            solved_at_wall_s=None if p.solved_at_wall_s is None else round(p.solved_at_wall_s, 4),
            threshold=threshold, logdir=s.logdir, resumed_from=resumed_from,
            resume_exact=resume_exact, skipped_updates=p.skipped_updates,
            skipped_by_reason=dict(p.skipped_by_reason),
            first_iteration_s=(None if p.first_iteration_s is None
                               else round(p.first_iteration_s, 4)),
            first_iteration_env_steps=p.first_iteration_env_steps)


def run_paths(logdir: str) -> dict[str, str]:
    """The files of a run under ``logdir`` by role."""
    return {name: os.path.join(logdir, rel) for name, rel in (
        ("settings", "run.json"), ("episodes", "episodes.csv"), ("tensorboard", "tb"),
        ("checkpoints", "checkpoints"), ("curve", "learning_curve.png"),
        ("weights", "weights.npz"), ("obs_norm", "obs_norm.npz"))}


def load_settings(logdir: str) -> RunSettings:
    """The settings a run in ``logdir`` was started with (for ``--resume``)."""
    path = run_paths(logdir)["settings"]
    if not os.path.isfile(path):
        raise TrainingError(f"nothing to resume: {path} does not exist (no run in {logdir})")
    with open(path) as f:
        return RunSettings.from_dict(json.load(f))


def write_settings(paths: dict[str, str], settings: RunSettings) -> None:
    """Create the run directory and write ``run.json`` atomically."""
    os.makedirs(settings.logdir, exist_ok=True)
    tmp = paths["settings"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(settings.to_dict(), f, indent=1)
    os.replace(tmp, paths["settings"])


def check_same_settings(where: str, saved: dict[str, Any], settings: RunSettings) -> None:
    """Raise TrainingError naming every fixed setting (``RunSettings.fixed``) in which
    ``settings`` differ from the ``saved`` ones (``to_dict`` form) of checkpoint ``where``."""
    changed = settings.changed_from(RunSettings.from_dict(saved))
    if changed:
        raise TrainingError(f"cannot resume {where} with different settings: "
                            + "; ".join(f"{k}: checkpoint {a!r}, now {b!r}"
                                        for k, (a, b) in changed.items()))


def import_env_module(name: str) -> None:
    """Import ``name`` (which registers envs), looking in the working directory too, as
    ``python -m`` would.

    Raises:
      ValueError: the module cannot be imported.
    """
    import importlib

    if name.endswith(".py") or "/" in name or os.sep in name or name.startswith("."):
        stem = os.path.splitext(os.path.basename(name.rstrip("/")))[0]
        raise ValueError(f"env module {name!r} is a file path; give the module's name as "
                         f"import would: {stem!r} (run from {os.path.dirname(name) or '.'!r}, "
                         "or put that directory on PYTHONPATH)")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        importlib.import_module(name)
    except ImportError as err:
        where = ""
        if err.name is not None and (err.name == name or name.startswith(err.name + ".")):
            where = (f" (looked in {os.getcwd()} and on sys.path: run from the directory "
                     "that holds it, or put that directory on PYTHONPATH, as the resume "
                     "command pgtwin prints when a run stops does)")
        raise ValueError(f"cannot import env module {name!r}: {err}{where}") from err


def reward_threshold(env_id: str) -> float | None:
    """The gymnasium spec's ``reward_threshold`` of ``env_id`` (None if it has none)."""
    return gym.spec(env_id).reward_threshold


def sampling_rng(seed: int) -> np.random.Generator:
    """The action-sampling generator of a run with ``seed`` (a stream apart from the
    weight initialisation's ``default_rng(seed)``)."""
    return np.random.default_rng([seed, 1])


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def train(settings: RunSettings, resume: bool = False,
          say: Callable[[str], None] = _stderr) -> RunResult:
    """Run (or, with ``resume``, continue) a training run; see the module docstring.

    Raises:
      TrainingError: no checkpoint to resume, a logdir already holding a run, settings
        that differ from the checkpoint's, or a failure during training (the message names
        env, step and the last intact checkpoint).
      ValueError: an unknown or unsupported env id (from ``make_vec_env``).
    """
    lock = claim_logdir(settings, resume)  # before TensorFlow: a refusal is immediate
    try:
        if lock.stale_message():
            say(lock.stale_message())
        return _train_locked(settings, resume, say)
    finally:
        lock.release()


def has_checkpoint(logdir: str) -> bool:
    """Whether the run in ``logdir`` has written a checkpoint."""
    return bool(checkpoints.list_checkpoints(run_paths(logdir)["checkpoints"]))


def check_fresh_logdir(logdir: str) -> None:
    """Raise TrainingError if ``logdir`` already holds a run (settings or checkpoints)."""
    if has_checkpoint(logdir) or os.path.exists(run_paths(logdir)["settings"]):
        raise TrainingError(f"{logdir} already holds a run: pass --resume to continue it, or "
                            "choose another --logdir")


def claim_logdir(settings: RunSettings, resume: bool) -> RunLock:
    """Check the run directory before any work and lock it for this process.

    A new run needs a directory without a run in it; either needs one it can write to;
    and no other live process may hold its lock (``pgtwin.train.run_lock``).
    """
    if not resume:
        check_fresh_logdir(settings.logdir)
    try:
        prepare_logdir(settings.logdir)
    except StorageError as err:
        kept = ("its checkpoints are untouched: make it writable, then resume again" if resume
                else "nothing was written: choose a writable --logdir")
        raise TrainingError(f"the run directory is not writable: {err}; {kept}") from err
    try:
        return RunLock(settings.logdir).acquire()
    except RunLockError as err:
        raise TrainingError(str(err)) from err


def _train_locked(settings: RunSettings, resume: bool, say: Callable[[str], None]) -> RunResult:
    """:func:`train` once the run directory is claimed."""
    import tensorflow as tf

    if settings.env_module:
        import_env_module(settings.env_module)
    if settings.deterministic:
        tf.config.experimental.enable_op_determinism()
    paths = run_paths(settings.logdir)
    envs = make_vec_env(settings.env_id, settings.config.num_envs, settings.seed,
                        settings.history)
    agent = run = None
    try:
        spec = spec_for_env(envs, settings.torso, settings.hidden)
        agent = agent_class(settings.impl)(spec, settings.config, seed=settings.seed)
        run = _Run(settings, paths, agent, envs, sampling_rng(settings.seed), say)
        if settings.obs_norm:
            run.normalizer = ObsNormalizer(spec.obs_dim, settings.obs_norm_clip)
        try:
            if resume:
                run.resume()
            else:
                run.start()
            return run.loop()
        except StorageError as err:
            raise TrainingError(run.storage_failure(err)) from err
    finally:
        if run is not None:
            run.close()
        else:
            envs.close()
            if agent is not None:
                agent.close()


class _Run:
    """One process's segment of a run (the state :func:`train` threads through the loop)."""

    def __init__(self, settings: RunSettings, paths: dict[str, str], agent, envs, rng, say):
        self.settings, self.paths, self.agent, self.envs, self.rng = settings, paths, agent, envs, rng
        self.say = say
        self.state = None
        self.progress = run_checkpoint.Progress()
        self.recent = collections.deque(maxlen=settings.solve_window)
        self.threshold = reward_threshold(settings.env_id)
        self.log: EpisodeLog | None = None
        self.writer = None
        self.last_checkpoint: str | None = None
        self.resumed_from: str | None = None
        self.snapshot_problem: str | None = None
        self.snapshotable = self._check_snapshot()
        self.normalizer: ObsNormalizer | None = None
        """``obs_norm`` runs: the observation statistics (checkpointed, written at the end)."""

    def _check_snapshot(self) -> bool:
        self.snapshot_problem = env_snapshot.snapshot_problem([self.envs],
                                                              self.settings.deterministic)
        return self.snapshot_problem is None

    def _say_reseed_fallback(self) -> None:
        """The env state cannot go into checkpoints: say so before the run relies on them."""
        if not self.snapshotable and self.settings.checkpoint_every:
            self.say(f"{self.settings.env_id}: the env's state cannot be checkpointed "
                     f"({self.snapshot_problem}); a --resume of this run will continue with "
                     "reseeded envs, not exactly (resume_exact: false in the summary)")

    # ------------------------------------------------------------------ start / resume
    def start(self) -> None:
        check_fresh_logdir(self.settings.logdir)  # again, now that the lock is held
        self._begin()

    def _begin(self) -> None:
        """Write the settings and a new episode log: the run's update 0."""
        with writing(self.paths["settings"]):
            write_settings(self.paths, self.settings)
        with writing(self.paths["episodes"]):
            self.log = EpisodeLog(self.paths["episodes"])
        self._say_reseed_fallback()

    def resume(self) -> None:
        root = self.paths["checkpoints"]
        for path in checkpoints.clean_temporaries(root):
            self.say(f"removed the unfinished checkpoint write {path}")
        ckpt, refused = checkpoints.find_latest(root)
        for path, reason in refused:
            self.say(f"refusing {reason}; moved it to {checkpoints.set_aside(path)}")
        if ckpt is None:
            if refused or checkpoints.set_aside_earlier(root):
                raise TrainingError(f"no usable checkpoint in {root}" + _why_none(root, refused))
            # Stopped before its first checkpoint: nothing was lost but the episodes logged
            # so far, and its settings are fixed, so resuming is starting it again.
            self.say(f"no checkpoint was written before {self.settings.logdir} stopped: "
                     "starting the run again from update 0 with its settings")
            self._begin()
            return
        if refused:
            self.say(f"using the previous good checkpoint {ckpt.path}")
        doc = run_checkpoint.load_state(ckpt.path)
        check_same_settings(ckpt.path, doc["settings"], self.settings)
        if self.settings.env_module and doc["settings"].get("env_module") is None:
            with writing(self.paths["settings"]):  # the next resume needs no module given
                write_settings(self.paths, self.settings)
        try:
            self.envs, self.state, self.progress = run_checkpoint.restore(
                ckpt.path, doc, self.agent, self.envs, self.rng, self.normalizer)
        except ValueError as err:
            raise TrainingError(f"cannot resume {ckpt.path}: {err}") from err
        self.recent.extend(self.progress.recent_returns)
        try:
            with writing(self.paths["episodes"]):
                self.log = EpisodeLog(self.paths["episodes"], keep=self.progress.episodes)
        except ValueError as err:
            raise TrainingError(f"cannot resume {ckpt.path}: {err}") from err
        self.last_checkpoint = self.resumed_from = ckpt.path
        how = ("exactly (env state restored)" if doc["env"] == "snapshot" else
               "with reseeded envs (this env's state cannot be checkpointed)")
        self.say(f"resuming {ckpt.path} {how}: update {self.progress.update}, env-step "
                 f"{self.progress.env_steps}, {self.progress.episodes} episodes logged")
        if self._done():
            why = (f"its {self.progress.env_steps} env steps reach the budget of "
                   f"{self.settings.total_steps} (raise --steps to go on)"
                   if self.progress.env_steps >= self.settings.total_steps else
                   "it solved the env and stops there (pass --no-stop to go on)")
            self.say(f"nothing left to train: {why}")

    # ------------------------------------------------------------------ loop
    def _done(self) -> bool:
        return self.progress.done(self.settings.total_steps, self.settings.stop_at_threshold)

    def loop(self) -> RunResult:
        from tqdm import tqdm

        s, p = self.settings, self.progress
        if s.tensorboard:
            from pgtwin.train.tensorboard import ScalarWriter
            self.writer = ScalarWriter(self.paths["tensorboard"])
        bar = tqdm(total=s.total_steps, initial=min(p.env_steps, s.total_steps), unit="step",
                   unit_scale=True, dynamic_ncols=True, file=sys.stderr,
                   disable=None if s.progress is None else not s.progress,
                   desc=f"{s.env_id} {s.impl}")
        wall_offset = p.wall_s
        try:
            if not self._done():
                for it in iterate_training(self.agent, self.envs, self.rng, self.state, p.update,
                                           schedules=s.schedules(), normalizer=self.normalizer):
                    self.state = it.state
                    wall = wall_offset + it.wall_s
                    self._record(it, wall)                                        # log
                    if self._stalled():
                        raise TrainingError(
                            f"{s.env_id} ({s.impl}) stopped at update {p.update} (env-step "
                            f"{p.env_steps}): " + stall_message(
                                p.consecutive_skips, sum(p.consecutive_skips.values()))
                            + f"; {self._intact()}")
                    bar.update(min(p.env_steps, s.total_steps) - bar.n)
                    bar.set_postfix(ret=_fmt(self._window_mean()), upd=p.update, refresh=False)
                    done = self._done()                                           # stop?
                    if s.checkpoint_every and (done or p.update % s.checkpoint_every == 0):
                        self._checkpoint()                                        # checkpoint
                    if done:
                        break
        except EnvValueError as err:
            then = (f"; fix the env (or wrap it to replace such values), then resume with: "
                    f"{resume_command(s.logdir, s.env_module)}" if self.last_checkpoint else "")
            raise TrainingError(f"{s.env_id} ({s.impl}) failed during update {p.update + 1} "
                                f"after env-step {p.env_steps}: {err}; {self._intact()}{then}"
                                ) from err
        except (ValueError, FloatingPointError) as err:
            raise TrainingError(f"{s.env_id} ({s.impl}) failed during update {p.update + 1} "
                                f"after env-step {p.env_steps}: {err}; {self._intact()}") from err
        except EnvStepError as err:
            then = (f"; fix the env, then resume with: {resume_command(s.logdir, s.env_module)}"
                    if self.last_checkpoint else "")
            raise TrainingError(f"{s.env_id} ({s.impl}) failed during update {p.update + 1}: "
                                f"{err}; {self._intact()}{then} (the env's traceback is "
                                "above)") from err
        finally:
            bar.close()
        return self._finish()

    def storage_failure(self, err: StorageError) -> str:
        """The one message for a failed write: what, why, what is intact, what to do."""
        s, p = self.settings, self.progress
        then = (f"then resume with: {resume_command(s.logdir, s.env_module)}"
                if self.last_checkpoint else "then start the run again")
        return (f"{s.env_id} ({s.impl}) could not write {err.path} after update {p.update} "
                f"(env-step {p.env_steps}): {err.reason}; {self._intact()} (checkpoints are "
                f"renamed into place only when complete). Free disk space or fix the "
                f"permissions, {then}")

    def _intact(self) -> str:
        """What a failure leaves: the last checkpoint, or none."""
        return (f"the last checkpoint {self.last_checkpoint} is intact"
                if self.last_checkpoint else "no checkpoint had been written")

    def _window_mean(self) -> float | None:
        return float(np.mean(self.recent)) if self.recent else None

    def _record(self, it, wall: float) -> None:
        p, batch = self.progress, it.batch
        rows = finished_episodes(batch, it.update, wall, p.episodes)
        with writing(self.paths["episodes"]):
            self.log.append(rows)
        self.recent.extend(batch.episode_returns.tolist())
        if it.update == 1:  # not a resumed segment's first (an older checkpoint has none)
            p.first_iteration_s, p.first_iteration_env_steps = wall, batch.env_steps
        p.update, p.env_steps, p.wall_s, p.episodes = it.update, batch.env_steps, wall, self.log.count
        if p.count(it.skipped):
            self.say(first_skip_message(it.skipped, it.update, it.metrics, it.batch.num_steps,
                                        self.settings.config.baseline,
                                        self.settings.max_consecutive_skips))
        mean = self._window_mean()
        p.mark_solved(mean, len(self.recent) == self.settings.solve_window, self.threshold, wall)
        if self.writer is not None:
            from pgtwin.train.tensorboard import update_scalars
            with writing(self.paths["tensorboard"]):
                self.writer.write(p.env_steps, update_scalars(
                    it.metrics, batch.episode_returns, batch.episode_lengths, mean, p.env_steps,
                    wall))

    def _stalled(self) -> bool:
        """Whether the last ``max_consecutive_skips`` updates were all skipped."""
        return self.progress.stalled(self.settings.max_consecutive_skips)

    def _checkpoint(self) -> None:
        p = self.progress
        p.recent_returns = list(self.recent)
        with writing(self.paths["episodes"]):
            self.log.sync()
        if self.writer is not None:
            with writing(self.paths["tensorboard"]):
                self.writer.flush()
        env_bytes = env_snapshot.snapshot(self.envs) if self.snapshotable else None
        meta = {"env_id": self.settings.env_id, "impl": self.settings.impl,
                "env_steps": p.env_steps, "episodes": p.episodes}
        with writing(checkpoints.checkpoint_path(self.paths["checkpoints"], p.update)):
            ckpt = checkpoints.write_checkpoint(
                self.paths["checkpoints"], p.update,
                lambda d: run_checkpoint.save(d, self.agent, self.envs, self.state, self.rng, p,
                                              self.settings.to_dict(), env_bytes,
                                              self.normalizer),
                meta, keep=self.settings.keep_checkpoints)
        self.last_checkpoint = ckpt.path

    def _finish(self) -> RunResult:
        s, p = self.settings, self.progress
        with writing(self.paths["episodes"]):
            self.log.sync()
        with writing(s.logdir):
            write_final_files(self.paths, self.agent.get_weights(), s, self.threshold,
                              f"{s.env_id}, {s.impl} twin, seed {s.seed}", self.normalizer)
        return RunResult.of(s, p, self._window_mean(), self.threshold, self.resumed_from,
                            resume_exact=self.snapshotable)

    def close(self) -> None:
        # Closing syncs the log and the event file: on a full disk that fails again, and
        # must not replace the error being reported, so it is said, not raised.
        for what, closer in (("episodes", self.log), ("tensorboard", self.writer)):
            if closer is None:
                continue
            try:
                with writing(self.paths[what]):
                    closer.close()
            except StorageError as err:
                self.say(f"also could not close {err.path}: {err.reason}")
        self.envs.close()
        self.agent.close()


def _why_none(root: str, refused: list) -> str:
    """Why a resume found no checkpoint: refused now, set aside earlier, or never written."""
    if refused:
        return ""  # each refusal was just reported
    aside = checkpoints.set_aside_earlier(root)
    if aside:
        return (f": {len(aside)} were set aside as unusable by an earlier resume "
                f"({', '.join(aside)}); nothing else is left to resume from")
    return " (none was written)"


def write_final_files(paths: dict[str, str], weights: dict[str, np.ndarray],
                      settings: RunSettings, threshold: float | None, title: str,
                      normalizer: ObsNormalizer | None = None) -> None:
    """``weights.npz`` (by canonical name, written atomically), ``obs_norm.npz`` beside it
    for an ``obs_norm`` run (the policy must be fed observations normalised with these
    statistics), and ``learning_curve.png`` (from ``episodes.csv``, which must be synced)
    at the end of a run."""
    tmp = paths["weights"] + ".tmp.npz"
    np.savez(tmp, **{name.replace("/", "__"): w for name, w in weights.items()})
    os.replace(tmp, paths["weights"])
    if normalizer is not None:
        tmp = paths["obs_norm"] + ".tmp.npz"
        np.savez(tmp, **normalizer.state())
        os.replace(tmp, paths["obs_norm"])
    episodes = read_episodes(paths["episodes"])
    save_learning_curves(paths["curve"],
                         [Curve(settings.impl, episodes["env_steps"], episodes["return"])],
                         title, threshold, settings.solve_window)


def load_weights(path: str) -> dict[str, np.ndarray]:
    """The weights a run wrote to ``weights.npz``, by canonical name."""
    with np.load(path) as z:
        return {key.replace("__", "/"): z[key] for key in z.files}


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"
