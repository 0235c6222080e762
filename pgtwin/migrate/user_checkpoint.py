"""A TF1 ``Saver`` checkpoint -> a ``tf.train.Checkpoint`` of the user's own TF2 model.

The user's TF2 model is built as they wrote it (:class:`pgtwin.parity.tf2_side.TF2Side`), its
variables are paired with the checkpoint's by :func:`pgtwin.parity.variable_mapping.infer_mapping`
(the table is the report's ``mapping_table``), assigned, and the model itself is written
as ``tf.train.Checkpoint(model=<their model>, optimizer=<their optimizer>)``. Their code
restores it with the same two keys::

    tf.train.Checkpoint(model=model, optimizer=optimizer).restore(path)
    tf.train.Checkpoint(model=model).restore(path).expect_partial()   # weights only

Where the TF1 variables come from:

* with a :class:`~pgtwin.parity.programs.TF1Program`: the program is built
  (:class:`pgtwin.parity.tf1_side.TF1Side`) and the checkpoint restored into its graph with
  ``tf1.train.Saver``; its compared variables (the trainable ones its loss depends on, or
  ``var_list``), in creation order, are the ones converted, and its outputs on ``inputs``
  are the oracle of the forward pass;
* without one: every float variable of the checkpoint that is not optimizer state, by
  name and shape only (a checkpoint stores no creation order), and no forward pass.

Nothing is invented: a TF1 variable without a TF2 partner, a TF2 variable without a TF1
one (a bias the Keras layer has and the old layer had not), or a trainable model
variable the TF2 loss does not read is an error listing them with their shapes.

Optimizer state (``optimizer_state``): ``auto`` converts TF1 Adam's state (``<var>/Adam``
= m, ``<var>/Adam_1`` = v, ``beta1_power``/``beta2_power`` -> Keras ``iterations``) when
the checkpoint has it for every converted variable and the user's optimizer is a Keras 3
or ``tf_keras`` ``Adam``; TF1 ``MomentumOptimizer``'s accumulators (``<var>/Momentum``)
into a Keras ``SGD`` with momentum, as ``-lr`` times them, and ``RMSPropOptimizer``'s slots
into a Keras ``RMSprop`` as they are (:mod:`pgtwin.migrate.slot_states`); else it starts it
fresh (the result says why); ``convert`` requires it; ``reset`` starts it
fresh. The optimizer is built on ``model.trainable_variables``, the
list a train step passes to ``apply_gradients``.

Verification, before anything is at ``dst``: the checkpoint is written into a temporary
directory beside ``dst``, restored into a *fresh* copy of the user's model (built again,
its loss called once) and optimizer (``assert_consumed``), and

* ``variables``: every converted variable, m and v equal the TF1 values exactly
  (the TF1 graph's restored values, or the checkpoint's), and ``iterations`` equals t;
* ``outputs``, ``loss``: the fresh model's loss and outputs on ``inputs`` equal the TF1
  graph's, to the dtype's tolerances (:data:`pgtwin.parity.parity_rows.DEFAULT_TOLERANCES`);
* ``weights``: one step of the fresh optimizer on random gradients equals one step of
  TF1's own ``AdamOptimizer`` (same settings, state loaded as stored) on the same ones, or
  of TF1's momentum or RMSProp rule from its slots.

Only then are the files renamed to ``dst`` (:mod:`pgtwin.migrate.checkpoint_prefix`).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin.migrate.agent_checkpoint import ConversionVerificationError
from pgtwin.migrate.checkpoint_prefix import refuse_existing, staged_prefix
from pgtwin.migrate.keras_adam_state import adam_slots, build_optimizer, is_keras_adam
from pgtwin.migrate.slot_states import read_slot_state
from pgtwin.parity.ladder import ParityReport, Row, compare_arrays
from pgtwin.parity.model_state import VARIABLE_OPS, split_name_map
from pgtwin.parity.optimizer_config import (keras_optimizer, optimizer_rows, tf1_clipping,
                                            tf1_rate_reads)
from pgtwin.parity.fed_scalars import fed_rate_keys
from pgtwin.parity.forward_rows import forward_rows
from pgtwin.parity.parity_rows import tf_keras_rows, tolerances
from pgtwin.parity.programs import TF1Program, TF2Program
from pgtwin.migrate.optimizer_states import OPTIMIZER_STATES
from pgtwin.migrate.second_copies import second_set_note
from pgtwin.migrate.tf1_checkpoint import (
    adam_pair, adam_step_count, checkpoint_dtype, checkpoint_prefix, load_tf1_adam, power_key,
    read_tf1_checkpoint, slot_parents)
from pgtwin.parity.tf1_side import TF1Side, variable_name
from pgtwin.parity.tf2_side import TF2Side, underlying
from pgtwin.parity.variable_mapping import (ONE_WITH_ONE, VariableInfo, VariableMapping,
                                            infer_mapping)

tf1 = tf.compat.v1

_APPLY_ADAM = {"ApplyAdam", "ResourceApplyAdam"}
_PASS_THROUGH = {"Identity", "ReadVariableOp", "Enter", "Cast"}
"""Ops between a variable and the op that reads it: a float64 graph's ``ApplyAdam`` reads its
float32 beta powers through a ``Cast``."""
#: ``(rtol, atol)`` of the one-step check, on the *step* (weights after - before), by dtype.
#: Keras 3 computes Adam's bias corrections from betas rounded to float32 (``ops.cast`` of
#: a Python float), TF1 from its stored powers, which it keeps in float32 even in a float64
#: graph, so even in float64 their steps part (by ~1e-5 relative at small t; docs/migration.md,
#: "Checkpoints into your own model", has the measurement). A wrong step
#: count changes the step by more than 1e-4 while t < ~70; past that it hardly matters,
#: and ``optimizer.iterations`` is checked exactly anyway. atol: the float's rounding of
#: weights near 1.
STEP_TOLERANCES = {"float32": (1e-4, 1e-6), "float64": (1e-4, 1e-12)}


class UserCheckpointError(ValueError):
    """The checkpoint cannot be converted into the user's model; the message says why and the fix."""


@dataclass
class UserConversion:
    """What :func:`convert_user_checkpoint` wrote and how it checked it."""

    dst: str
    """The prefix written (``dst.index``, ``dst.data-*``)."""
    mapping: VariableMapping
    """Which TF1 variable went into which TF2 variable, and by which rule."""
    optimizer_state: str
    """``adam`` (m, v and iterations converted), ``momentum`` (SGD's momentums from TF1's
    accumulators), ``rmsprop`` (RMSprop's slots), ``fresh`` or ``none`` (no optimizer
    written)."""
    iterations: int
    """Keras ``iterations`` written (TF1's Adam step count; 0 when fresh)."""
    not_converted: list[str] = field(default_factory=list)
    """TF1 checkpoint names left out (variables no loss uses, ``global_step``, other state)."""
    notes: list[str] = field(default_factory=list)
    """Why the optimizer state was not converted, and other things to know."""
    report: ParityReport = field(default_factory=ParityReport)
    """The verification (variables, outputs, loss, weights), all passed."""


