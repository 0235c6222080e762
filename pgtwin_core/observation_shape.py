"""A per-env check that observations keep the shape of the observation space.

A vector env stacks its sub-envs' observations; one whose shape changes mid-run would
otherwise fail inside numpy with ``all input arrays must have the same shape``, naming
neither the env nor the step. ``pgtwin_core.envs.make_vec_env`` wraps every sub-env in
:class:`ObservationShapeCheck` and tells each its index; ``pgtwin_core.rollout.collect`` adds
the rollout step and env-step to the message, as it does for non-finite observations. The
wrapper also tags what its env's own ``reset`` or ``step`` raises with the env's index.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np

from pgtwin_core.errors import ENV_INDEX


class ObservationShapeError(ValueError):
    """A sub-env returned an observation whose shape is not its observation space's.

    ``AsyncVectorEnv`` re-raises a worker's error as ``type(message)``: then only the
    message survives and the other fields are None.
    """

    def __init__(self, message: object, env_index: int | None = None,
                 got: tuple[int, ...] | None = None, expected: tuple[int, ...] | None = None):
        super().__init__(str(message))
        self.env_index, self.got, self.expected = env_index, got, expected


def shape_message(got: tuple[int, ...], who: str, where: str,
                  expected: tuple[int, ...]) -> str:
    """The one wording of a shape error, e.g. ``observation of shape (5,) from env 2 at
    rollout step 1 (env-step 24); expected (4,), ...``."""
    return (f"observation of shape {tuple(got)} from {who} at {where}; expected "
            f"{tuple(expected)}, the shape of its observation space (an env's observations "
            "must keep one shape for the whole run)")


class ObservationShapeCheck(gymnasium.Wrapper):
    """Raise :class:`ObservationShapeError` when ``reset`` or ``step`` returns an observation
    whose shape differs from ``observation_space.shape``.

    ``env_index`` is set by ``make_vec_env`` after the vector env is built (``set_attr``
    reaches sync and async sub-envs alike); None names no index.
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.env_index: int | None = None

    def reset(self, **kwargs) -> tuple[Any, dict]:
        with self._indexed():
            obs, info = self.env.reset(**kwargs)
        self._check(obs, "reset")
        return obs, info

    def step(self, action):
        with self._indexed():
            obs, reward, terminated, truncated, info = self.env.step(action)
        self._check(obs, "step")
        return obs, reward, terminated, truncated, info

    @contextlib.contextmanager
    def _indexed(self) -> Iterator[None]:
        """Run the env's own code; what it raises leaves with this env's index as its
        ``pgtwin_core.errors.ENV_INDEX`` attribute (the rollout's message names the env)."""
        try:
            yield
        except Exception as err:
            if self.env_index is not None and not hasattr(err, ENV_INDEX):
                try:
                    setattr(err, ENV_INDEX, self.env_index)
                except AttributeError:  # an exception type that takes no attributes
                    pass
            raise

    def _check(self, obs: Any, where: str) -> None:
        expected = self.observation_space.shape
        got = np.shape(obs)
        if expected is not None and tuple(got) != tuple(expected):
            who = "an env" if self.env_index is None else f"env {self.env_index}"
            raise ObservationShapeError(shape_message(got, who, where, expected),
                                        self.env_index, tuple(got), tuple(expected))
