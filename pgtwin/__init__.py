"""pgtwin: REINFORCE twice (TF1 graph and TF2 eager) with the tools to prove they agree.

This package is the tool on top of the twins, in sub-packages named for what they hold:
``train/`` (training runs), ``parity/`` (the ladder, the harness on user code, the twins'
ladder), ``migrate/`` (checkpoint conversion), ``measure/`` (benchmarks, baseline
variance), ``cli/`` (the ``pgtwin`` command line), ``mode_agnostic/`` (TensorFlow code both
twins share) and ``twins`` (both twins by name). It is the only library package that imports
both twins. docs/architecture.md draws the layers.

The public names below are imported when first read, so ``import pgtwin`` does not import
TensorFlow.
"""
import os

from pgtwin.lazy_names import lazy_getattr

# Quiet TensorFlow's C++ start-up chatter unless the user asked for it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"

_HOMES = {
    **dict.fromkeys(("compare", "assert_parity", "TF1Program", "TF2Program", "ParityReport"),
                    "pgtwin.parity"),
    **dict.fromkeys(("RunSettings", "train"), "pgtwin.train"),
    **dict.fromkeys(("convert_checkpoint", "convert_user_checkpoint"), "pgtwin.migrate"),
    **dict.fromkeys(("IMPLS", "agent_class"), "pgtwin.twins"),
}
__all__ = ["__version__", *_HOMES]
__getattr__ = lazy_getattr(__name__, _HOMES)
