"""``MODULE:FACTORY`` on the command line -> the object the factory returns.

``pgtwin compare`` and ``pgtwin convert-checkpoint`` take the user's programs as
``--tf1 MODULE:FACTORY`` / ``--tf2 MODULE:FACTORY``: the module is imported (from the
current directory too, as ``python -m`` would), the attribute looked up (dotted paths
allowed: ``module:Class.method``) and called, with ``dtype=`` when it accepts a ``dtype``
argument (or ``**kwargs``). An attribute that already is an ``expected_type`` is used as it is.
"""
from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any


class FactoryError(ValueError):
    """A ``MODULE:FACTORY`` spec that cannot be loaded; the message names the part and the fix."""


def load_factory(spec: str, expected_type: type | tuple[type, ...], dtype: str | None = None,
                 what: str = "factory") -> Any:
    """The ``expected_type`` object that ``spec`` (``"module:attr"``) names or makes.

    Args:
      spec: ``package.module:attribute`` (the attribute may be dotted).
      expected_type: what the factory must return (e.g. :class:`pgtwin.parity.programs.TF2Program`).
      dtype: passed as ``dtype=`` when the factory takes it; None: never passed.
      what: how to call the spec in errors (``"--tf2"``).

    Raises:
      FactoryError: a malformed spec, a module that does not import, a missing attribute,
        something not callable, a factory that raises (its exception is the ``__cause__``),
        or a factory returning another type.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr or ":" in attr:
        raise FactoryError(f"{what} {spec!r} is not MODULE:FACTORY (e.g. "
                           "examples.tf1_agent_class.programs:tf2)")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and (module_name == err.name or module_name.startswith(f"{err.name}.")):
            raise FactoryError(f"{what} {spec!r}: no module named {err.name!r} (looked in the "
                               "current directory and sys.path; run from the directory that "
                               "holds it or set PYTHONPATH)") from None
        raise FactoryError(f"{what} {spec!r}: module {module_name!r} imports {err.name!r}, "
                           "which is not installed") from err
    except Exception as err:
        raise FactoryError(f"{what} {spec!r}: importing {module_name!r} failed: "
                           f"{type(err).__name__}: {err}") from err
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            public = sorted(n for n in dir(target) if not n.startswith("_")
                            and callable(getattr(target, n, None)))
            raise FactoryError(f"{what} {spec!r}: {module_name!r} has no attribute "
                               f"{attr!r} (callables there: {public[:20]})")
        target = getattr(target, part)
    if isinstance(target, expected_type):
        return target
    if not callable(target):
        raise FactoryError(f"{what} {spec!r} is a {type(target).__name__}, not a factory "
                           f"returning {_names(expected_type)}")
    passed = dtype is not None and _takes_dtype(target)
    try:
        result = target(dtype=dtype) if passed else target()
    except Exception as err:
        call = f"{attr}(dtype={dtype!r})" if passed else f"{attr}()"
        raise FactoryError(f"{what} {spec!r}: calling {call} raised "
                           f"{type(err).__name__}: {err}") from err
    if not isinstance(result, expected_type):
        raise FactoryError(f"{what} {spec!r} returned a {type(result).__name__}; it must "
                           f"return a {_names(expected_type)}")
    return result


def _takes_dtype(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "dtype" or p.kind is p.VAR_KEYWORD for p in params)


def _names(types: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
