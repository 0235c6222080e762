"""pgtwin: REINFORCE twice (TF1 graph and TF2 eager) with the tools to prove they agree.

This package is the tool on top of the twins: the ``pgtwin`` command line, the parity
harness, checkpoint migration and the benchmark runner. It is the only library package
that imports both twins.
"""
import os

# Quiet TensorFlow's C++ start-up chatter unless the user asked for it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"
