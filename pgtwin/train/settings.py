"""A run's settings, and the one place they are resolved: table, per-env overrides, what was given.

:class:`RunSettings` (with its :class:`~pgtwin_core.config.ReinforceConfig`) is the table:
its field defaults are the defaults of every run. A known env overrides some of them by name
(:data:`ENV_OVERRIDES`); the episodic baselines lengthen the rollout
(:func:`for_episodic_baseline`); what the caller gave overrides the rest
(:func:`resolve`). ``pgtwin train`` (``--strategy`` runs too) and ``pgtwin demo`` build
their settings with :func:`resolve`; ``python -m pgtwin.train.distributed`` with
:func:`worker_config`. The stopping threshold is not here: it is the gymnasium spec's
``reward_threshold`` (CartPole-v1: 475), and envs without one train for ``total_steps``.
docs/cartpole.md says how the CartPole-v1 row was tuned.
"""
from __future__ import annotations

import dataclasses
import glob
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pgtwin_core.baselines import EPISODIC
from pgtwin_core.config import NaturalConflictError, ReinforceConfig
from pgtwin_core.schedules import Schedules
from pgtwin.train.skipped_updates import MAX_CONSECUTIVE_SKIPS

RESUMABLE = ("total_steps", "stop_at_threshold", "checkpoint_every", "keep_checkpoints",
             "progress", "tensorboard", "logdir", "max_consecutive_skips")
"""Settings a resumed run may change; every other one must equal the checkpoint's."""


@dataclass(frozen=True)
class RunSettings:
    """Everything that defines a run."""

    env_id: str
    """A registered gymnasium id."""
    impl: str
    """Twin: ``graph`` or ``eager``."""
    config: ReinforceConfig
    """Hyperparameters of the updates (and num_envs, num_steps, dtype)."""
    logdir: str
    """Where the run's files go (see the module docstring)."""
    env_module: str | None = None
    """A module imported before the env is made (it registers ``env_id``)."""
    seed: int = 0
    """Seeds the initial weights, the envs (env i: seed + i) and action sampling."""
    total_steps: int = 1_000_000
    """Env-step budget (``--steps``)."""
    torso: str = "mlp"
    """``mlp`` or ``lstm``."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden sizes."""
    history: int = 1
    """Observation window K (``lstm`` needs K >= 1 windows; ``mlp`` uses 1)."""
    checkpoint_every: int = 25
    """Updates between checkpoints; 0 writes none (the final one included)."""
    keep_checkpoints: int = 2
    """Complete checkpoints kept (>= 1); the newest is only pruned by a newer complete one."""
    stop_at_threshold: bool = True
    """Stop when the window mean reaches the env's reward_threshold."""
    solve_window: int = 100
    """Finished episodes the stopping mean is over."""
    deterministic: bool = False
    """Deterministic TF ops, and an env that must be snapshotted (bit-exact resume)."""
    progress: bool | None = None
    """Show the tqdm bar: True, False, or None (only on a terminal)."""
    tensorboard: bool = True
    """Write TensorBoard scalars."""
    max_consecutive_skips: int = MAX_CONSECUTIVE_SKIPS
    """Stop with an error after this many skipped updates in a row (non-finite loss or
    gradient, or no complete episode; ``pgtwin.train.skipped_updates``); 0 never stops."""
    lr_schedule: str = "constant"
    """The learning rate over the run: ``constant``, ``linear`` or ``cosine`` decay from
    ``config.learning_rate`` to ``lr_floor`` times it (``pgtwin_core.schedules``)."""
    lr_floor: float = 0.1
    """The decayed learning rate's final fraction of ``config.learning_rate``, in [0, 1]."""
    schedule_steps: int | None = None
    """Env steps the schedules run over; :func:`resolve` sets ``total_steps`` when one
    needs it and none is given (fixed for the run: a resume with more ``--steps`` holds
    the final values)."""
    log_std_floor: float | None = None
    """Gaussian policies: the least ``policy/log_std`` (a projection after each update);
    None: none."""
    log_std_floor_final: float | None = None
    """The floor after ``schedule_steps``, reached linearly (None: ``log_std_floor``)."""
    obs_norm: bool = False
    """Normalise observations by a running mean and std (``pgtwin_core.obs_normalizer``;
    the statistics are checkpointed and written beside the final weights)."""
    obs_norm_clip: float = 10.0
    """Normalised observations are clipped to [-clip, clip]."""

    def schedules(self) -> Schedules:
        """The run's schedules (validated: ``ValueError`` names the bad value)."""
        return Schedules(self.config.learning_rate, self.lr_schedule, self.lr_floor,
                         self.schedule_steps, self.log_std_floor, self.log_std_floor_final)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings (``config`` as a dict)."""
        doc = dataclasses.asdict(self)
        doc["hidden"] = list(self.hidden)
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "RunSettings":
        """Inverse of :meth:`to_dict`."""
        doc = dict(doc)
        # A run saved before ReinforceConfig.baseline_memory existed was batch-only (0).
        doc["config"] = ReinforceConfig(**{"baseline_memory": 0.0, **doc["config"]})
        doc["hidden"] = tuple(doc["hidden"])
        return cls(**doc)

    def fixed(self) -> dict[str, Any]:
        """The settings a resume must not change, the config's as ``config.<field>``."""
        doc = {k: v for k, v in self.to_dict().items() if k not in RESUMABLE}
        doc.update({f"config.{k}": v for k, v in doc.pop("config").items()})
        return doc

    def changed_from(self, before: "RunSettings") -> dict[str, tuple[Any, Any]]:
        """``{fixed setting: (before's, these)}`` where they differ. An ``env_module`` given
        where ``before`` had none is no change: a run started from Python, the env's module
        imported by the caller, saved none, and the CLI needs it to make the env again."""
        was, now = before.fixed(), self.fixed()
        return {k: (was.get(k), v) for k, v in now.items() if was.get(k) != v
                and not (k == "env_module" and was.get(k) is None)}


CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(ReinforceConfig))
"""Names :func:`resolve` reads as ``ReinforceConfig`` fields; the others are ``RunSettings``'."""

LSTM_HISTORY = 8
"""Observation window K for ``torso='lstm'`` when none is given (the MLP sees one)."""

ENV_OVERRIDES: dict[str, dict[str, Any]] = {
    # A rollout cuts CartPole's up-to-500-step episodes without bootstrapping, so the last
    # ~1/(1 - gamma) steps of each batch see truncated returns: gamma = 0.97 keeps that
    # tail short against T = 128. 128 envs make one policy call serve 128 env steps.
    # Observation normalisation ended the collapses (the mean falling back to ~100 as the
    # cart drifted off the track): every seed 0-9 of both twins solves in 131k steps;
    # "mean" is the baseline that won on those seeds (docs/cartpole.md, issue 15).
    "CartPole-v1": dict(num_envs=128, num_steps=128, learning_rate=2.5e-2, gamma=0.97,
                        baseline="mean", obs_norm=True, total_steps=3_000_000),
    # Reward -1 a step until the tip is high: a seed whose first policy never reaches it
    # sees identical returns and does not learn. The entropy bonus keeps it exploring, the
    # value baseline tells states near the goal from far ones, 32 envs see the goal more
    # often: every seed 0-9 of both twins reaches -100 (74k-864k steps; docs/continuous.md).
    "Acrobot-v1": dict(num_envs=32, baseline="value", entropy_coef=0.01, obs_norm=True),
    # No reward_threshold: it runs for the budget, issue 15's 200k steps. Plain and Adam
    # steps moved the policy too little to learn the swing-up in 200k steps (best -1044
    # over seeds 0-9); natural gradient steps of KL 0.02 (SGD at 1, from NATURAL_STEP) on
    # GAE advantages of a value net without the time feature (truncations bootstrapped)
    # learn it by ~80k steps. Without the entropy bonus 2 of 20 runs let their std
    # collapse and fell back to -1000 (a linear anneal of the step: 5 of 20; a log-std
    # floor did not stop it); with it, one run collapsed late, which TRPO's line search
    # (natural_backtracks) guards against. With both, every seed 0-9 of both twins ends
    # at -229 to -532 (docs/continuous.md).
    "Pendulum-v1": dict(num_steps=128, gamma=0.95, baseline="value", gae_lambda=0.95,
                        value_horizon=0, natural_kl=0.02, entropy_coef=0.01, obs_norm=True,
                        total_steps=200_000),
    # 168-step (one week) episodes. T = 169: the 168 steps and gymnasium's autoreset step,
    # so every batch holds each env's whole week (the episodic baselines use complete
    # episodes only; at T = 168 the weeks drift across batch edges).
    "BatteryArbitrage-v0": dict(num_steps=169, learning_rate=3e-3, total_steps=500_000),
}
"""Per-env overrides of the table, by ``RunSettings`` or ``ReinforceConfig`` field name."""

