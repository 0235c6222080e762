"""Errors both twins raise, defined once so callers can catch them whatever the twin."""
from __future__ import annotations

import os
import sysconfig
from types import FrameType


class DisconnectedGradientError(RuntimeError):
    """A loss does not reach some trainable variables: their gradient would be None.

    The usual cause: log-probs turned into numpy during the rollout give a loss with no
    path to the weights, so every gradient is None and nothing learns (docs/migration.md,
    "tf.gradients -> GradientTape").
    """

    def __init__(self, variables: list[str], what: str = "the loss"):
        self.variables = list(variables)
        super().__init__(
            f"{what} does not reach the trainable variable(s) {self.variables}: their gradient "
            "is None. Was the loss built from values that left the graph (numpy log-probs, "
            "a stop_gradient, an unrelated tensor)? Refusing a silent None/zero update."
        )


class RecordingMismatchError(ValueError):
    """A ``cached`` update was asked for a batch that is not the recorded rollout.

    The cached update path differentiates the forward passes the rollout ran; training on
    any other batch (or under changed weights) would give a wrong gradient, so it refuses.
    """


class NoCompleteEpisodeError(ValueError):
    """An episodic baseline was asked for an estimate on a batch with no complete episode.

    ``optimal_scalar_episodic``, ``optimal_per_param`` and ``optimal_time`` use only episodes
    that both start and end inside the batch; episodes longer than the rollout (a good
    CartPole policy runs 500 steps) leave none. ``agent.update`` skips such a batch (see
    ``pgtwin_core.baselines.skipped_update_metrics``); ``gradients`` and ``loss_value`` raise.
    """


class IncompatibleCheckpointError(ValueError):
    """An agent checkpoint was written by an agent of another architecture, dtype or optimizer.

    Raised by both twins' ``restore`` before any value is assigned (the agent is unchanged),
    with every mismatched variable and both shapes (``pgtwin_core.checkpoint_layout``).
    """

    def __init__(self, path: str, problems: list[str]):
        self.path, self.problems = path, list(problems)
        super().__init__(
            f"checkpoint {path} does not fit this agent: " + "; ".join(self.problems)
            + ". Restore it into an agent built with the PolicySpec and ReinforceConfig "
            "(hidden sizes, dtype, optimizer) it was written with; nothing was restored")


class CheckpointFormatError(IncompatibleCheckpointError):
    """The checkpoint is the other twin's format: a TF1 ``Saver`` file where a TF2
    ``tf.train.Checkpoint`` is read, or the reverse. Nothing in it is compared, so the
    message names the format and the way across, not variables."""

    def __init__(self, path: str, written_as: str, fix: str):
        self.path, self.problems = path, [f"it is {written_as}"]
        ValueError.__init__(self, f"checkpoint {path} is {written_as}, which this agent does "
                                  f"not read: {fix}; nothing was restored")


class EnvStepError(RuntimeError):
    """The env's own ``step`` raised: the message says where in the rollout and where in the
    env's code; the env's exception is the ``__cause__`` (with its traceback)."""


class EnvValueError(ValueError):
    """An env returned a value pgtwin refuses (a NaN or inf observation or reward): the
    message names the env index, the step and the value. The env's to fix, as an
    :class:`EnvStepError` is."""


ENV_INDEX = "pgtwin_env_index"
"""The attribute the sub-env wrapper sets on an exception its env raises: the env's index
in the vector env (an ``AsyncVectorEnv`` re-raises a worker's error without it)."""


def innermost_frame(err: BaseException) -> tuple[FrameType, int] | None:
    """``(frame, line)`` where ``err`` was raised (its traceback's innermost entry), or None
    for an exception never raised."""
    tb = err.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame, tb.tb_lineno


PROJECT_PACKAGES = frozenset({"pgtwin", "pgtwin_core", "legacy_graph", "eager"})
"""pgtwin's top-level packages: their frames are not the user's code."""


def _library_dirs() -> tuple[str, ...]:
    """Where installed packages and the standard library live (their frames are not the
    user's code either)."""
    paths = sysconfig.get_paths()
    return tuple(os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib",
                                                               "purelib", "platlib") if k in paths)


def _is_users(frame: FrameType) -> bool:
    """Whether ``frame`` runs code outside pgtwin, installed packages and the stdlib."""
    module = str(frame.f_globals.get("__name__", "")).split(".")[0]
    return module not in PROJECT_PACKAGES and users_file(frame.f_code.co_filename)


def users_file(filename: str) -> bool:
    """Whether ``filename`` is the user's code: not in pgtwin's packages, installed packages
    or the standard library, and a file (not ``<string>``). For a TF1 op's creation
    traceback, which holds file names and no modules."""
    path = os.path.realpath(filename)
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    project = tuple(os.path.join(here, p) + os.sep for p in PROJECT_PACKAGES)
    return not path.startswith(_library_dirs() + project) and not filename.startswith("<")


def raised_at(err: BaseException) -> str:
    """``FILE:LINE in FUNCTION`` of the user's code where ``err`` was raised: the innermost
    frame of its traceback outside pgtwin, installed packages and the standard library
    (``(inside MODULE)`` added where the exception came from deeper, e.g. TensorFlow's
    ops); the innermost frame where no frame is the user's; ``""`` if it was never raised."""
    tb, frames = err.__traceback__, []
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    if not frames:
        return ""
    users = [f for f in frames if _is_users(f[0])]
    frame, line = users[-1] if users else frames[-1]
    where = f"{frame.f_code.co_filename}:{line} in {frame.f_code.co_name}"
    inner = frames[-1][0]
    if inner is not frame:
        where += f" (inside {inner.f_globals.get('__name__', '?')})"
    return where
