"""The user's TF2 program, run by the harness on the user's own variables.

:class:`TF2Side` builds a :class:`pgtwin.parity.programs.TF2Program` (a Keras 3 or ``tf_keras``
model, a ``tf.Module``, or an object holding one), calls its loss once under a
``GradientTape`` so lazily built layers make their variables, and takes as the TF2
variables the trainable ones that call read, in the order it first read them (the
layers' order). Their values at that point are the model's own initial values (the
initialisation rung); the TF1 values are then assigned into those same variables, so the
user's loss, train step and optimizer run on them unchanged.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin.migrate.keras_adam_state import adam_slots, is_keras_adam
from pgtwin.parity.code_checks import (LegacyCodeError, ProgramBuildError, eager_guard,
                                       program_failed, require_eager)
from pgtwin.parity.index_ranges import index_error_from
from pgtwin.parity.model_state import state_kept, tf2_state_variables
from pgtwin.parity.optimizer_groups import keras_owner
from pgtwin.parity.programs import TF2Program, resolve
from pgtwin.parity.variable_mapping import VariableInfo

_WEIGHT_ATTRS = ("kernel", "bias", "embeddings", "recurrent_kernel", "gamma", "beta",
                 "depthwise_kernel", "pointwise_kernel")


def loss_results(value: Any, what: str) -> dict[str, Any]:
    """``{"loss": ..., other outputs}`` from what a user's loss returned."""
    if isinstance(value, Mapping):
        if "loss" not in value:
            raise ValueError(f"{what} returned a dict without a 'loss' key (keys: {sorted(value)})")
        return dict(value)
    if isinstance(value, (tuple, list)):
        raise ValueError(f"{what} returned a {type(value).__name__}: return the loss, or a "
                         "dict {'loss': loss, key: tensor}")
    return {"loss": value}


def underlying(v: Any) -> tf.Variable:
    """The ``tf.Variable`` behind a Keras 3 variable (``.value``), or ``v`` itself."""
    inner = getattr(v, "value", None)
    return inner if isinstance(inner, tf.Variable) else v


def _owned_trainable(obj: Any, depth: int = 2) -> list[Any]:
    """Trainable variables of ``obj`` or of the models/modules its attributes hold."""
    found = getattr(obj, "trainable_variables", None)
    if found is not None and not callable(found):
        return list(found)
    if depth == 0 or not hasattr(obj, "__dict__"):
        return []
    out = []
    for value in vars(obj).values():
        out.extend(_owned_trainable(value, depth - 1))
    return out


def _frozen(obj: Any) -> set[int]:
    """``id``s of the ``tf.Variable``s behind the Keras variables that say they are not
    trainable, in every layer reachable from ``obj``.

    Keras 3 keeps ``trainable`` on its own variable: a layer built with ``trainable=False``,
    or frozen after it was built (a target network), holds ``tf.Variable``s that still say
    ``trainable=True``, so a tape watches them like any weight. They are the model's state,
    as TF1's ``trainable=False`` variables are (:mod:`pgtwin.parity.model_state`)."""
    return {id(underlying(v)) for layer in _layers(obj) for v in _layer_variables(layer)
            if getattr(v, "trainable", True) is False}


def _layer_variables(layer: Any) -> list[Any]:
    """A Keras layer's own and its sublayers' variables, as it holds them (none for a
    tf_keras layer not built yet)."""
    try:
        return list(getattr(layer, "weights", None) or [])
    except ValueError:
        return []


def _is_layer(value: Any) -> bool:
    """True for a Keras 3 or tf_keras layer (judged by its class: no property is run)."""
    cls = type(value)
    return callable(getattr(cls, "build", None)) and hasattr(cls, "trainable_weights") \
        and hasattr(cls, "add_weight")


def _layers(obj: Any, seen: set[int] | None = None) -> list[Any]:
    """Every Keras layer reachable through ``.layers`` and attributes, ``obj`` included."""
    seen = set() if seen is None else seen
    if id(obj) in seen or not hasattr(obj, "__dict__"):
        return []
    seen.add(id(obj))
    out = [obj] if _is_layer(obj) else []
    children = list(getattr(obj, "layers", []) or []) if out else []
    children += [v for v in vars(obj).values() if _is_layer(v)]
    for child in children:
        out.extend(_layers(child, seen))
    return out