WORKER_OVERRIDES: dict[str, Any] = dict(num_envs=8, num_steps=64)
"""``python -m pgtwin.train.distributed``'s overrides of the table: a short run per worker
(8 envs x 64 steps per replica; docs/scaling.md measures it). No per-env row applies."""


def _apply(settings: RunSettings, values: Mapping[str, Any]) -> RunSettings:
    """``settings`` with ``values`` (``RunSettings`` or ``ReinforceConfig`` field names) set."""
    config = {k: v for k, v in values.items() if k in CONFIG_FIELDS}
    run = {k: v for k, v in values.items() if k not in CONFIG_FIELDS}
    return dataclasses.replace(settings, config=settings.config.replace(**config), **run)


NATURAL_STEP: dict[str, Any] = dict(optimizer="sgd", learning_rate=1.0)
"""What a run with ``natural_kl`` takes unless given: the natural step applied whole by SGD
(``pgtwin_core.natural_gradient``; a per-env row sets ``natural_kl`` alone)."""


def env_row(env_id: str) -> dict[str, Any]:
    """``env_id``'s row of :data:`ENV_OVERRIDES` (a ``module:Id`` form looks up ``Id``)."""
    return ENV_OVERRIDES.get(env_id.rsplit(":", 1)[-1], {})


def defaults_for(env_id: str, natural: bool = True) -> RunSettings:
    """The settings a run of ``env_id`` gets when nothing is given: the table with the env's
    row of :data:`ENV_OVERRIDES` (a ``module:Id`` form looks up ``Id``) applied.

    ``logdir`` is empty and ``impl`` is ``eager``: :func:`resolve` fills them. A row that
    sets ``natural_kl`` takes :data:`NATURAL_STEP` for what it does not set itself;
    ``natural=False``: the row without its natural step (what :func:`with_natural_step`
    falls back to).
    """
    base = RunSettings(env_id=env_id, impl="eager", config=ReinforceConfig(), logdir="")
    row = env_row(env_id)
    if not natural:
        row = {k: v for k, v in row.items() if k != "natural_kl"}
    elif row.get("natural_kl") is not None:
        row = {**NATURAL_STEP, **row}
    return _apply(base, row)


