"""Write each example's ``batch.npz``: the inputs ``pgtwin compare --inputs`` reads.

    python examples/make_batches.py            # seed 0, 64 steps each

Each example's ``programs.make_batch`` makes a random-policy CartPole batch with the dtypes
old code fed (float64 observations and returns, int64 actions), so the harness has to cast
them to the placeholders' declared dtypes as ``feed_dict`` did. The files are a few KB and
committed; tests/test_migration_examples.py checks they are what this script writes.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

import numpy as np

EXAMPLES = ("tf1_agent_class", "tf1_notebook", "tf1_actor_critic")
HERE = os.path.dirname(os.path.abspath(__file__))


def batch_path(example: str) -> str:
    """``examples/<example>/batch.npz``."""
    return os.path.join(HERE, example, "batch.npz")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=64)
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(HERE))  # run as a script from anywhere
    for example in EXAMPLES:
        programs = importlib.import_module(f"examples.{example}.programs")
        batch = programs.make_batch(args.seed, n=args.steps)
        np.savez_compressed(batch_path(example), **batch)
        shapes = ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in batch.items())
        print(f"{batch_path(example)}: {shapes}")


if __name__ == "__main__":
    main()