def is_optimizer(value: Any) -> bool:
    """True for a Keras optimizer (Keras 3's, ``tf_keras``' new and legacy ones)."""
    return hasattr(value, "apply_gradients") and hasattr(value, "get_config")


def find_optimizers(obj: Any, model: Any) -> list[Any]:
    """Every Keras optimizer held by the model (``compile``), the object (an attribute, or
    a dict or list in one), or a model the object holds (an agent of two compiled networks),
    each once, the model's first (an
    actor-critic agent holds one per network)."""
    def attributes(holder: Any) -> list[Any]:  # a dict or list of them counts too
        values = list(vars(holder).values()) if hasattr(holder, "__dict__") else []
        return values + [x for v in values if isinstance(v, (dict, list, tuple))
                         for x in (v.values() if isinstance(v, dict) else v)]

    held = [v for v in attributes(obj) if not is_optimizer(v) and hasattr(v, "optimizer")]
    found = []
    for holder in (model, obj, *held):
        for value in [getattr(holder, "optimizer", None), *attributes(holder)]:
            if is_optimizer(value) and all(value is not f for f in found):
                found.append(value)
    return found


class TF2Side:
    """One :class:`TF2Program`: the user's object, its variables, loss and train step.

    Attributes:
      obj, model: the built object and the part holding the variables.
      variables: ``{name: tf.Variable}`` the loss reads, in first-read order.
      handles: ``{name: variable}`` as the user's code holds it (a Keras 3 variable, else
        the ``tf.Variable``), for ``apply_gradients``.
      initial: ``{name: value}`` before any load: the model's own initial values;
        ``initial_state`` the same of the state variables.
      not_compared: trainable variables of the model that the loss does not read.
      optimizers: every Keras optimizer found, the named one first.
      optimizer: the first of them, or None.
    """

    def __init__(self, program: TF2Program, inputs: Mapping[str, np.ndarray],
                 what: str = "TF2Program"):
        self.program, self.what = program, what
        require_eager(f"{what}.build")
        with eager_guard():
            self.obj = _users(program.build, f"{what}.build")
        require_eager(f"{what}.build")
        self.model = self.obj if program.model is None else resolve(self.obj, program.model,
                                                                    f"{what}.model")
        self.inputs = {k: tf.constant(a) for k, a in inputs.items()}
        self.state: dict[str, Any] = {}
        built = tf2_state_variables(self.model, self.obj)  # a model built in build()
        self.state = _by_name(built, self.model, self.obj)
        with state_kept(self), tf.GradientTape() as tape:
            first = loss_results(_users(lambda: program.loss(self.obj, dict(self.inputs)),
                                        f"{what}.loss", inputs), f"{what}.loss")
        self.returned = [k for k in first if k != "loss"]
        """The keys the loss returns besides ``loss`` (before ``TF2Program.outputs`` picks)."""
        frozen = _frozen(self.obj)
        watched = [v for v in tape.watched_variables() if v.trainable and id(v) not in frozen]
        if not watched:
            raise ValueError(f"{what}.loss read no trainable variable: it must compute the "
                             "loss from the model's variables (not from numpy values)")
        owned = [*_owned_trainable(self.model), *_owned_trainable(self.obj)]
        by_id = {id(underlying(v)): v for v in owned}
        handles = [by_id.get(id(v), v) for v in watched]
        self.handles = _by_name(handles, self.model, self.obj)
        self.variables = {name: underlying(h) for name, h in self.handles.items()}
        mirrored = _mirrored_components(owned)
        self._assigned = {n: mirrored.get(id(v), v) for n, v in self.variables.items()}
        """What :meth:`load` assigns for each compared variable: itself, or the
        ``tf.distribute`` variable whose replica-0 copy the loss read (assigning that copy
        alone left the other replicas at Keras' initial values)."""
        made = {id(underlying(v)): i for i, v in reversed(list(enumerate(owned)))}
        self.creation_order = sorted(self.variables, key=lambda n: made.get(
            id(self.variables[n]), len(made)))  # stable: the unowned keep the read order
        read = {id(v) for v in watched} | {id(mirrored[id(v)]) for v in watched
                                           if id(v) in mirrored}
        unread = list({id(underlying(v)): v for v in owned
                       if id(underlying(v)) not in read}.values())
        unread_names = _by_name(unread, self.model, self.obj)
        self.not_compared = list(unread_names)
        """Display names (Keras paths) of the model's trainable variables the loss does not
        read."""
        self.not_compared_shapes = {n: tuple(underlying(h).shape.as_list())
                                    for n, h in unread_names.items()}
        self.initial = self.values()
        self.restated = False
        self.optimizers = found = self._held_optimizers()
        self.optimizer = found[0] if found else None
        # made by the first call too; a tf.Module agent's optimizer slots are not the model's
        slots = {id(underlying(v)) for o in found for v in _optimizer_variables(o)}
        state = [v for v in tf2_state_variables(self.model, self.obj)
                 if id(underlying(v)) not in slots]
        self.state = _by_name(state, self.model, self.obj)
        self.initial_state = self.state_values()

    def set_input(self, key: str, value: Any) -> None:
        """Give the loss and train step ``value`` for batch key ``key`` from now on (in the
        dtype it had)."""
        self.inputs[key] = tf.constant(value, dtype=self.inputs[key].dtype)

    def infos(self, order: list[str] | None = None) -> list[VariableInfo]:
        """The variables the loss reads as :class:`VariableInfo`, in first-read order (or in
        ``order``, e.g. :attr:`creation_order`: the model's)."""
        return [VariableInfo(n, tuple(self.variables[n].shape.as_list()),
                             self.variables[n].dtype.base_dtype.name)
                for n in (order or self.variables)]

    def values(self) -> dict[str, np.ndarray]:
        """``{name: value}`` now."""
        return {n: v.numpy() for n, v in self.variables.items()}

    def state_infos(self) -> list[VariableInfo]:
        """The state variables (:mod:`pgtwin.parity.model_state`) as :class:`VariableInfo`."""
        return [VariableInfo(n, tuple(v.shape), tf.as_dtype(v.dtype).name)
                for n, v in self.state.items()]

    def state_values(self) -> dict[str, np.ndarray]:
        """``{name: value}`` of the state variables now."""
        return {n: np.asarray(v.numpy()) for n, v in self.state.items()}

    def load_state(self, values: Mapping[str, np.ndarray]) -> None:
        """Assign the state variables (by TF2 name) their ``values``."""
        for name, value in values.items():
            v = self.state[name]
            v.assign(np.asarray(value).astype(tf.as_dtype(v.dtype).as_numpy_dtype))

    def load(self, values: Mapping[str, np.ndarray]) -> None:
        """Assign ``values`` (by TF2 name) into the user's variables (every replica of a
        ``tf.distribute`` one)."""
        for name, value in values.items():
            self._assigned[name].assign(np.asarray(value).astype(
                self.variables[name].dtype.as_numpy_dtype))

    def momentum_of(self, name: str) -> float | None:
        """The ``momentum`` of the Keras layer whose moving statistic is state ``name``
        (a ``BatchNormalization``), or None."""
        target = underlying(self.state[name])
        for layer in self.layers():
            momentum = getattr(layer, "momentum", None)
            for attr in ("moving_mean", "moving_variance"):
                v = getattr(layer, attr, None)
                if momentum is not None and v is not None and underlying(v) is target:
                    return float(momentum)
        return None

    def layers(self) -> list[Any]:
        """Every Keras layer of the model and of the object around it."""
        return list({id(x): x for x in [*_layers(self.model), *_layers(self.obj)]}.values())

    def initializer_of(self, name: str) -> str:
        """The Keras initializer that made the variable, as ``Class(config)``, or ''."""
        target = self.variables[name]
        for layer in _layers(self.model):
            for attr in _WEIGHT_ATTRS:
                v = getattr(layer, attr, None)
                if v is not None and underlying(v) is target:
                    init = getattr(layer, f"{attr}_initializer", None)
                    if init is None:
                        return ""
                    config = {k: x for k, x in (init.get_config() or {}).items()
                              if x is not None}
                    return f"{type(init).__name__}({config})"
        return ""

    def moved_by_loss(self) -> list[str]:
        """The state variables one call of the program's loss changes (a Keras
        ``BatchNormalization`` layer called in training mode moves its statistics), put back
        after."""
        with state_kept(self):
            before = self.state_values()
            self.program.loss(self.obj, dict(self.inputs))
            after = self.state_values()
        return [n for n in before if not np.array_equal(before[n], after[n])]

    def run(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray | None]]:
        """``({"loss": ..., outputs}, {name: gradient or None})`` on the inputs (the
        state left as it was: a Keras layer in training mode updates it on every call)."""
        with state_kept(self), tf.GradientTape() as tape:
            out = loss_results(self.program.loss(self.obj, dict(self.inputs)),
                               f"{self.what}.loss")
        grads = tape.gradient(out["loss"], list(self.variables.values()))
        keys = self.program.outputs
        outputs = {k: np.asarray(v) for k, v in out.items()
                   if k == "loss" or keys is None or k in keys}
        return outputs, {n: None if g is None else np.asarray(g)
                         for n, g in zip(self.variables, grads)}

    def adam_moments(self) -> dict[str, np.ndarray]:
        """``{name: Adam's first moment m}`` now, for the compared variables a built Keras
        ``Adam`` holds slots for; empty for another optimizer or one not built yet (its m
        is then 0)."""
        out = {}
        for optimizer in self.optimizers:
            if not is_keras_adam(optimizer) or not getattr(optimizer, "built", True):
                continue
            for name, handle in self.handles.items():
                try:
                    m, _ = adam_slots(optimizer, handle)
                except (KeyError, ValueError, AttributeError, IndexError):  # not its own
                    continue
                if m is not None:
                    out.setdefault(name, np.asarray(m.numpy()))
        return out

    def _held_optimizers(self) -> list[Any]:
        """The Keras optimizers the object holds now (:func:`find_optimizers`), the one
        ``TF2Program.optimizer`` names first: None until a train step makes it; anything
        else that is not an optimizer is a ValueError naming it."""
        found = find_optimizers(self.obj, self.model)
        ref = self.program.optimizer
        if ref is None:
            return found
        named = resolve(self.obj, ref, f"{self.what}.optimizer")
        if named is None:
            return found
        if not is_optimizer(named):
            raise ValueError(f"{self.what}.optimizer={ref!r} is a {type(named).__name__}, not "
                             "a Keras optimizer (no apply_gradients and get_config): name the "
                             "attribute that holds the optimizer, or leave it out to have the "
                             "optimizers the object holds found")
        return [named, *(o for o in found if o is not named)]

    def refresh_optimizers(self) -> list[Any]:
        """The Keras optimizers the object holds now and did not before, which become
        :attr:`optimizers`: a train step that makes its optimizer on its first call (or,
        wrongly, on every call). None for a restated optimizer."""
        if self.restated:
            return []
        held = self._held_optimizers()
        new = [o for o in held if all(o is not f for f in self.optimizers)]
        if held:
            self.optimizers, self.optimizer = held, held[0]
        return new

    def tf_keras_objects(self) -> list[str]:
        """The class names of the model and optimizers that are tf_keras' (``tf.keras``
        under ``TF_USE_LEGACY_KERAS=1``), not Keras 3's."""
        return [type(o).__name__ for o in (self.model, *self.optimizers)
                if type(o).__module__.split(".")[0] == "tf_keras"]

    def owner_of(self, name: str) -> Any:
        """The Keras optimizer that steps variable ``name``
        (:func:`~pgtwin.parity.optimizer_groups.keras_owner`), or None."""
        return keras_owner(self.optimizers, self.handles[name])

    def has_step(self) -> bool:
        """True when the program gives a train step or an optimizer the harness can apply."""
        return self.program.train_step is not None or self.optimizer is not None

    def step(self) -> None:
        """The user's train step, else the optimizer applied to the loss's gradients."""
        if self.program.train_step is not None:
            self.program.train_step(self.obj, dict(self.inputs))
            return
        with tf.GradientTape() as tape:
            loss = loss_results(self.program.loss(self.obj, dict(self.inputs)),
                                f"{self.what}.loss")["loss"]
        grads = tape.gradient(loss, list(self.variables.values()))
        self.optimizer.apply_gradients([(g, self.handles[n]) for n, g in
                                        zip(self.variables, grads) if g is not None])

    def set_optimizer(self, optimizer: Any) -> None:
        """Use ``optimizer`` (a restated one) instead of the program's own step."""
        self.optimizer, self.optimizers, self.restated = optimizer, [optimizer], True
        self.program = TF2Program(build=self.program.build, loss=self.program.loss,
                                  outputs=self.program.outputs)


