"""The run directory's storage: checked writable before training, and write failures
during training turned into one message naming the path.

A read-only logdir used to fail at the first write with ``OSError: [Errno 30] Read-only
file system: '.../episodes.csv.tmp'``; a full disk with 93 lines ending in TensorFlow's
``ResourceExhaustedError``. :func:`prepare_logdir` refuses the first before any work;
:func:`writing` wraps each write of a run (episode log, TensorBoard, checkpoint, final
files) so that either becomes a :class:`StorageError` naming what was being written, which
``pgtwin.train.run`` reports with the last intact checkpoint.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Iterator


class StorageError(RuntimeError):
    """Writing ``path`` failed for ``reason`` (the OS's or TensorFlow's words)."""

    def __init__(self, path: str, reason: str):
        self.path, self.reason = path, reason
        super().__init__(f"cannot write {path}: {reason}")


def prepare_logdir(logdir: str) -> None:
    """Create ``logdir`` if needed and prove a file can be created in it.

    Raises ``StorageError`` naming the directory (read-only, not a directory, permission).
    """
    with writing(logdir):
        os.makedirs(logdir, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=logdir)
        os.close(fd)
        os.remove(probe)


@contextlib.contextmanager
def writing(path: str) -> Iterator[None]:
    """Turn an ``OSError`` (or a TensorFlow I/O error) raised inside into ``StorageError``.

    ``path`` is what is being written; the OS's own file name is used when it gives one.
    Errors of other kinds pass through unchanged.
    """
    try:
        yield
    except OSError as err:
        reason = err.strerror or str(err)
        raise StorageError(err.filename or path, reason) from err
    except Exception as err:
        tf = sys.modules.get("tensorflow")
        if tf is not None and isinstance(err, tf.errors.OpError):
            raise StorageError(path, _one_line(err.message)) from err
        raise


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:500]
