"""Policy specifications and their initial numpy weights.

A :class:`PolicySpec` says everything both twins need to build *the same* network:
distribution, torso, layer sizes, activation, observation and action shapes, how a
Gaussian mean is squashed into its bounds. The dtype is not part of it: it is a setting of
the run (``ReinforceConfig.dtype``), passed to what needs it. :func:`init_weights` gives the
numpy weights under canonical names (``policy/dense_0/kernel`` ...) that both twins use
verbatim as their variable names, which is what makes exact parity possible.

Network (both torsos end in the same head)::

    mlp : x = obs                                   [B, obs_dim]
          x = act(x @ dense_i/kernel + dense_i/bias) for each hidden size
    lstm: obs is a history window                   [B, K, obs_dim]
          h_K = LSTM(obs) (hand-written, gates i, f, g, o; see lstm_step below)
          x = act(x @ dense_i/kernel + dense_i/bias) for hidden[1:]
    head: z = x @ head/kernel + head/bias           [B, num_actions] or [B, action_dim]
    categorical: logits = z
    gaussian   : mean = squash(z), log_std = policy/log_std (state-independent, [action_dim])
"""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from pgtwin_core.config import DTYPES
from pgtwin_core.finite_arrays import cast_finite

DISTRIBUTIONS = ("categorical", "gaussian")
TORSOS = ("mlp", "lstm")
ACTIVATIONS = ("tanh", "relu")
SQUASHES = ("sigmoid", "tanh", "none")


class Torso:
    """The torso both networks share (the policy's, and the value net's of
    ``pgtwin_core.value_spec``): needs ``obs_shape``, ``torso`` and ``hidden``."""

    obs_shape: tuple[int, ...]
    torso: str
    hidden: tuple[int, ...]

    @property
    def obs_dim(self) -> int:
        """Features of one observation (the last axis of ``obs_shape``)."""
        return self.obs_shape[-1]

    @property
    def history(self) -> int:
        """Length K of the observation window (1 for ``mlp``)."""
        return self.obs_shape[0] if self.torso == "lstm" else 1

    @property
    def dense_sizes(self) -> tuple[int, ...]:
        """Sizes of the dense hidden layers (after the LSTM for ``lstm``)."""
        return self.hidden[1:] if self.torso == "lstm" else self.hidden

    def torso_shapes(self, prefix: str, extra_inputs: int = 0
                     ) -> tuple[dict[str, tuple[int, ...]], int]:
        """``({name: shape}, width)``: the torso's weights under ``prefix``
        (``{prefix}/lstm/...``, ``{prefix}/dense_i/...``) in creation order, and the width
        of its output. ``extra_inputs`` features join the first dense layer's input (after
        the LSTM, if any): the value net's time feature."""
        shapes: dict[str, tuple[int, ...]] = {}
        width = self.obs_dim
        if self.torso == "lstm":
            units = self.hidden[0]
            shapes[f"{prefix}/lstm/kernel"] = (width + units, 4 * units)
            shapes[f"{prefix}/lstm/bias"] = (4 * units,)
            width = units
        width += extra_inputs
        for i, size in enumerate(self.dense_sizes):
            shapes[f"{prefix}/dense_{i}/kernel"] = (width, size)
            shapes[f"{prefix}/dense_{i}/bias"] = (size,)
            width = size
        return shapes, width


