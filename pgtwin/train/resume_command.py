"""The shell command that resumes a run, as printed after Ctrl-C, a failed write or a lost
worker.

A run on an env from the user's own module (``--env mymod:MyEnv-v0``) imports that module
again on ``--resume``. When it was found through ``PYTHONPATH`` or the working directory,
a resume from another shell or directory cannot find it, so the command carries
``PYTHONPATH=DIR`` for it. A module installed in site-packages needs nothing.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def module_root(name: str) -> Path | None:
    """The ``sys.path`` directory module ``name`` was imported from (for ``pkg.mod``, the
    directory holding ``pkg``); None if it is not imported or has no file."""
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if not path:
        return None
    root = Path(path).resolve().parent
    for _ in range(name.count(".") + (Path(path).name == "__init__.py")):
        root = root.parent
    return root


def _searched_from_environment() -> set[Path]:
    """The directories a later shell may not search: the working directory and
    ``PYTHONPATH``'s entries, resolved."""
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return {Path(p or os.getcwd()).resolve() for p in [os.getcwd(), *entries]}


def resume_command(logdir: str, env_module: str | None = None) -> str:
    """``pgtwin train --resume --logdir LOGDIR``, preceded by ``PYTHONPATH=DIR`` when the
    run's ``env_module`` was imported from the working directory or ``PYTHONPATH`` (not
    from an installed package); LOGDIR then absolute too, since the command is meant to
    work from another directory. Quoted for a POSIX shell."""
    root = module_root(env_module) if env_module else None
    if root is None or root not in _searched_from_environment():
        return f"pgtwin train --resume --logdir {shlex.quote(logdir)}"
    return (f"PYTHONPATH={shlex.quote(str(root))} pgtwin train --resume --logdir "
            f"{shlex.quote(os.path.abspath(logdir))}")
