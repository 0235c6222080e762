"""Importing TensorFlow for the CLI without its start-up notices, as ``TF_CPP_MIN_LOG_LEVEL`` asks.

TensorFlow 2.21 logs through absl before absl's logging is initialised, and such messages
ignore ``TF_CPP_MIN_LOG_LEVEL``: even at 2 every process printed the oneDNN notice, "Could
not find cuda drivers", "failed call to cuInit" and absl's "WARNING: All log messages
before absl::InitializeLog() ..." (twice: two libraries load). :func:`import_tensorflow`
captures file descriptor 2 while TensorFlow loads and finds its devices, then writes back
every captured line the level does not filter: absl's ``I...``/``W...``/``E...`` lines
below the level, and the known device-probe notices, are dropped; anything else (a real
error, a Python warning) is replayed, so nothing is lost. With the level unset or 0 every
line is replayed.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile

_SEVERITY = re.compile(r"^([IWEF])\d{4} ")
_LEVELS = {"I": 0, "W": 1, "E": 2, "F": 3}
_NOTICES = (
    "All log messages before absl::InitializeLog() is called are written to STDERR",
    "failed call to cuInit",  # E-level, but only says there is no GPU
)


def min_log_level() -> int:
    """``TF_CPP_MIN_LOG_LEVEL`` as an int (0 when unset or not a number)."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def shown(line: str, level: int) -> bool:
    """Whether a start-up line passes ``TF_CPP_MIN_LOG_LEVEL = level``."""
    if level <= 0:
        return True
    if any(notice in line for notice in _NOTICES):
        return level < 2 and not line.startswith("WARNING: All log messages")
    match = _SEVERITY.match(line)
    return match is None or _LEVELS[match.group(1)] >= level


def import_tensorflow():
    """``import tensorflow`` (and its device probe) with the start-up lines filtered; returns
    the module. Later calls return it at once."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            import tensorflow as tf
            tf.config.list_physical_devices()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode(errors="replace")
    level = min_log_level()
    kept = [line for line in text.splitlines() if line.strip() and shown(line, level)]
    if kept:
        print("\n".join(kept), file=sys.stderr, flush=True)
    return tf
