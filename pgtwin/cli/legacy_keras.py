"""``--legacy-keras``: run old code that needs ``tf.compat.v1.layers`` (``pgtwin compare``,
``pgtwin convert-checkpoint --tf2``).

TensorFlow >= 2.16 serves ``tf.keras`` from Keras 3, which has no ``tf.compat.v1.layers``;
with ``TF_USE_LEGACY_KERAS=1`` set before TensorFlow is imported it serves ``tf_keras``
(``pip install -e ".[legacy]"``) instead. The option sets the variable for the process.
"""
from __future__ import annotations

import argparse
import os
import sys


def add_legacy_keras_argument(p: argparse.ArgumentParser) -> None:
    """Register ``--legacy-keras`` on a subcommand's parser."""
    p.add_argument("--legacy-keras", action="store_true",
                   help="set TF_USE_LEGACY_KERAS=1 (tf_keras as tf.keras) for code using "
                        "tf.compat.v1.layers; needs pip install -e \".[legacy]\"")


def apply_legacy_keras(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Set ``TF_USE_LEGACY_KERAS=1`` if ``--legacy-keras`` was given; refuse (exit 2) when
    TensorFlow is already imported without it, which the variable can no longer change."""
    if not getattr(args, "legacy_keras", False):
        return
    if "tensorflow" in sys.modules and os.environ.get("TF_USE_LEGACY_KERAS") != "1":
        parser.error("--legacy-keras: TensorFlow is already imported; set "
                     "TF_USE_LEGACY_KERAS=1 in the environment instead")
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
