"""Rollouts: step a gymnasium vector env with a policy and return a time-major ``Batch``.

Gymnasium 1.x vector envs autoreset in NEXT_STEP mode: after env i reports
``terminated or truncated`` at step t, the call at t + 1 only resets env i — the action is
ignored, the reward (0) is part of no episode and the observation returned is the new
episode's first one. Such steps are kept in the arrays (so shapes stay ``[T, N]``) but are
marked ``valid = False``: training and episode statistics skip them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from pgtwin_core import sampling
from pgtwin_core.errors import ENV_INDEX, EnvStepError, EnvValueError, raised_at
from pgtwin_core.observation_shape import ObservationShapeError, shape_message
from pgtwin_core.specs import PolicySpec

PolicyFn = Callable[[np.ndarray], np.ndarray]


@dataclass
class RolloutState:
    """What a rollout carries from one ``collect`` to the next (mutable, owned by the caller)."""

    obs: np.ndarray
    """Current observation of every env, ``[N, *obs_shape]``."""
    needs_reset: np.ndarray
    """bool ``[N]``: env i ended its episode on the last step, so its next step only resets."""
    episode_return: np.ndarray
    """float64 ``[N]``: undiscounted return so far of each env's running episode."""
    episode_length: np.ndarray
    """int64 ``[N]``: steps so far of each env's running episode."""
    env_steps: int = 0
    """Env steps taken so far over all envs, autoreset steps included."""

    @classmethod
    def start(cls, envs: gym.vector.VectorEnv, seed: int | None = None) -> "RolloutState":
        """Reset ``envs`` (env i with seed ``seed + i``) and start counting."""
        if seed is None:
            seed = getattr(envs, "pgtwin_seed", None)
        obs, _ = envs.reset(seed=seed)
        n = envs.num_envs
        _check_finite_obs(obs, step=-1, env_steps=0)
        return cls(obs=obs, needs_reset=np.zeros(n, bool), episode_return=np.zeros(n),
                   episode_length=np.zeros(n, np.int64))


@dataclass(frozen=True)
class Batch:
    """A time-major rollout of T steps from N envs.

    Actions are those sampled (unclipped for Gaussian policies); ``log_probs`` are numpy
    values for statistics only: they carry no gradient (a loss built from them reaches no weight).
    """

    obs: np.ndarray
    """``[T, N, *obs_shape]`` observations the actions were chosen from."""
    actions: np.ndarray
    """int64 ``[T, N]`` (categorical) or float64 ``[T, N, action_dim]`` (gaussian)."""
    rewards: np.ndarray
    """float64 ``[T, N]``."""
    terminated: np.ndarray
    """bool ``[T, N]``: the episode ended in a terminal state at this step."""
    truncated: np.ndarray
    """bool ``[T, N]``: the episode was cut (time limit) at this step."""
    log_probs: np.ndarray
    """float64 ``[T, N]``: log pi(a|s) at sampling time (no gradient)."""
    valid: np.ndarray
    """bool ``[T, N]``: False on autoreset steps, which belong to no episode."""
    next_obs: np.ndarray
    """``[N, *obs_shape]``: the observation after the last step."""
    episode_returns: np.ndarray
    """float64 ``[E]``: undiscounted returns of the episodes that finished in this batch."""
    episode_lengths: np.ndarray
    """int64 ``[E]``: lengths of those episodes."""
    params: np.ndarray | None = None
    """``[T, N, num_params]`` distribution parameters used for sampling (for diagnostics)."""
    env_steps: int = 0
    """Total env steps taken by the rollout state at the end of this batch."""
    episode_steps: np.ndarray | None = None
    """int64 ``[T, N]``: each step's index in its episode, counted from the episode's real
    first step (0), also for an episode that began in an earlier batch; -1 on autoreset
    steps. None in a hand-made batch (``pgtwin_core.episode_time.episode_steps`` then counts
    from the batch's first step)."""

    @property
    def num_steps(self) -> int:
        """T."""
        return self.rewards.shape[0]

    @property
    def num_envs(self) -> int:
        """N."""
        return self.rewards.shape[1]

    @property
    def num_valid(self) -> int:
        """Steps that belong to an episode."""
        return int(self.valid.sum())


