"""Parity: the ladder's report, the harness on the user's own TF1/TF2 code, and the twins' ladder.

Public names (imported lazily, so ``import pgtwin.parity`` does not import TensorFlow):

* :func:`compare`, :func:`assert_parity` (``harness``): the ladder on user code, either
  contract (a loss builder and a TF2 function, or a :class:`TF1Program` and a
  :class:`TF2Program`);
* :class:`TF1Program`, :class:`TF2Program` (``programs``): the user's code as it is written;
* :class:`ParityReport`, :class:`Row`, :data:`RUNGS` (``ladder``): the report;
* :func:`run_ladder` (``twin_parity``): ``legacy_graph`` against ``eager``, rung by rung.
"""
from pgtwin.lazy_names import lazy_getattr

_HOMES = {
    "compare": "pgtwin.parity.harness",
    "assert_parity": "pgtwin.parity.harness",
    "TF1Program": "pgtwin.parity.programs",
    "TF2Program": "pgtwin.parity.programs",
    "ParityReport": "pgtwin.parity.ladder",
    "Row": "pgtwin.parity.ladder",
    "RUNGS": "pgtwin.parity.ladder",
    "run_ladder": "pgtwin.parity.twin_parity",
}
__all__ = list(_HOMES)
__getattr__ = lazy_getattr(__name__, _HOMES)
