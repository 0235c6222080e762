"""REINFORCE the TF1 way: one ``tf.Graph``, placeholders, ``tf.gradients``, one ``Session``.

The twin of ``eager``, file beside file. ``from legacy_graph import ReinforceAgent``; the
name is imported when first read, so ``import legacy_graph`` imports no TensorFlow and no
module of the twin (no import cycle can start here).
"""
from pgtwin.lazy_names import lazy_getattr

_HOMES = {"ReinforceAgent": "legacy_graph.agent"}
__all__ = list(_HOMES)
__getattr__ = lazy_getattr(__name__, _HOMES)
