"""Checkpoint directories that are written atomically and verified before use.

Layout under a run's checkpoint root::

    checkpoints/
      update_00000040/          a complete checkpoint (the name is only ever given by rename)
        manifest.json           format, update, meta, and size + sha256 of every other file
        ...                     whatever the writer put there (agent/, state.json, env.pkl)
      update_00000050/
      .tmp-update_00000060-*/   a write in progress (or killed mid-write): never read

Writing: the files go into a fresh ``.tmp-*`` directory, are fsynced, the manifest is
written last, and only then is the directory renamed to ``update_<N>``; older checkpoints
are pruned after that, so at every instant the previous complete checkpoint exists. A pruned
checkpoint is renamed to ``.tmp-pruned-*`` before it is deleted. A crash at any point
leaves at worst a ``.tmp-*`` directory, which :func:`clean_temporaries` removes.

Reading: :func:`verify` recomputes every checksum, so a truncated or corrupted file is
refused with a :class:`CheckpointError` naming the file, and :func:`find_latest` falls back
to the newest checkpoint that verifies, reporting the ones it refused.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

FORMAT = "pgtwin-checkpoint/1"
MANIFEST = "manifest.json"
_NAME = re.compile(r"^update_(\d{8})$")
_TMP_PREFIX = ".tmp-"
_PRUNED_PREFIX = f"{_TMP_PREFIX}pruned-"
_ASIDE = re.compile(r"^update_\d{8}\.corrupt\d*$")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, truncated or corrupted (the message says which)."""


@dataclass(frozen=True)
class Checkpoint:
    """A verified checkpoint directory."""

    path: str
    update: int
    meta: dict[str, Any] = field(default_factory=dict)
    """What the writer recorded about the run at this checkpoint (JSON values)."""


def checkpoint_path(root: str, update: int) -> str:
    """Where the checkpoint of update ``update`` lives under ``root``."""
    return os.path.join(root, f"update_{update:08d}")


def list_checkpoints(root: str) -> list[tuple[int, str]]:
    """``[(update, path)]`` of the complete-looking checkpoint dirs under ``root``, oldest first."""
    if not os.path.isdir(root):
        return []
    found = []
    for name in os.listdir(root):
        match = _NAME.match(name)
        if match and os.path.isdir(os.path.join(root, name)):
            found.append((int(match.group(1)), os.path.join(root, name)))
    return sorted(found)


