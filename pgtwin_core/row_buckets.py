"""Batch sizes rounded up to a few buckets, for functions that compile once per shape.

XLA compiles a function once per input shape: fed every batch size as it comes (the
episodic baselines feed the steps of the batch's complete episodes, a different count each
update), it would compile on almost every call. Padding the rows up to a bucket bounds that
to four compiles per octave of batch sizes, for at most a quarter more rows (docs/benchmarks.md,
per-sample group). The padded rows copy the
last real row, so they hold valid inputs (a finite log-probability), and each output row
depends on its own input row only: slicing the first ``n`` rows off gives what the unpadded
call would.
"""
from __future__ import annotations

import numpy as np

SMALL = 16
"""Up to this size the buckets are the powers of two."""


def bucket_size(n: int) -> int:
    """The smallest bucket ``>= n``: 1, 2, 4, 8, 16, then four even steps per octave.

    Above 16, the octave ``(2^(k-1), 2^k]`` is cut in steps of ``2^(k-3)``
    (``(16, 32]``: 20, 24, 28, 32; ``(1024, 2048]``: 1280, 1536, 1792, 2048), so
    ``bucket_size(n) < 1.25 n``. Powers of two are buckets: ``bucket_size(2^k) = 2^k``.
    """
    if n < 0:
        raise ValueError(f"bucket_size: n={n} is negative")
    if n <= SMALL:
        return 0 if n == 0 else 1 << (n - 1).bit_length()
    step = 1 << ((n - 1).bit_length() - 3)
    return -(-n // step) * step


def pad_rows(x: np.ndarray, size: int) -> np.ndarray:
    """``x`` (``[n, ...]``, ``n >= 1``) with its last row repeated up to ``size`` rows.

    Returns ``x`` itself when ``size == n``; raises ``ValueError`` if ``size < n``.
    """
    n = x.shape[0]
    if size < n or n == 0:
        raise ValueError(f"pad_rows: cannot pad {n} rows to {size}")
    if size == n:
        return x
    return np.concatenate([x, np.repeat(x[-1:], size - n, axis=0)])
