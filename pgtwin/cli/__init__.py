"""The ``pgtwin`` command line: :func:`main` (the console script) and :func:`build_parser`.

``entry`` holds both; ``commands/`` one module per subcommand; ``argument_types`` the
argparse types they share; ``factories`` the ``MODULE:FACTORY`` loader of ``pgtwin compare``
and ``pgtwin convert-checkpoint``; ``tensorflow_startup`` the quiet TensorFlow import.
"""
from pgtwin.cli.entry import build_parser, main

__all__ = ["build_parser", "main"]
