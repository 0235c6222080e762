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
    "compare": "pgtwin.parity.harness",
    "assert_parity": "pgtwin.parity.harness",
    "TF1Program": "pgtwin.parity.programs",
    "TF2Program": "pgtwin.parity.programs",
    "ParityReport": "pgtwin.parity.ladder",
    "RunSettings": "pgtwin.train.run",
    "train": "pgtwin.train.run",
    "convert_checkpoint": "pgtwin.migrate.agent_checkpoint",
    "convert_user_checkpoint": "pgtwin.migrate.user_checkpoint",
    "IMPLS": "pgtwin.twins",
    "agent_class": "pgtwin.twins",
}
__all__ = ["__version__", *_HOMES]
__getattr__ = lazy_getattr(__name__, _HOMES)
