"""Checks made before the user's code runs, each a message that names the cause and the fix.

Old TF1 code fails on TF 2.x in a few ways whose tracebacks name only the symptom:

* a module that calls ``tf.compat.v1.disable_v2_behavior()`` or
  ``disable_eager_execution()`` switches eager execution off for the whole process, so the
  TF2 side later fails with ``Cannot convert a symbolic tf.Tensor``;
* ``tf.compat.v1.layers`` (``dense``, ``conv2d``) needs legacy Keras (``tf_keras``) on
  TF >= 2.16, where ``tf.keras`` is Keras 3: ```dense` is not available with Keras 3``;
* ``tf.contrib`` is gone: ``tf_slim`` holds ``tf.contrib.layers`` and ``slim``.

:func:`eager_guard` turns the first into :class:`EagerSwitchedOffError` at the line that
makes the call; :func:`explain_build_error` turns the others into
:class:`LegacyCodeError`.
"""
from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator

import tensorflow as tf

from pgtwin_core.errors import raised_at
from pgtwin.parity.tf_patches import replaced

tf1 = tf.compat.v1

LEGACY_EXTRA = 'pip install -e ".[legacy]"'
_SWITCHES = ("disable_v2_behavior", "disable_eager_execution")


class LegacyCodeError(RuntimeError):
    """The user's TF1 code cannot run as it is on this TensorFlow; the message says why."""


class EagerSwitchedOffError(LegacyCodeError):
    """The user's code switched eager execution off for the process."""


class ProgramBuildError(ValueError):
    """The user's ``build`` (or first loss call) raised: the message names which, the file
    and line of their code, and the exception; that exception is the ``__cause__``."""


def program_failed(err: BaseException, what: str) -> ProgramBuildError:
    """The :class:`ProgramBuildError` for ``err`` raised by the user's ``what``
    (``"TF1Program.build"``), naming where; a ``dtype`` passed on through ``**kwargs`` to
    code that does not take it (pgtwin gives a factory with ``**kwargs`` a ``dtype=``) is
    named as such."""
    where = raised_at(err)
    text = (f"{what} raised {type(err).__name__}" + (f" in {where}" if where else "")
            + f": {_shortened(str(err))}")
    if isinstance(err, TypeError) and "unexpected keyword argument 'dtype'" in str(err):
        text += (" (the factory took **kwargs, so it was called with dtype=...: make it take "
                 "dtype itself and pass it where it belongs, or drop **kwargs)")
    return ProgramBuildError(text)


MAX_ERROR_LINES = 12
MAX_ERROR_CHARS = 2000


def _shortened(text: str) -> str:
    """An exception's text cut to its first :data:`MAX_ERROR_LINES` lines and
    :data:`MAX_ERROR_CHARS` characters (Keras puts whole arrays in some messages: a uint8
    input to a Conv2D printed its 80-line kernel), saying how much was left out."""
    lines = text.splitlines()
    kept = "\n".join(lines[:MAX_ERROR_LINES])[:MAX_ERROR_CHARS]
    left = len(text) - len(kept)
    return kept if left <= 0 else f"{kept} ... ({left} more characters of the message)"


def _caller() -> str:
    """``file:line`` of the user's code that called the patched function."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/tensorflow/" not in frame.filename and __file__ != frame.filename:
            return f"{frame.filename}:{frame.lineno}"
    return "an unknown place"


def _refusal(name: str, where: str) -> EagerSwitchedOffError:
    return EagerSwitchedOffError(
        f"{where} calls tf.compat.v1.{name}(): that switches eager execution off for the "
        "whole process, and the TF2 side of the comparison needs it on. pgtwin builds your "
        "TF1 code in a tf.Graph of its own, where placeholders, tf.gradients and Sessions "
        f"work without that call: delete the line (or, where your script needs it when it "
        f"runs as the program, put it in an `if __name__ == \"__main__\":` block at the top "
        f"of the file, before anything builds an op).")


@contextlib.contextmanager
def eager_guard() -> Iterator[None]:
    """Run the user's import or build refusing calls that switch eager execution off.

    The refusal is raised at the call, so its traceback ends in the user's line.
    ``tf.reset_default_graph()``, which old scripts start with, does nothing inside: the
    graph the harness builds in is new (and TF refuses to reset a graph entered with
    ``as_default()``, which is how the harness runs them).
    """
    with contextlib.ExitStack() as stack:
        for name in _SWITCHES:
            stack.enter_context(replaced(name, lambda _original, n=name: _refuse(n)))
        stack.enter_context(replaced("reset_default_graph", lambda _original: _keep_graph))
        yield


def _refuse(name: str):
    def call(*_args, **_kwargs):
        raise _refusal(name, _caller())
    return call


def _keep_graph() -> None:
    """``tf.reset_default_graph()`` during the user's build: nothing to reset."""