@dataclass(frozen=True)
class PolicySpec(Torso):
    """What both twins build: a categorical or Gaussian policy over an MLP or LSTM torso."""

    distribution: str
    """``categorical`` (discrete actions, logits) or ``gaussian`` (continuous, mean and log-std)."""
    obs_shape: tuple[int, ...]
    """Shape of one observation: ``(obs_dim,)`` for ``mlp``, ``(K, obs_dim)`` for ``lstm``."""
    action_size: int
    """Number of discrete actions (categorical) or the action dimension (gaussian)."""
    torso: str = "mlp"
    """``mlp`` or ``lstm`` (a hand-written LSTM over the K-observation window)."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden sizes; for ``lstm`` the first is the LSTM's units, the rest dense layers after it."""
    activation: str = "tanh"
    """Activation of the dense hidden layers: ``tanh`` or ``relu``."""
    action_low: tuple[float, ...] | None = None
    """Gaussian only: lower bounds of the action box (length ``action_size``)."""
    action_high: tuple[float, ...] | None = None
    """Gaussian only: upper bounds of the action box (length ``action_size``)."""
    squash: str = "none"
    """Gaussian only: how the mean is put in the bounds: ``sigmoid``, ``tanh`` or ``none``."""
    log_std_init: float = -0.5
    """Gaussian only: initial value of the learned, state-independent log-std."""
    action_start: int = 0
    """Categorical only: the env's first action (gymnasium's ``Discrete(n, start=s)``). The
    policy samples indices ``0..n-1``; the env is stepped with ``s + index``
    (``pgtwin_core.sampling.env_actions``), and batches keep the indices."""

    def __post_init__(self) -> None:
        _check_choice("distribution", self.distribution, DISTRIBUTIONS)
        _check_choice("torso", self.torso, TORSOS)
        _check_choice("activation", self.activation, ACTIVATIONS)
        _check_choice("squash", self.squash, SQUASHES)
        object.__setattr__(self, "obs_shape", tuple(int(d) for d in self.obs_shape))
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        expected_rank = 2 if self.torso == "lstm" else 1
        if len(self.obs_shape) != expected_rank or min(self.obs_shape) < 1:
            raise ValueError(
                f"PolicySpec.obs_shape={self.obs_shape} does not fit torso={self.torso!r}: "
                f"expected {'(K, obs_dim)' if expected_rank == 2 else '(obs_dim,)'} with positive sizes"
            )
        if isinstance(self.action_size, bool) or int(self.action_size) != self.action_size:
            # A float size would only fail later, as a numpy shape error far from here.
            raise ValueError(f"PolicySpec.action_size must be an integer, got {self.action_size!r}")
        object.__setattr__(self, "action_size", int(self.action_size))
        if self.action_size < 1:
            raise ValueError(f"PolicySpec.action_size must be >= 1, got {self.action_size}")
        if any(h < 1 for h in self.hidden):
            raise ValueError(f"PolicySpec.hidden sizes must be >= 1, got {self.hidden}")
        if self.torso == "lstm" and not self.hidden:
            raise ValueError("PolicySpec.hidden must name the LSTM units for torso='lstm'")
        if isinstance(self.action_start, bool) or int(self.action_start) != self.action_start:
            raise ValueError(f"PolicySpec.action_start must be an integer, got {self.action_start!r}")
        object.__setattr__(self, "action_start", int(self.action_start))
        if self.action_start and self.distribution != "categorical":
            raise ValueError(f"PolicySpec.action_start={self.action_start} is for categorical "
                             "policies (a Discrete action space); a Box has bounds instead")
        if self.distribution == "gaussian":
            self._check_bounds()
        if not np.isfinite(self.log_std_init):
            raise ValueError(f"PolicySpec.log_std_init must be finite, got {self.log_std_init}")

    def _check_bounds(self) -> None:
        if self.squash == "none" and self.action_low is None:
            return
        for name in ("action_low", "action_high"):
            bound = getattr(self, name)
            if bound is None or len(bound) != self.action_size:
                raise ValueError(
                    f"PolicySpec.{name}={bound} must have {self.action_size} entries "
                    f"for squash={self.squash!r}"
                )
            object.__setattr__(self, name, tuple(float(b) for b in bound))
        low, high = np.asarray(self.action_low), np.asarray(self.action_high)
        # Without a squash the bounds only clip what the env gets, so a dimension may be
        # unbounded on either side (a Box of [0, 1] x [-inf, inf]); a squash needs them all.
        finite = self.squash == "none" or (np.all(np.isfinite(low)) and np.all(np.isfinite(high)))
        if not (finite and np.all(low < high)):
            need = "low < high" if self.squash == "none" else "finite with low < high"
            raise ValueError(
                f"PolicySpec action bounds must be {need} for squash={self.squash!r}, got "
                f"low={self.action_low}, high={self.action_high}"
            )

    @property
    def num_params(self) -> int:
        """Distribution parameters per sample: logits, or mean and log-std side by side."""
        return self.action_size * (2 if self.distribution == "gaussian" else 1)

    @property
    def is_discrete(self) -> bool:
        """Whether actions are integer indices (categorical)."""
        return self.distribution == "categorical"

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """Canonical weight names in creation order, with their shapes."""
        shapes, width = self.torso_shapes("policy")
        shapes["policy/head/kernel"] = (width, self.action_size)
        shapes["policy/head/bias"] = (self.action_size,)
        if self.distribution == "gaussian":
            shapes["policy/log_std"] = (self.action_size,)
        return shapes


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"PolicySpec.{name}={value!r} is not one of {choices}")