@dataclass
class _Adam:
    """TF1 Adam's state for the converted variables: ``{tf1 name: (m, v)}``, powers, names."""

    slots: dict[str, tuple[np.ndarray, np.ndarray]]
    beta1_power: np.ndarray
    beta2_power: np.ndarray
    names: list[str]


def convert_user_checkpoint(
    src: str,
    dst: str,
    tf1_program: TF1Program | None,
    tf2_program: TF2Program,
    inputs: Mapping[str, Any],
    name_map: Mapping[str, str] | None = None,
    optimizer_state: str = "auto",
    drop: Sequence[str] = (),
    overwrite: bool = False,
    seed: int = 0,
) -> UserConversion:
    """Convert the TF1 checkpoint ``src`` into a checkpoint of the user's TF2 model at prefix ``dst``.

    Args:
      src: TF1 ``Saver`` checkpoint prefix (or its directory).
      dst: prefix of the TF2 checkpoint to write.
      tf1_program: the old program (see the module docstring), or None: the checkpoint alone.
      tf2_program: the user's model, loss and optional optimizer (:class:`TF2Program`).
      inputs: ``{feed key: numpy array}``, one batch as the old code fed it: the TF2 loss
        is called on it to build the model, and both sides' outputs are compared on it.
      name_map: ``{tf1 name: tf2 name}`` overriding the inferred pairing.
      optimizer_state: ``auto``, ``convert`` or ``reset``.
      drop: TF1 names (or scopes ending in ``/``) to leave out (checkpoint-only mode: a
        critic that was not migrated).
      overwrite: replace an existing checkpoint at ``dst``.
      seed: of the random gradients of the optimizer check.

    Raises:
      UserCheckpointError: variables that cannot be paired (listed with shapes), a shape
        or dtype that differs, optimizer state that cannot be converted under ``convert``.
      ConversionVerificationError: the restored copy does not reproduce the TF1 side.
      FileExistsError: ``dst`` exists and ``overwrite`` is False.
    """
    if optimizer_state not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer_state={optimizer_state!r} is not one of {OPTIMIZER_STATES}")
    if dst.endswith(("/", os.sep)):
        raise UserCheckpointError(f"the destination {dst!r} ends in '/': it is a prefix "
                                  "(files DST.index and DST.data-*), not a directory; write "
                                  f"{os.path.join(dst, 'ckpt')!r} for files in that directory. "
                                  "Nothing was written.")
    dst = os.path.abspath(dst)
    refuse_existing(dst, overwrite)
    prefix = checkpoint_prefix(src)
    values = read_tf1_checkpoint(prefix)
    unmatched = [d for d in drop if not any(_dropped(n, [d]) for n in values)]
    if unmatched:
        scopes = sorted({n.split("/")[0] + "/" for n in values if "/" in n})
        raise UserCheckpointError(f"drop {unmatched} matches nothing in checkpoint {prefix} "
                                  f"(its names' first scopes: {scopes[:20]}): name a variable, "
                                  "or a scope ending in '/'. Nothing was written.")
    legacy = None
    notes: list[str] = []
    try:
        if tf1_program is not None:
            legacy = TF1Side(tf1_program, inputs)
            _restore_tf1(legacy, prefix, values)
            legacy.sync_copies()  # A3C: the trained weights are the global network's
            if legacy.copies:
                notes.append(_copies_note(legacy.copies))
            tf1_infos = [i for i in legacy.infos() if not _dropped(i.name, drop)]
            tf1_state = [i for i in legacy.state_infos() if not _dropped(i.name, drop)]
            oracle = {**legacy.values(), **legacy.state_values()}
            fed = legacy.tf2_inputs()
        else:
            tf1_infos, tf1_state = _checkpoint_infos(values, drop), []
            oracle = {i.name: values[i.name] for i in tf1_infos}
            # No placeholders to cast to: floats take the checkpoint's dtype, as a feed
            # to a TF1 placeholder of it would (float64 returns into a float32 model).
            dtype0 = checkpoint_dtype(values)
            fed = {k: np.asarray(v).astype(dtype0) if np.asarray(v).dtype.kind == "f"
                   else v for k, v in inputs.items()}
        eager = TF2Side(tf2_program, fed)
        mapping, state = _pairings(tf1_infos, tf1_state, eager, name_map, legacy is not None)
        everything = VariableMapping(mapping.pairs + state.pairs,
                                     mapping.problems + state.problems)
        _refuse_unpaired(everything, eager, prefix, legacy is not None)
        dtype = _common_dtype(everything, prefix)
        eager.load({p.tf2.name: oracle[p.tf1.name] for p in mapping.pairs})
        eager.load_state({p.tf2.name: oracle[p.tf1.name] for p in state.pairs})

        optimizer, unknown = _written_optimizer(eager, tf2_program)
        slot_state = None if optimizer_state == "reset" else _tf1_slot_state(
            values, mapping, optimizer)
        kept = {n: v for n, v in values.items() if not _dropped(n, drop)}  # --drop beta1_power
        adam = None if slot_state is not None else _tf1_adam(
            kept, mapping, legacy, optimizer, optimizer_state, prefix, notes, unknown)
        if unknown and optimizer_state == "reset":
            notes.append(unknown)
        steps = 0
        if optimizer is not None:
            build_optimizer(optimizer, _trainable(eager))
            if adam is not None:
                steps = _load_adam(eager, mapping, adam, optimizer, prefix)
            else:
                tf1_rate = legacy.optimizer()[1].get("learning_rate") \
                    if legacy is not None and legacy.train_op is not None and any(
                        n.split("/")[-1] == "global_step"
                        for n in tf1_rate_reads(legacy.train_op)) else None
                steps = _continue_schedule(values, optimizer, notes, tf1_rate,
                                           guessed=legacy is None)
                if slot_state is not None:
                    _load_slot_state(eager, mapping, slot_state, optimizer)
                if not steps:
                    notes.extend(_step_left_note(values))
        objects = _checkpoint_objects(eager.model, optimizer)
        with staged_prefix(dst, overwrite) as staged:
            writer = tf.train.Checkpoint(**objects)
            writer.save_counter  # noqa: B018  (created now, so restoring finds it written)
            written = writer.write(staged)
            report = _verify(written, tf2_program, fed, eager, mapping, state, oracle, adam,
                             steps, legacy, dtype, seed, slot_state)
            report.rows.extend(_settings_rows(legacy, optimizer, dtype))
            report.rows.extend(_fresh_state_rows(notes, dtype))
            report.mapping_table = everything.to_table()
            if not report.ok:
                raise ConversionVerificationError(report)
    finally:
        if legacy is not None:
            legacy.close()
    used = {p.tf1.name for p in everything.pairs} | set(adam.names if adam else ())
    if legacy is not None:  # A3C: the global variables' values were converted
        used |= set(legacy.copies.values())
    if slot_state is not None and optimizer is not None:
        used |= {f"{n}/{x}" for n in slot_state.slots for x in slot_state.suffixes}
    if adam is None and steps:  # the schedule's step count came from it
        used |= {n for n, v in values.items() if _is_global_step(n, v)}
    how = ("none" if optimizer is None else "adam" if adam is not None
           else slot_state.kind if slot_state is not None else "fresh")
    left = sorted(set(values) - used)
    second = second_set_note(values, {p.tf1.name: p.tf2.name for p in mapping.pairs}, left)
    if second:
        report.rows.append(Row("variables", "second set", 0.0, 0.0, True, second, dtype))
    return UserConversion(dst, everything, how, steps, left, notes, report)


