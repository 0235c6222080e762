"""``optimal_time``'s large kernels carried as blocks of their input rows, each its own chain.

In ``episodic_baselines._time`` every weight has its own psi carry and its own chain of
kernels a step (psi's update, its square, the step's sums, the terms). XLA's CPU backend
splits each kernel of a large carry (the 64 x 64 kernel's ``[E, 64, 64]``) over both
threads and waits for both halves, four times a step. Cut along the kernel's input rows
instead, a weight is several independent carries ``[E, rows, out]``, whose chains XLA runs
side by side without those waits. Every quantity of ``optimal_time`` is per element, so a
block's sums, ratios and terms are the whole weight's, cut the same way: the blocks are
joined back along the row axis after the loop.

``BLOCKS = 4`` row blocks for a kernel of at least ``LARGE`` elements was the fastest of 1, 2,
4 and 8 for the CartPole MLP (64, 64) at B = 2048 (docs/benchmarks.md section 6).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tensorflow as tf

BLOCKS = 4
"""Row blocks of a large kernel (fewer where it has fewer input rows)."""
LARGE = 2048
"""Elements from which a kernel is cut into blocks."""


class Block(NamedTuple):
    """One carry: weight ``weight``'s rows ``start:stop`` (the whole weight when ``rows`` is
    None), of shape ``shape``."""

    weight: int
    rows: tuple[int, int] | None
    shape: tuple[int, ...]


def _row_sizes(rows: int) -> list[int]:
    """Near-equal sizes, larger first, of ``min(BLOCKS, rows)`` blocks of ``rows``."""
    count = min(BLOCKS, rows)
    return [len(part) for part in np.array_split(np.arange(rows), count)]


def blocks(shapes: list[tuple[int, ...]], is_kernel: list[bool]) -> list[Block]:
    """The carries, in weight order: a kernel (``[in, out]``; an LSTM gate layer's too) of at
    least ``LARGE`` elements cut into row blocks, every other weight whole."""
    out = []
    for k, (shape, kernel) in enumerate(zip(shapes, is_kernel)):
        if not kernel or int(np.prod(shape, dtype=np.int64)) < LARGE:
            out.append(Block(k, None, tuple(shape)))
            continue
        start = 0
        for size in _row_sizes(shape[0]):
            out.append(Block(k, (start, start + size), (size, *shape[1:])))
            start += size
    return out


def rows_of(block: Block, x: tf.Tensor, axis: int) -> tf.Tensor:
    """The block's slice of its weight's tensor ``x`` (rows along ``axis``)."""
    if block.rows is None:
        return x
    start, stop = block.rows
    index = [slice(None)] * axis + [slice(start, stop)]
    return x[tuple(index)]


def joined(parts: list[tf.Tensor], carries: list[Block], axis: int) -> list[tf.Tensor]:
    """Per weight, in weight order: its blocks' tensors (one per carry, in ``carries``'
    order) joined along ``axis``, the row axis."""
    per_weight: dict[int, list[tf.Tensor]] = {}
    for part, block in zip(parts, carries):
        per_weight.setdefault(block.weight, []).append(part)
    return [xs[0] if len(xs) == 1 else tf.concat(xs, axis) for _, xs in sorted(per_weight.items())]
