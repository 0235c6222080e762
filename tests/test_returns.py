"""Tests for ``pgtwin_core.returns``, in the TF-Agents value_ops style.

Three ways: hand-derived cases (``tests/returns_cases.py``), a slow pure-python oracle on
random inputs, and layout agreement ([T] vs [T, 1], and [T, N] vs N separate columns).
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgtwin_core.returns import discounted_returns, normalize, return_scale
from tests.returns_cases import CASES

F, T = False, True


# ---------------------------------------------------------------------------------------
# Hand-derived cases.


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hand_derived_cases(case):
    got = discounted_returns(case.rewards, case.terminated, case.truncated, case.gamma,
                             bootstrap=case.bootstrap)
    assert got.dtype == np.float64
    assert got.shape == case.rewards.shape
    np.testing.assert_allclose(got, case.expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("shape", [(0,), (0, 3)])
def test_empty_time_axis(shape):
    got = discounted_returns(np.zeros(shape), np.zeros(shape, bool), np.zeros(shape, bool),
                             0.9)
    assert got.shape == shape
    assert got.dtype == np.float64


def test_integer_rewards_and_int_flags_give_float64():
    # G_1 = 2 (terminated); G_0 = 1 + 0.5 * G_1 = 2.0
    got = discounted_returns([1, 2], [0, 1], [0, 0], 0.5)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [2.0, 2.0])


def test_inputs_are_not_modified():
    rewards = np.array([1.0, 2.0, 3.0])
    terminated = np.array([F, F, F])
    truncated = np.array([F, T, F])
    bootstrap = np.array([0.0, 1.0, 2.0])
    copies = [a.copy() for a in (rewards, terminated, truncated, bootstrap)]
    discounted_returns(rewards, terminated, truncated, 0.9, bootstrap=bootstrap)
    for before, after in zip(copies, (rewards, terminated, truncated, bootstrap)):
        np.testing.assert_array_equal(before, after)


# ---------------------------------------------------------------------------------------
# Slow oracle on random inputs.


def oracle_returns(rewards, terminated, truncated, gamma, bootstrap):
    """Reward-to-go summed forward from each step, one column and one step at a time.

    Deliberately a different formulation from the module's backward recursion:
    G_t = sum_{k=t}^{e} gamma^(k-t) r_k  (+ gamma^(e-t+1) * bootstrap[e] if e was cut),
    where e is the first step >= t that ends the episode or the last row.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    num_steps = rewards.shape[0]
    squeeze = rewards.ndim == 1
    if squeeze:
        rewards, terminated, truncated, bootstrap = (
            np.asarray(a)[:, None] for a in (rewards, terminated, truncated, bootstrap))
    out = np.zeros(rewards.shape, dtype=np.float64)
    for n in range(rewards.shape[1]):
        for t in range(num_steps):
            total, scale = 0.0, 1.0
            k = t
            while True:
                total += scale * float(rewards[k, n])
                scale *= gamma
                if terminated[k, n]:
                    break
                if truncated[k, n] or k == num_steps - 1:
                    total += scale * float(bootstrap[k, n])
                    break
                k += 1
            out[t, n] = total
    return out[:, 0] if squeeze else out


@st.composite
def rollouts(draw, max_steps=30, max_envs=5, ndim=None):
    """(rewards, terminated, truncated, gamma, bootstrap), never both flags at one step."""
    num_steps = draw(st.integers(0, max_steps))
    num_envs = draw(st.integers(1, max_envs))
    ndim = ndim or draw(st.sampled_from([1, 2]))
    shape = (num_steps,) if ndim == 1 else (num_steps, num_envs)
    size = int(np.prod(shape))
    floats = st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False)
    rewards = np.array(draw(st.lists(floats, min_size=size, max_size=size))).reshape(shape)
    bootstrap = np.array(draw(st.lists(floats, min_size=size, max_size=size))).reshape(shape)
    # 0 = continues, 1 = terminated, 2 = truncated: exclusive by construction.
    ends = np.array(draw(st.lists(st.sampled_from([0, 0, 0, 1, 2]), min_size=size,
                                  max_size=size)), dtype=int).reshape(shape)
    gamma = draw(st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)))
    return rewards, ends == 1, ends == 2, gamma, bootstrap