def collect(
    envs: gym.vector.VectorEnv,
    policy_fn: PolicyFn,
    spec: PolicySpec,
    num_steps: int,
    rng: np.random.Generator,
    state: RolloutState | None = None,
) -> tuple[Batch, RolloutState]:
    """Run ``num_steps`` steps of every env and return ``(batch, state)``.

    Args:
      envs: a vector env with NEXT_STEP autoreset (see ``pgtwin_core.envs.make_vec_env``).
      policy_fn: maps observations ``[N, *obs_shape]`` to distribution parameters
        ``[N, spec.num_params]`` (numpy), e.g. a twin's ``dist_params``.
      spec: the policy spec, for sampling and clipping.
      num_steps: T >= 1.
      rng: the generator actions are sampled with.
      state: the state returned by the previous call; ``None`` resets the envs.

    Raises:
      ObservationShapeError (a ValueError): an observation whose shape is not the observation
        space's, naming the env index, the rollout step, both shapes.
      ValueError: a non-finite observation or reward, or distribution params of the wrong
        shape or non-finite, naming the env index and the step; an env that autoresets in
        another mode than NEXT_STEP.
    """
    if num_steps < 1:
        raise ValueError(f"collect: num_steps must be >= 1, got {num_steps}")
    _check_autoreset_mode(envs)
    if state is None:
        state = RolloutState.start(envs)
    n = envs.num_envs
    obs_buf = np.empty((num_steps, *state.obs.shape), dtype=state.obs.dtype)
    act_shape = (num_steps, n) if spec.is_discrete else (num_steps, n, spec.action_size)
    act_buf = np.empty(act_shape, np.int64 if spec.is_discrete else np.float64)
    params_buf = np.empty((num_steps, n, spec.num_params))
    rew_buf = np.empty((num_steps, n))
    term_buf = np.empty((num_steps, n), bool)
    trunc_buf = np.empty((num_steps, n), bool)
    logp_buf = np.empty((num_steps, n))
    valid_buf = np.empty((num_steps, n), bool)
    steps_buf = np.empty((num_steps, n), np.int64)
    ep_returns: list[np.ndarray] = []
    ep_lengths: list[np.ndarray] = []

    obs, act_dtype = state.obs, _action_dtype(envs)
    for t in range(num_steps):
        params = np.asarray(policy_fn(obs))
        _check_params(params, spec, n, t)
        actions, log_probs = sampling.sample(spec, params, rng)
        _check_finite_actions(actions, params, t)
        next_obs, rewards, terminated, truncated, _ = _step(envs, spec, actions, act_dtype, t,
                                                           state.env_steps + n)
        state.env_steps += n
        _check_obs_shape(next_obs, state.obs.shape, t, state.env_steps)
        _check_finite_obs(next_obs, t, state.env_steps)
        _check_finite_rewards(rewards, t, state.env_steps)
        valid = ~state.needs_reset
        rewards = np.where(valid, rewards, 0.0)
        obs_buf[t], act_buf[t], params_buf[t] = obs, actions, params
        # A step can fail and hit the time limit at once (CartPole's pole falling at step
        # 500 sets both): it is a true terminal, so ``truncated`` is kept for cuts alone.
        rew_buf[t], term_buf[t] = rewards, terminated & valid
        trunc_buf[t] = truncated & valid & ~terminated
        logp_buf[t], valid_buf[t] = log_probs, valid
        steps_buf[t] = np.where(valid, state.episode_length, -1)

        state.episode_return += rewards
        state.episode_length += valid
        done = (terminated | truncated) & valid
        if done.any():
            ep_returns.append(state.episode_return[done].copy())
            ep_lengths.append(state.episode_length[done].copy())
            state.episode_return[done] = 0.0
            state.episode_length[done] = 0
        state.needs_reset = done
        obs = next_obs
    state.obs = obs
    batch = Batch(
        obs=obs_buf, actions=act_buf, rewards=rew_buf, terminated=term_buf, truncated=trunc_buf,
        log_probs=logp_buf, valid=valid_buf, next_obs=obs,
        episode_returns=np.concatenate(ep_returns) if ep_returns else np.zeros(0),
        episode_lengths=np.concatenate(ep_lengths) if ep_lengths else np.zeros(0, np.int64),
        params=params_buf, env_steps=state.env_steps, episode_steps=steps_buf,
    )
    return batch, state


