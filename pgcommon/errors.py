"""Errors both twins raise, defined once so callers can catch them whatever the twin."""
from __future__ import annotations


class DisconnectedGradientError(RuntimeError):
    """A loss does not reach some trainable variables: their gradient would be None.

    This is seed 000's bug made loud: log-probs turned into numpy during the rollout give a
    loss with no path to the weights, so every gradient is None and nothing learns.
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