@settings(max_examples=50, deadline=None)
@given(rollouts())
def test_matches_slow_oracle(rollout):
    rewards, terminated, truncated, gamma, bootstrap = rollout
    got = discounted_returns(rewards, terminated, truncated, gamma, bootstrap=bootstrap)
    want = oracle_returns(rewards, terminated, truncated, gamma, bootstrap)
    assert got.shape == rewards.shape
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@settings(max_examples=50, deadline=None)
@given(rollouts(ndim=1))
def test_1d_agrees_with_single_column(rollout):
    rewards, terminated, truncated, gamma, bootstrap = rollout
    flat = discounted_returns(rewards, terminated, truncated, gamma, bootstrap=bootstrap)
    column = discounted_returns(rewards[:, None], terminated[:, None], truncated[:, None],
                                gamma, bootstrap=bootstrap[:, None])
    assert column.shape == (rewards.shape[0], 1)
    np.testing.assert_array_equal(flat, column[:, 0])


@settings(max_examples=50, deadline=None)
@given(rollouts(ndim=2))
def test_batch_agrees_with_columns_one_at_a_time(rollout):
    # Vectorising over N must not couple the environments.
    rewards, terminated, truncated, gamma, bootstrap = rollout
    batch = discounted_returns(rewards, terminated, truncated, gamma, bootstrap=bootstrap)
    for n in range(rewards.shape[1]):
        single = discounted_returns(rewards[:, n], terminated[:, n], truncated[:, n], gamma,
                                    bootstrap=bootstrap[:, n])
        np.testing.assert_array_equal(batch[:, n], single)


@settings(max_examples=50, deadline=None)
@given(rollouts())
def test_gamma_0_gives_rewards(rollout):
    rewards, terminated, truncated, _, bootstrap = rollout
    got = discounted_returns(rewards, terminated, truncated, 0.0, bootstrap=bootstrap)
    np.testing.assert_array_equal(got, rewards)


# ---------------------------------------------------------------------------------------
# normalize.


def test_normalize_zero_mean_unit_std():
    x = np.array([[1.0, 2.0], [3.0, 10.0], [-4.0, 0.5]])
    got = normalize(x)
    assert got.dtype == np.float64
    assert got.shape == x.shape
    np.testing.assert_allclose(got.mean(), 0.0, atol=1e-12)
    np.testing.assert_allclose(got.std(), 1.0, rtol=1e-6)  # eps = 1e-8 shifts it slightly
    # mean = 1, std = sqrt(((-1)^2 + 1^2) / 2) = 1, so [0, 2] -> [-1, 1]
    np.testing.assert_allclose(normalize([0.0, 2.0], eps=0.0), [-1.0, 1.0])


def test_normalize_masked_uses_masked_entries_only():
    x = np.array([0.0, 2.0, 1000.0, np.nan])
    mask = np.array([T, T, F, F])
    # mean over [0, 2] = 1, std = 1; the padding (1000, nan) neither counts nor leaks.
    got = normalize(x, eps=0.0, mask=mask)
    np.testing.assert_array_equal(got, [-1.0, 1.0, 0.0, 0.0])


def test_normalize_masked_2d_statistics():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 5.0, size=(7, 4))
    mask = rng.random((7, 4)) < 0.6
    got = normalize(x, mask=mask)
    assert np.all(got[~mask] == 0.0)
    np.testing.assert_allclose(got[mask].mean(), 0.0, atol=1e-12)
    np.testing.assert_allclose(got[mask].std(), 1.0, rtol=1e-6)


@pytest.mark.parametrize("eps", [1e-8, 0.0])
@pytest.mark.parametrize("value", [0.0, 0.1, -3.7, 1e6])
def test_normalize_constant_gives_zeros(value, eps):
    # 0.1 * 7 does not sum to exactly 0.7; the result must still be exactly 0, not ~1e-9.
    got = normalize(np.full((7,), value), eps=eps)
    np.testing.assert_array_equal(got, np.zeros(7))


def test_normalize_empty_mask_and_empty_input_give_zeros():
    np.testing.assert_array_equal(normalize([1.0, 2.0], mask=[F, F]), [0.0, 0.0])
    assert normalize(np.zeros((0,))).shape == (0,)


# ---------------------------------------------------------------------------------------
# Errors name the argument and the first bad index.


def _ok(shape=(4,)):
    return dict(rewards=np.ones(shape), terminated=np.zeros(shape, bool),
                truncated=np.zeros(shape, bool), gamma=0.9, bootstrap=np.zeros(shape))


@pytest.mark.parametrize("name", ["terminated", "truncated", "bootstrap"])
def test_error_shape_mismatch(name):
    kwargs = _ok()
    kwargs[name] = kwargs[name][:3]
    with pytest.raises(ValueError,
                       match=rf"^{name} has shape \(3,\) but rewards has shape \(4,\)$"):
        discounted_returns(**kwargs)