def require_eager(what: str) -> None:
    """Raise :class:`EagerSwitchedOffError` when eager execution is off in this process.

    Call it outside any ``graph.as_default()`` block (inside one, graph mode is expected).
    """
    if not tf.executing_eagerly():
        raise EagerSwitchedOffError(
            f"eager execution is off in this process (seen at {what}): some module called "
            "tf.compat.v1.disable_v2_behavior() or disable_eager_execution(), which switches "
            "it off for the whole process, and the TF2 side of the comparison needs it on. "
            "pgtwin builds your TF1 code in a tf.Graph of its own, so delete that call (or "
            "put it in an `if __name__ == \"__main__\":` block at the top of its file, before "
            "anything builds an op).")


_RNN_CELLS = frozenset({"RNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell",
                        "MultiRNNCell", "DropoutWrapper", "ResidualWrapper", "DeviceWrapper",
                        "LSTMStateTuple"})
"""``tf.compat.v1.nn.rnn_cell``'s names: Keras-backed, like ``tf.compat.v1.layers``."""


def _legacy_keras_setting() -> str:
    """What the message adds about ``TF_USE_LEGACY_KERAS`` as it is set now: a value that
    TensorFlow does not read as on (only ``1``, ``true`` and ``True`` are), or one it does
    while tf_keras did not load; '' where it is unset."""
    value = os.environ.get("TF_USE_LEGACY_KERAS")
    if value is None:
        return ""
    if value not in ("1", "true", "True"):  # what TensorFlow reads as on
        return f" (TF_USE_LEGACY_KERAS is set to {value!r}, which leaves it off: set it to 1)"
    return " (TF_USE_LEGACY_KERAS is set, but tf_keras is not importable)"


def explain_build_error(err: BaseException, what: str) -> LegacyCodeError | None:
    """The :class:`LegacyCodeError` that explains ``err`` raised by ``what``, or None."""
    text = str(err)
    if isinstance(err, AttributeError) and "not available with Keras 3" in text:
        name = text.split("`")[1] if "`" in text else ""
        module = "tf.compat.v1.nn.rnn_cell" if name in _RNN_CELLS else "tf.compat.v1.layers"
        symbol = f"{module}.{name}" if name else module
        return LegacyCodeError(
            f"{what} uses {symbol}, which TensorFlow >= 2.16 only "
            "provides with legacy Keras (tf.keras is Keras 3 there). Install it with "
            f"{LEGACY_EXTRA} (tf_keras) and set TF_USE_LEGACY_KERAS=1 before TensorFlow is "
            "imported (pgtwin compare and pgtwin convert-checkpoint: --legacy-keras)"
            + _legacy_keras_setting()
            + f". Original error: {text}")
    if isinstance(err, AttributeError) and "_in_graph_mode" in text:
        # tf.compat.v1.keras.layers is Keras 3 itself on TensorFlow >= 2.16: its layers
        # build in the graph, but make Keras 3 variables, which TF1's optimizers and
        # Savers cannot take (minimize(var_list=model.trainable_weights) raised this).
        return LegacyCodeError(
            f"{what} uses Keras layers in a TF1 graph (tf.compat.v1.keras.layers or "
            "tf.keras.layers, a tf.keras model called on placeholders), which TensorFlow >= "
            "2.16 serves with Keras 3: its layers build, but their Keras 3 variables are no "
            "TF1 variables, so a tf.compat.v1 optimizer, Saver or initializer cannot take them "
            "(and tf.compat.v1.keras.backend.get_session is gone). Install legacy Keras with "
            f"{LEGACY_EXTRA} (tf_keras) and "
            "set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported (pgtwin compare and "
            "pgtwin convert-checkpoint: --legacy-keras)"
            + _legacy_keras_setting()
            + f". Original error: {text}")
    if isinstance(err, AttributeError) and "contrib" in text:
        return LegacyCodeError(
            f"{what} uses tf.contrib, which TensorFlow 2 removed. tf.contrib.layers and "
            f"tf.contrib.slim live on in tf_slim ({LEGACY_EXTRA}): replace "
            "`tf.contrib.layers` / `tf.contrib.slim` with `import tf_slim as slim` and "
            f"`slim.<layer>`. Original error: {text}")
    if isinstance(err, ModuleNotFoundError) and err.name in ("tf_slim", "tf_keras"):
        return LegacyCodeError(
            f"{what} imports {err.name}, which is not installed: {LEGACY_EXTRA} installs "
            "tf_slim and tf_keras, the legacy pieces old TF1 code needs.")
    return None


def explained(err: BaseException) -> BaseException:
    """What to report for ``err``: the :class:`LegacyCodeError` that explains it or its cause
    (a factory that failed on old code), else ``err`` itself."""
    for candidate in (err, err.__cause__):
        if isinstance(candidate, LegacyCodeError):
            return candidate
    cause = err.__cause__
    found = explain_build_error(cause, str(err).split(":")[0]) if cause is not None else None
    return found or err
