"""Seeded gymnasium vector environments for the rollouts of both twins."""
from __future__ import annotations

import dataclasses
from typing import Literal

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

import pgtwin_core.battery  # noqa: F401  (registers BatteryArbitrage-v0)
from pgtwin_core import seeded_cartpole
from pgtwin_core.history import HistoryWindow
from pgtwin_core.observation_shape import ObservationShapeCheck
from pgtwin_core.specs import observation_rank_problem

Vectorization = Literal["auto", "vector", "sync", "async"]

SUPPORTED_HINT = (
    "supported: any registered gymnasium env with Box observations and Discrete or Box "
    "actions, e.g. CartPole-v1, Pendulum-v1, BatteryArbitrage-v0"
)


def unknown_env_message(env_id: str, err: Exception) -> str:
    """Why ``env_id`` is not registered, what is supported, and how to register one's own:
    the forgotten module prefix is the usual cause with a user's env."""
    if isinstance(err, gymnasium.error.DeprecatedEnv):  # registered, in a newer version
        return f"env id {env_id!r} is deprecated: {err}"
    return (f"unknown env id {env_id!r} ({err}); {SUPPORTED_HINT}. If your own module "
            f"registers it, import that module first (pgtwin train: --env "
            f"MODULE:{env_id}, e.g. --env mypkg.envs:{env_id})")


_MODES = {"vector": "vector_entry_point", "sync": "sync", "async": "async"}


def make_vec_env(
    env_id: str,
    num_envs: int = 1,
    seed: int = 0,
    history: int = 1,
    vectorization: Vectorization = "auto",
) -> gymnasium.vector.VectorEnv:
    """Build ``num_envs`` copies of ``env_id`` as one vector env, seeded but not yet reset.

    The seed is recorded as ``envs.pgtwin_seed``; the first collect must call
    ``envs.reset(seed=envs.pgtwin_seed)``, which seeds sub-env i with ``seed + i`` in the
    "sync" and "async" modes (so env i replays ``gymnasium.make(env_id)`` reset with
    ``seed + i``). CartPole's hand-vectorised env ("vector" mode) is replaced by
    ``seeded_cartpole.PerEnvSeededCartPoleVectorEnv``, whose env i draws its initial states
    from its own generator seeded ``seed + i``, as a single env would. Other hand-vectorised
    envs draw all their envs from one generator seeded with ``seed``: deterministic, but not
    per-env equal to single envs. The action spaces are seeded with ``seed`` here (sub-env
    i's with ``seed + i``).

    Autoreset is gymnasium's NEXT_STEP mode: after env i reports ``terminated | truncated``,
    the next ``step`` returns its reset observation with reward 0 and both flags False, and
    ignores its action for that step. Rollouts must mask that transition out.

    Args:
        env_id: a registered gymnasium id with a Box observation space and a Discrete or
            Box action space.
        num_envs: number of parallel envs N, >= 1.
        seed: base seed (python int).
        history: K >= 1. With K > 1 observations are float [N, K, obs_dim], the last K
            observations oldest first, zero-padded after each reset (see ``HistoryWindow``);
            with K = 1 they stay float [N, obs_dim].
        vectorization: "vector" uses the env's own vectorised class (``vector_entry_point``,
            fastest), "sync" steps copies in this process, "async" steps them in worker
            processes (for slow, CPU-heavy envs), "auto" picks "vector" where the env has
            one and "sync" otherwise.

    Returns:
        A ``gymnasium.vector.VectorEnv`` with attributes ``pgtwin_seed``, ``pgtwin_env_id``
        and ``pgtwin_history``.

    Raises:
        ValueError: unknown ``env_id``; unsupported observation or action space; bad
            ``num_envs``, ``history`` or ``vectorization``; an env without autoreset mode
            NEXT_STEP.
    """
    if isinstance(num_envs, bool) or int(num_envs) != num_envs or num_envs < 1:
        raise ValueError(f"num_envs must be an integer >= 1, got num_envs={num_envs!r}")
    if isinstance(history, bool) or int(history) != history or history < 1:
        raise ValueError(f"history must be an integer >= 1, got history={history!r}")
    if vectorization not in ("auto", *_MODES):
        raise ValueError(
            f"vectorization must be one of 'auto', 'vector', 'sync', 'async', "
            f"got vectorization={vectorization!r}"
        )
    try:
        spec = gymnasium.spec(env_id)
    except gymnasium.error.Error as err:
        raise ValueError(unknown_env_message(env_id, err)) from err

    has_vector = spec.vector_entry_point is not None
    if vectorization == "vector" and not has_vector:
        raise ValueError(
            f"vectorization='vector' needs an env with a vector_entry_point; {env_id!r} has "
            f"none, use 'sync' or 'async'"
        )
    if vectorization == "auto":
        vectorization = "vector" if has_vector else "sync"

    if vectorization == "vector" and spec.vector_entry_point == seeded_cartpole.REPLACES:
        spec = dataclasses.replace(spec, vector_entry_point=seeded_cartpole.ENTRY_POINT)
    # Sub-envs (sync, async) check their observations' shape; a hand-vectorised env's whole
    # batch is checked by ``collect``.
    wrappers = {} if vectorization == "vector" else {"wrappers": [ObservationShapeCheck]}
    envs = gymnasium.make_vec(spec, int(num_envs), vectorization_mode=_MODES[vectorization],
                              **wrappers)
    if vectorization != "vector":
        envs.set_attr("env_index", list(range(int(num_envs))))
    try:
        check_spaces(env_id, envs.single_observation_space, envs.single_action_space)
        _check_autoreset(env_id, envs)
    except ValueError:
        envs.close()
        raise

    envs.action_space.seed(seed)
    envs.single_action_space.seed(seed)
    for i, env in enumerate(getattr(envs.unwrapped, "envs", ())):
        env.action_space.seed(seed + i)  # sync mode only; async copies live in workers

    if history > 1:
        envs = HistoryWindow(envs, int(history))
    # Recorded, not applied: the first collect resets with it, so nothing is consumed here.
    envs.pgtwin_seed = seed
    envs.pgtwin_env_id = env_id
    envs.pgtwin_history = int(history)
    return envs


