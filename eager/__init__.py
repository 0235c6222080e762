"""REINFORCE the TF2 way: ``tf.Variable``s, ``GradientTape``, ``tf.function``, ``tf.distribute``.

The twin of ``legacy_graph``, file beside file, plus the distributed agent.
``from eager import ReinforceAgent, DistributedReinforceAgent``; the names are imported when
first read, so ``import eager`` imports no TensorFlow and no module of the twin (no import
cycle can start here).
"""
from pgtwin.lazy_names import lazy_getattr

_HOMES = {"ReinforceAgent": "eager.agent",
          "DistributedReinforceAgent": "eager.distributed"}
__all__ = list(_HOMES)
__getattr__ = lazy_getattr(__name__, _HOMES)
