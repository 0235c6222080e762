"""A vector env's complete state as bytes, so a resumed run steps the same episodes on.

Gymnasium envs have no save/restore API, but the classic-control envs, ``BatteryArbitrage-v0``
and gymnasium's vector containers are plain Python objects: their physics state, step
counters, autoreset flags and ``np.random.Generator`` pickle exactly. The one thing that
does not pickle is ``SyncVectorEnv.env_fns`` (closures made inside ``gymnasium.make_vec``),
which is only used to build the sub-envs; it is written as a reference and filled back in
from a freshly made env of the same id when the snapshot is restored.

Envs holding OS resources (``AsyncVectorEnv`` worker processes, render windows, external
simulators) cannot be snapshotted: :func:`snapshot` raises :class:`EnvSnapshotError`.

A snapshot is a pickle: restore only snapshots you wrote yourself.
"""
from __future__ import annotations

import io
import pickle
from typing import Any

import gymnasium as gym


class EnvSnapshotError(RuntimeError):
    """The env's state cannot be captured (or a snapshot does not fit the env given)."""


def _env_fns_lists(envs: Any) -> list[list]:
    """The ``env_fns`` of every sync vector env in the wrapper chain, outermost first."""
    found, seen = [], set()
    node = envs
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        fns = node.__dict__.get("env_fns") if hasattr(node, "__dict__") else None
        if fns is not None:
            found.append(fns)
        node = node.__dict__.get("env") if hasattr(node, "__dict__") else None
    return found


class _Pickler(pickle.Pickler):
    def __init__(self, file, refs: list[list]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._refs = {id(fns): i for i, fns in enumerate(refs)}

    def persistent_id(self, obj):
        return ("env_fns", self._refs[id(obj)]) if id(obj) in self._refs else None


#: Modules that moved, by their old name (snapshots written before the move name them).
MOVED_MODULES = {"pgcommon": "pgtwin_core"}


def moved(module: str) -> str:
    """The current name of ``module``, given :data:`MOVED_MODULES` (packages and below)."""
    for old, new in MOVED_MODULES.items():
        if module == old or module.startswith(old + "."):
            return new + module[len(old):]
    return module


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, refs: list[list]):
        super().__init__(file)
        self._refs = refs

    def find_class(self, module: str, name: str):
        return super().find_class(moved(module), name)

    def persistent_load(self, pid):
        kind, index = pid
        if kind != "env_fns" or index >= len(self._refs):
            raise EnvSnapshotError(
                f"env snapshot refers to env_fns #{index}, but the fresh env has "
                f"{len(self._refs)} sync vector env(s): the snapshot is of a different env"
            )
        return self._refs[index]


def snapshot(envs: gym.vector.VectorEnv) -> bytes:
    """The state of ``envs`` (wrappers, sub-envs, their generators) as bytes.

    Raises:
      EnvSnapshotError: the env holds something that cannot be pickled (the message says
        what), e.g. an ``AsyncVectorEnv``.
    """
    buf = io.BytesIO()
    try:
        _Pickler(buf, _env_fns_lists(envs)).dump(envs)
    except (pickle.PicklingError, TypeError, AttributeError) as err:
        raise EnvSnapshotError(
            f"cannot snapshot env {getattr(envs, 'pgtwin_env_id', type(envs).__name__)!r}: "
            f"{err}"
        ) from err
    return buf.getvalue()


class NotCheckpointableError(ValueError):
    """``--deterministic`` with an env whose state cannot be checkpointed: the run's settings
    ask for what the env cannot give, so the command line refuses them as a usage error."""


def snapshot_problem(envs: list[gym.vector.VectorEnv], deterministic: bool) -> str | None:
    """None where every env of ``envs`` (a run's, one per local replica) can be snapshot;
    else why not, or, with ``deterministic`` (a bit-exact resume needs the envs' state),
    raises :class:`NotCheckpointableError` saying why."""
    try:
        for env in envs:
            snapshot(env)
    except EnvSnapshotError as err:
        if deterministic:
            raise NotCheckpointableError(
                f"--deterministic needs an env whose state can be checkpointed: {err}; "
                "drop --deterministic (a resume then reseeds the envs)") from err
        return str(err)
    return None


def restore(data: bytes, fresh: gym.vector.VectorEnv) -> gym.vector.VectorEnv:
    """The env saved in ``data``; ``fresh`` (same id and size, not yet used) lends its env_fns.

    ``fresh`` itself is closed: the restored env replaces it.
    """
    env_id = getattr(fresh, "pgtwin_env_id", None)
    envs = _Unpickler(io.BytesIO(data), _env_fns_lists(fresh)).load()
    if not isinstance(envs, gym.vector.VectorEnv):
        raise EnvSnapshotError(f"env snapshot holds a {type(envs).__name__}, not a vector env")
    if getattr(envs, "pgtwin_env_id", None) != env_id or envs.num_envs != fresh.num_envs:
        raise EnvSnapshotError(
            f"env snapshot is of {getattr(envs, 'pgtwin_env_id', None)!r} x {envs.num_envs}, "
            f"but the run uses {env_id!r} x {fresh.num_envs}"
        )
    fresh.close()
    return envs