def env_spaces_check(env_id: str, torso: str = "mlp", history: int = 1) -> None:
    """Raise ValueError unless ``env_id`` is registered with spaces pgtwin supports, with
    observations of a rank ``torso`` takes (``specs.observation_rank_problem``).

    One plain env is made and closed: cheap next to the TensorFlow import a run needs, so
    ``pgtwin train`` refuses an unsupported env before importing TensorFlow.
    """
    try:
        spec = gymnasium.spec(env_id)
    except gymnasium.error.Error as err:
        raise ValueError(unknown_env_message(env_id, err)) from err
    try:
        # An env registered with a vector_entry_point alone has no single env to make: one
        # vector env of one env gives the same spaces (what the run builds).
        env = (gymnasium.make(env_id) if spec.entry_point is not None
               else make_vec_env(env_id, 1))
    except (gymnasium.error.DependencyNotInstalled, ImportError) as err:
        # gymnasium's own word for it, or a plain ImportError from an env's module (its
        # jax envs, the gym compatibility shims): either way a package is missing
        raise ValueError(f"{env_id!r} needs a package that is not installed: {err}") from err
    observations, actions = ((env.observation_space, env.action_space)
                             if spec.entry_point is not None
                             else (env.single_observation_space, env.single_action_space))
    try:
        check_spaces(env_id, observations, actions)
        problem = observation_rank_problem(env_id, observations.shape, torso, history)
        if problem:
            raise ValueError(problem)
    finally:
        env.close()


def check_spaces(env_id: str, obs_space: spaces.Space, act_space: spaces.Space) -> None:
    """Raise ValueError unless observations are Box and actions Discrete or a 1-D Box,
    saying how to wrap the env where a gymnasium wrapper does it."""
    if not isinstance(obs_space, spaces.Box):
        fix = (": wrap the env in gymnasium.wrappers.FlattenObservation, which makes it one "
               "Box (a Discrete(n) one-hot as n values, a Box's values as they are, a Dict's "
               "or Tuple's parts side by side)" if isinstance(obs_space, (spaces.Discrete,
                                                                         spaces.MultiDiscrete,
                                                                         spaces.Tuple,
                                                                         spaces.Dict))
               else "")
        raise ValueError(f"{env_id!r} has observation space {obs_space}, which is not a Box"
                         f"{fix}; {SUPPORTED_HINT}")
    if not isinstance(act_space, (spaces.Discrete, spaces.Box)):
        fix = (": not supported yet; a MultiDiscrete([n1, n2]) or MultiBinary(k) can be "
               "re-encoded as one Discrete(n1 * n2) or Discrete(2 ** k) by a wrapper that "
               "decodes the index (gymnasium.ActionWrapper)"
               if isinstance(act_space, (spaces.MultiDiscrete, spaces.MultiBinary)) else "")
        raise ValueError(f"{env_id!r} has action space {act_space}, which is neither Discrete "
                         f"nor Box{fix}; {SUPPORTED_HINT}")
    if isinstance(act_space, spaces.Box) and len(act_space.shape) != 1:
        size = int(np.prod(act_space.shape))
        raise ValueError(f"{env_id!r} has action space {act_space} of shape {act_space.shape}; "
                         f"a Box action must be 1-D: flatten it with gymnasium.wrappers."
                         f"TransformAction(env, lambda a: a.reshape({act_space.shape}), a "
                         f"Box of shape ({size},))")


def _check_autoreset(env_id: str, envs: gymnasium.vector.VectorEnv) -> None:
    """Raise ValueError unless the vector env autoresets in NEXT_STEP mode.

    The rollout code and ``HistoryWindow`` both assume that an ended env returns its reset
    observation on the following step.
    """
    mode = envs.metadata.get("autoreset_mode")
    if mode is None or AutoresetMode(mode) is not AutoresetMode.NEXT_STEP:
        raise ValueError(
            f"{env_id!r}: vector env autoreset_mode is {mode!r}, but pgtwin rollouts need "
            f"{AutoresetMode.NEXT_STEP!r}"
        )
