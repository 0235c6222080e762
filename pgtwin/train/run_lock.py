"""An exclusive lock on a run directory for the lifetime of the process training in it.

Two ``pgtwin train`` processes writing one run directory (a ``--resume`` started while the
run is still going) would overwrite each other's checkpoints and episode log. The lock is
``LOGDIR/.lock``, held with ``fcntl.flock``: the kernel releases it when the process exits
in any way (SIGKILL included), so a crashed owner never blocks the next run. The file
records the owner (pid, host, start time); a record left behind by an owner that died
is reported as stale and taken over. The file itself is never deleted (a waiter could
otherwise lock an unlinked inode); a clean release empties it.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from typing import Any

LOCK_NAME = ".lock"


class RunLockError(RuntimeError):
    """The run directory is locked by another live process (the message names its pid)."""


class RunLock:
    """``LOGDIR/.lock``: :meth:`acquire` it before writing anything in ``logdir``, and
    :meth:`release` it (or let the process end) when done. Usable as a context manager."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self.path = os.path.join(logdir, LOCK_NAME)
        self._fd: int | None = None
        self.stale_owner: dict[str, Any] | None = None
        """The record of a dead owner this lock took over, if any."""

    def acquire(self) -> "RunLock":
        """Lock, or raise :class:`RunLockError` naming the owner. ``logdir`` must exist."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read(fd)
            os.close(fd)
            raise RunLockError(
                f"{self.logdir} is in use by {_describe(owner)}: another pgtwin process is "
                "training there, and two writers would overwrite each other's checkpoints and "
                "logs. Wait for it to finish (or stop it), or choose another --logdir") from None
        previous = _read(fd)
        if previous and previous.get("pid") != os.getpid():
            self.stale_owner = previous  # flock is free, so that owner is gone
        record = {"pid": os.getpid(), "host": socket.gethostname(),
                  "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Empty the record and unlock (idempotent)."""
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
        except OSError:  # a full or read-only disk must not hide the run's own error
            pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def stale_message(self) -> str | None:
        """A line saying whose stale record was taken over, or None."""
        if self.stale_owner is None:
            return None
        return (f"{self.logdir}: taking over the lock of {_describe(self.stale_owner)}, "
                "which is no longer running (it crashed or was killed)")

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        return json.loads(raw) if raw.strip() else {}
    except (OSError, ValueError):
        return {"pid": "unknown (unreadable lock record)"}


def _describe(owner: dict[str, Any]) -> str:
    if not owner:
        return "a process that left no record"
    where = f" on {owner['host']}" if owner.get("host") else ""
    since = f", since {owner['since']}" if owner.get("since") else ""
    return f"process {owner.get('pid')}{where}{since}"
