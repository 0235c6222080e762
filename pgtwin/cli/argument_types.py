"""argparse types of the ``pgtwin`` subcommands: each parses one kind of value or says why not."""
from __future__ import annotations

import argparse
import os


def int_at_least(low: int):
    """An argparse type: an integer >= ``low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value
    parse.__name__ = f"integer >= {low}"  # argparse names the type in some messages
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def finite_number(text: str) -> float:
    """A finite number (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def unit_interval(text: str) -> float:
    """A number in [0, 1] (argparse type, for gamma)."""
    value = finite_number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value:g}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (argparse type)."""
    value = finite_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value:g}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (argparse type)."""
    value = finite_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value:g}")
    return value


def hidden_sizes(text: str) -> tuple[int, ...]:
    """Comma-separated layer sizes, e.g. ``64,64`` (argparse type)."""
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated integers like 64,64, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be >= 1, got {text!r}")
    return sizes


def number_or_auto(text: str) -> float | str:
    """``auto`` or a finite number (argparse type, for ``--baseline-shrinkage``; the range is
    ``ReinforceConfig``'s to check, naming the field)."""
    return "auto" if text == "auto" else finite_number(text)


def output_file(text: str) -> str:
    """A file the command will write: refused at once (not after the work that fills it)
    when it names a directory, or its directory is missing or not writable."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file name in it")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"the directory of {text!r} ({parent}) does not exist "
                                         "or is not a directory; create it first")
    if not os.access(parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"the directory of {text!r} ({parent}) is not "
                                         "writable")
    return text
