"""``grouped_terms``: GROUP episodes' leave-one-out terms as one fraction, against numpy.

The oracle is the term as docs/baselines.md writes it, one division per cell:
``psi (a - b)`` with ``b = (N - psi^2 a) / (D - psi^2)`` where ``D - psi^2 > 0``, else
``psi (a - fallback)``, summed over each group's episodes in float64 numpy.
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from pgtwin.mode_agnostic.grouped_terms import (GROUP, grouped_ascent_terms, grouped_sums,
                                                 pad_episodes)


def oracle(psi, q, a, n_total, d_total, fallback):
    """``[E / GROUP, *shape]`` float64: the per-cell terms, summed per group (slices of
    E / GROUP episodes, row i of every slice one group), from the inputs upcast (``q`` the
    squares as the caller's dtype rounds them, so that both take the same branch)."""
    psi, q, a, n_total, d_total, fallback = (
        np.asarray(x, np.float64) for x in (psi, q, a, n_total, d_total, fallback))
    shape = (-1,) + (1,) * (psi.ndim - 1)
    a, fallback = a.reshape(shape), fallback.reshape(shape)
    others = d_total[None] - q
    safe = np.where(others > 0, others, 1.0)
    b = np.where(others > 0, (n_total[None] - q * a) / safe, fallback)
    terms = psi * (a - b)
    return terms.reshape((GROUP, -1) + psi.shape[1:]).sum(axis=0)


def case(rng, episodes, scale, dtype):
    """A step's inputs ``(psi, q, a, N, D, fallback)`` in ``dtype``: E episodes of a
    ``[3, 2]`` weight, some psi exactly 0, memory sums >= 0 added to N and D. Element
    (0, 0) has one episode's psi and no memory, so its ``D - q`` is exactly 0: the fallback."""
    psi = rng.normal(size=(episodes, 3, 2)) * scale
    psi[rng.random(psi.shape) < 0.4] = 0.0
    psi[:, 0, 0] = 0.0
    psi[0, 0, 0] = scale
    psi = psi.astype(dtype)
    q = psi * psi
    a = rng.normal(size=episodes).astype(dtype)
    fallback = rng.normal(size=episodes).astype(dtype)
    memory_den = (np.abs(rng.normal(size=(3, 2))) * scale * scale).astype(dtype)
    memory_den[0, 0] = 0.0
    d_total = q.sum(axis=0) + memory_den
    n_total = (q * a[:, None, None]).sum(axis=0) + memory_den * rng.normal(size=(3, 2)).astype(dtype)
    return psi, q, a, n_total, d_total, fallback


def zero_padded(x):
    """``x`` with zero rows up to a multiple of GROUP (what ``pad_episodes`` should give)."""
    return np.concatenate([x, np.zeros((-len(x) % GROUP,) + x.shape[1:], x.dtype)])


def grouped(psi, q, a, n_total, d_total, fallback):
    psi, q, a, fallback = (pad_episodes(tf.constant(x)) for x in (psi, q, a, fallback))
    return grouped_ascent_terms(psi, q, a, tf.constant(n_total), tf.constant(d_total),
                                fallback).numpy()


@pytest.mark.parametrize("episodes", [1, 5, GROUP, 3 * GROUP + 2])
def test_float64_equals_the_per_cell_oracle(episodes):
    rng = np.random.default_rng(episodes)
    psi, q, a, n_total, d_total, fallback = case(rng, episodes, 1.0, np.float64)
    got = grouped(psi, q, a, n_total, d_total, fallback)
    want = oracle(zero_padded(psi), zero_padded(q), zero_padded(a), n_total, d_total,
                  zero_padded(fallback))
    assert got.shape == want.shape == ((episodes + GROUP - 1) // GROUP, 3, 2)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # element (0, 0): episode 0 alone, so its group's sum is psi (a - fallback), by hand
    assert got[0, 0, 0] == pytest.approx(psi[0, 0, 0] * (a[0] - fallback[0]), rel=1e-15)


@pytest.mark.parametrize("scale", [1e-15, 1.0, 1e15])
def test_float32_neither_overflows_nor_underflows_at_extreme_scales(scale):
    """psi^2 up to 1e30 or down to 1e-30 (float32 spans about 1e-38 to 3e38): products of
    GROUP unscaled denominators would overflow (1e30^8) or underflow; the scaled ones lie in
    (0, 1]. The terms scale as psi, so compare relative to it."""
    rng = np.random.default_rng(7)
    inputs = case(rng, 2 * GROUP, scale, np.float32)
    got = grouped(*inputs)
    want = oracle(*inputs)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got / scale, want / scale, rtol=1e-4, atol=1e-4)


def test_padding_adds_zero_episodes_up_to_a_multiple_of_the_group():
    x = tf.reshape(tf.range(1, 7, dtype=tf.float32), [3, 2])
    padded = pad_episodes(x).numpy()
    assert padded.shape == (GROUP, 2)
    np.testing.assert_array_equal(padded[:3], x.numpy())
    assert not padded[3:].any()
    assert pad_episodes(tf.zeros([GROUP, 2])).shape == (GROUP, 2)


def test_padding_keeps_the_other_axes_static_sizes_while_tracing():
    """A traced E is unknown, and so are the paddings; the other axes' sizes must stay known,
    or an axis of size 1 (a one-action head's) no longer broadcasts back to 1 and
    ``optimal_time``'s loop carry changes shape (Pendulum-v1 failed so)."""
    seen = []

    @tf.function(input_signature=[tf.TensorSpec([None, 3, 1], tf.float32)])
    def padded(x):
        out = pad_episodes(x)
        seen.append(out.shape.as_list())
        return out

    assert padded(tf.ones([5, 3, 1])).shape == (GROUP, 3, 1)
    assert seen == [[None, 3, 1]]


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-13), (np.float32, 1e-5)])
@pytest.mark.parametrize("episodes", [GROUP, 3 * GROUP])
def test_the_steps_sums_by_groups_equal_the_plain_sums(dtype, rtol, episodes):
    """Oracle: numpy's ``sum_e a_e psi_e^2`` and ``sum_e psi_e^2`` over all episodes in
    float64. Element (0, 0) is touched by episode 0 alone (``case``), so its den must be
    exactly that episode's ``psi^2``: the terms take the fallback where ``D - psi^2`` is 0,
    and a rounding there would turn the fallback into a huge ratio."""
    rng = np.random.default_rng(episodes)
    psi, q, a, _, _, _ = case(rng, episodes, 1.0, dtype)
    got = grouped_sums(tf.constant(psi), tf.constant(a)).numpy()
    wide_q = np.asarray(psi, np.float64) ** 2
    want = np.stack([(wide_q * np.asarray(a, np.float64)[:, None, None]).sum(0),
                     wide_q.sum(0)])
    assert got.shape == (2, 3, 2) and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    assert got[1, 0, 0] == q[0, 0, 0]