def observation_rank_problem(env_id: str, obs_shape: tuple[int, ...], torso: str,
                             history: int = 1) -> str | None:
    """Why an env's observations of ``obs_shape`` (the env's own, before any history window)
    do not fit ``torso``, or None. The MLP takes ``[obs_dim]``; the LSTM takes ``[obs_dim]``
    in a window of ``history`` steps, or an env's own window ``[K, obs_dim]`` (history 1),
    whose first axis it reads as time."""
    rank = len(obs_shape)
    if rank == 1:
        return None
    flatten = ("flatten them first (gymnasium.wrappers.FlattenObservation around the env, "
               "or an env that returns obs.ravel())")
    if torso == "lstm" and rank == 2 and history == 1:
        return None
    if torso == "lstm" and rank == 2:
        return (f"{env_id!r} has 2-D observations {tuple(obs_shape)}: the lstm torso reads "
                "them as the env's own window [K, obs_dim] only with --history 1 "
                f"(history=1), while a history window (here {history} steps) stacks 1-D "
                "observations: pass --history 1, or if the first "
                f"axis is not time, {flatten}")
    if torso == "lstm":
        return (f"{env_id!r} has {rank}-D observations {tuple(obs_shape)}: the lstm torso "
                f"takes 1-D observations or an env's own window [K, obs_dim]; {flatten}")
    time = (", or, if the first axis is time ([K, obs_dim]), use --torso lstm --history 1 "
            "(torso='lstm', history=1), which reads it as K steps" if rank == 2 else "")
    return (f"{env_id!r} has {rank}-D observations {tuple(obs_shape)}, and the mlp torso takes "
            f"1-D ones: {flatten}{time}")


def spec_for_env(
    env: gym.Env | gym.vector.VectorEnv,
    torso: str = "mlp",
    hidden: tuple[int, ...] = (64, 64),
    activation: str = "tanh",
    squash: str | None = None,
    log_std_init: float = -0.5,
) -> PolicySpec:
    """A sensible spec from an env's (single) observation and action spaces.

    Discrete actions give a categorical policy (``Discrete(n, start=s)``: ``action_start = s``,
    so the env gets ``s + index``); a Box gives a Gaussian one whose mean is
    squashed into the bounds (``sigmoid`` for ``[0, 1]`` boxes, else
    ``tanh``; ``none`` for boxes unbounded in some dimension, whose bounded dimensions are
    then clipped when the env is stepped). The observation shape is taken as it is, so a
    history-window env (``[K, obs_dim]``) needs ``torso='lstm'``.
    """
    obs_space = getattr(env, "single_observation_space", env.observation_space)
    act_space = getattr(env, "single_action_space", env.action_space)
    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"spec_for_env: observation space {obs_space} is not a Box")
    history = getattr(env, "pgtwin_history", 1)
    problem = observation_rank_problem(
        getattr(env, "pgtwin_env_id", None) or getattr(getattr(env, "spec", None), "id", None)
        or "the env",
        obs_space.shape[1:] if history > 1 else obs_space.shape, torso, history)
    if problem:
        raise ValueError(f"spec_for_env: {problem}")
    if isinstance(act_space, gym.spaces.Discrete):
        return PolicySpec("categorical", obs_space.shape, int(act_space.n), torso=torso,
                          hidden=hidden, activation=activation,
                          action_start=int(act_space.start))
    if isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1:
        low, high = act_space.low.astype(np.float64), act_space.high.astype(np.float64)
        bounded = bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)))
        some = bool(np.any(np.isfinite(low)) or np.any(np.isfinite(high)))
        if squash is None:
            unit_box = bounded and np.all(low == 0.0) and np.all(high == 1.0)
            squash = "sigmoid" if unit_box else ("tanh" if bounded else "none")
        return PolicySpec(
            "gaussian", obs_space.shape, int(act_space.shape[0]), torso=torso, hidden=hidden,
            activation=activation, squash=squash, log_std_init=log_std_init,
            action_low=tuple(low) if some else None,
            action_high=tuple(high) if some else None,
        )
    raise ValueError(
        f"spec_for_env: action space {act_space} is not supported "
        "(supported: Discrete, or a 1-D Box)"
    )


