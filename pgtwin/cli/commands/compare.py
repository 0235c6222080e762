"""``pgtwin compare``: the parity ladder on the user's own TF1 program and TF2 model.

``--tf1 MODULE:FACTORY`` and ``--tf2 MODULE:FACTORY`` name functions returning a
:class:`pgtwin.parity.programs.TF1Program` and a :class:`pgtwin.parity.programs.TF2Program` (called
with ``dtype=`` when they take it); ``--inputs`` is an ``.npz`` batch keyed like the TF1
feeds. Prints the variable mapping and the report table (or JSON) on stdout. Exit code 0
when every rung passes, 1 when the two part, 2 when the comparison cannot be set up (a
bad factory, input or variable pairing: the message on stderr names it), 3 when pgtwin
itself fails (a bug: its traceback on stderr), so that a script never reads a crash as
"they part".
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from pgtwin_core.config import DTYPES
from pgtwin.cli.argument_types import non_negative_int
from pgtwin.cli.legacy_keras import add_legacy_keras_argument, apply_legacy_keras
from pgtwin.parity.initialisation import INIT_MODES


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``compare`` and its options."""
    p = subparsers.add_parser(
        "compare", help="compare your TF1 program with its TF2 migration, rung by rung",
        description="Build your TF1 program (placeholders, loss, train_op, Session) in a graph "
                    "of its own and your TF2 model on its own variables, pair their variables, "
                    "and climb the ladder: initialisation, variables, outputs, loss, gradients, "
                    "weights after your own train steps. Exit code 1 where they part.")
    p.add_argument("--tf1", required=True, metavar="MODULE:FACTORY",
                   help="function returning a pgtwin.parity.programs.TF1Program")
    p.add_argument("--tf2", required=True, metavar="MODULE:FACTORY",
                   help="function returning a pgtwin.parity.programs.TF2Program")
    p.add_argument("--inputs", required=True, metavar="BATCH.npz",
                   help="numpy arrays keyed like the TF1 feeds (one batch)")
    p.add_argument("--steps", type=non_negative_int, default=3,
                   help="train steps before the weights rung (default 3; 0: none)")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="passed to factories that take a dtype argument (default: theirs)")
    p.add_argument("--map", action="append", default=[], metavar="OLD=NEW",
                   help="pair TF1 variable OLD with TF2 variable NEW (repeatable)")
    p.add_argument("--init", choices=INIT_MODES, default="warn",
                   help="initial values that differ: warn (default), fail, or off")
    add_legacy_keras_argument(p)
    p.add_argument("--json", action="store_true",
                   help='print {"ok", "summary", "mapping", "rows": [...]} instead of a table')
    p.set_defaults(run=run)
    return p


def _name_map(pairs: list[str], parser: argparse.ArgumentParser) -> dict[str, str]:
    out = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            parser.error(f"compare --map: expected OLD=NEW, got {pair!r}")
        out[old] = new
    return out


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Load the factories and the batch, compare, print; return the exit code."""
    name_map = _name_map(args.map, parser)
    if not os.path.isfile(args.inputs):
        parser.error(f"compare --inputs: no file {args.inputs!r}")
    apply_legacy_keras(args, parser)
    import numpy as np

    from pgtwin.cli.tensorflow_startup import import_tensorflow

    import_tensorflow()  # first, so its start-up notices are filtered as the log level asks

    from pgtwin.parity.code_checks import LegacyCodeError, eager_guard, explained
    from pgtwin.parity.code_parity import compare_programs
    from pgtwin.cli.factories import FactoryError, load_factory
    from pgtwin.parity.programs import TF1Program, TF2Program
    from pgtwin.parity.tf1_side import FeedError
    from pgtwin.parity.variable_mapping import MappingError

    try:
        with np.load(args.inputs) as data:
            inputs = {k: data[k] for k in data.files}
        with eager_guard():  # a module that switches eager off at import is refused there
            tf1 = load_factory(args.tf1, TF1Program, dtype=args.dtype, what="--tf1")
            tf2 = load_factory(args.tf2, TF2Program, dtype=args.dtype, what="--tf2")
        report = compare_programs(tf1, tf2, inputs, steps=args.steps, name_map=name_map,
                                  init=args.init, dtype=args.dtype)
    except FactoryError as err:
        return _refused(str(explained(err)), 2, args.json)
    except (LegacyCodeError, FeedError, MappingError, LookupError, ValueError,
            TypeError) as err:
        return _refused(f"{type(err).__name__}: {err}", 2, args.json)
    except Exception as err:  # noqa: BLE001  (pgtwin's own failure: not "they part")
        traceback.print_exc()
        return _refused(f"internal error, a bug in pgtwin (the traceback is above; please "
                        f"report it): {type(err).__name__}: {err}", 3, args.json)
    print(report.to_json() if args.json else report.to_table())
    return 0 if report.ok else 1


def _refused(message: str, code: int, as_json: bool) -> int:
    """Say why no report came (stderr; with ``--json`` also ``{"ok": false, "error",
    "exit"}`` on stdout, for the script that reads it) and return ``code``."""
    print(f"pgtwin compare: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps({"ok": False, "error": message, "exit": code}))
    return code
