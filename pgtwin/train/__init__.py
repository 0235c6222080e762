"""Training runs: the run loop, its settings, checkpoints, logs, and runs under ``tf.distribute``.

Public names (imported lazily; none imports TensorFlow at package import):

* :class:`RunSettings`, :func:`train`, :class:`TrainingError` (``run``): one twin, one env;
* :func:`train_distributed`, :func:`make_strategy` (``distributed``): the eager twin on
  several replicas.
"""
from pgtwin.lazy_names import lazy_getattr

_HOMES = {
    "RunSettings": "pgtwin.train.run",
    "train": "pgtwin.train.run",
    "TrainingError": "pgtwin.train.run",
    "train_distributed": "pgtwin.train.distributed",
    "make_strategy": "pgtwin.train.distributed",
}
__all__ = list(_HOMES)
__getattr__ = lazy_getattr(__name__, _HOMES)
