"""``pgtwin convert-checkpoint SRC DST``: a TF1 ``Saver`` checkpoint -> the eager twin's TF2 checkpoint.

Exit code 0 when the checkpoint was converted and verified; 1 when it does not fit the
policy (missing, extra or misshapen variables, all listed), fails verification, or ``DST``
exists; nothing is written at ``DST`` in those cases. See ``pgtwin.checkpoint_migration``.
"""
from __future__ import annotations

import argparse
import json
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``convert-checkpoint`` and its options."""
    p = subparsers.add_parser(
        "convert-checkpoint", help="convert a TF1 Saver checkpoint to the eager twin's TF2 one",
        description="Read a TF1 Saver checkpoint (written by legacy_graph or by your own graph), "
                    "rename its variables to pgtwin's canonical names, convert Adam's state "
                    "(m, v, beta powers -> Keras momentums, velocities, iterations), write a "
                    "tf.train.Checkpoint that eager.agent.ReinforceAgent.restore reads, and verify "
                    "it: same variables, same distribution parameters on sample observations, "
                    "same optimizer steps. Nothing is written unless all of that holds.")
    p.add_argument("src", metavar="SRC", help="TF1 checkpoint prefix (or its directory)")
    p.add_argument("dst", metavar="DST", help="prefix of the TF2 checkpoint to write")
    p.add_argument("--map", action="append", default=[], metavar="OLD=NEW",
                   help="rename a TF1 variable (actor/fc1/W=policy/dense_0/kernel) or a scope "
                        "(actor/=policy/); slots follow their variable; repeatable")
    p.add_argument("--drop", action="append", default=[], metavar="NAME",
                   help="leave out a TF1 variable (global_step) or scope (critic/); repeatable")
    p.add_argument("--env", default=None, metavar="ENV_ID",
                   help="take observation and action spaces (Gaussian bounds, squash) from this "
                        "gymnasium env and check them against the shapes")
    p.add_argument("--activation", choices=("tanh", "relu"), default="tanh",
                   help="hidden activation (not stored in checkpoints; default tanh)")
    p.add_argument("--history", type=int, default=1, metavar="K",
                   help="observation window of an lstm policy (not stored in checkpoints; default 1)")
    p.add_argument("--optimizer", choices=("adam", "sgd"), default="adam",
                   help="optimizer of the eager agent that will restore DST (default adam)")
    p.add_argument("--optimizer-state", choices=("auto", "convert", "reset"), default="auto",
                   help="auto: convert Adam's state if SRC has it, else start fresh; convert: "
                        "require it; reset: drop it (default auto)")
    p.add_argument("--learning-rate", type=float, default=None,
                   help="stored in DST and used by the agent restoring it (default: "
                        "ReinforceConfig's 1e-2)")
    p.add_argument("--adam-beta1", type=float, default=None, help="Adam beta1 of SRC's training (default 0.9)")
    p.add_argument("--adam-beta2", type=float, default=None, help="Adam beta2 of SRC's training (default 0.999)")
    p.add_argument("--adam-epsilon", type=float, default=None, help="Adam epsilon (default 1e-8, TF1's)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing DST")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Convert, print what was written (or why not), return the exit code."""
    from pgcommon.config import ReinforceConfig
    from pgtwin.checkpoint_migration import (
        CheckpointMismatchError, ConversionVerificationError, convert_checkpoint, parse_map)

    if args.history < 1:
        parser.error(f"--history must be >= 1, got {args.history}")
    try:
        name_map = parse_map(args.map)
    except ValueError as err:
        parser.error(str(err))
    overrides = {"learning_rate": args.learning_rate, "adam_beta1": args.adam_beta1,
                 "adam_beta2": args.adam_beta2, "adam_epsilon": args.adam_epsilon}
    try:
        config = ReinforceConfig(optimizer=args.optimizer,
                                 **{k: v for k, v in overrides.items() if v is not None})
    except ValueError as err:
        parser.error(str(err))
    try:
        result = convert_checkpoint(
            args.src, args.dst, name_map=name_map, drop=args.drop, env_id=args.env,
            activation=args.activation, history=args.history, config=config,
            optimizer_state=args.optimizer_state, overwrite=args.overwrite)
    except (CheckpointMismatchError, ConversionVerificationError, FileExistsError, ValueError) as err:
        if args.json:
            print(json.dumps({"ok": False, "error": str(err)}))
        print(f"pgtwin convert-checkpoint: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"ok": True, "dst": result.dst, "spec": _spec_dict(result.spec),
                          "renamed": result.renamed, "optimizer_state": result.optimizer_state,
                          "iterations": result.iterations, "dropped": result.dropped,
                          "report": result.report.to_dict()}))
        return 0
    print(result.report.to_table())
    renames = [f"  {old} -> {new}" for old, new in result.renamed.items() if old != new]
    print("\n".join([f"wrote {result.dst}", f"spec: {result.spec}",
                     f"optimizer state: {result.optimizer_state} (iterations {result.iterations})"]
                    + (["renamed:"] + renames if renames else [])
                    + ([f"dropped: {result.dropped}"] if result.dropped else [])))
    print(f"restore it with eager.agent.ReinforceAgent(spec, ReinforceConfig(optimizer="
          f"{result.config.optimizer!r}, dtype={result.config.dtype!r})).restore({result.dst!r})")
    return 0


def _spec_dict(spec) -> dict:
    import dataclasses

    return dataclasses.asdict(spec)
