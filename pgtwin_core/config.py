"""``ReinforceConfig``: every hyperparameter of a REINFORCE run, shared by both twins."""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

OPTIMIZERS = ("adam", "sgd")
BASELINES = (
    "none",
    "mean",
    "optimal_scalar",
    "optimal_scalar_episodic",
    "optimal_per_param",
    "optimal_time",
    "time_mean",
    "value",
)
VALUE_FITS = ("after", "before")
PER_STEP_BASELINES = ("none", "mean", "time_mean", "value")
"""The baselines whose estimate is per step (reward-to-go), which GPOMDP can weight."""
SHRINKABLE_BASELINES = ("optimal_scalar_episodic", "optimal_per_param")
"""The baselines ``baseline_shrinkage`` applies to (ratios over the other episodes)."""
SHRINKAGE_AUTO = "auto"
"""``baseline_shrinkage``'s data-driven lambda (``pgtwin_core/baselines/shrinkage.py``)."""
UPDATE_PATHS = ("recompute", "cached")
DTYPES = ("float32", "float64")


class NaturalConflictError(ValueError):
    """``natural_kl`` set with a choice it cannot serve (:func:`natural_conflict`)."""


def _real(value: object) -> bool:
    """A real number, not a bool (True would pass as 1)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _shrinkage(value: object) -> bool:
    """None (off), ``SHRINKAGE_AUTO``, or a real number in [0, 1] (not a bool)."""
    return value is None or value == SHRINKAGE_AUTO or (_real(value) and 0.0 <= value <= 1.0)


def _count(value: object) -> bool:
    """An integer >= 1, python or numpy, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


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
    """Divide the reward-to-go by its std over the batch's valid steps (not centred: the
    baseline alone shifts it, so ``baseline='none'`` subtracts nothing)."""
    baseline: str = "none"
    """Baseline subtracted from the returns: one of ``BASELINES``."""
    baseline_memory: float = 0.5
    """Decay rho in [0, 1) of the earlier batches' sums in the episodic baselines
    (``optimal_scalar_episodic``, ``optimal_per_param``, ``optimal_time``): batch k - j
    counts rho^j (``pgtwin_core/baseline_memory.py``); 0 = this batch only. Unbiased either
    way; docs/baselines.md (Decision 6) measures why the default is 0.5."""
    baseline_shrinkage: float | str | None = None
    """``optimal_scalar_episodic`` / ``optimal_per_param`` only: shrink each episode's
    leave-one-out ratio baseline towards the leave-one-out mean of the same episodes and
    memory, ``(1 - lambda) b^(-e) + lambda m^(-e)`` (per element for ``optimal_per_param``).
    None or 0: off; a number in [0, 1]; ``"auto"``: a James-Stein lambda from the other
    episodes' spread (``pgtwin_core/baselines/shrinkage.py``). Unbiased either way;
    docs/baselines.md measures when it pays off."""
    gpomdp: bool = False
    """Weight step t's term by gamma^t, t counted from the episode's real first step
    (``pgtwin_core.episode_time``): GPOMDP (Baxter & Bartlett 2001), the gradient of the
    discounted objective. False: every step's reward-to-go term weighs 1, as most
    implementations do. Only with the per-step baselines ``PER_STEP_BASELINES``."""
    value_hidden: tuple[int, ...] | None = None
    """``baseline='value'``: the value network's hidden sizes; None = the policy's
    (``PolicySpec.hidden``; an LSTM policy gets an LSTM value torso)."""
    value_learning_rate: float = 1e-2
    """``baseline='value'``: the value optimizer's step size (the optimizer is of the
    policy's kind, ``optimizer``, with its betas and epsilon, but its own state; Adam
    under ``natural_kl``: ``pgtwin_core.value_spec.value_optimizer_config``)."""
    value_fit_steps: int = 10
    """``baseline='value'``: full-batch optimizer steps on the value loss per update."""
    value_fit: str = "after"
    """``baseline='value'``: ``after`` = the advantages use the net fitted on the earlier
    batches, then it is fitted on this one (independent of this batch: unbiased);
    ``before`` = fitted on this batch first, then used (tighter, correlated with it)."""
    value_horizon: int = 0
    """``baseline='value'``: the time feature is t / value_horizon (t: the step's index in
    its episode); set it to the env's time limit, which is what makes the value depend on
    t. 0: no time limit, the feature is 0 (a time-unlimited env's value depends on the
    state alone)."""
    gae_lambda: float | None = None
    """``baseline='value'``: None = the advantage is the Monte-Carlo reward-to-go less V
    (REINFORCE with baseline); a number in [0, 1] = GAE(gamma, lambda) advantages from the
    value net (``pgtwin_core.gae``), the value of a truncated episode's last state and of
    the rollout's cut bootstrapped, and the value net fitted to the lambda-returns A + V.
    lambda = 1 is the reward-to-go with those bootstraps; smaller lambda trades variance
    for the value net's bias (``pgtwin_core.value_path``)."""
    natural_kl: float | None = None
    """None: the loss gradient goes to the optimizer as it is. A number delta > 0: the
    natural policy gradient step (``pgtwin_core.natural_gradient``): the gradient
    preconditioned by the inverse Fisher of the batch's per-sample scores and scaled so the
    step's KL, to second order, is delta; the optimizer must be ``sgd``, whose
    ``learning_rate`` then scales that step (1.0 takes it whole, as NPG and TRPO do)."""
    natural_damping: float = 0.1
    """``natural_kl``: lambda added to the Fisher's diagonal (> 0; TRPO's and SB3's 0.1)."""
    natural_cg_iters: int = 10
    """``natural_kl``: conjugate-gradient steps per update (TRPO's 10)."""
    natural_backtracks: int = 10
    """``natural_kl``: the line search halves the step up to this many times until the
    measured KL is within 1.5 delta and the surrogate loss falls (TRPO's; 0: the step as
    it is; ``pgtwin_core.natural_gradient``)."""
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
    jit_compile: bool = True
    """XLA-compile the eager twin's update steps (``tf.function(jit_compile=True)``) and both
    twins' per-sample gradient functions and episodic-baseline updates (eager: the same;
    legacy: each as one compiled function called in its graph, ``vectorized`` and
    ``analytic`` among the per-sample methods). Compiled per-sample functions get their rows
    padded to ``pgtwin_core.row_buckets`` sizes. The legacy twin's other updates and its
    ghost norms are not compiled (its Session runs them faster without; docs/benchmarks.md
    measures both)."""

    def __post_init__(self) -> None:
        # Predicates, not comparisons evaluated here: a None or a string must give the
        # message naming the field, not a TypeError from `None > 0`.
        checks = [
            ("gamma", lambda v: _real(v) and 0.0 <= v <= 1.0, "must be a number in [0, 1]"),
            ("learning_rate", lambda v: _real(v) and 0 < v < math.inf, "must be a finite number > 0"),
            ("adam_beta1", lambda v: _real(v) and 0.0 <= v < 1.0, "must be a number in [0, 1)"),
            ("adam_beta2", lambda v: _real(v) and 0.0 <= v < 1.0, "must be a number in [0, 1)"),
            ("adam_epsilon", lambda v: _real(v) and 0 < v < math.inf, "must be a finite number > 0"),
            ("normalize_returns", lambda v: isinstance(v, bool), "must be True or False"),
            ("gpomdp", lambda v: isinstance(v, bool), "must be True or False"),
            ("value_hidden", lambda v: v is None or (isinstance(v, (tuple, list)) and len(v) >= 1
                                                     and all(_count(h) for h in v)),
             "must be None (the policy's) or a non-empty tuple of ints >= 1"),
            ("value_learning_rate", lambda v: _real(v) and 0 < v < math.inf,
             "must be a finite number > 0"),
            ("value_fit_steps", _count, "must be an int >= 1"),
            ("value_fit", lambda v: v in VALUE_FITS, f"must be one of {VALUE_FITS}"),
            ("value_horizon", lambda v: isinstance(v, numbers.Integral)
             and not isinstance(v, bool) and v >= 0,
             "must be an int >= 0 (the env's time limit; 0: none)"),
            ("gae_lambda", lambda v: v is None or (_real(v) and 0.0 <= v <= 1.0),
             "must be None (Monte-Carlo returns) or a number in [0, 1]"),
            ("jit_compile", lambda v: isinstance(v, bool), "must be True or False"),
            ("baseline_memory", lambda v: _real(v) and 0.0 <= v < 1.0,
             "must be a number in [0, 1) (0: episodic baselines from this batch only)"),
            ("baseline_shrinkage", _shrinkage,
             "must be None (off), a number in [0, 1] or 'auto'"),
            ("natural_kl", lambda v: v is None or (_real(v) and 0 < v < math.inf),
             "must be None (plain gradient steps) or a finite number > 0 (the KL of a "
             "natural gradient step)"),
            ("natural_damping", lambda v: _real(v) and 0 < v < math.inf,
             "must be a finite number > 0"),
            ("natural_cg_iters", _count, "must be an int >= 1"),
            ("natural_backtracks", lambda v: isinstance(v, numbers.Integral)
             and not isinstance(v, bool) and v >= 0, "must be an int >= 0 (0: no line search)"),
            ("entropy_coef", lambda v: _real(v) and 0 <= v < math.inf, "must be a finite number >= 0"),
            # inf is refused too: TF's clip_by_global_norm turns an infinite clip norm into NaN.
            ("max_grad_norm", lambda v: v is None or (_real(v) and 0 < v < math.inf),
             "must be None or a finite number > 0"),
            ("num_envs", _count, "must be an int >= 1"),
            ("num_steps", _count, "must be an int >= 1"),
            ("optimizer", lambda v: v in OPTIMIZERS, f"must be one of {OPTIMIZERS}"),
            ("baseline", lambda v: v in BASELINES, f"must be one of {BASELINES}"),
            ("update_path", lambda v: v in UPDATE_PATHS, f"must be one of {UPDATE_PATHS}"),
            ("dtype", lambda v: v in DTYPES, f"must be one of {DTYPES}"),
        ]
        for name, ok, why in checks:
            value = getattr(self, name)
            try:
                valid = bool(ok(value))
            except TypeError:  # e.g. an unhashable value tested with `in`
                valid = False
            if not valid:
                raise ValueError(f"ReinforceConfig.{name}={value!r} {why}")
        if self.update_path == "cached" and self.baseline.startswith("optimal"):
            # Those baselines weigh per-sample gradients, which the twins compute with their
            # own pass over the batch; the recorded rollout passes would go unused.
            raise ValueError(
                f"ReinforceConfig.update_path='cached' cannot serve baseline={self.baseline!r}: "
                "the optimal baselines need per-sample gradients, computed from the batch "
                "again; use update_path='recompute' with them")
        if self.gpomdp and self.baseline not in PER_STEP_BASELINES:
            raise ValueError(
                f"ReinforceConfig.gpomdp=True cannot serve baseline={self.baseline!r}: GPOMDP "
                f"weights per-step terms, use one of {PER_STEP_BASELINES} (optimal_time is "
                "GPOMDP with its own baseline already)")
        if self.baseline_shrinkage and self.baseline not in SHRINKABLE_BASELINES:
            raise ValueError(
                f"ReinforceConfig.baseline_shrinkage={self.baseline_shrinkage!r} cannot serve "
                f"baseline={self.baseline!r}: it shrinks a leave-one-out ratio baseline "
                f"towards the mean, use it with one of {SHRINKABLE_BASELINES} (or set it to "
                "None)")
        if self.update_path == "cached" and self.baseline == "value":
            raise ValueError(
                "ReinforceConfig.update_path='cached' cannot serve baseline='value': the "
                "value net is fitted between the rollout and the update; use "
                "update_path='recompute'")
        if self.gae_lambda is not None and self.baseline != "value":
            raise ValueError(
                f"ReinforceConfig.gae_lambda={self.gae_lambda!r} cannot serve "
                f"baseline={self.baseline!r}: GAE's advantages come from the learned value "
                "net; use baseline='value' (or set gae_lambda to None)")
        self._check_natural()
        if self.value_hidden is not None:  # a list from a run's JSON settings
            object.__setattr__(self, "value_hidden", tuple(int(h) for h in self.value_hidden))
        object.__setattr__(self, "num_envs", int(self.num_envs))
        object.__setattr__(self, "num_steps", int(self.num_steps))

    def _check_natural(self) -> None:
        """Refuse a ``natural_kl`` that :func:`natural_conflict` finds a conflict for."""
        why = natural_conflict(self)
        if why is not None:
            raise NaturalConflictError(
                f"ReinforceConfig.natural_kl={self.natural_kl!r} cannot serve {why}")

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


def natural_conflict(config: ReinforceConfig) -> str | None:
    """Why ``config.natural_kl`` cannot be used with the rest of ``config``, None if it can
    (or is off). The one home of these rules: the config refuses them, and
    ``pgtwin.train.settings.resolve`` drops a per-env row's natural step when the caller's
    choices meet one."""
    if config.natural_kl is None:
        return None
    if config.optimizer != "sgd":
        return (f"optimizer={config.optimizer!r}: Adam would rescale each coordinate of the "
                "natural step and undo it; use optimizer='sgd' (learning_rate scales the "
                "step, 1.0 takes it whole)")
    if config.max_grad_norm is not None:
        return (f"max_grad_norm={config.max_grad_norm!r}: the KL radius bounds the step "
                "already; set max_grad_norm to None (or lower natural_kl)")
    if config.baseline.startswith("optimal"):
        return (f"baseline={config.baseline!r}: the optimal baselines' update is the twins' "
                f"own TensorFlow step; use a per-step baseline {PER_STEP_BASELINES}")
    if config.update_path == "cached":
        return ("update_path='cached': the natural step needs per-sample scores, computed "
                "from the batch again; use update_path='recompute'")
    return None
