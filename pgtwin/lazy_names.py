"""Public names of a package, imported from their modules only when first read.

A package's ``__init__`` names its public surface without importing TensorFlow: ``import
pgtwin`` and ``pgtwin --help`` stay fast, and ``pgtwin.parity.compare`` loads the harness
(and TensorFlow) the first time it is read. PEP 562's module ``__getattr__``.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` reading ``name`` from module ``homes[name]``.

    ``homes`` maps each public name to the dotted module that defines it (e.g.
    ``{"compare": "pgtwin.parity.harness"}``). A name not in ``homes`` raises
    ``AttributeError`` as a plain module does.
    """
    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(homes[name]), name)
    return __getattr__
