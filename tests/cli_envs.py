"""Test-only env ids for the CLI tests, used through gymnasium's ``module:Id`` form, e.g.
``pgtwin train --env tests.cli_envs:NaNObsCartPole-v0`` (gymnasium imports this module,
which registers them).

* ``SlowCartPole-v0``: CartPole that sleeps ``delay`` seconds per step, so a run lasts
  long enough to be killed in the middle.
* ``NaNObsCartPole-v0`` / ``NaNRewardCartPole-v0``: CartPole whose sub-env reset with
  seed ``nan_env_seed`` returns a NaN observation (or reward) on its ``nan_at``-th step call
  (0-based, counted since construction). With ``--seed 0`` sub-env i is reset with seed i,
  so the NaN comes from env index ``nan_env_seed``.
* ``RaisingCartPole-v0``: the same, whose ``step`` raises ``RuntimeError`` there instead
  (a simulator that crashes).
* ``EasyCartPole-v0``: CartPole with ``reward_threshold = 15``, to test the stopping rule
  in a few updates.
* ``ShiftedActionCartPole-v0``: CartPole whose actions are ``Discrete(2, start=3)`` (3 pushes
  left, 4 right); any other action raises, naming it.
* ``ShapeShiftCartPole-v0``: CartPole whose sub-env reset with seed ``nan_env_seed``
  returns a 5-feature observation on its ``nan_at``-th step call.
* ``HugeRewardCartPole-v0``: CartPole paying ``HUGE_REWARD`` per step: finite in float64
  (the rollout's check passes) but past float32's range, so a float32 loss without return
  normalisation is not finite.
* ``MultiDiscreteCartPole-v0`` / ``GridActionCartPole-v0`` / ``DictObsCartPole-v0``: spaces
  pgtwin does not support (a MultiDiscrete action, a 2-D Box action, Dict observations).
* ``NeedsBox2D-v0``: an env whose constructor needs a package that is not installed.
* ``NeedsJax-v0``: the same, said by a plain ``ModuleNotFoundError``.
* ``UnpicklableCartPole-v0``: CartPole holding a lambda, so its state cannot be pickled
  into a checkpoint (a resume reseeds it).
"""
from __future__ import annotations

import time

import gymnasium
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

NAN_ENV_SEED = 2
NAN_AT = 5


class SlowCartPole(CartPoleEnv):
    """CartPole whose ``step`` takes at least ``delay`` seconds."""

    def __init__(self, delay: float = 0.002, **kwargs):
        super().__init__(**kwargs)
        self.delay = delay

    def step(self, action):
        time.sleep(self.delay)
        return super().step(action)


class NaNCartPole(CartPoleEnv):
    """CartPole injecting one NaN into the observation or the reward (see module doc)."""

    def __init__(self, target: str = "obs", nan_env_seed: int = NAN_ENV_SEED,
                 nan_at: int = NAN_AT, **kwargs):
        super().__init__(**kwargs)
        self.target, self.nan_env_seed, self.nan_at = target, nan_env_seed, nan_at
        self.first_seed = None
        self.calls = 0

    def reset(self, *, seed=None, options=None):
        if self.first_seed is None:
            self.first_seed = seed
        return super().reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self.first_seed == self.nan_env_seed and self.calls == self.nan_at:
            if self.target == "raise":
                raise RuntimeError(f"simulator crashed at call {self.calls}")
            if self.target == "obs":
                obs = np.array(obs, copy=True)
                obs[1] = np.nan
            else:
                reward = float("nan")
        self.calls += 1
        return obs, reward, terminated, truncated, info


def train_to_its_failure(env_id: str, logdir: str) -> int:
    """``pgtwin train`` on ``env_id`` of this module with the schedule its failures are set
    for (seed 0, 4 envs x 4 steps an update, a checkpoint after every update): update 1 is
    checkpointed and the failure comes at rollout step 1 of update 2. The exit code."""
    from pgtwin.cli import main

    return main(["train", "--env", f"tests.cli_envs:{env_id}", "--seed", "0", "--num-envs",
                 "4", "--num-steps", "4", "--hidden", "8", "--checkpoint-every", "1",
                 "--steps", "400", "--logdir", logdir, "--no-progress"])


HUGE_REWARD = 1e39  # > float32's max, 3.4e38


