"""A lost worker ends the others in bounded time, with a message that names it.

``MultiWorkerMirroredStrategy`` offers two guards, both used here:

* the peer health check: a thread in every worker pings every peer every ``interval``
  seconds; a peer that fails ``retries`` checks of ``timeout`` seconds each aborts every
  collective in this process with ``UnavailableError`` (TF's coordination service, whose
  heartbeats stop when a process dies, aborts them the same way, often first);
* the collective timeout (``CommunicationOptions(timeout_seconds)``): a collective that
  has not completed in that time raises ``DeadlineExceededError``, the backstop for a
  peer that is alive but stuck.

The health check's knobs are class attributes of TF's ``CollectiveAllReduceExtended``
(TF sets them the same way in its own tests); they are read when the strategy is created,
so :func:`configure` runs before that.
"""
from __future__ import annotations

import re

HEALTH_CHECKS_PER_TIMEOUT = 4
"""The health check pings every ``worker_timeout / 4`` seconds, each ping waiting as long,
two tries: a dead peer is found within about ``3/4`` of ``worker_timeout``."""

_UNHEALTHY = re.compile(r"unhealthy[^/]*((?:/job:\w+/replica:\d+/task:\d+\s*)+)")
_DOWN = re.compile(r"/job:\w+/replica:\d+/task:(\d+) is down")
_TASK = re.compile(r"/job:\w+/(?:replica:\d+/)?task:(\d+)")


class WorkerLostError(RuntimeError):
    """A peer of a multi-worker run stopped answering (the message names it)."""

    def __init__(self, message: str, worker: int | None):
        super().__init__(message)
        self.worker = worker


def configure(worker_timeout: float) -> None:
    """Set the health check of every ``MultiWorkerMirroredStrategy`` created after this call.

    Start-up (waiting for every worker to join) may take ten times ``worker_timeout``:
    hosts of a cluster seldom start within seconds of each other.
    """
    from tensorflow.python.distribute.collective_all_reduce_strategy import (
        CollectiveAllReduceExtended as Extended,
    )

    step = max(1, int(round(worker_timeout / HEALTH_CHECKS_PER_TIMEOUT)))
    Extended._enable_check_health = True  # noqa: SLF001 (TF's knobs: see the module doc)
    Extended._check_health_interval = step  # noqa: SLF001
    Extended._check_health_timeout = step  # noqa: SLF001
    Extended._check_health_retry_limit = 2  # noqa: SLF001
    Extended._check_health_initial_timeout = int(10 * worker_timeout)  # noqa: SLF001


def communication_options(worker_timeout: float):
    """``CommunicationOptions`` whose collectives give up after ``worker_timeout`` seconds."""
    import tensorflow as tf

    return tf.distribute.experimental.CommunicationOptions(timeout_seconds=float(worker_timeout))


def lost_worker(error: BaseException, me: int) -> int | None:
    """The index of the worker that a collective error blames, else None.

    TF names the dead peer as ``/job:worker/replica:0/task:N`` in the coordination
    service's "tasks are unhealthy" list or the health check's "task:N is down"; failing
    both, the first task named that is not this worker (``me``).
    """
    text = str(error)
    listed = _UNHEALTHY.search(text)
    if listed:
        return int(_TASK.search(listed.group(1)).group(1))
    down = _DOWN.search(text)
    if down:
        return int(down.group(1))
    others = [int(t) for t in _TASK.findall(text) if int(t) != me]
    return others[0] if others else None


def reason(error: BaseException) -> str:
    """The line of a collective error that says what happened, without TF's op prefix."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    line = next((x for x in lines if re.search(r"unhealthy|is down|timed out|deadline", x, re.I)),
                lines[0] if lines else "")
    return re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", line).rstrip(":")[:300]


def is_collective_failure(error: BaseException) -> bool:
    """Whether ``error`` is how TF reports a collective that lost a peer or timed out."""
    import tensorflow as tf

    return isinstance(error, (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
                              tf.errors.CancelledError, tf.errors.AbortedError,
                              tf.errors.FailedPreconditionError, tf.errors.InternalError))
