"""The value network of ``baseline='value'``: its spec, numpy initial weights and inputs.

Both twins build *the same* value net from a :class:`ValueSpec` and the numpy weights of
:func:`init_value_weights`, under the same canonical names (``value/dense_0/kernel`` ...), as
they do the policy (``pgtwin_core.specs``). Network (TF ops once, in
``pgtwin.mode_agnostic.value_net``)::

    mlp : x = concat(obs, tau)                        [B, obs_dim + 1]
    lstm: x = concat(LSTM(obs window), tau)           [B, units + 1]   (the policy's LSTM)
          x = act(x @ dense_i/kernel + dense_i/bias)  for each dense size
    head: z = x @ head/kernel + head/bias             [B]
    V = return_mean + return_std * z                  (the targets' scale, not trained)

``tau = t / value_horizon`` is the time feature (t the step's index in its episode,
``pgtwin_core.episode_time``): with a time limit the reward-to-go of a state depends on the
steps left, so the value must see t; without one (``value_horizon = 0``) tau is 0.

The net is trained on standardised targets ``(G - return_mean) / return_std``, the two
statistics set from the batch it is fitted on (``pgtwin_core.value_path``) and kept as
untrained variables: on raw CartPole returns (tens) the tanh units saturated chasing the
mean and V collapsed to a constant (docs/baselines.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.episode_time import episode_steps
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec, Torso, orthogonal


@dataclass(frozen=True)
class ValueSpec(Torso):
    """What both twins build for the value baseline (module doc)."""

    obs_shape: tuple[int, ...]
    """The policy's: ``(obs_dim,)`` for ``mlp``, ``(K, obs_dim)`` for ``lstm``."""
    torso: str
    """The policy's torso: ``mlp`` or ``lstm``."""
    hidden: tuple[int, ...]
    """Hidden sizes; for ``lstm`` the first is the LSTM's units."""
    activation: str
    """``tanh`` or ``relu`` (the policy's)."""

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """The trained weights' canonical names in creation order, with their shapes."""
        shapes, width = self.torso_shapes("value", extra_inputs=1)  # + the time feature
        shapes["value/head/kernel"] = (width, 1)
        shapes["value/head/bias"] = (1,)
        return shapes

    def variable_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every variable of the value net: the trained weights, then ``STATS``."""
        return {**self.weight_shapes(), **{name: (1,) for name in STATS}}


STATS = ("value/return_mean", "value/return_std")
"""The targets' statistics V is scaled back with (module doc): not trained, checkpointed."""


def value_spec(spec: PolicySpec, config: ReinforceConfig) -> ValueSpec:
    """The value net of a policy ``spec``: its torso and activation, ``config.value_hidden``
    (or the policy's hidden sizes)."""
    hidden = spec.hidden if config.value_hidden is None else tuple(config.value_hidden)
    return ValueSpec(obs_shape=spec.obs_shape, torso=spec.torso, hidden=hidden,
                     activation=spec.activation)


def value_optimizer_config(config: ReinforceConfig) -> ReinforceConfig:
    """The config each twin builds the value net's optimizer from: the policy's kind at
    ``value_learning_rate``, except under ``natural_kl``, where the policy's SGD only
    carries the natural step and the value net's regression keeps Adam (as TRPO's critic
    does; docs/continuous.md measures SGD against Adam there)."""
    kind = "adam" if config.natural_kl is not None else config.optimizer
    return config.replace(learning_rate=config.value_learning_rate, optimizer=kind,
                          natural_kl=None)


def init_value_weights(vspec: ValueSpec, seed: int = 0, *, dtype: str) -> dict[str, np.ndarray]:
    """Initial weights by canonical name, in ``dtype``: orthogonal kernels (gain sqrt(2)
    hidden, 1 for the head, as Stable-Baselines3's value head), zero biases, the LSTM
    forget-gate bias at 1; the statistics at 0 and 1. Drawn from ``default_rng((seed, 1))``: the policy's seed, a
    stream of its own (the policy's weights do not change when a value net is added)."""
    rng = np.random.default_rng((seed, 1))
    weights = {"value/return_mean": np.zeros(1, dtype), "value/return_std": np.ones(1, dtype)}
    for name, shape in vspec.weight_shapes().items():
        if name.endswith("bias"):
            value = np.zeros(shape)
            if name == "value/lstm/bias":
                units = shape[0] // 4
                value[units:2 * units] = 1.0
        else:
            value = orthogonal(rng, shape, 1.0 if name.startswith("value/head") else np.sqrt(2.0))
        weights[name] = value.astype(dtype)
    return {n: weights[n] for n in vspec.variable_shapes()}


def check_value_weights(vspec: ValueSpec, weights: dict[str, np.ndarray], *,
                        dtype: str) -> dict[str, np.ndarray]:
    """``weights`` cast to ``dtype``; ``ValueError`` listing the missing, extra, misshapen or
    non-finite ones."""
    shapes = vspec.variable_shapes()
    problems = [f"missing {n}" for n in shapes if n not in weights]
    problems += [f"extra {n}" for n in weights if n not in shapes]
    problems += [f"{n}: expected {shapes[n]}, got {tuple(np.shape(weights[n]))}"
                 for n in shapes if n in weights and tuple(np.shape(weights[n])) != shapes[n]]
    problems += [f"{n} holds non-finite values" for n in shapes if n in weights
                 and tuple(np.shape(weights[n])) == shapes[n]
                 and not np.all(np.isfinite(weights[n]))]
    if "value/return_std" in weights and np.all(np.isfinite(weights["value/return_std"])) \
            and np.any(np.asarray(weights["value/return_std"]) <= 0):
        problems.append("value/return_std must be > 0")
    if problems:
        raise ValueError("value weights do not match the ValueSpec: " + "; ".join(problems))
    return {n: np.asarray(weights[n], dtype) for n in shapes}


def time_feature(batch: Batch, config: ReinforceConfig) -> np.ndarray:
    """float64 ``[T, N]``: tau = t / ``config.value_horizon`` (0 where the horizon is 0 and
    on autoreset steps)."""
    steps = episode_steps(batch)
    if config.value_horizon == 0:
        return np.zeros(steps.shape)
    return np.where(steps >= 0, steps / float(config.value_horizon), 0.0)