def _mirrored_components(owned: list[Any]) -> dict[int, Any]:
    """``{id(replica copy): its tf.distribute variable}`` for the ``owned`` variables
    that are ``tf.distribute`` ones (a model built under ``MirroredStrategy.scope()``):
    a loss called outside ``strategy.run`` reads, and a tape watches, replica 0's copy."""
    out = {}
    for v in owned:
        u = underlying(v)
        if isinstance(u, tf.distribute.DistributedValues):
            out.update({id(c): u for c in u.values})
    return out


def _users(call: Any, what: str, inputs: Mapping[str, Any] | None = None) -> Any:
    """``call()``, the user's code: what it raises comes back as
    :class:`~pgtwin.parity.code_checks.ProgramBuildError` naming ``what`` and the line (the
    harness's own refusals, raised before, pass as they are), or, for an index out of range
    that one of ``inputs`` holds, as :class:`~pgtwin.parity.index_ranges.IndexRangeError`."""
    try:
        return call()
    except (LegacyCodeError, ProgramBuildError):
        raise
    except Exception as err:  # noqa: BLE001  (the user's code: named, not hidden)
        raise (index_error_from(err, inputs or {}, what) or program_failed(err, what)) from err


def _optimizer_variables(optimizer: Any) -> list[Any]:
    """A Keras optimizer's variables (a property in Keras 3 and tf_keras, a method in
    tf_keras' legacy optimizers); none for None."""
    found = getattr(optimizer, "variables", None)
    found = found() if callable(found) else found
    return list(found or [])


