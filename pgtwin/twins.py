"""Both twins by name: ``graph`` (legacy_graph, TF1 Session) and ``eager`` (TF2)."""
from __future__ import annotations

import importlib

IMPLS = ("graph", "eager")
_PACKAGES = {"graph": "legacy_graph", "eager": "eager"}


def agent_class(impl: str) -> type:
    """The ``ReinforceAgent`` class of twin ``impl`` (``graph`` or ``eager``)."""
    if impl not in _PACKAGES:
        raise ValueError(f"unknown impl {impl!r}: choose one of {IMPLS}")
    return importlib.import_module(f"{_PACKAGES[impl]}.agent").ReinforceAgent


def twin_module(impl: str, name: str):
    """Module ``name`` (e.g. ``per_sample``) of twin ``impl``."""
    if impl not in _PACKAGES:
        raise ValueError(f"unknown impl {impl!r}: choose one of {IMPLS}")
    return importlib.import_module(f"{_PACKAGES[impl]}.{name}")