class ShiftedActionCartPole(gymnasium.Wrapper):
    """CartPole with ``Discrete(2, start=3)`` actions, refusing actions outside them."""

    def __init__(self, **kwargs):
        super().__init__(CartPoleEnv(**kwargs))
        self.action_space = gymnasium.spaces.Discrete(2, start=3)
        self.received: list[int] = []

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"ShiftedActionCartPole got action {action!r}, outside "
                             f"{self.action_space}")
        self.received.append(int(action))
        return self.env.step(int(action) - 3)


class ShapeShiftCartPole(NaNCartPole):
    """CartPole whose observation grows a fifth feature once (see module doc)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = CartPoleEnv.step(self, action)
        if self.first_seed == self.nan_env_seed and self.calls == self.nan_at:
            obs = np.append(obs, np.float32(0.0))
        self.calls += 1
        return obs, reward, terminated, truncated, info


class HugeRewardCartPole(CartPoleEnv):
    """CartPole paying ``HUGE_REWARD`` per step."""

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, HUGE_REWARD, terminated, truncated, info


class MultiDiscreteCartPole(CartPoleEnv):
    """CartPole declaring a MultiDiscrete action space (unsupported)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.action_space = gymnasium.spaces.MultiDiscrete([2, 2])


class GridActionCartPole(CartPoleEnv):
    """CartPole declaring a 2-D Box action space ``(2, 1)`` (unsupported: not flat)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (2, 1), np.float32)


class NeedsBox2D(CartPoleEnv):
    """An env whose constructor needs a package that is missing, as Box2D envs without
    ``gymnasium[box2d]``."""

    def __init__(self, **kwargs):
        raise gymnasium.error.DependencyNotInstalled(
            'Box2D is not installed, you can install it by run `pip install swig` followed by '
            '`pip install "gymnasium[box2d]"`')


class NeedsJax(CartPoleEnv):
    """An env whose module imports a package that is missing with a plain ImportError, as
    gymnasium's ``phys2d/`` (jax) and ``GymV26Environment-v0`` (shimmy) do."""

    def __init__(self, **kwargs):
        raise ModuleNotFoundError("No module named 'jax'")


class DictObsCartPole(CartPoleEnv):
    """CartPole declaring a Dict observation space (unsupported)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_space = gymnasium.spaces.Dict({"state": self.observation_space})


class UnpicklableCartPole(CartPoleEnv):
    """CartPole with an attribute pickle refuses."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hook = lambda: None


class InitRaisesCartPole(CartPoleEnv):
    """An env whose constructor fails (a missing config file, a simulator not started)."""

    def __init__(self, **kwargs):
        raise RuntimeError("the simulator is not running")


def _register(env_id: str, entry_point, **kwargs) -> None:
    if env_id not in gymnasium.registry:
        gymnasium.register(env_id, entry_point=entry_point, max_episode_steps=500, **kwargs)


_register("SlowCartPole-v0", SlowCartPole)
_register("NaNObsCartPole-v0", NaNCartPole, kwargs={"target": "obs"})
_register("NaNRewardCartPole-v0", NaNCartPole, kwargs={"target": "reward"})
_register("RaisingCartPole-v0", NaNCartPole, kwargs={"target": "raise"})
_register("EasyCartPole-v0", CartPoleEnv, reward_threshold=15.0)
_register("ShiftedActionCartPole-v0", ShiftedActionCartPole)
_register("ShapeShiftCartPole-v0", ShapeShiftCartPole)
_register("HugeRewardCartPole-v0", HugeRewardCartPole)
_register("MultiDiscreteCartPole-v0", MultiDiscreteCartPole)
_register("GridActionCartPole-v0", GridActionCartPole)
_register("NeedsBox2D-v0", NeedsBox2D)
_register("NeedsJax-v0", NeedsJax)
_register("DictObsCartPole-v0", DictObsCartPole)
_register("UnpicklableCartPole-v0", UnpicklableCartPole)
_register("InitRaisesCartPole-v0", InitRaisesCartPole)
if "VectorOnlyCartPole-v0" not in gymnasium.registry:  # a vector_entry_point and no other
    gymnasium.register("VectorOnlyCartPole-v0", entry_point=None,
                       vector_entry_point="gymnasium.envs.classic_control.cartpole:"
                                          "CartPoleVectorEnv", max_episode_steps=500)
