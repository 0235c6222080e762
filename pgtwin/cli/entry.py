"""The ``pgtwin`` command line: one subcommand per module in ``pgtwin.cli.commands``.

Each command module exposes ``add_parser(subparsers)`` (registering its arguments and
``set_defaults(run=...)``) and keeps its imports of TensorFlow inside ``run`` so that
``pgtwin --help`` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from pgtwin import __version__
from pgtwin.mode_agnostic.process_tuning import tune_process

COMMANDS = ("train", "parity", "compare", "bench", "demo", "convert_checkpoint")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every available subcommand."""
    parser = argparse.ArgumentParser(
        prog="pgtwin",
        description="REINFORCE in TF1 graph mode and TF2 eager, with parity checks and benchmarks.",
    )
    parser.add_argument("--version", action="version", version=f"pgtwin {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        command = importlib.import_module(f"pgtwin.cli.commands.{name}").add_parser(sub)
        # Errors a command raises after parsing (parser.error) name the subcommand, as
        # argparse's own do: "pgtwin convert-checkpoint: error: ...", not "pgtwin: error:".
        command.set_defaults(command_parser=command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pgtwin`` console script; returns the exit code (130 after
    Ctrl-C, with one line instead of a traceback). Before any command imports TensorFlow,
    the process is tuned (:func:`tune_process`: a CPU allocator that reuses memory, and
    XLA's vector width where measured faster)."""
    tune_process()
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 0
    command = getattr(args, "command_parser", parser)
    try:
        return int(args.run(args, command) or 0)
    except KeyboardInterrupt:  # a command's own handler says more (train: the resume)
        print(f"{command.prog}: interrupted", file=sys.stderr)
        return 130