def init_weights(spec: PolicySpec, seed: int = 0, *, dtype: str) -> dict[str, np.ndarray]:
    """Initial weights under canonical names, in ``dtype`` (``float32`` or ``float64``).

    Orthogonal kernels (gain sqrt(2) for hidden layers, 0.01 for the head, as in
    Stable-Baselines3 and CleanRL, so the initial policy is near uniform), zero biases,
    the LSTM forget-gate bias at 1, and ``log_std = log_std_init``.
    """
    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}
    for name, shape in spec.weight_shapes().items():
        if name.endswith("log_std"):
            value = np.full(shape, spec.log_std_init)
        elif name.endswith("bias"):
            value = np.zeros(shape)
            if name == "policy/lstm/bias":
                units = shape[0] // 4
                value[units:2 * units] = 1.0  # forget gate: remember by default
        else:
            gain = 0.01 if name.startswith("policy/head") else np.sqrt(2.0)
            value = orthogonal(rng, shape, gain)
        weights[name] = value.astype(_np_dtype(dtype))
    return weights


def orthogonal(rng: np.random.Generator, shape: tuple[int, int], gain: float) -> np.ndarray:
    """A ``shape`` matrix with orthonormal rows or columns times ``gain`` (Saxe et al. 2014),
    float64; the policy's and the value net's kernels (``pgtwin_core.value_spec``)."""
    rows, cols = shape
    a = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))  # unique decomposition, as in Saxe et al. (2014)
    q = q if rows >= cols else q.T
    return gain * q[:rows, :cols]


def check_weights(spec: PolicySpec, weights: dict[str, np.ndarray], *,
                  dtype: str) -> dict[str, np.ndarray]:
    """Validate ``weights`` against ``spec`` and return them cast to ``dtype``.

    Raises ``ValueError`` listing the missing, extra and wrongly shaped weights together,
    then for a weight that is not real numbers, or has a non-finite entry before or after
    the cast (naming it: ``pgtwin_core.finite_arrays.cast_finite``).
    """
    shapes = spec.weight_shapes()
    missing = [n for n in shapes if n not in weights]
    extra = [n for n in weights if n not in shapes]
    wrong = [
        f"{n}: expected {shapes[n]}, got {tuple(np.shape(weights[n]))}"
        for n in shapes if n in weights and tuple(np.shape(weights[n])) != shapes[n]
    ]
    problems = []
    if missing:
        problems.append(f"missing {missing}")
    if extra:
        problems.append(f"extra {extra}")
    if wrong:
        problems.append("wrongly shaped " + "; ".join(wrong))
    if problems:
        raise ValueError("weights do not match the PolicySpec: " + ", ".join(problems))
    out = {}
    for name in shapes:
        value = np.asarray(weights[name])
        if value.dtype.kind not in "fiub":  # complex would drop its imaginary part silently
            raise ValueError(f"weight {name} has dtype {value.dtype}; expected real numbers")
        out[name] = cast_finite(value, _np_dtype(dtype).name, f"weight {name}",
                                "scale the weights")
    return out


def _np_dtype(dtype: str) -> np.dtype:
    """``dtype`` as numpy's, refusing anything but ``DTYPES`` (a float16 would pass numpy)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not one of {DTYPES}")
    return np.dtype(dtype)
