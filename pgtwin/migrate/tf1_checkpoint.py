"""A TF1 ``Saver`` checkpoint as a table: its variables, their optimizer slots, Adam's step count.

A TF1 checkpoint is a flat ``{name: array}`` table (``tf.train.load_checkpoint``). Besides
the model's variables it holds the optimizer's *slots*, named after their variable
(``<var>/Adam`` = m and ``<var>/Adam_1`` = v for ``AdamOptimizer``; ``<var>/Momentum`` ...)
and Adam's *non-slot* variables ``beta1_power``, ``beta2_power`` (``_1``, ``_2`` ... for
further Adam optimizers in the graph), which hold ``beta ** (t + 1)`` after t steps.

Shared by both converters: :mod:`pgtwin.migrate.agent_checkpoint` (into pgtwin's eager agent)
and :mod:`pgtwin.migrate.user_checkpoint` (into the user's own model).
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

_POWER = re.compile(r"(^|/)beta([12])_power(_\d+)?$")


_FILE_SUFFIX = re.compile(r"\.(index|meta|data-\d+-of-\d+)$")
"""A checkpoint's files beside its prefix: the index, the shards, and the ``Saver``'s graph
(``.meta``, the file users most often pick)."""


def checkpoint_prefix(src: str) -> str:
    """The prefix of the TF1 checkpoint ``src``: a prefix (``model.ckpt-5``), one of its files
    (``model.ckpt-5.index``, ``.meta``, ``model.ckpt-5.data-00000-of-00001``: the prefix is what
    TensorFlow reads, and it takes an ``.index`` file for an empty checkpoint), or a directory
    with a ``checkpoint`` file (its latest).

    Raises:
      ValueError: no checkpoint there; the message lists the prefixes of the checkpoints in
        that directory (a ``Saver(max_to_keep=...)`` deletes the older ones).
    """
    if os.path.isdir(src):
        latest = tf.train.latest_checkpoint(src)
        if latest is None:
            stale = os.path.isfile(os.path.join(src, "checkpoint"))
            raise ValueError(
                f"{src!r} is a directory whose 'checkpoint' file "
                + ("names no checkpoint that exists (its paths are stale: the directory was "
                   "moved or copied?)" if stale else "is missing")
                + ": give the checkpoint's prefix (model.ckpt for model.ckpt.index)"
                + _listed(src))
        return latest
    if os.path.isfile(src) and src.lower().endswith((".h5", ".hdf5", ".keras")):
        raise ValueError(
            f"{src!r} is a Keras weights file (model.save_weights or model.save), not a TF1 "
            "Saver checkpoint: there is nothing to convert. Load it into your TF2 model with "
            "model.load_weights(path) (Keras 3 reads tf.keras' HDF5 weights by layer order); "
            "it holds no optimizer state. To carry the optimizer's state too, convert the "
            "Saver checkpoint of the same run, if it wrote one")
    prefix = _FILE_SUFFIX.sub("", src)
    if not os.path.isfile(f"{prefix}.index"):
        raise ValueError(f"no TF1 checkpoint at {src!r}: {prefix + '.index'!r} does not exist"
                         + _listed(os.path.dirname(prefix) or "."))
    return prefix


def checkpoint_dtype(values: Mapping[str, np.ndarray]) -> str:
    """``float64`` when every float variable of a checkpoint's ``values`` is but Adam's beta
    powers, else ``float32``: TF1 keeps the powers in float32 even in a float64 graph, so a
    float64 Adam checkpoint always holds two float32 scalars."""
    floats = {v.dtype.name for n, v in values.items() if v.dtype.kind == "f" and not power_key(n)}
    return "float64" if floats == {"float64"} else "float32"


def _listed(directory: str) -> str:
    """``; the checkpoints in DIR: a, b`` from its ``*.index`` files (prefixes), or ''."""
    try:
        found = sorted(f[:-len(".index")] for f in os.listdir(directory) if f.endswith(".index"))
    except OSError:
        return ""
    return f"; the checkpoints in {directory!r}: {', '.join(found)}" if found else ""


def read_tf1_checkpoint(src: str) -> dict[str, np.ndarray]:
    """Every variable of a TF1 checkpoint (``src`` as :func:`checkpoint_prefix` takes it)."""
    prefix = checkpoint_prefix(src)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (ValueError, tf.errors.NotFoundError, tf.errors.DataLossError) as err:
        raise ValueError(f"cannot read a checkpoint at {prefix!r}: {err}") from None
    names = list(reader.get_variable_to_shape_map())
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in names:
        raise ValueError(f"{src!r} is already a TF2 object-based checkpoint (tf.train.Checkpoint); "
                         "convert-checkpoint reads TF1 Saver checkpoints")
    return {name: np.asarray(reader.get_tensor(name)) for name in sorted(names)}


def power_key(name: str) -> str | None:
    """``"beta1"`` or ``"beta2"`` when ``name`` is one of Adam's beta powers, else None."""
    match = _POWER.search(name)
    return f"beta{match.group(2)}" if match else None