NOT_CONVERTED = "optimizer state not converted, started fresh: "
"""How a note of :func:`_tf1_adam` starts where the checkpoint's state is left behind."""


def _step_left_note(values: Mapping[str, np.ndarray]) -> list[str]:
    """The note where the checkpoint holds a ``global_step`` that no Keras setting needs
    (no schedule, no Adam bias correction): ``iterations`` stays 0, said with the step
    (a loop that counts with it, as code trained under MonitoredTrainingSession did, may
    read it)."""
    found = [int(np.asarray(v)) for n, v in values.items() if _is_global_step(n, v)]
    return [f"optimizer.iterations left at 0, where TF1's global_step was {found[0]}: the "
            "optimizer's rule reads no step count, but a loop or schedule of yours may: "
            f"assign optimizer.iterations ({found[0]}) after the restore if it does"] \
        if found and found[0] else []


def _fresh_state_rows(notes: list[str], dtype: str) -> list[Row]:
    """A warning where the checkpoint holds optimizer state for the converted variables that
    was not converted: the verification checks the weights, and a resumed run's next step
    is still not TF1's (before RMSProp's state converted, its mean square, 0.55 after 60
    A2C updates, restarted at the port's 1.0: that step parted by a quarter of itself)."""
    return [Row("weights", "optimizer state", 0.0, 0.0, True,
                f"WARNING {n[len(NOT_CONVERTED):]}: the optimizer starts fresh, so a resumed "
                "run's next step is not TF1's next step (its moments start again)",
                f"{dtype}, the settings") for n in notes if n.startswith(NOT_CONVERTED)]


def _settings_rows(legacy: TF1Side | None, optimizer: Any, dtype: str) -> list[Row]:
    """With the TF1 program: its ``train_op``'s optimizer settings, read at the restored
    step (a decayed rate at its ``global_step``), against the Keras optimizer's, read at its
    ``iterations`` (``pgtwin.parity.optimizer_config.optimizer_rows``). The one-step check
    of :func:`_verify` steps both sides with the Keras settings, so only the state is
    under test there: a rate, epsilon or schedule that differs from TF1's shows here, as a
    warning (continuing with other settings, or another optimizer, may be the point of the
    conversion; the next step is then not TF1's)."""
    if legacy is None or legacy.train_op is None or optimizer is None:
        return []
    kind, settings = keras_optimizer(optimizer)
    clip = tf1_clipping(legacy.train_op, legacy.loss)
    rows = optimizer_rows(*legacy.optimizer(), kind, settings,
                          ("its train_op", type(optimizer).__name__), f"{dtype}, the settings",
                          clip, None if clip is None else legacy.clip_threshold(
                              list(legacy.variables)))
    fed = fed_rate_keys(legacy)
    # A clipping only TF1's graph does passes in compare, whose train steps compare it;
    # here nothing steps TF1's graph, so it is a warning like the rest. A rate TF1's loop
    # fed was in no checkpoint: the port's own loop sets it, or not, at every step.
    return [Row(r.rung, r.item, r.max_abs, r.max_rel, True, _fed_rate_note(
                fed, legacy.optimizer()[1].get("learning_rate"), settings), r.context)
            if fed and r.item == "optimizer.learning_rate" else
            r if r.ok and r.item != "optimizer.clipping" else
            Row(r.rung, r.item, r.max_abs, r.max_rel, True,
                f"WARNING {r.note}: the next step is not TF1's", r.context)
            for r in rows]


def _fed_rate_note(keys: list[str], tf1_rate: float | None, settings: Mapping[str, Any]
                   ) -> str:
    """The learning-rate row's note where TF1's rate is a placeholder its loop fed: the
    value the batch gives, and that no checkpoint holds it."""
    fed = ", ".join(f"inputs[{k!r}]" for k in keys)
    return (f"TF1's learning rate is the placeholder its loop feeds ({fed}: {tf1_rate:g} in "
            "this batch), which no checkpoint holds; the Keras optimizer was written with "
            f"{settings.get('learning_rate'):g}. Set it from your loop's schedule at every "
            "step (optimizer.learning_rate.assign(...)), as the TF1 loop fed it")


# ------------------------------------------------------------------- TF1 side
def _dropped(name: str, drop: Sequence[str]) -> bool:
    return any(name == d or (d.endswith("/") and name.startswith(d)) for d in drop)


def _restore_tf1(legacy: TF1Side, prefix: str, values: Mapping[str, np.ndarray]) -> None:
    """Restore every graph variable the checkpoint holds with the program's own ``Saver`` semantics.

    A compared variable the checkpoint lacks, or holds in another shape or dtype, is an
    error.
    """
    with legacy.graph.as_default():
        graph_vars = tf1.global_variables()
    var_list, problems = {}, []
    for v in graph_vars:
        name, shape = variable_name(v), tuple(v.shape.as_list())
        if name not in values:
            continue
        made, held = v.dtype.base_dtype.name, np.asarray(values[name]).dtype.name
        if tuple(values[name].shape) != shape:
            problems.append(f"{name}: the program makes it {shape}, the checkpoint holds "
                            f"{tuple(values[name].shape)}")
        elif made != held:
            problems.append(f"{name}: the program makes it {made}, the checkpoint holds "
                            f"{held} (build the program in the checkpoint's dtype: --dtype "
                            f"{held}, or leave --dtype out)")
        else:
            var_list[name] = v
    missing = [n for n in legacy.variables if n not in values]
    if missing:
        problems.append(f"the program's variables {missing} are not in the checkpoint "
                        f"(it holds {sorted(values)[:20]}{' ...' if len(values) > 20 else ''}): "
                        + (RENAMED if _renamed(legacy, missing, values) else
                           "was it written by this program? Build it with the arguments that "
                           "wrote the checkpoint (layer sizes, scope names)"))
    if problems:
        raise UserCheckpointError(f"checkpoint {prefix} does not fit the TF1 program: "
                                  + "; ".join(problems) + ". Nothing was written.")
    with legacy.graph.as_default():
        tf1.train.Saver(var_list).restore(legacy.session, prefix)


