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
