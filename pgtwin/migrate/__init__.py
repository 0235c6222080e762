"""Checkpoint migration: TF1 ``Saver`` checkpoints into pgtwin's eager agent or the user's model.

Public names (imported lazily):

* :func:`convert_checkpoint` (``agent_checkpoint``): into the eager twin's checkpoint;
* :func:`convert_user_checkpoint` (``user_checkpoint``): into the user's own TF2 model.
"""
from pgtwin.lazy_names import lazy_getattr

_HOMES = {
    "convert_checkpoint": "pgtwin.migrate.agent_checkpoint",
    "convert_user_checkpoint": "pgtwin.migrate.user_checkpoint",
}
__all__ = list(_HOMES)
__getattr__ = lazy_getattr(__name__, _HOMES)