RENAMED = ("the checkpoint holds variables of those shapes under other names, as a Saver "
           "given a var_list dict ({'policy/fc/w': w, ...}) writes them: with --tf1 the "
           "checkpoint must hold the program's own names (--map pairs TF1 names with TF2 ones, "
           "not checkpoint keys). Convert without --tf1, pairing by shape or with --map "
           "CHECKPOINT_NAME=TF2_NAME, or restore it into your TF1 program with that Saver and "
           "save it again with a plain tf.compat.v1.train.Saver()")
"""The cause where the TF1 program's variables are missing from a checkpoint that holds
others of the same shapes."""


def _renamed(legacy: TF1Side, missing: Sequence[str], values: Mapping[str, np.ndarray]) -> bool:
    """Whether the checkpoint holds, under names the program does not make, float variables
    whose shapes are those of the ``missing`` ones, one for one."""
    made = set(legacy.graph_variables())
    others = sorted(tuple(np.shape(v)) for n, v in values.items()
                    if n not in made and np.asarray(v).dtype.kind == "f")
    wanted = sorted(tuple(legacy.variables[n].shape.as_list()) for n in missing)
    return bool(wanted) and all(others.count(s) >= wanted.count(s) for s in set(wanted))


def _checkpoint_infos(values: Mapping[str, np.ndarray], drop: Sequence[str]) -> list[VariableInfo]:
    """The checkpoint's float variables that are not optimizer state, in name order."""
    slots = slot_parents({n: v.shape for n, v in values.items()})
    return [VariableInfo(n, tuple(v.shape), v.dtype.name) for n, v in values.items()
            if n not in slots and not power_key(n) and v.dtype.kind == "f"
            and not _dropped(n, drop)]


# ------------------------------------------------------------------- mapping
def _pairings(tf1_infos: list[VariableInfo], tf1_state: list[VariableInfo], eager: TF2Side,
              name_map: Mapping[str, str] | None, ordered: bool
              ) -> tuple[VariableMapping, VariableMapping]:
    """``(the weights' pairs, the state's pairs)`` (:mod:`pgtwin.parity.model_state`).

    With the TF1 program (``ordered``) each set is paired in its own creation order. The
    checkpoint alone does not say which of its variables are state, so there every one of
    them is paired with the TF2 weights and state together, by shape and name, and a pair
    is state when its TF2 variable is; the problems stay with the first mapping."""
    if ordered:
        weights_map, state_map = split_name_map(name_map, {i.name for i in tf1_state})
        return (infer_mapping(tf1_infos, eager.infos(), weights_map,
                              tf2_orders=[eager.infos(eager.creation_order)]),
                infer_mapping(tf1_state, eager.state_infos(), state_map))
    joint = infer_mapping(tf1_infos, eager.infos() + eager.state_infos(), name_map,
                          ordered=False)
    held = set(eager.state)
    return (VariableMapping([p for p in joint.pairs if p.tf2.name not in held], joint.problems),
            VariableMapping([p for p in joint.pairs if p.tf2.name in held]))


def _refuse_unpaired(mapping: VariableMapping, eager: TF2Side, prefix: str,
                     have_program: bool) -> None:
    """Every variable on both sides paired, and every trainable model variable read by the loss."""
    lines = [f"- {p.described}: {p.message}"
             for p in mapping.problems]
    if eager.not_compared:
        lines.append(f"- TF2 {eager.not_compared}: trainable variables of the model that "
                     "TF2Program.loss does not read, so no TF1 value can be paired with them "
                     "and the checkpoint would hold their initial values; make the loss read "
                     "them, or leave them out of the model")
    if not lines:
        return
    fixes = ["pair them with name_map={tf1 name: tf2 name} (--map OLD=NEW)",
             "build the Keras layer as the TF1 one was (use_bias=False where it had no bias)"]
    if any(ONE_WITH_ONE in p.message for p in mapping.problems):
        fixes.insert(0, "a recurrent cell laid out in other variables on each side (above) "
                        "converts by no pairing: build the TF2 cell with TF1's variables, or "
                        "convert its weights as said above and load them yourself")
    if not have_program:
        fixes.append("leave out TF1 variables the model does not hold with drop (--drop NAME "
                     "or SCOPE/), or give the TF1 program (--tf1) so only what its loss uses "
                     "is converted")
    raise UserCheckpointError(
        f"checkpoint {prefix}: the TF1 and TF2 variables could not be paired, and nothing "
        "is invented for a variable that does not exist:\n" + "\n".join(lines)
        + "\nFix: " + "; ".join(fixes) + ".\nThe pairs found:\n"
        + mapping.to_table(with_problems=False) + "\nNothing was written.")


def _common_dtype(mapping: VariableMapping, prefix: str) -> str:
    """The pairs' float dtype (``float32``/``float64``); a pair whose dtypes differ is an error."""
    bad = [f"{p.tf1.name} {p.tf1.dtype} -> {p.tf2.name} {p.tf2.dtype}" for p in mapping.pairs
           if p.tf1.dtype != p.tf2.dtype]
    if bad:
        raise UserCheckpointError(
            f"checkpoint {prefix}: dtypes differ: {bad}; build the TF2 model in the "
            "checkpoint's dtype (its factory's dtype=..., --dtype). Nothing was written.")
    dtypes = sorted({p.tf1.dtype for p in mapping.pairs})
    return dtypes[0] if dtypes == ["float64"] else "float32"


def _trainable(eager: TF2Side) -> list[Any]:
    """The list the user's train step hands ``apply_gradients``: ``model.trainable_variables``."""
    found = getattr(eager.model, "trainable_variables", None)
    return list(found) if found is not None and not callable(found) else list(eager.handles.values())


def _checkpoint_objects(model: Any, optimizer: Any) -> dict[str, Any]:
    """``{"model": model, "optimizer": optimizer}``, refusing what a Checkpoint cannot hold."""
    if not isinstance(model, tf.__internal__.tracking.Trackable):
        raise UserCheckpointError(
            f"the TF2 object is a {type(model).__name__}, which tf.train.Checkpoint cannot "
            "write: name the part holding the variables (a Keras model or tf.Module) with "
            "TF2Program(model='attribute'). Nothing was written.")
    return {"model": model} if optimizer is None else {"model": model, "optimizer": optimizer}