def test_error_shape_mismatch_rejects_broadcasting():
    kwargs = _ok((4, 2))
    kwargs["terminated"] = np.zeros(4, bool)
    with pytest.raises(ValueError, match=r"terminated has shape \(4,\) but rewards has "
                                         r"shape \(4, 2\)"):
        discounted_returns(**kwargs)


@pytest.mark.parametrize("shape", [(), (2, 3, 4)])
def test_error_rewards_rank(shape):
    kwargs = _ok(shape)
    with pytest.raises(ValueError, match=r"rewards must be 1-D .* got shape"):
        discounted_returns(**kwargs)


@pytest.mark.parametrize("gamma, shown", [(-0.1, "-0.1"), (1.5, "1.5"), (np.nan, "nan"),
                                          (np.inf, "inf")])
def test_error_gamma(gamma, shown):
    kwargs = _ok()
    kwargs["gamma"] = gamma
    with pytest.raises(ValueError, match=rf"gamma must be .*\[0, 1\], got {shown}$"):
        discounted_returns(**kwargs)


@pytest.mark.parametrize("name", ["rewards", "bootstrap"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_error_non_finite_2d_names_tuple_index(name, bad):
    kwargs = _ok((4, 2))
    kwargs[name] = kwargs[name].copy()
    kwargs[name][2, 1] = bad
    kwargs[name][3, 0] = bad  # a later one: the first in C order must be named
    with pytest.raises(ValueError, match=rf"^{name}\[2, 1\] is {bad} \(non-finite\)"):
        discounted_returns(**kwargs)


@pytest.mark.parametrize("name", ["rewards", "bootstrap"])
def test_error_non_finite_1d_names_int_index(name):
    kwargs = _ok()
    kwargs[name] = kwargs[name].copy()
    kwargs[name][2] = np.nan
    with pytest.raises(ValueError, match=rf"^{name}\[2\] is nan \(non-finite\)"):
        discounted_returns(**kwargs)


def test_error_both_flags_at_one_step():
    kwargs = _ok((3, 2))
    kwargs["terminated"] = np.array([[F, F], [F, T], [T, F]])
    kwargs["truncated"] = np.array([[F, T], [F, T], [T, F]])
    with pytest.raises(ValueError,
                       match=r"^terminated and truncated are both set at \[1, 1\]"):
        discounted_returns(**kwargs)


def test_error_normalize_mask_shape():
    with pytest.raises(ValueError, match=r"^mask has shape \(2,\) but x has shape \(3,\)$"):
        normalize([1.0, 2.0, 3.0], mask=[T, T])


def test_error_normalize_non_finite_counted_entry():
    with pytest.raises(ValueError, match=r"^x\[1, 0\] is inf \(non-finite\)"):
        normalize([[1.0, 2.0], [np.inf, 3.0]])


@pytest.mark.parametrize("eps", [-1e-8, np.nan])
def test_error_normalize_eps(eps):
    with pytest.raises(ValueError, match=r"^eps must be .*>= 0, got"):
        normalize([1.0, 2.0], eps=eps)


# ---------------------------------------------------------------------------------------
# Layering: pgtwin_core must stay TensorFlow-free.


def test_returns_module_does_not_import_tensorflow():
    code = ("import sys, pgtwin_core.returns; "
            "assert not any(m == 'tensorflow' or m.startswith('tensorflow.') "
            "for m in sys.modules), 'tensorflow was imported'")
    repo_root = pathlib.Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=repo_root)


@pytest.mark.parametrize("scale", [1e100, 1e200, 1e300])
def test_normalising_does_not_depend_on_a_huge_finite_scale(scale):
    # (x s - mean) / std is (x - mean_x) / std_x for any s > 0 (eps = 0: eps / std would
    # differ by 1e-8 at s = 1); past s ~ 1e154 the squares of the deviations overflow, and an
    # inf std made every advantage 0.
    x = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.0]])
    np.testing.assert_allclose(normalize(x * scale, eps=0.0), normalize(x, eps=0.0),
                               rtol=1e-12, atol=1e-15)
    assert return_scale(x * scale, eps=0.0) == pytest.approx(return_scale(x, eps=0.0) * scale,
                                                             rel=1e-12)


def test_discounted_returns_that_overflow_are_named_with_the_rewards_size():
    rewards = np.full((3, 2), 1e308)  # each finite; steps 0 and 1 sum past 1.8e308
    with pytest.raises(ValueError, match=r"the discounted return at \[0, 0\] overflows "
                                         r"float64 \(the rewards reach 1e\+308\): scale"):
        discounted_returns(rewards, np.zeros((3, 2), bool), np.zeros((3, 2), bool), gamma=0.99)
