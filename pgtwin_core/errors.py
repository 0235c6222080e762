"""Errors both twins raise, defined once so callers can catch them whatever the twin."""
from __future__ import annotations

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


def innermost_frame(err: BaseException) -> tuple[FrameType, int] | None:
    """``(frame, line)`` where ``err`` was raised (its traceback's innermost entry), or None
    for an exception never raised."""
    tb = err.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame, tb.tb_lineno


def raised_at(err: BaseException) -> str:
    """``FILE:LINE in FUNCTION`` where ``err`` was raised, or ``""`` if it never was."""
    found = innermost_frame(err)
    if found is None:
        return ""
    frame, line = found
    return f"{frame.f_code.co_filename}:{line} in {frame.f_code.co_name}"