# ------------------------------------------------------------ optimizer state
def _written_optimizer(eager: TF2Side, program: TF2Program) -> tuple[Any, str]:
    """``(the Keras optimizer to write, or None; why none, where the object holds several)``.

    An actor-critic agent holds one Keras optimizer per network, and which variables each
    steps is known only once the user's train step has built them: none is written then
    (each starts fresh) unless ``TF2Program.optimizer`` names the one to write."""
    if len(eager.optimizers) <= 1 or program.optimizer is not None:
        return eager.optimizer, ""
    held = ", ".join(type(o).__name__ for o in eager.optimizers)
    return None, (f"the TF2 object holds {len(eager.optimizers)} Keras optimizers ({held}), "
                  "and which variables each steps is known only once your train step has "
                  "built them: none is written, each starts fresh (TF2Program.optimizer "
                  "names one to write with the state of every converted variable)")


def _tf1_adam(values: Mapping[str, np.ndarray], mapping: VariableMapping,
              legacy: TF1Side | None, optimizer: Any, mode: str, prefix: str,
              notes: list[str], unknown: str = "") -> _Adam | None:
    """TF1 Adam's state of the converted variables, or None (with the reason in ``notes``).

    Under ``convert`` every reason not to is an error instead. ``unknown``: why the
    optimizer is None though the TF2 object holds several (:func:`_written_optimizer`).
    """
    if mode == "reset":
        return None
    slot_of = slot_parents({n: v.shape for n, v in values.items()})
    by_var = _slots_by_variable(values, slot_of)
    names = [p.tf1.name for p in mapping.pairs]
    has_state = any(n in by_var for n in names) or any(power_key(n) for n in values)
    reason = None
    pairs = {n: adam_pair(by_var.get(n, {})) for n in names}
    copied: list[str] = []
    if legacy is not None:  # the graph says which optimizer updates each variable
        trained = {n: variable_name(v) for n, v in legacy.trained.items() if n in names}
        adam = _adam_updated(legacy, list(trained.values()))
        pairs = {n: p if trained.get(n, n) in adam else None for n, p in pairs.items()}
        for n, (m, v) in _copies_slots(legacy, names, values).items():
            pairs[n], copied = (values[m], values[v]), copied + [m, v]
        has_state = has_state or bool(copied)
        names = [trained.get(n, n) for n in names]
    powers = _powers(values, names, legacy)
    if not has_state:
        reason = "the checkpoint holds no optimizer state for the converted variables"
    elif optimizer is None:
        reason = unknown or ("the checkpoint holds optimizer state but the TF2 program has no "
                             "optimizer (TF2Program.optimizer names it)")
    elif not is_keras_adam(optimizer):
        reason = (f"the TF2 optimizer is {type(optimizer).__module__}.{type(optimizer).__name__}; "
                  "only TF1 Adam's state converts, into a Keras Adam without amsgrad (and "
                  "MomentumOptimizer's and RMSPropOptimizer's, into a Keras SGD with momentum "
                  "and an RMSprop)")
    elif any(p is None for p in pairs.values()):
        bad = {n: sorted(by_var.get(n, {})) for n, p in pairs.items() if p is None}
        reason = f"not one Adam slot pair (S, S_1) for every converted variable: {bad}"
    elif isinstance(powers, str):
        reason = powers
    if reason is not None:
        if mode == "convert":
            raise UserCheckpointError(f"checkpoint {prefix}: cannot convert the optimizer "
                                      f"state: {reason}; use optimizer_state='reset' "
                                      "(--optimizer-state reset) to start it fresh. Nothing "
                                      "was written.")
        if has_state:
            notes.append(f"{NOT_CONVERTED}{reason}")
        return None
    (b1_name, b2_name) = powers
    used = [b1_name, b2_name] + [s for s, (var, _) in slot_of.items() if var in pairs] + copied
    return _Adam({n: p for n, p in pairs.items()}, values[b1_name], values[b2_name], used)


#: Keras optimizers whose step reads ``iterations`` beyond the schedule (bias correction).
BIAS_CORRECTED = ("adam", "adamw", "nadam", "adamax")


def _continue_schedule(values: Mapping[str, np.ndarray], optimizer: Any,
                       notes: list[str], tf1_rate: float | None = None,
                       guessed: bool = False) -> int:
    """Keras ``iterations`` set where the optimizer's learning rate is a schedule and its
    state starts fresh, so the schedule goes on where TF1's stopped (it would start again
    from its first rate); the step count set, else 0.

    ``tf1_rate`` (TF1's rate at its restored ``global_step``, read from a program whose
    rate is a schedule of it): the first step whose Keras rate equals it, where TF1's ``global_step`` counts other units
    than updates (env steps: 32 a step); else TF1's ``global_step`` itself. Not for an
    Adam-like optimizer: its fresh m and v would be bias-corrected as if that many steps had
    filled them. ``guessed``: no TF1 program to read the rate from, so the note says what
    ``global_step`` was taken to count."""
    step = global_step(values)
    if not step or not isinstance(optimizer.get_config().get("learning_rate"), Mapping):
        return 0
    kind = keras_optimizer(optimizer)[0]
    if kind in BIAS_CORRECTED:
        notes.append(f"the learning-rate schedule starts again from step 0, not TF1's "
                     f"global_step {step}: a fresh {kind}'s bias correction also reads "
                     "optimizer.iterations, so assign optimizer.iterations yourself (the "
                     "schedule's step) if you want TF1's rate, knowing that Adam's first "
                     "steps are then bias-corrected as if its moments had been filled")
        return 0
    found = _step_with_rate(optimizer, step, tf1_rate)
    if found is not None and found != step:
        optimizer.iterations.assign(found)
        notes.append(f"optimizer.iterations set to {found}, the first step at which the Keras "
                     f"schedule's rate equals TF1's at its global_step {step} "
                     f"({tf1_rate:g}): TF1's global_step counts other units than the "
                     "optimizer's updates (env steps, or several updates a step)")
        return found
    optimizer.iterations.assign(step)
    notes.append(f"optimizer.iterations set to TF1's global_step {step}, so the "
                 "learning-rate schedule goes on where TF1's stopped" + (
                     " if global_step counted the optimizer's updates (one that counts env "
                     "steps does not: give --tf1, whose rate at global_step sets "
                     "iterations)" if guessed else
                     f"; no step of the Keras schedule has TF1's rate {tf1_rate:g} (see the "
                     "settings' warning: the schedules differ)"
                     if tf1_rate is not None and found is None else ""))
    return step