def for_episodic_baseline(row: RunSettings, max_episode_steps: int | None) -> RunSettings:
    """``row`` with a rollout long enough for the episodic baselines' complete episodes.

    ``optimal_scalar_episodic``, ``optimal_per_param`` and ``optimal_time`` use only episodes
    that start and end inside the batch; a batch without one is skipped. An env mid-episode
    at the batch's start completes its next episode within ``2 x max_episode_steps`` steps,
    so T is raised to that (CartPole-v1: 1,000) and N lowered to keep about the same batch
    (CartPole-v1: 16 envs); docs/baselines.md measures the difference.
    ``max_episode_steps`` None (no time limit known): ``row`` unchanged.
    """
    c = row.config
    if max_episode_steps is None or c.num_steps >= 2 * max_episode_steps:
        return row
    num_steps = 2 * max_episode_steps
    return _apply(row, {"num_steps": num_steps,
                        "num_envs": max(1, c.num_envs * c.num_steps // num_steps)})


def max_episode_steps(env_id: str | None) -> int | None:
    """The registered time limit of ``env_id`` (``module:Id`` looks up ``Id``), else None.

    An id whose module is not imported yet is not registered: None (its rollout length is
    left as given; batches without a complete episode are skipped).
    """
    import gymnasium

    if env_id is None:
        return None
    try:
        return gymnasium.spec(env_id.rsplit(":", 1)[-1]).max_episode_steps
    except gymnasium.error.Error:  # not registered (yet)
        return None


def _safe(env_id: str) -> str:
    return env_id.replace(":", "_").replace("/", "_")


def default_logdir(env_id: str, impl: str, seed: int) -> str:
    """``runs/ENV__IMPL__sSEED__YYYYmmdd-HHMMSS``."""
    return os.path.join("runs", f"{_safe(env_id)}__{impl}__s{seed}__"
                                f"{time.strftime('%Y%m%d-%H%M%S')}")


def newest_logdir(env_id: str, impl: str, seed: int) -> str | None:
    """The newest ``runs/ENV__IMPL__sSEED__*`` directory, if any."""
    found = sorted(glob.glob(os.path.join("runs", f"{_safe(env_id)}__{impl}__s{seed}__*")))
    return found[-1] if found else None


def with_natural_step(env_id: str, base: RunSettings, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with :data:`NATURAL_STEP` filled in where it sets ``natural_kl`` (a row's
    got them in :func:`defaults_for`). A row's ``natural_kl`` that the caller's other
    choices conflict with (``pgtwin_core.config.natural_conflict``: ``--optimizer adam``, a
    clip, an optimal baseline) is dropped instead, as a row's GAE drops with its value
    baseline; a given one is left for ``ReinforceConfig`` to refuse."""
    if "natural_kl" in given:
        return given if given["natural_kl"] is None else {**NATURAL_STEP, **given}
    if base.config.natural_kl is None:
        return given
    try:
        _apply(base, given)
    except NaturalConflictError:  # the row's optimizer and rate without it, unless given
        plain = defaults_for(env_id, natural=False).config
        return {**{k: getattr(plain, k) for k in NATURAL_STEP}, **given, "natural_kl": None}
    except ValueError:  # another bad value: resolve's own _apply names it
        pass
    return given


def resolve(env_id: str, given: Mapping[str, Any], saved: RunSettings | None = None) -> RunSettings:
    """The run's settings: ``given`` over ``saved`` (a resumed run's) or over the defaults.

    Args:
      env_id: the gymnasium id (without a ``module:`` prefix).
      given: the values the caller set, by ``RunSettings`` or ``ReinforceConfig`` field
        name; a name absent takes the resumed run's value, else the default. Without
        ``saved``, an episodic baseline with neither ``num_envs`` nor ``num_steps`` given
        gets :func:`for_episodic_baseline`'s rollout, ``torso='lstm'`` without
        ``history`` gets :data:`LSTM_HISTORY`, ``baseline='value'`` without
        ``value_horizon`` the env's time limit (0 without one), and ``natural_kl`` its
        :func:`with_natural_step`. A missing ``logdir`` is :func:`default_logdir`'s.

    Raises:
      ValueError: a value ``ReinforceConfig`` or ``RunSettings`` refuses.
    """
    given = dict(given)
    if saved is not None:
        base = dataclasses.replace(saved, env_id=env_id)
    else:
        base = defaults_for(env_id)
        if (given.get("baseline", base.config.baseline) in EPISODIC
                and "num_steps" not in given and "num_envs" not in given):
            base = for_episodic_baseline(base, max_episode_steps(env_id))
        if given.get("torso") == "lstm":
            given.setdefault("history", LSTM_HISTORY)
        if given.get("baseline", base.config.baseline) == "value":
            # The value net's time feature t / horizon: the env's time limit, 0 if none
            # (unless the row that sets the value baseline sets its horizon too).
            if "value_horizon" not in env_row(env_id) or "baseline" in given:
                given.setdefault("value_horizon", max_episode_steps(env_id) or 0)
        else:  # a row's GAE needs its value baseline: another baseline given drops it
            given.setdefault("gae_lambda", None)
        given = with_natural_step(env_id, base, given)
    settings = _apply(base, given)
    if settings.schedule_steps is None and (settings.lr_schedule != "constant"
                                            or settings.log_std_floor_final is not None):
        settings = dataclasses.replace(settings, schedule_steps=settings.total_steps)
    settings.schedules()  # refuse a bad schedule now, naming it
    if not (settings.obs_norm_clip > 0):
        raise ValueError(f"obs_norm_clip={settings.obs_norm_clip!r} must be > 0")
    if not settings.logdir:
        settings = dataclasses.replace(
            settings, logdir=default_logdir(env_id, settings.impl, settings.seed))
    return settings


def worker_config(given: Mapping[str, Any]) -> ReinforceConfig:
    """The config of ``python -m pgtwin.train.distributed``: the table's, with
    :data:`WORKER_OVERRIDES`, then ``given`` (``ReinforceConfig`` field names)."""
    return ReinforceConfig().replace(**{**WORKER_OVERRIDES, **given})