def slot_parents(shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[str, str]]:
    """``{slot name: (variable name, slot suffix)}`` for the optimizer slots among ``shapes``.

    A name ``<var>/<suffix>`` whose ``<var>`` is also in the checkpoint with the same shape
    is a slot of it (``Adam``, ``Adam_1``, ``Momentum`` ...); beta powers never are.
    """
    out = {}
    for name, shape in shapes.items():
        if power_key(name):
            continue
        base, _, suffix = name.rpartition("/")
        if base in shapes and tuple(shapes[base]) == tuple(shape) and not power_key(base):
            out[name] = (base, suffix)
    return out


NOT_ADAM = frozenset({"Adadelta", "Adagrad", "AdagradDA", "ProximalAdagrad", "Ftrl",
                      "RMSProp", "Momentum", "GradientDescent", "ProximalGradientDescent"})
"""The default names of TF1's other optimizers, which name their slots (``W/Adadelta``,
``W/Adadelta_1``): two slots ``S``, ``S_1`` of one of these are not Adam's m and v."""


def adam_pair(slots: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(m, v)`` when a variable's slots ``{suffix: value}`` are exactly one Adam pair ``S``,
    ``S_1`` (``S`` the optimizer's name: ``Adam``, or the ``name=`` it was given): not for
    another optimizer's default name (:data:`NOT_ADAM`), nor where the second slot has a
    negative entry (Adam's v is a mean of squares; RMSProp's momentum is not)."""
    pairs = [s for s in slots if f"{s}_1" in slots]
    if len(pairs) != 1 or len(slots) != 2 or pairs[0].split("/")[-1] in NOT_ADAM:
        return None
    m, v = slots[pairs[0]], slots[f"{pairs[0]}_1"]
    return None if np.any(np.asarray(v) < 0) else (m, v)


def adam_step_count(beta1_power: float, beta2_power: float, beta1: float, beta2: float) -> int:
    """Adam's step count t from TF1's accumulators ``beta_i_power = beta_i ** (t + 1)``.

    Keras' ``iterations`` is this t: its next step uses ``beta ** (t + 1)``, as TF1's does.
    TF1 keeps the powers in float32 and multiplies by float32-rounded betas, so t is solved
    with those; each power gives an estimate (float32 error ~6e-8 t relative, so within
    0.25 of an integer up to t ~ 1e5). A power that has underflowed (t > ~980 for beta1 =
    0.9) says nothing; if both have, the bias corrections are exactly 1 in float32 and any
    t past the underflow is equivalent: the first such t is returned.
    """
    estimates = []
    for power, beta in ((beta1_power, beta1), (beta2_power, beta2)):
        b = float(np.float32(beta))
        if not 0.0 < b < 1.0 or not power <= 1.0:
            raise ValueError(f"beta={beta} and beta power {power} are not an Adam state")
        if power > np.finfo(np.float32).tiny:
            estimates.append(math.log(power) / math.log(b) - 1.0)
    if not estimates:
        return math.ceil(math.log(np.finfo(np.float32).tiny) / math.log(float(np.float32(beta2))))
    steps = round(estimates[-1])
    for est in estimates:
        if abs(est - steps) > 0.25 or steps < 0:
            raise ValueError(
                f"beta powers {beta1_power:g}, {beta2_power:g} do not come from one step count "
                f"with beta1={beta1}, beta2={beta2} (estimates {[round(e, 3) for e in estimates]}): "
                "were other betas used? (set them with --adam-beta1/--adam-beta2)")
    return steps


def load_tf1_adam(optimizer: Any, variables: Mapping[str, Any],
                  slots: Mapping[str, tuple[np.ndarray, np.ndarray]], beta1_power: Any,
                  beta2_power: Any, session: Any) -> None:
    """Put Adam's state into a TF1 ``AdamOptimizer`` whose slots exist in ``session``'s graph.

    ``slots[name]`` is ``(m, v)`` for ``variables[name]``; the beta powers are loaded as
    given (TF1 keeps them as float32 variables, even in a float64 graph).
    """
    for name, variable in variables.items():
        _set(optimizer.get_slot(variable, "m"), slots[name][0], session)
        _set(optimizer.get_slot(variable, "v"), slots[name][1], session)
    # TF1 Adam has no public accessor for its beta powers.
    beta1, beta2 = optimizer._get_beta_accumulators()  # noqa: SLF001
    _set(beta1, beta1_power, session)
    _set(beta2, beta2_power, session)


def _set(variable: Any, value: Any, session: Any) -> None:
    """Assign ``value`` to a graph variable by running its initializer on it: no op is added
    to the graph (what the deprecated ``Variable.load`` runs)."""
    session.run(variable.initializer, {variable.initializer.inputs[1]: value})
