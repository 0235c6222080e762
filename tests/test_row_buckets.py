"""pgtwin_core.row_buckets: the batch sizes XLA-compiled per-sample functions are padded to."""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin_core.row_buckets import bucket_size, pad_rows


@pytest.mark.parametrize("n,expected", [
    # powers of two up to 16
    (1, 1), (2, 2), (3, 4), (7, 8), (9, 16), (16, 16),
    # (16, 32] in steps of 16 / 4 = 4
    (17, 20), (20, 20), (21, 24), (32, 32),
    # (1024, 2048] in steps of 1024 / 4 = 256: the benchmark's sizes are buckets themselves
    (1025, 1280), (1100, 1280), (1281, 1536), (2047, 2048), (2048, 2048), (256, 256),
])
def test_bucket_size_by_hand(n, expected):
    assert bucket_size(n) == expected


def test_bucket_size_bounds_padding_and_bucket_count():
    sizes = np.arange(1, 5000)
    buckets = np.array([bucket_size(int(n)) for n in sizes])
    assert np.all(buckets >= sizes)
    assert np.all(np.diff(buckets) >= 0)  # monotone
    big = sizes > 16
    assert np.all(buckets[big] < 1.25 * sizes[big])
    # four buckets per octave above 16: (16, 4096] holds 8 octaves
    assert len(set(buckets[(sizes > 16) & (sizes <= 4096)])) == 4 * 8
    assert all(bucket_size(bucket_size(int(n))) == bucket_size(int(n)) for n in sizes[::37])


def test_bucket_size_refuses_negative():
    with pytest.raises(ValueError, match="n=-1 is negative"):
        bucket_size(-1)


def test_pad_rows_repeats_the_last_row():
    x = np.arange(6.0).reshape(3, 2)
    padded = pad_rows(x, 5)
    np.testing.assert_array_equal(padded, [[0, 1], [2, 3], [4, 5], [4, 5], [4, 5]])
    assert pad_rows(x, 3) is x
    with pytest.raises(ValueError, match="cannot pad 3 rows to 2"):
        pad_rows(x, 2)
