"""Where an exception was raised: pgtwin's own refusal, or a failure inside another package.

``pgtwin train`` reports a ``ValueError`` from pgtwin's own checks (an unknown env id, spaces
it does not support, settings that do not go together) as a usage error, exit 2. The same
class raised inside TensorFlow, Keras, numpy or the user's env module is not a usage error:
the settings were accepted and something failed while building or running. Reporting that
as "usage: ..." sent users to their command line for what is a bug (the twenty-ninth
session's one-action trace failure showed that way), so it gets its own report.
"""
from __future__ import annotations

import traceback

from pgtwin_core.errors import PROJECT_PACKAGES, innermost_frame


def raised_in(err: BaseException) -> tuple[str, str, int]:
    """``(module, file, line)`` of the innermost frame of ``err``'s traceback (where it was
    raised); ``("", "", 0)`` for an exception never raised."""
    found = innermost_frame(err)
    if found is None:
        return "", "", 0
    frame, line = found
    return str(frame.f_globals.get("__name__", "")), frame.f_code.co_filename, line


def raised_by_project(err: BaseException) -> bool:
    """True when pgtwin's own code raised ``err`` (its top-level package is one of
    :data:`PROJECT_PACKAGES`), or when it was never raised."""
    module = raised_in(err)[0]
    return not module or module.split(".")[0] in PROJECT_PACKAGES


def foreign_failure(err: BaseException, doing: str) -> str:
    """The report of ``err`` raised outside pgtwin while ``doing``: the cause first (which
    package raised what, where), then that the settings were accepted, then the traceback.

    Args:
      err: the exception, with its traceback.
      doing: what was under way, e.g. ``"building the graph twin's agent for Pendulum-v1"``.
    """
    module, path, line = raised_in(err)
    package = module.split(".")[0] or "?"
    lines = [f"{package} raised {type(err).__name__} while {doing}: {err}",
             f"  raised in {module} ({path}:{line}). Your settings were accepted: this is a "
             "failure in pgtwin or in the code it called (the env module included), not "
             "in the command line. Please report it with the command and the traceback "
             "below.", ""]
    lines += traceback.format_exception(type(err), err, err.__traceback__)
    return "\n".join(line.rstrip("\n") for line in lines)