def _step_with_rate(optimizer: Any, last: int, rate: float | None) -> int | None:
    """The first step in ``[0, last]`` at which the Keras optimizer's schedule gives
    ``rate`` (to a relative 1e-6), else None (None too without a rate or a schedule that
    takes a vector of steps)."""
    schedule = getattr(optimizer, "_learning_rate", None)
    if rate is None or not callable(schedule):
        return None
    try:
        rates = np.asarray(schedule(tf.range(last + 1, dtype=tf.float32)), np.float64)
    except (TypeError, ValueError, tf.errors.OpError):
        return None
    if rates.shape != (last + 1,):
        return None
    close = np.flatnonzero(np.abs(rates - rate) <= 1e-6 * max(abs(rate), 1e-30))
    return int(close[0]) if close.size else None


def global_step(values: Mapping[str, np.ndarray]) -> int | None:
    """TF1's ``global_step`` in a checkpoint's ``values`` (an integer scalar named
    ``global_step`` or ``.../global_step``), else None."""
    return next((int(v) for n, v in values.items() if _is_global_step(n, v)), None)


def _is_global_step(name: str, value: np.ndarray) -> bool:
    return ((name == "global_step" or name.endswith("/global_step")) and np.ndim(value) == 0
            and np.asarray(value).dtype.kind in "iu")


def _powers(values: Mapping[str, np.ndarray], names: Sequence[str],
            legacy: TF1Side | None) -> tuple[str, str] | str:
    """The names of the beta powers of the Adam that trained ``names``, or why not.

    One pair in the checkpoint: that one. Several (an actor and a critic, each with its
    own Adam): the graph's ``ApplyAdam`` ops say which pair updates these variables.
    """
    found = {k: sorted(n for n in values if power_key(n) == k) for k in ("beta1", "beta2")}
    if not found["beta1"] or not found["beta2"]:
        return f"beta powers: found {found}, need beta1_power and beta2_power"
    if len(found["beta1"]) == 1 and len(found["beta2"]) == 1:
        return found["beta1"][0], found["beta2"][0]
    if legacy is not None:
        used = {_apply_adam_powers(op) for op in legacy.graph.get_operations()
                if op.type in _APPLY_ADAM and _source_variable(op.inputs[0]) in names}
        used.discard(None)
        if len(used) == 1:
            return used.pop()
        return (f"the converted variables are updated by {len(used)} Adam optimizers' powers "
                f"{sorted(used)}")
    return (f"several beta powers {found} (several Adam optimizers): give the TF1 program "
            "(--tf1) so its graph says which one trained these variables")


def _copies_note(copies: Mapping[str, str]) -> str:
    """What was converted for A3C's local copies (:attr:`TF1Side.copies`)."""
    shown = ", ".join(f"{g} as {n}" for n, g in list(copies.items())[:3])
    return (f"the weights converted are the global network's, which the train_op updates "
            f"({shown}{', ...' if len(copies) > 3 else ''}), and its Adam state; the "
            "checkpoint's copies the loss reads held them as of their last sync")


def _copies_slots(legacy: TF1Side, names: Sequence[str], values: Mapping[str, np.ndarray]
                  ) -> dict[str, tuple[str, str]]:
    """``{compared name: (m's checkpoint name, v's)}`` for the local copies among ``names``
    (:attr:`TF1Side.copies`): the slots of the ``ApplyAdam`` op that updates the global
    variable, read from the graph (an A3C worker's optimizer, built under its scope, names
    them ``worker_0/global/fc/w/Adam``, which no name rule ties to ``global/fc/w``)."""
    wanted = {g: n for n, g in legacy.copies.items() if n in names}
    out = {}
    for op in legacy.graph.get_operations():
        if op.type in _APPLY_ADAM and _source_variable(op.inputs[0]) in wanted:
            m, v = _source_variable(op.inputs[1]), _source_variable(op.inputs[2])
            if m in values and v in values:
                out[wanted[_source_variable(op.inputs[0])]] = (m, v)
    return out


def _adam_updated(legacy: TF1Side, names: Sequence[str]) -> set[str]:
    """Which of ``names`` the TF1 graph updates by an ``ApplyAdam`` op (an Adadelta or
    RMSProp also names its two slots ``S``, ``S_1``)."""
    return {_source_variable(op.inputs[0]) for op in legacy.graph.get_operations()
            if op.type in _APPLY_ADAM} & set(names)


def _apply_adam_powers(op: tf.Operation) -> tuple[str, str] | None:
    b1, b2 = _source_variable(op.inputs[3]), _source_variable(op.inputs[4])
    return None if b1 is None or b2 is None else (b1, b2)


def _source_variable(tensor: tf.Tensor) -> str | None:
    """The name of the variable ``tensor`` reads (through Identity/ReadVariableOp), else None."""
    op = tensor.op
    while op.type in _PASS_THROUGH and op.inputs:
        op = op.inputs[0].op
    return op.name if op.type in VARIABLE_OPS else None


def _load_adam(eager: TF2Side, mapping: VariableMapping, adam: _Adam, optimizer: Any,
               prefix: str) -> int:
    """Assign m, v per variable and ``iterations`` = t into the user's (built) Keras Adam."""
    kind, settings = keras_optimizer(optimizer)
    try:
        steps = adam_step_count(float(adam.beta1_power), float(adam.beta2_power),
                                settings.get("beta_1", 0.9), settings.get("beta_2", 0.999))
    except ValueError as err:
        raise UserCheckpointError(
            f"checkpoint {prefix}: {str(err).split(': were')[0]}: does the TF2 {kind} have "
            f"TF1's betas (beta_1={settings.get('beta_1')}, beta_2={settings.get('beta_2')})? "
            "Nothing was written.") from None
    for p in mapping.pairs:
        handle = eager.handles[p.tf2.name]
        try:
            m_slot, v_slot = adam_slots(optimizer, handle)
        except (KeyError, ValueError) as err:
            raise UserCheckpointError(
                f"{p.tf2.name}: the TF2 optimizer was built on model.trainable_variables, "
                f"which does not hold it ({err}); name the model that holds every variable "
                "with TF2Program(model=...). Nothing was written.") from None
        m, v = adam.slots[p.tf1.name]
        m_slot.assign(m)
        v_slot.assign(v)
    optimizer.iterations.assign(steps)
    return steps


