"""``ReinforceConfig``: every hyperparameter of a REINFORCE run, shared by both twins."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

OPTIMIZERS = ("adam", "sgd")
BASELINES = (
    "none",
    "mean",
    "optimal_scalar",
    "optimal_scalar_episodic",
    "optimal_per_param",
    "optimal_time",
)
UPDATE_PATHS = ("recompute", "cached")
DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class ReinforceConfig:
    """Hyperparameters of REINFORCE; invalid values raise ``ValueError`` at construction."""

    gamma: float = 0.99
    """Discount factor in [0, 1]."""
    learning_rate: float = 1e-2
    """Optimizer step size (> 0)."""
    optimizer: str = "adam"
    """``adam`` or ``sgd`` (plain gradient descent, no momentum)."""
    adam_beta1: float = 0.9
    """Adam's first-moment decay."""
    adam_beta2: float = 0.999
    """Adam's second-moment decay."""
    adam_epsilon: float = 1e-8
    """Adam's epsilon, set explicitly: TF1's AdamOptimizer and Keras Adam default differently."""
    normalize_returns: bool = True
    """Standardise the returns over the batch's valid steps before the baseline."""
    baseline: str = "none"
    """Baseline subtracted from the returns: one of ``BASELINES``."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus subtracted from the loss (>= 0)."""
    max_grad_norm: float | None = None
    """Clip the global gradient norm to this value; ``None`` for no clipping."""
    num_envs: int = 16
    """Parallel environments per rollout."""
    num_steps: int = 128
    """Steps per environment per update (the rollout length T)."""
    update_path: str = "recompute"
    """``recompute`` (feed the batch again) or ``cached`` (differentiate the rollout's passes)."""
    dtype: str = "float32"
    """``float32`` or ``float64`` for weights and computations."""

    def __post_init__(self) -> None:
        checks = [
            ("gamma", 0.0 <= self.gamma <= 1.0, "must be in [0, 1]"),
            ("learning_rate", self.learning_rate > 0 and math.isfinite(self.learning_rate),
             "must be a finite number > 0"),
            ("adam_beta1", 0.0 <= self.adam_beta1 < 1.0, "must be in [0, 1)"),
            ("adam_beta2", 0.0 <= self.adam_beta2 < 1.0, "must be in [0, 1)"),
            ("adam_epsilon", self.adam_epsilon > 0, "must be > 0"),
            ("entropy_coef", self.entropy_coef >= 0 and math.isfinite(self.entropy_coef),
             "must be a finite number >= 0"),
            ("max_grad_norm", self.max_grad_norm is None or self.max_grad_norm > 0,
             "must be None or > 0"),
            ("num_envs", isinstance(self.num_envs, int) and self.num_envs >= 1, "must be an int >= 1"),
            ("num_steps", isinstance(self.num_steps, int) and self.num_steps >= 1, "must be an int >= 1"),
            ("optimizer", self.optimizer in OPTIMIZERS, f"must be one of {OPTIMIZERS}"),
            ("baseline", self.baseline in BASELINES, f"must be one of {BASELINES}"),
            ("update_path", self.update_path in UPDATE_PATHS, f"must be one of {UPDATE_PATHS}"),
            ("dtype", self.dtype in DTYPES, f"must be one of {DTYPES}"),
        ]
        for name, ok, why in checks:
            if not ok:
                raise ValueError(f"ReinforceConfig.{name}={getattr(self, name)!r} {why}")

    @property
    def batch_size(self) -> int:
        """Samples per update: ``num_envs * num_steps``."""
        return self.num_envs * self.num_steps

    @property
    def needs_per_sample_gradients(self) -> bool:
        """Whether the baseline is built from per-sample (or per-episode) scores."""
        return self.baseline.startswith("optimal")

    def replace(self, **changes) -> "ReinforceConfig":
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)
