"""``row_blocks``: which weights are cut, where, and that joining undoes the cut."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pgtwin.mode_agnostic.row_blocks import BLOCKS, LARGE, Block, blocks, joined, rows_of


def test_only_large_kernels_are_cut_into_near_equal_row_blocks():
    # The CartPole MLP (64, 64): kernels (4, 64), (64, 64), (64, 2) and their biases.
    shapes = [(4, 64), (64,), (64, 64), (64,), (64, 2), (2,)]
    kernel = [True, False, True, False, True, False]
    got = blocks(shapes, kernel)
    assert BLOCKS == 4 and 64 * 64 >= LARGE > 4 * 64
    # by hand: 64 rows in 4 blocks of 16, every other weight whole, in weight order
    assert got == [Block(0, None, (4, 64)), Block(1, None, (64,)),
                   Block(2, (0, 16), (16, 64)), Block(2, (16, 32), (16, 64)),
                   Block(2, (32, 48), (16, 64)), Block(2, (48, 64), (16, 64)),
                   Block(3, None, (64,)), Block(4, None, (64, 2)), Block(5, None, (2,))]
    # a large bias stays whole; rows that do not divide evenly: 10 rows -> 3, 3, 2, 2
    odd = blocks([(10, 300), (LARGE,)], [True, False])
    assert [b.rows for b in odd] == [(0, 3), (3, 6), (6, 8), (8, 10), None]
    assert [b.shape for b in odd] == [(3, 300), (3, 300), (2, 300), (2, 300), (LARGE,)]


def test_joining_the_blocks_slices_gives_back_each_weight():
    shapes = [(10, 300), (7,), (3, 2)]
    carries = blocks(shapes, [True, False, True])
    rng = np.random.default_rng(0)
    full = [rng.normal(size=(5, *s)) for s in shapes]  # a leading axis, rows on axis 1
    parts = [rows_of(c, tf.constant(full[c.weight]), 1) for c in carries]
    assert [tuple(p.shape[1:]) for p in parts] == [c.shape for c in carries]
    back = joined(parts, carries, 1)
    assert len(back) == 3
    for got, want in zip(back, full):
        np.testing.assert_array_equal(got.numpy(), want)
