"""``optimal_time``'s per-step sums over the episodes, by groups of GROUP episodes: the
step's two sums (:func:`grouped_sums`) and the ascent's terms, one division per group
(:func:`grouped_ascent_terms`).

At step l the ascent's term of episode e and element h is ``psi (a_l D - N) / (D - psi^2)``
(``episodic_baselines._time``): one division per (e, l, h) cell, 11.8M of them an update at
B = 2048, and divisions are what bounded that loop's last kernel (docs/benchmarks.md
section 6). Only the terms' sum reaches the gradient, so GROUP episodes' terms are added as
one fraction: ``sum_i n_i / x_i = (sum_i n_i prod_{j != i} x_j) / prod_j x_j``, built as a
tree of pairs ``(n_a x_b + n_b x_a, x_a x_b)``. That is one division per GROUP cells, at the
price of about 3 multiplications per cell.

Scaled so that no product can overflow or underflow: with ``D > 0``, ``x_i = (D - q_i) / D``
and ``n_i = psi_i (a_i - N / D)`` (the same quotient), so every ``x_i`` lies in ``(0, 1]``.
A group's ``q_i = psi_i^2`` are part of D (memory and other episodes add only non-negative
amounts), so its ``x_i`` sum to at least GROUP - 1. Then every ``x_j`` but the smallest is
at least ``1 - min x``, and the product (or any partial product of the tree) is at least
``2^-GROUP min x``, where ``min x`` is at least D's rounding unit relative to D. A cell whose
``D - q_i`` is not positive (no other episode's psi is nonzero) takes ``x_i = 1`` and
``n_i = psi_i (a_i - fallback_i)``: the per-cell formula's fallback (docs/baselines.md).

GROUP = 8 was the fastest of 4, 8 and 16 at B = 2048 (docs/benchmarks.md section 6). The
episodes axis is padded with zero rows to a multiple of GROUP (:func:`pad_episodes`): a
padded episode's psi stays 0, so it adds 0 to every sum and every term.
"""
from __future__ import annotations

import tensorflow as tf

GROUP = 8
"""Episodes whose terms share one division (a power of two: the pairs' tree)."""


def pad_episodes(x: tf.Tensor) -> tf.Tensor:
    """``x`` (``[E, ...]``) with zero rows appended up to a multiple of :data:`GROUP`, its
    other axes' static sizes kept (``tf.pad`` with paddings it cannot read while tracing
    leaves every axis of unknown size).

    XLA compiles for the concrete E, where a pad of 0 rows is dropped."""
    extra = -tf.shape(x)[0] % GROUP
    paddings = tf.concat([[[0, extra]], tf.zeros([x.shape.rank - 1, 2], tf.int32)], 0)
    return tf.ensure_shape(tf.pad(x, paddings), [None, *x.shape[1:]])


def _groups(x: tf.Tensor) -> list[tf.Tensor]:
    """``[E, *s] -> GROUP x [E / GROUP, *s]``: slice j holds episodes ``j E/GROUP ..``; row i
    of the slices together is one group."""
    split = tf.reshape(x, tf.concat([[GROUP, -1], tf.shape(x)[1:]], 0))
    return [split[j] for j in range(GROUP)]


def expand_to_rank(x: tf.Tensor, rank: int) -> tf.Tensor:
    """``x`` with trailing unit axes up to ``rank``."""
    return tf.reshape(x, tf.concat([tf.shape(x), tf.ones([rank - x.shape.rank], tf.int32)], 0))


def leading_sum(x: tf.Tensor, weights: tf.Tensor | None = None) -> tf.Tensor:
    """``[*shape]``: the sum of ``x [N, *shape]`` over its leading axis, each row times its
    entry of ``weights [N]`` if given, as one matrix product over x's flattened elements.

    Why a matrix product and not ``reduce_sum``: XLA's CPU code for a sum over more than 32
    leading rows is a reduce window and a reduce, which read each column with a stride and
    need their operand written out first; the product runs in the CPU's matrix kernel, which
    reads x once. Its left operand is two copies of the weights (or rows of ones), of which
    one is kept: XLA rewrites a product with a single row into that same sum
    (docs/benchmarks.md section 6 has the measurements)."""
    flat = tf.reshape(x, tf.stack([tf.shape(x)[0], -1]))
    if weights is None:
        left = tf.ones(tf.stack([2, tf.shape(x)[0]]), x.dtype)
    else:
        left = tf.stack([weights, weights])
    out = tf.matmul(left, flat)[0]
    return tf.reshape(out, tf.shape(x)[1:])


def grouped_sums(psi: tf.Tensor, a_l: tf.Tensor) -> tf.Tensor:
    """``[2, *shape]``: ``sum_e a_l[e] psi[e]^2`` and ``sum_e psi[e]^2`` for ``psi [E, *shape]``
    (E a multiple of GROUP) and ``a_l [E]``, stacked (one write where the caller keeps both).

    Summed in two stages: first over each group's GROUP episodes (the slices of
    :func:`_groups`, added elementwise: one kernel that reads psi once and squares it on the
    way, its output ``[E / GROUP, 2, *shape]``), then over the groups by
    :func:`leading_sum`. A matrix product over all E rows would need psi^2 written out
    first and read again, and its matrix kernel packs the whole operand: of the loop's
    passes over psi, it was the costliest (docs/benchmarks.md section 6)."""
    rank = psi.shape.rank
    num = den = None
    for p, a in zip(_groups(psi), _groups(a_l)):
        sq = tf.square(p)
        weighted = sq * expand_to_rank(a, rank)
        num = weighted if num is None else num + weighted
        den = sq if den is None else den + sq
    return leading_sum(tf.stack([num, den], axis=1))  # over [E / GROUP, 2, *shape]


def grouped_ascent_terms(psi: tf.Tensor, sq: tf.Tensor, a_l: tf.Tensor, total_num: tf.Tensor,
                         total_den: tf.Tensor, fallback: tf.Tensor) -> tf.Tensor:
    """``[E / GROUP, *shape]``: per group of GROUP episodes, the sum of their terms
    ``psi (a_l D - N) / (D - psi^2)``, or ``psi (a_l - fallback)`` where ``D - psi^2 <= 0``.

    Args:
      psi, sq: ``[E, *shape]`` the scores so far and their squares (E a multiple of GROUP).
      a_l, fallback: ``[E]`` the step's discounted rewards and fallback baselines.
      total_num, total_den: ``[*shape]`` N and D, the step's sums with the memory's.
    """
    rank = psi.shape.rank
    some = total_den > 0
    inv_d = tf.where(some, 1.0 / tf.where(some, total_den, tf.ones_like(total_den)),
                     tf.zeros_like(total_den))
    mean = total_num * inv_d
    pairs = []
    for p, q, a, f in zip(_groups(psi), _groups(sq), _groups(a_l), _groups(fallback)):
        a, f = expand_to_rank(a, rank), expand_to_rank(f, rank)
        others = total_den[None] - q
        positive = others > 0
        pairs.append((p * tf.where(positive, a - mean[None], a - f),
                      tf.where(positive, others * inv_d[None], tf.ones_like(others))))
    while len(pairs) > 1:
        pairs = [(na * xb + nb * xa, xa * xb)
                 for (na, xa), (nb, xb) in zip(pairs[::2], pairs[1::2])]
    top, bottom = pairs[0]
    return top / bottom
