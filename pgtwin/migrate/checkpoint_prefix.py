"""A TF2 checkpoint at a prefix (``dst.index``, ``dst.data-*``), written so it is never half there.

The converters write into a temporary directory beside ``dst`` (same filesystem, so the
renames are atomic), verify what they wrote, and only then move the files into place:
data first, the index last, since the index is what makes a prefix readable. On any
error the temporary directory is removed and nothing is left at ``dst``.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator


def prefix_files(dst: str) -> list[str]:
    """The files of the checkpoint at prefix ``dst`` that exist (names in its directory)."""
    directory, base = os.path.dirname(os.path.abspath(dst)), os.path.basename(dst)
    if not os.path.isdir(directory):
        return []
    return sorted(f for f in os.listdir(directory)
                  if f == f"{base}.index" or f.startswith(f"{base}.data-"))


def refuse_existing(dst: str, overwrite: bool) -> list[str]:
    """The files at ``dst`` (to replace), or :class:`FileExistsError` unless ``overwrite``."""
    existing = prefix_files(dst)
    if existing and not overwrite:
        raise FileExistsError(f"{os.path.abspath(dst)} exists ({existing}); to replace it, "
                              "pass --overwrite (overwrite=True in Python)")
    return existing


def move_into_place(tmp: str, out_dir: str, base: str, existing: list[str]) -> None:
    """Rename the verified files from ``tmp`` next to ``dst``: data first, the index last."""
    for name in existing:
        os.remove(os.path.join(out_dir, name))
    files = sorted(os.listdir(tmp), key=lambda f: f.endswith(".index"))
    for name in files:
        os.replace(os.path.join(tmp, name), os.path.join(out_dir, name))


@contextlib.contextmanager
def staged_prefix(dst: str, overwrite: bool = False) -> Iterator[str]:
    """A temporary prefix beside ``dst`` to write and verify; moved to ``dst`` on a clean exit.

    Raises :class:`FileExistsError` on entry when ``dst`` exists and not ``overwrite``, and
    ``ValueError`` naming ``dst`` when its directory cannot be made or written (nothing is
    left: the directories it made for ``dst`` are removed again, also after a failure in
    the body).
    """
    dst = os.path.abspath(dst)
    out_dir, base = os.path.dirname(dst), os.path.basename(dst)
    existing = refuse_existing(dst, overwrite)
    made = _missing_ancestors(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".tmp-{base}-", dir=out_dir)
    except OSError as err:
        _remove_empty(made)
        raise ValueError(f"cannot write the checkpoint {dst}: {err.strerror or err} "
                         f"({err.filename or out_dir}); choose a directory you can write in. "
                         "Nothing was written.") from None
    done = False
    try:
        yield os.path.join(tmp, base)
        move_into_place(tmp, out_dir, base, existing)
        done = True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not done:  # a failed conversion leaves no directories it made either
            _remove_empty(made)


def _missing_ancestors(path: str) -> list[str]:
    """``path`` and its ancestors that do not exist yet, innermost first."""
    missing = []
    while path and not os.path.exists(path) and os.path.dirname(path) != path:
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def _remove_empty(dirs: list[str]) -> None:
    """Remove the directories of ``dirs`` (innermost first) that exist and are empty."""
    for path in dirs:
        try:
            os.rmdir(path)
        except OSError:
            return
