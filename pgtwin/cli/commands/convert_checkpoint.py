"""``pgtwin convert-checkpoint SRC DST``: a TF1 ``Saver`` checkpoint -> a TF2 checkpoint.

Two targets: with ``--tf2 MODULE:FACTORY --inputs batch.npz`` (and optionally ``--tf1``),
the user's own model and optimizer (``pgtwin.migrate.user_checkpoint``); without, pgtwin's eager
agent (``pgtwin.migrate.agent_checkpoint``). Exit code 0 when the checkpoint was converted
and verified; 1 when it does not fit (missing, extra or misshapen variables, all listed),
fails verification, or ``DST`` exists; nothing is written at ``DST`` in those cases.
"""
from __future__ import annotations

import argparse
import json
import sys

from pgtwin_core.config import DTYPES, OPTIMIZERS
from pgtwin_core.specs import ACTIVATIONS
from pgtwin.cli.legacy_keras import add_legacy_keras_argument, apply_legacy_keras
from pgtwin.migrate.optimizer_states import OPTIMIZER_STATES

DEFAULT_ACTIVATION = "tanh"
"""The hidden activation assumed when ``--activation`` is not given (a checkpoint holds
weights, not the functions between them)."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``convert-checkpoint`` and its options."""
    p = subparsers.add_parser(
        "convert-checkpoint", help="convert a TF1 Saver checkpoint into your TF2 model (--tf2) "
                                   "or into the eager twin",
        description="Read a TF1 Saver checkpoint (written by legacy_graph or by your own graph) "
                    "and write it as a tf.train.Checkpoint. With --tf2 MODULE:FACTORY and "
                    "--inputs: into your own Keras model and optimizer, paired as pgtwin "
                    "compare pairs them, moving statistics included (docs/migration.md, "
                    "'Checkpoints into your own model'). Without: into pgtwin's eager agent, "
                    "renamed to its canonical names. Adam's state converts (m, v, beta powers "
                    "-> Keras momentums, velocities, iterations). The result is verified (same "
                    "values, same outputs, same optimizer steps) and nothing is written unless "
                    "all of that holds.")
    p.add_argument("src", metavar="SRC", help="TF1 checkpoint prefix (model.ckpt-5), one of its "
                   "files (model.ckpt-5.index) or its directory (the latest)")
    p.add_argument("dst", metavar="DST", help="prefix of the TF2 checkpoint to write")
    p.add_argument("--tf2", default=None, metavar="MODULE:FACTORY",
                   help="write into your own TF2 model: FACTORY returns a pgtwin.parity.programs."
                        "TF2Program (called with dtype= when it takes it); needs --inputs")
    p.add_argument("--tf1", default=None, metavar="MODULE:FACTORY",
                   help="with --tf2: the TF1Program that wrote SRC; its variable order pairs "
                        "them and its outputs verify the forward pass (default: the "
                        "checkpoint's names and shapes alone)")
    p.add_argument("--inputs", default=None, metavar="BATCH.npz",
                   help="with --tf2: one batch, keyed like the TF1 feeds, to build the model "
                        "and compare the outputs on")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="with --tf2: dtype= for the factories (default: the checkpoint's)")
    p.add_argument("--map", action="append", default=[], metavar="OLD=NEW",
                   help="rename a TF1 variable (actor/fc1/W=policy/dense_0/kernel) or a scope "
                        "(actor/=policy/) for pgtwin's agent; slots follow their variable; "
                        "with --tf2: pair one TF1 variable OLD with one TF2 variable NEW "
                        "(full names, no scopes); repeatable")
    p.add_argument("--drop", action="append", default=[], metavar="NAME",
                   help="leave out a TF1 variable (global_step) or scope (critic/); repeatable")
    p.add_argument("--env", default=None, metavar="ENV_ID",
                   help="take observation and action spaces (Gaussian bounds, squash) from this "
                        "gymnasium env and check them against the shapes")
    p.add_argument("--activation", choices=ACTIVATIONS, default=None,
                   help=f"hidden activation (not stored in checkpoints; default "
                        f"{DEFAULT_ACTIVATION})")
    p.add_argument("--history", type=int, default=1, metavar="K",
                   help="observation window of an lstm policy (not stored in checkpoints; default 1)")
    p.add_argument("--forget-bias", type=float, default=1.0, metavar="F",
                   help="forget_bias of a TF1 LSTMCell / BasicLSTMCell in SRC (not stored in "
                        "checkpoints; default 1.0, TF1's), added to the forget gate's bias "
                        "as the cell's gates are reordered for pgtwin's LSTM")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam",
                   help="optimizer of the eager agent that will restore DST (default adam)")
    p.add_argument("--optimizer-state", choices=OPTIMIZER_STATES, default="auto",
                   help="auto: convert the optimizer's state (Adam, Momentum, RMSProp) if SRC "
                        "has it, else start fresh; convert: require it; reset: drop it "
                        "(default auto)")
    p.add_argument("--learning-rate", type=float, default=None,
                   help="stored in DST and used by the agent restoring it (default: "
                        "ReinforceConfig's 1e-2)")
    p.add_argument("--adam-beta1", type=float, default=None, help="Adam beta1 of SRC's training (default 0.9)")
    p.add_argument("--adam-beta2", type=float, default=None, help="Adam beta2 of SRC's training (default 0.999)")
    p.add_argument("--adam-epsilon", type=float, default=None, help="Adam epsilon (default 1e-8, TF1's)")
    add_legacy_keras_argument(p)
    p.add_argument("--overwrite", action="store_true", help="replace an existing DST")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Convert, print what was written (or why not), return the exit code."""
    from pgtwin.cli.tensorflow_startup import import_tensorflow

    apply_legacy_keras(args, parser)
    import_tensorflow()  # first, so its start-up notices are filtered as the log level asks
    from pgtwin_core.config import ReinforceConfig
    from pgtwin.migrate.agent_checkpoint import (
        CheckpointMismatchError, ConversionVerificationError, convert_checkpoint, parse_map)

    if args.history < 1:
        parser.error(f"--history must be >= 1, got {args.history}")
    try:
        name_map = parse_map(args.map)
    except ValueError as err:
        parser.error(str(err))
    if args.tf2 is not None:
        return _run_user(args, parser, name_map)
    if args.tf1 is not None or args.inputs is not None:
        parser.error("--tf1 and --inputs go with --tf2 (converting into your own model)")
    overrides = {"learning_rate": args.learning_rate, "adam_beta1": args.adam_beta1,
                 "adam_beta2": args.adam_beta2, "adam_epsilon": args.adam_epsilon}
    try:
        config = ReinforceConfig(optimizer=args.optimizer,
                                 **{k: v for k, v in overrides.items() if v is not None})
    except ValueError as err:
        parser.error(str(err))
    from pgtwin.migrate.tf1_checkpoint import checkpoint_prefix
    try:
        src = checkpoint_prefix(args.src)
        result = convert_checkpoint(
            src, args.dst, name_map=name_map, drop=args.drop, env_id=args.env,
            activation=args.activation or DEFAULT_ACTIVATION, history=args.history,
            config=config,
            optimizer_state=args.optimizer_state, overwrite=args.overwrite,
            forget_bias=args.forget_bias)
    except (CheckpointMismatchError, ConversionVerificationError, FileExistsError, ValueError) as err:
        if args.json:
            print(json.dumps({"ok": False, "error": str(err)}))
        print(f"pgtwin convert-checkpoint: {err}", file=sys.stderr)
        return 1
    notes = result.notes + assumed_settings(args, config)
    if args.json:
        print(json.dumps({"ok": True, "src": src, "dst": result.dst, "spec": _spec_dict(result.spec),
                          "dtype": result.config.dtype, "notes": notes,
                          "renamed": result.renamed, "optimizer_state": result.optimizer_state,
                          "iterations": result.iterations, "dropped": result.dropped,
                          "report": result.report.to_dict()}))
        return 0
    print(result.report.to_table())
    renames = [f"  {old} -> {new}" for old, new in result.renamed.items() if old != new]
    print("\n".join([f"read {src}", f"wrote {result.dst}", f"spec: {result.spec}",
                     f"optimizer state: {result.optimizer_state} (iterations {result.iterations})"]
                    + (["renamed:"] + renames if renames else [])
                    + ([f"dropped: {result.dropped}"] if result.dropped else [])
                    + [f"note: {n}" for n in notes]))
    print(f"restore it with eager.agent.ReinforceAgent(spec, ReinforceConfig(optimizer="
          f"{result.config.optimizer!r}, dtype={result.config.dtype!r})).restore({result.dst!r})")
    return 0


def assumed_settings(args: argparse.Namespace, config) -> list[str]:
    """Notes on what DST holds that SRC could not say and the command line did not give:
    the hidden activation, and (with the optimizer's state kept) the learning rate."""
    notes = []
    if args.activation is None:
        others = ", ".join(a for a in ACTIVATIONS if a != DEFAULT_ACTIVATION)
        notes.append(f"activation {DEFAULT_ACTIVATION} is the default, not read from SRC (a "
                     f"checkpoint holds no activation): pass --activation ({others}) if "
                     "SRC's network used another; the weights convert either way, the "
                     "policy they make does not")
    if args.learning_rate is None:
        notes.append(f"learning rate {config.learning_rate:g} is ReinforceConfig's default, "
                     "not SRC's (a TF1 checkpoint holds no learning rate): pass "
                     "--learning-rate to go on training at SRC's rate")
    return notes


def _spec_dict(spec) -> dict:
    import dataclasses

    return dataclasses.asdict(spec)


def _run_user(args: argparse.Namespace, parser: argparse.ArgumentParser,
              name_map: dict[str, str]) -> int:
    """Convert into the user's own model (``--tf2``); print the tables; return the exit code."""
    import numpy as np

    from pgtwin.migrate.agent_checkpoint import ConversionVerificationError
    from pgtwin.cli.factories import FactoryError, load_factory
    from pgtwin.parity.code_checks import LegacyCodeError, explained
    from pgtwin.parity.programs import TF1Program, TF2Program
    from pgtwin.migrate.tf1_checkpoint import checkpoint_prefix, read_tf1_checkpoint
    from pgtwin.migrate.user_checkpoint import UserCheckpointError, convert_user_checkpoint

    agent_only = [flag for flag, value, default in (
        ("--env", args.env, None), ("--activation", args.activation, None),
        ("--history", args.history, 1), ("--optimizer", args.optimizer, "adam"),
        ("--learning-rate", args.learning_rate, None), ("--adam-beta1", args.adam_beta1, None),
        ("--adam-beta2", args.adam_beta2, None), ("--adam-epsilon", args.adam_epsilon, None))
        if value != default]
    if agent_only:
        parser.error(f"{agent_only} describe pgtwin's agent; with --tf2 your model and "
                     "optimizer say it")
    if args.inputs is None:
        parser.error("--tf2 needs --inputs BATCH.npz (one batch keyed like the TF1 feeds)")
    scopes = [k for k in name_map if k.endswith("/")]
    if scopes:
        parser.error(f"--map {scopes}: with --tf2 a map pairs one TF1 variable with one TF2 "
                     "variable (OLD=NEW, full names as the mapping table prints them)")

    def fail(err: Exception) -> int:
        if args.json:
            print(json.dumps({"ok": False, "error": str(err)}))
        print(f"pgtwin convert-checkpoint: {err}", file=sys.stderr)
        return 1

    try:
        with np.load(args.inputs) as data:
            inputs = {k: data[k] for k in data.files}
    except (OSError, ValueError) as err:
        return fail(ValueError(f"--inputs {args.inputs!r}: cannot read an .npz: {err}"))
    try:
        src = checkpoint_prefix(args.src)
        dtype = args.dtype or _checkpoint_dtype(read_tf1_checkpoint(src))
        tf2 = load_factory(args.tf2, TF2Program, dtype, what="--tf2")
        tf1 = None if args.tf1 is None else load_factory(args.tf1, TF1Program, dtype, what="--tf1")
        result = convert_user_checkpoint(src, args.dst, tf1, tf2, inputs, name_map,
                                         args.optimizer_state, args.drop, args.overwrite)
    except (FactoryError, UserCheckpointError, ConversionVerificationError, FileExistsError,
            ValueError, LegacyCodeError) as err:
        return fail(explained(err))
    if args.json:
        print(json.dumps({"ok": True, "src": src, "dst": result.dst,
                          "optimizer_state": result.optimizer_state,
                          "iterations": result.iterations, "not_converted": result.not_converted,
                          "notes": result.notes, "report": result.report.to_dict()}))
        return 0
    print(result.report.to_table())
    print("\n".join([f"read {src}", f"wrote {result.dst}",
                     f"optimizer state: {result.optimizer_state} (iterations {result.iterations})"]
                    + [f"note: {n}" for n in result.notes]
                    + ([f"not converted: {result.not_converted}"] if result.not_converted else [])))
    print(restore_hint(result.dst, result.optimizer_state != "none"))
    if args.tf1 is None:
        print("note: without --tf1 the outputs, loss and optimizer settings were not compared "
              "with TF1's (only the values written, restored and one optimizer step from "
              "them): give --tf1 to check them too")
    from pgtwin.parity.parity_rows import TF_KERAS_ITEM

    if any(r.item == TF_KERAS_ITEM for r in result.report.rows):
        print("note: the checkpoint holds tf_keras objects (the tf_keras row above): restore "
              "it under TF_USE_LEGACY_KERAS=1 too, as a Keras 3 optimizer leaves tf_keras' "
              "slots unbound and assert_consumed fails")
    return 0


def restore_hint(dst: str, optimizer: bool) -> str:
    """How to restore the written checkpoint; with an optimizer, that its slots must exist
    before ``assert_consumed`` (Keras makes them on its first step or ``build``; the restore
    fills them in when they are made)."""
    if not optimizer:
        return f"restore it with tf.train.Checkpoint(model=model).restore({dst!r})"
    return (f"restore it with status = tf.train.Checkpoint(model=model, optimizer=optimizer)"
            f".restore({dst!r}), then optimizer.build(model.trainable_variables) before "
            "status.assert_consumed() (Keras makes the optimizer's slots on build or its "
            "first step, and the restore fills them in as they are made; the model's own "
            "variables must exist by then: call it once on a batch first where its layers "
            "make them on their first call)")


def _checkpoint_dtype(values) -> str:
    """The checkpoint's dtype (``pgtwin.migrate.tf1_checkpoint.checkpoint_dtype``)."""
    from pgtwin.migrate.tf1_checkpoint import checkpoint_dtype

    return checkpoint_dtype(values)
