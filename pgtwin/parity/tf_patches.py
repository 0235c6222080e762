"""TensorFlow functions replaced while the user's old code is imported or built.

TF holds each public function under several module objects: ``tensorflow.compat.v1``, its
API wrappers (importing ``tf_keras`` adds more), and the implementation module that other
TF functions call it through. :func:`replaced` swaps the function in every loaded
``tensorflow*`` module that holds it, so the user's code sees the replacement however it
imported TensorFlow, and restores them all on exit.
"""
from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator

import tensorflow as tf

tf1 = tf.compat.v1


@contextlib.contextmanager
def replaced(name: str, make: Callable[[Callable], Callable]) -> Iterator[None]:
    """Within the block, ``tf.compat.v1.<name>`` everywhere is ``make(original)``.

    ``name`` may be dotted (``"train.get_global_step"``).

    A nested ``replaced`` of the same name replaces the replacement (``make`` sees it as
    the original), so the innermost wins and each level restores its own.
    """
    *path, leaf = name.split(".")
    parent = functools.reduce(getattr, path, tf1)
    original = getattr(parent, leaf)
    replacement = make(original)
    holders = _holders(leaf, original, parent)
    for module in holders:
        setattr(module, leaf, replacement)
    try:
        yield
    finally:
        for module in holders:
            setattr(module, leaf, original)


def _holders(name: str, original: object, parent: object) -> list[object]:
    """Every loaded ``tensorflow*`` module (or API wrapper) whose ``name`` is ``original``.

    Reads module dicts only, so no lazily loaded module is imported by looking.
    """
    out = []
    for key, module in list(sys.modules.items()):
        if module is None or not key.startswith("tensorflow"):
            continue
        own = object.__getattribute__(module, "__dict__")
        wrapped = own.get("_tfmw_wrapped_module")
        if own.get(name) is original or (
                wrapped is not None and vars(wrapped).get(name) is original):
            out.append(module)
    if parent not in out:
        out.append(parent)
    return out


#: Names TensorFlow 2.x moved that tf_slim 1.1 still reads while building a graph
#: (``slim.batch_norm``): ``(module, attribute, what to put there)``, each only where absent.
_SLIM_NAMES = (("tensorflow.python.framework.ops", "Tensor", lambda: tf.Tensor),
               ("tensorflow.python.ops.control_flow_ops", "cond", lambda: tf.cond))


@contextlib.contextmanager
def slim_names() -> Iterator[None]:
    """Within the block, the TensorFlow module attributes tf_slim reads and TensorFlow 2.21
    no longer has (``ops.Tensor``, ``control_flow_ops.cond``) point at their public
    successors; removed again on exit. Old code's ``slim.batch_norm`` then builds as it
    did on TensorFlow 1.x instead of raising ``AttributeError`` inside tf_slim."""
    import importlib

    added = []
    for module_name, attr, value in _SLIM_NAMES:
        module = importlib.import_module(module_name)
        if not hasattr(module, attr):
            setattr(module, attr, value())
            added.append((module, attr))
    try:
        yield
    finally:
        for module, attr in added:
            delattr(module, attr)