def _step(envs: gym.vector.VectorEnv, spec: PolicySpec, actions: np.ndarray,
          act_dtype: np.dtype, step: int, env_steps: int):
    """``envs.step`` of the sampled actions; a sub-env's shape error gets the step added,
    and anything else the env raises becomes an :class:`EnvStepError` naming the step and
    the line of the env's code that raised."""
    try:
        return envs.step(sampling.env_actions(spec, actions, act_dtype))
    except ObservationShapeError as err:
        where = f"rollout step {step} (env-step {env_steps})"
        if err.env_index is None:  # re-raised from an async worker: only its message is left
            raise ObservationShapeError(f"{err}, at {where}") from err
        raise ObservationShapeError(
            shape_message(err.got, f"env {err.env_index}", where, err.expected),
            err.env_index, err.got, err.expected) from err
    except Exception as err:  # noqa: BLE001  (the env's code: reported with its traceback)
        index = getattr(err, ENV_INDEX, None)
        who = "the env" if index is None else f"env {index}"
        raise EnvStepError(f"{who} raised {type(err).__name__} at rollout step {step} "
                           f"(env-step {env_steps}), in {raised_at(err)}: {err}") from err


def _action_dtype(envs: gym.vector.VectorEnv) -> np.dtype:
    """The dtype of one env's actions (its Box's), float32 where the env does not say."""
    space = getattr(envs, "single_action_space", None)
    return getattr(space, "dtype", None) or np.dtype(np.float32)


def _check_finite_actions(actions: np.ndarray, params: np.ndarray, step: int) -> None:
    """Gaussian samples are finite before they reach the env: a log-std past the dtype's
    range (a --log-std-floor of 800) samples inf from finite params."""
    if actions.dtype.kind != "f" or np.isfinite(actions).all():
        return
    i = int(np.argmax(~np.isfinite(actions).all(axis=tuple(range(1, actions.ndim)))))
    raise ValueError(
        f"non-finite action {actions[i]} sampled for env {i} at rollout step {step}, from "
        f"distribution params {params[i]}: a log-std too large to sample from (check "
        "--log-std-floor, or the policy's log_std); nothing was sent to the env")


def _check_obs_shape(obs: np.ndarray, expected: tuple[int, ...], step: int,
                     env_steps: int) -> None:
    # A hand-vectorised env has no sub-env wrappers: its whole batch is checked here.
    if obs.shape != expected:
        raise ObservationShapeError(shape_message(
            obs.shape, "the vector env", f"rollout step {step} (env-step {env_steps})", expected))


def _check_autoreset_mode(envs: gym.vector.VectorEnv) -> None:
    # The valid mask assumes NEXT_STEP; in SAME_STEP mode the step after an end is a real
    # step, so masking it would silently drop data. Envs that do not say are trusted.
    mode = getattr(envs, "metadata", {}).get("autoreset_mode")
    if mode is not None and AutoresetMode(mode) is not AutoresetMode.NEXT_STEP:
        raise ValueError(
            f"collect: the vector env autoresets in mode {AutoresetMode(mode)!r}; rollouts need "
            f"{AutoresetMode.NEXT_STEP!r} (gymnasium's default, see pgtwin_core.envs.make_vec_env)"
        )


def _check_params(params: np.ndarray, spec: PolicySpec, n: int, step: int) -> None:
    # NaN logits would otherwise sample action 0 silently (every `u > cdf` is False).
    expected = (n, spec.num_params)
    if params.shape != expected:
        raise ValueError(
            f"policy_fn returned distribution params of shape {params.shape} at rollout step "
            f"{step}; expected {list(expected)} for a {spec.distribution} policy"
        )
    bad = ~np.isfinite(params).all(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"policy_fn returned non-finite distribution params for env {i} at rollout step "
            f"{step}: {params[i]}"
        )


def _check_finite_obs(obs: np.ndarray, step: int, env_steps: int) -> None:
    bad = ~np.isfinite(obs.reshape(obs.shape[0], -1)).all(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        where = "reset" if step < 0 else f"rollout step {step}"
        raise EnvValueError(
            f"non-finite observation from env {i} at {where} (env-step {env_steps}): {obs[i]}"
        )


def _check_finite_rewards(rewards: np.ndarray, step: int, env_steps: int) -> None:
    bad = ~np.isfinite(rewards)
    if bad.any():
        i = int(np.argmax(bad))
        raise EnvValueError(
            f"non-finite reward {rewards[i]} from env {i} at rollout step {step} "
            f"(env-step {env_steps})"
        )