def _tf1_slot_state(values: Mapping[str, np.ndarray], mapping: VariableMapping,
                    optimizer: Any) -> Any:
    """TF1 Momentum's or RMSProp's slots of the converted variables, where the checkpoint
    holds them for every one and the TF2 optimizer takes them
    (:func:`pgtwin.migrate.slot_states.read_slot_state`); else None (Adam's reading then
    says why nothing converts)."""
    by_var = _slots_by_variable(values, slot_parents({n: v.shape for n, v in values.items()}))
    return read_slot_state(by_var, [p.tf1.name for p in mapping.pairs], optimizer)


def _slots_by_variable(values: Mapping[str, np.ndarray], slot_of: Mapping[str, tuple[str, str]]
                       ) -> dict[str, dict[str, np.ndarray]]:
    """``{variable: {slot suffix: value}}`` from ``slot_parents``' ``{slot: (variable,
    suffix)}``."""
    by_var: dict[str, dict[str, np.ndarray]] = {}
    for slot, (var, suffix) in slot_of.items():
        by_var.setdefault(var, {})[suffix] = values[slot]
    return by_var


def _rate(optimizer: Any) -> float:
    """The Keras optimizer's learning rate at its iterations now (a schedule's value)."""
    return keras_optimizer(optimizer)[1]["learning_rate"]


def _load_slot_state(eager: TF2Side, mapping: VariableMapping, state: Any,
                     optimizer: Any) -> None:
    """Assign the converted slots into the user's (built) Keras optimizer."""
    for p in mapping.pairs:
        for _, slot, value in state.written(optimizer, eager.handles[p.tf2.name], p.tf1.name,
                                            _rate(optimizer)):
            slot.assign(np.asarray(value, np.float64))


# --------------------------------------------------------------- verification
def _verify(path: str, program: TF2Program, fed: Mapping[str, Any], written: TF2Side,
            mapping: VariableMapping, state: VariableMapping, oracle: Mapping[str, np.ndarray],
            adam: _Adam | None, steps: int, legacy: TF1Side | None, dtype: str, seed: int,
            slot_state: Any = None) -> ParityReport:
    """Restore ``path`` into a fresh copy of the user's model and compare it with the TF1
    side: the weights and the state pairs against TF1's values, the model's other
    variables against what was written."""
    report = ParityReport()
    tol = tolerances(dtype)
    fresh = TF2Side(program, fed)
    report.rows.extend(tf_keras_rows(fresh.tf_keras_objects(), dtype))
    if fresh.model is written.model or (fresh.optimizer is not None
                                        and fresh.optimizer is written.optimizer):
        raise UserCheckpointError(
            "TF2Program.build returned the same model or optimizer object on its second "
            "call: it must build a new one each time, so the checkpoint can be verified on a "
            "fresh copy (make the optimizer inside build, not at module level). Nothing was "
            "written.")
    optimizer = fresh.optimizer if written.optimizer is not None else None
    built = {**fresh.values(), **fresh.state_values()}  # before the restore
    status = tf.train.Checkpoint(**_checkpoint_objects(fresh.model, optimizer)).restore(path)
    if optimizer is not None:
        build_optimizer(optimizer, _trainable(fresh))
    try:
        status.assert_consumed()
        report.add(Row("variables", "restore into a fresh model", 0.0, 0.0, True,
                       "every value in the checkpoint restored (assert_consumed)", dtype))
    except AssertionError as err:
        report.add(Row("variables", "restore into a fresh model", float("inf"), float("inf"),
                       False, str(err).splitlines()[0][:300], dtype))
    # The fresh copy's names may differ from the written one's (Keras numbers unnamed
    # layers per process: sequential_2/dense_8): the same program reads its variables in
    # the same order, so they correspond by position.
    rename = {**dict(zip(written.variables, fresh.variables)),
              **dict(zip(written.state, fresh.state))}
    restored = {**fresh.values(), **fresh.state_values()}
    for p in mapping.pairs + state.pairs:
        row = compare_arrays("variables", f"{p.tf1.name} -> {p.tf2.name}",
                             oracle[p.tf1.name], restored[rename[p.tf2.name]], 0.0, 0.0, dtype)
        if not row.ok and np.array_equal(built[rename[p.tf2.name]],
                                         restored[rename[p.tf2.name]]):
            v = fresh.variables.get(rename[p.tf2.name])
            held = v is None or any(not _is_not(a, v) for a in _all_variables(fresh.model))
            row = Row(row.rung, row.item, row.max_abs, row.max_rel, False,
                      UNTRACKED if held else NOT_THE_MODELS, dtype)
        report.add(row)
    compared = [*written.variables.values(),
                *(underlying(written.state[p.tf2.name]) for p in state.pairs)]
    for a, b in zip(_all_variables(written.model), _all_variables(fresh.model)):
        if not all(_is_not(a, v) for v in compared):
            continue
        if _name(a).endswith(SEED_STATE):
            report.add(Row("variables", _name(a), 0.0, 0.0, True, SEED_STATE_NOTE, dtype))
            continue
        report.add(compare_arrays("variables", _name(a), np.asarray(a), np.asarray(b),
                                  0.0, 0.0, dtype))
    if adam is not None:
        for p in mapping.pairs:
            m_slot, v_slot = adam_slots(optimizer, fresh.handles[rename[p.tf2.name]])
            m, v = adam.slots[p.tf1.name]
            report.add(compare_arrays("variables", f"{p.tf1.name}/Adam -> m", m,
                                      np.asarray(m_slot), 0.0, 0.0, dtype))
            report.add(compare_arrays("variables", f"{p.tf1.name}/Adam_1 -> v", v,
                                      np.asarray(v_slot), 0.0, 0.0, dtype))
    if slot_state is not None and optimizer is not None:
        for p in mapping.pairs:
            for label, slot, value in slot_state.written(
                    optimizer, fresh.handles[rename[p.tf2.name]], p.tf1.name, _rate(optimizer)):
                got = np.asarray(slot)
                report.add(compare_arrays("variables", label,
                                          np.asarray(value, np.float64).astype(got.dtype), got,
                                          0.0, 0.0, dtype))  # as the assignment rounded it
    if optimizer is not None and (adam is not None or steps):
        report.add(compare_arrays("variables", "optimizer.iterations", np.asarray(steps),
                                  np.asarray(optimizer.iterations), 0.0, 0.0, dtype))
    if legacy is not None:
        legacy_out = legacy.run()
        eager_out, _ = fresh.run()
        report.rows.extend(forward_rows(legacy, fresh, legacy_out, eager_out, fed, tol, dtype))
    if adam is not None:
        grads = _step_gradients(mapping, optimizer, seed)
        expected = tf1_adam_step(oracle, adam, grads, keras_optimizer(optimizer)[1])
        optimizer.apply_gradients(
            [(tf.constant(grads[p.tf1.name], fresh.variables[rename[p.tf2.name]].dtype),
              fresh.handles[rename[p.tf2.name]]) for p in mapping.pairs])
        after = fresh.values()
        for p in mapping.pairs:
            report.add(compare_arrays("weights", f"{p.tf1.name} -> {p.tf2.name}",
                                      expected[p.tf1.name] - oracle[p.tf1.name],
                                      after[rename[p.tf2.name]] - restored[rename[p.tf2.name]],
                                      *STEP_TOLERANCES[dtype], f"{dtype}, one Adam step"))
    if slot_state is not None and optimizer is not None:
        report.rows.extend(_slot_step_rows(fresh, mapping, rename, restored, oracle,
                                           slot_state, optimizer, dtype, seed))
    return report