def _attribute_paths(*objs: Any) -> dict[int, str]:
    """``{id(variable): "attr/attr/..."}``: where each variable of the ``tf.Module`` objects
    among ``objs`` sits as an attribute path (``policy/hidden/w``, ``layers/0/w``)."""
    paths: dict[int, str] = {}
    for obj in objs:
        if not isinstance(obj, tf.Module):
            continue
        for path, v in obj._flatten(predicate=lambda x: isinstance(x, tf.Variable),
                                    with_path=True):
            paths.setdefault(id(underlying(v)), "/".join(str(p) for p in path))
    return paths


def _by_name(handles: list[Any], *owners: Any) -> dict[str, Any]:
    """``{display name: handle}``, each name unique (:func:`_variable_names`, then
    :func:`_unique`)."""
    out: dict[str, Any] = {}
    for handle, name in zip(handles, _variable_names(handles, *owners)):
        out[_unique(name, out)] = handle
    return out


def _variable_names(handles: list[Any], *owners: Any) -> list[str]:
    """One display name per variable: a Keras 3 variable's ``path`` (which names its
    layer, where its tf.Variable's name may not), else its tf.Variable name; where that is
    not unique (a ``tf.Module`` whose layers all make ``tf.Variable(..., name="w")``), its
    attribute path in the owners, so the table reads ``hidden/w``, ``out/w`` and not
    ``w``, ``_2/w``."""
    names = [getattr(h, "path", None) or underlying(h).name.split(":")[0] for h in handles]
    repeated = {n for n in names if names.count(n) > 1}
    paths = _attribute_paths(*owners) if repeated else {}
    return [paths.get(id(underlying(h)), n) if n in repeated else n
            for h, n in zip(handles, names)]


def _unique(name: str, taken: Mapping[str, Any]) -> str:
    """``name``, or ``scope_2/leaf``, ``scope_3/leaf`` ... when that name is taken.

    The suffix goes on the scope so the last component (``kernel``, ``bias``), which says
    the variable's kind, stays as it is.
    """
    if name not in taken:
        return name
    head, _, leaf = name.rpartition("/")
    k = 2
    while f"{head}_{k}/{leaf}" in taken:
        k += 1
    return f"{head}_{k}/{leaf}"
