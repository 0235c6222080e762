"""What changes over a run by schedule: the learning rate, and the Gaussian log-std floor.

Both are pure functions of the schedule and of the env steps taken before the update's
rollout, computed here in float64 numpy; the training loop hands the value to whichever
twin runs (``agent.set_learning_rate``; the floor as a projection of ``policy/log_std``),
so both twins apply the same number at the same update by construction, and a resumed run
(which restores the env-step counter) continues the schedule exactly.

With ``f = min(env_steps / steps, 1)`` the progress through the schedule, ``lr0`` the
config's ``learning_rate`` and ``r = lr_floor``::

    constant: lr = lr0
    linear  : lr = lr0 * (1 - (1 - r) f)
    cosine  : lr = lr0 * (r + (1 - r) (1 + cos(pi f)) / 2)

    log-std floor = log_std_floor + (log_std_floor_final - log_std_floor) f
                    (log_std_floor_final None: log_std_floor throughout)

The floor is a projection, not a reparametrisation: after the update, any entry of
``policy/log_std`` below the floor is set to it (the optimizer's moments are left as they
are), so the policy's exploration noise never falls below ``exp(floor)`` while the
gradient still moves it freely above.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

LR_SCHEDULES = ("constant", "linear", "cosine")
LOG_STD = "policy/log_std"


@dataclass(frozen=True)
class Schedules:
    """A run's schedules; the defaults change nothing (``active`` is False)."""

    learning_rate: float
    """lr0, the config's ``learning_rate``."""
    lr_schedule: str = "constant"
    """One of ``LR_SCHEDULES``."""
    lr_floor: float = 0.1
    """The final learning rate as a fraction of lr0, in [0, 1]."""
    steps: int | None = None
    """Env steps over which the schedules run (then they hold their final value)."""
    log_std_floor: float | None = None
    """Least ``policy/log_std`` at the start (None: no floor; Gaussian policies only)."""
    log_std_floor_final: float | None = None
    """Least ``policy/log_std`` after ``steps`` (None: ``log_std_floor`` throughout)."""

    def __post_init__(self) -> None:
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule={self.lr_schedule!r} is not one of {LR_SCHEDULES}")
        if not (0.0 <= self.lr_floor <= 1.0):
            raise ValueError(f"lr_floor={self.lr_floor!r} must be a fraction in [0, 1] of the "
                             "learning rate")
        for name in ("log_std_floor", "log_std_floor_final"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name}={value!r} must be a finite number or None")
        if self.log_std_floor_final is not None and self.log_std_floor is None:
            raise ValueError("log_std_floor_final is set without log_std_floor: give the "
                             "starting floor too")
        needs_steps = self.lr_schedule != "constant" or self.log_std_floor_final is not None
        if needs_steps and (self.steps is None or self.steps < 1):
            raise ValueError(f"steps={self.steps!r}: a schedule needs its length in env steps "
                             "(>= 1); pgtwin train takes --steps when none is given")

    @property
    def active(self) -> bool:
        """Whether anything changes over the run (else the loop leaves the agent alone)."""
        return self.lr_schedule != "constant" or self.log_std_floor is not None

    def progress(self, env_steps: int) -> float:
        """``f`` in [0, 1]."""
        return 0.0 if self.steps is None else min(max(env_steps, 0) / self.steps, 1.0)

    def learning_rate_at(self, env_steps: int) -> float:
        """The learning rate of the update whose rollout starts after ``env_steps`` steps."""
        if self.lr_schedule == "constant":
            return self.learning_rate
        f, r = self.progress(env_steps), self.lr_floor
        if self.lr_schedule == "linear":
            return self.learning_rate * (1.0 - (1.0 - r) * f)
        return self.learning_rate * (r + (1.0 - r) * 0.5 * (1.0 + math.cos(math.pi * f)))

    def log_std_floor_at(self, env_steps: int) -> float | None:
        """The least ``policy/log_std`` after the update whose rollout starts after
        ``env_steps`` steps (None: no floor)."""
        if self.log_std_floor is None or self.log_std_floor_final is None:
            return self.log_std_floor
        return self.log_std_floor + (self.log_std_floor_final - self.log_std_floor) * \
            self.progress(env_steps)

    def before_update(self, agent: Any, env_steps: int) -> None:
        """Set the agent's learning rate for the next update (when scheduled)."""
        if self.lr_schedule != "constant":
            agent.set_learning_rate(self.learning_rate_at(env_steps))

    def after_update(self, agent: Any, env_steps: int) -> None:
        """Project ``policy/log_std`` onto the floor (when there is one)."""
        floor = self.log_std_floor_at(env_steps)
        if floor is None:
            return
        weights = agent.get_weights()
        if LOG_STD not in weights:
            raise ValueError(f"log_std_floor={self.log_std_floor} is for Gaussian policies; "
                             f"this policy has no {LOG_STD}")
        log_std = weights[LOG_STD]
        if (log_std < floor).any():
            weights[LOG_STD] = np.maximum(log_std, np.asarray(floor, log_std.dtype))
            agent.set_weights(weights)