def _step_gradients(mapping: VariableMapping, optimizer: Any, seed: int
                    ) -> dict[str, np.ndarray]:
    """``{tf1 name: float64 gradient}``: random gradients for the one-step check of the
    optimizer state, scaled to half of every clipping threshold the Keras optimizer has
    (``clipnorm``, ``global_clipnorm``, ``clipvalue``), so that its step and TF1's rule,
    which the check runs without TF1's graph and its clipping ops, take the same gradients.
    Before, a port that clips as TF1 does was refused: Keras clipped the check's gradients
    and the oracle did not."""
    rng = np.random.default_rng(seed)
    grads = {p.tf1.name: 0.1 * rng.standard_normal(p.tf1.shape) for p in mapping.pairs}
    norm = float(np.sqrt(sum(np.sum(g * g) for g in grads.values())))
    largest = max((float(np.max(np.abs(g))) for g in grads.values() if g.size), default=0.0)
    limits = [getattr(optimizer, k, None) for k in ("clipnorm", "global_clipnorm")]
    scales = [0.5 * float(c) / norm for c in limits if c and norm > 0]  # each norm <= global
    value = getattr(optimizer, "clipvalue", None)
    if value and largest > 0:
        scales.append(0.5 * float(value) / largest)
    scale = min([1.0, *scales])
    return {n: scale * g for n, g in grads.items()}


def _slot_step_rows(fresh: TF2Side, mapping: VariableMapping, rename: Mapping[str, str],
                    restored: Mapping[str, np.ndarray], oracle: Mapping[str, np.ndarray],
                    state: Any, optimizer: Any, dtype: str, seed: int) -> list[Row]:
    """One step of the restored Keras optimizer on random gradients against TF1's rule
    from its slots and weights as stored (the slot state's ``step``)."""
    grads = _step_gradients(mapping, optimizer, seed)
    expected = state.step(oracle, grads, keras_optimizer(optimizer)[1])
    optimizer.apply_gradients(
        [(tf.constant(grads[p.tf1.name], fresh.variables[rename[p.tf2.name]].dtype),
          fresh.handles[rename[p.tf2.name]]) for p in mapping.pairs])
    after = fresh.values()
    return [compare_arrays("weights", f"{p.tf1.name} -> {p.tf2.name}",
                           expected[p.tf1.name] - oracle[p.tf1.name],
                           after[rename[p.tf2.name]] - restored[rename[p.tf2.name]],
                           *STEP_TOLERANCES[dtype], f"{dtype}, one {state.kind} step")
            for p in mapping.pairs]


UNTRACKED = ("the restore left this variable as the fresh model built it: the written "
             "checkpoint does not hold it, as tf.train.Checkpoint(model=...) does not track "
             "it (a Keras 3 weight kept in a plain list or dict attribute of the model is "
             "not tracked): keep it as an attribute of its own, or make it a layer's weight")
"""The note of a converted variable that the checkpoint written did not hold."""

NOT_THE_MODELS = (
    "the TF2 loss reads this variable and TF2Program.model does not hold it (another "
    "object's: a critic the actor's loss reads through tf.stop_gradient), so the checkpoint "
    "written from the model cannot: name as model the object that holds every variable the "
    "loss reads (the agent), or give a loss that reads only the model's")
"""The note of a converted variable outside ``TF2Program.model`` (a helper converting only
the actor was told the weight was kept in an untracked list)."""


def _is_not(a: Any, v: tf.Variable) -> bool:
    """True when the model variable ``a`` (Keras 3 or tf.Variable) is not ``v``."""
    inner = getattr(a, "value", None)
    return (inner if isinstance(inner, tf.Variable) else a) is not v


SEED_STATE = "seed_generator_state"
"""The name of a Keras 3 ``SeedGenerator``'s state variable (an ``LSTM``, ``GRU`` or
``Dropout`` layer holds one), which ``tf.train.Checkpoint`` does not save."""
SEED_STATE_NOTE = ("a Keras SeedGenerator's state (dropout's random seed): tf.train.Checkpoint "
                   "does not save it, so each build draws its own; not compared")


def _all_variables(model: Any) -> list[Any]:
    found = getattr(model, "variables", None)
    return list(found) if found is not None and not callable(found) else []


def _name(v: Any) -> str:
    return str(getattr(v, "path", None) or v.name).split(":")[0]


def tf1_adam_step(weights: Mapping[str, np.ndarray], adam: _Adam,
                  grads: Mapping[str, np.ndarray], settings: Mapping[str, float]
                  ) -> dict[str, np.ndarray]:
    """The weights after one step of TF1's own ``AdamOptimizer`` from the stored state.

    Args:
      weights: ``{tf1 name: value}`` before the step; grads: ``{tf1 name: gradient}``
        (float64, cast to each weight's dtype).
      adam: m, v and the beta powers as the checkpoint stores them.
      settings: Keras' names (``learning_rate, beta_1, beta_2, epsilon``), the user's
        optimizer's, so only the state is under test.

    The oracle of the weights rung: a graph of its own, TF1's optimizer code.
    """
    graph = tf.Graph()
    with graph.as_default():
        variables = {n: tf1.Variable(w, name=f"w{i}") for i, (n, w) in
                     enumerate(weights.items()) if n in grads}
        dtype = next(iter(variables.values())).dtype.base_dtype
        # Hyperparameters in the weights' dtype: a Python float would be rounded to float32
        # first (TF1's convert_to_tensor), which parts from Keras' float64 step by ~1e-8.
        opt = tf1.train.AdamOptimizer(*(tf.constant(settings.get(k, default), dtype) for k, default
                                        in (("learning_rate", 1e-3), ("beta_1", 0.9),
                                            ("beta_2", 0.999), ("epsilon", 1e-8))))
        step = opt.apply_gradients([(tf.constant(grads[n].astype(v.dtype.as_numpy_dtype)), v)
                                    for n, v in variables.items()])
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            load_tf1_adam(opt, variables, adam.slots, adam.beta1_power, adam.beta2_power, sess)
            sess.run(step)
            return sess.run(variables)
