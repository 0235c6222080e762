"""TensorFlow code that is the same in graph mode and in eager mode, kept once.

Layering, bottom to top:

    pgtwin_core          the shared layer: numpy and Python only, never TensorFlow
    pgtwin.mode_agnostic TensorFlow ops that read the same under TF1 graphs and TF2 eager
    legacy_graph, eager  the twins: how variables are made, gradients taken, functions run
    the rest of pgtwin   the tool: training runs, parity, migration, measurement, the CLI

This package sits *below* the twins: both import it, it imports neither of them and nothing
else from ``pgtwin`` (only TensorFlow, numpy and ``pgtwin_core``), so importing it from a twin
makes no cycle. It lives inside ``pgtwin`` rather than as a top-level package because every
other top-level package is the shared layer, which must stay TensorFlow-free; and it cannot live
in a twin because the twins never import each other.

Nothing here creates a variable, takes a gradient or decides how a function is run: those are
what differ between the twins, and each twin keeps them in its own file of the same name.
"""
