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

    Raises :class:`FileExistsError` on entry when ``dst`` exists and not ``overwrite``.
    """
    dst = os.path.abspath(dst)
    out_dir, base = os.path.dirname(dst), os.path.basename(dst)
    existing = refuse_existing(dst, overwrite)
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".tmp-{base}-", dir=out_dir)
    try:
        yield os.path.join(tmp, base)
        move_into_place(tmp, out_dir, base, existing)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