def write_checkpoint(root: str, update: int, fill: Callable[[str], None],
                     meta: dict[str, Any] | None = None, keep: int | None = 2) -> Checkpoint:
    """Write checkpoint ``update`` atomically and keep only the newest ``keep`` (>= 1).

    Args:
      root: the checkpoint root (created if missing).
      update: the update count the checkpoint is of (its name).
      fill: writes the checkpoint's files into the directory it is given.
      meta: JSON-serialisable facts stored in the manifest (returned by :func:`verify`).
      keep: checkpoints to keep after this one is complete, this one included; None
        prunes nothing (a shard of a distributed checkpoint: :func:`prune` once every
        worker's shard is written).
    """
    if keep is not None and keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}update_{update:08d}-", dir=root)
    try:
        os.chmod(tmp, _directory_mode())  # mkdtemp's 0700 would hide the run from its group
        fill(tmp)
        files = {rel: _describe(os.path.join(tmp, rel)) for rel in _files_under(tmp)}
        manifest = {"format": FORMAT, "update": int(update), "meta": meta or {}, "files": files}
        with open(os.path.join(tmp, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        for rel in files:
            _fsync_file(os.path.join(tmp, rel))
        _fsync_dir(tmp)
        final = checkpoint_path(root, update)
        if os.path.exists(final):
            # Rewriting an update (a resumed run passing the same point): the old copy is
            # moved aside first, because rename cannot replace a non-empty directory.
            aside = tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}replaced-", dir=root)
            os.rename(final, os.path.join(aside, "old"))
            os.rename(tmp, final)
            remove_tree(aside, "the replaced copy of a checkpoint")
        else:
            os.rename(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if keep is not None:
        prune(root, keep)
    return Checkpoint(final, int(update), manifest["meta"])


class CheckpointCleanupWarning(UserWarning):
    """An old checkpoint (or a replaced copy) could not be deleted: it stays on disk."""


def prune(root: str, keep: int) -> list[str]:
    """Delete all but the newest ``keep`` (>= 1) checkpoints under ``root``; return their paths.

    A deletion that fails is not an error of the run (the newest checkpoints are intact,
    and a half-deleted old one fails :func:`verify` by name if it is ever used) but it is
    never silent: a :class:`CheckpointCleanupWarning` names the path and the OS error, and
    the next prune tries again.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    earlier = [os.path.join(root, n) for n in os.listdir(root) if n.startswith(_PRUNED_PREFIX)]
    old = [path for _, path in list_checkpoints(root)[:-keep]]
    for path in old:
        # Renamed out of the checkpoints' names first (one atomic step), then deleted: a
        # kill during the deletion leaves a .tmp-* directory, which a resume removes,
        # never an update_N that lacks some of its files.
        doomed = tempfile.mkdtemp(prefix=f"{_PRUNED_PREFIX}{os.path.basename(path)}-", dir=root)
        os.rename(path, os.path.join(doomed, "old"))
        remove_tree(doomed, f"an old checkpoint ({os.path.basename(path)})")
    for path in earlier:  # what an earlier prune could not delete: tried again
        remove_tree(path, "an old checkpoint")
    return old


def remove_tree(path: str, what: str) -> bool:
    """``shutil.rmtree(path)``; on failure a :class:`CheckpointCleanupWarning`, and False."""
    failures: list[str] = []
    shutil.rmtree(path, onerror=lambda _fn, where, exc: failures.append(f"{where}: {exc[1]}"))
    if failures:
        warnings.warn(CheckpointCleanupWarning(
            f"could not delete {what} {path} ({failures[0]}"
            + (f", and {len(failures) - 1} more" if len(failures) > 1 else "")
            + "): it stays on disk and is tried again at the next checkpoint; free the disk "
            "or fix the permissions"), stacklevel=2)
    return not failures


def verify(path: str) -> Checkpoint:
    """Check the manifest and every file's size and sha256; return the checkpoint.

    Raises:
      CheckpointError: naming the checkpoint and the first problem found.
    """
    manifest_path = os.path.join(path, MANIFEST)
    if not os.path.isfile(manifest_path):
        raise CheckpointError(f"checkpoint {path} has no {MANIFEST}: incomplete or not a "
                              "pgtwin checkpoint")
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
        files, update = manifest["files"], int(manifest["update"])
        fmt = manifest["format"]
    except (ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"checkpoint {path}: {MANIFEST} is unreadable ({err})") from err
    if fmt != FORMAT:
        raise CheckpointError(f"checkpoint {path} has format {fmt!r}, expected {FORMAT!r}")
    for rel, want in sorted(files.items()):
        full = os.path.join(path, rel)
        if not os.path.isfile(full):
            raise CheckpointError(f"checkpoint {path}: file {rel} is missing")
        size = os.path.getsize(full)
        if size != want["size"]:
            raise CheckpointError(f"checkpoint {path}: file {rel} is {size} bytes but the "
                                  f"manifest says {want['size']} (truncated or overwritten)")
        if _sha256(full) != want["sha256"]:
            raise CheckpointError(f"checkpoint {path}: file {rel} fails its sha256 check "
                                  "(corrupted)")
    return Checkpoint(path, update, manifest.get("meta", {}))


def find_latest(root: str) -> tuple[Checkpoint | None, list[tuple[str, str]]]:
    """The newest checkpoint under ``root`` that verifies, and ``[(path, reason)]`` of the
    newer ones refused (newest first)."""
    refused = []
    for _, path in reversed(list_checkpoints(root)):
        try:
            return verify(path), refused
        except CheckpointError as err:
            refused.append((path, str(err)))
    return None, refused


def set_aside_earlier(root: str) -> list[str]:
    """Names of the checkpoints under ``root`` that an earlier resume set aside
    (``update_N.corrupt*``), oldest first."""
    if not os.path.isdir(root):
        return []
    return sorted(n for n in os.listdir(root) if _ASIDE.match(n))


def set_aside(path: str) -> str:
    """Rename a refused checkpoint to ``<path>.corrupt`` (kept for inspection); return it."""
    target = path + ".corrupt"
    n = 1
    while os.path.exists(target):
        n += 1
        target = f"{path}.corrupt{n}"
    os.rename(path, target)
    return target


def clean_temporaries(root: str) -> list[str]:
    """Remove the ``.tmp-*`` dirs of interrupted writes under ``root``; return their paths."""
    if not os.path.isdir(root):
        return []
    removed = [os.path.join(root, n) for n in os.listdir(root) if n.startswith(_TMP_PREFIX)]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def _files_under(top: str) -> list[str]:
    out = []
    for dirpath, _, names in os.walk(top):
        out += [os.path.relpath(os.path.join(dirpath, n), top) for n in names]
    return sorted(out)


def _describe(path: str) -> dict[str, Any]:
    return {"size": os.path.getsize(path), "sha256": _sha256(path)}


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _directory_mode() -> int:
    """``0o777`` less the process's umask: the mode ``os.makedirs`` would give."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o777 & ~umask


def _fsync_file(path: str) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
