"""Tests for ``pgtwin_core.sampling``: log-probs against naive formulas and hand-derived
numbers, seeded determinism, extreme logits, empirical frequencies and env actions."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pgtwin_core.sampling import env_actions, log_prob, log_softmax, sample, split_gaussian
from pgtwin_core.specs import PolicySpec

CAT4 = PolicySpec("categorical", (3,), 4)
GAUSS2 = PolicySpec("gaussian", (3,), 2)  # unbounded, squash 'none'
GAUSS2_BOXED = PolicySpec("gaussian", (3,), 2, squash="tanh",
                          action_low=(-2.0, 0.0), action_high=(2.0, 1.0))


def naive_categorical_log_prob(logits: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """log(exp(l_a) / sum_j exp(l_j)), computed literally, one row at a time."""
    out = []
    for row, a in zip(logits, actions):
        out.append(math.log(math.exp(row[a]) / sum(math.exp(v) for v in row)))
    return np.array(out)


def naive_gaussian_log_prob(mean, log_std, actions) -> np.ndarray:
    """log of the product of 1-D normal densities N(a_j; mu_j, sigma_j)."""
    out = []
    for mu_row, ls_row, a_row in zip(mean, log_std, actions):
        density = 1.0
        for mu, ls, a in zip(mu_row, ls_row, a_row):
            sigma = math.exp(ls)
            density *= math.exp(-((a - mu) ** 2) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma)
        out.append(math.log(density))
    return np.array(out)


# ---------------------------------------------------------------------------------------
# log_prob.


def test_categorical_log_prob_matches_naive_formula():
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=2.0, size=(50, 4))  # small: the naive exp cannot overflow
    actions = rng.integers(0, 4, size=50)
    np.testing.assert_allclose(log_prob(CAT4, logits, actions),
                               naive_categorical_log_prob(logits, actions), rtol=1e-12, atol=1e-12)


def test_gaussian_log_prob_matches_product_of_normal_densities():
    rng = np.random.default_rng(1)
    mean, log_std = rng.normal(size=(50, 2)), rng.uniform(-1.0, 1.0, size=(50, 2))
    actions = mean + rng.normal(scale=2.0, size=(50, 2))
    params = np.concatenate([mean, log_std], axis=1)
    np.testing.assert_allclose(log_prob(GAUSS2, params, actions),
                               naive_gaussian_log_prob(mean, log_std, actions), rtol=1e-12)


def test_hand_derived_log_probs():
    # Categorical: logits (ln 1, ln 2, ln 5) give probs (1, 2, 5) / 8, so
    # log pi(2) = ln(5/8) = -0.4700036292457356 and log pi(0) = ln(1/8) = -2.0794415416798357.
    spec3 = PolicySpec("categorical", (1,), 3)
    logits = np.log([[1.0, 2.0, 5.0], [1.0, 2.0, 5.0]])
    np.testing.assert_allclose(log_prob(spec3, logits, np.array([2, 0])),
                               [-0.4700036292457356, -2.0794415416798357], rtol=1e-14)
    # Gaussian: mean (1, 0), log_std (ln 2, 0), action (3, 0.5): z = (1, 0.5),
    # log p = (-1/2 - ln 2 - ln(2 pi)/2) + (-1/8 - 0 - ln(2 pi)/2)
    #       = -0.625 - 0.6931471805599453 - 1.8378770664093453 = -3.1560242469692907.
    params = np.array([[1.0, 0.0, math.log(2.0), 0.0]])
    np.testing.assert_allclose(log_prob(GAUSS2, params, np.array([[3.0, 0.5]])),
                               [-3.1560242469692907], rtol=1e-14)


def test_split_gaussian():
    params = np.arange(8.0).reshape(2, 4)
    mean, log_std = split_gaussian(params, 2)
    np.testing.assert_array_equal(mean, [[0, 1], [4, 5]])
    np.testing.assert_array_equal(log_std, [[2, 3], [6, 7]])


def test_extreme_logits_give_finite_results():
    logits = np.array([[0.0, 1000.0], [1000.0, 0.0], [1000.0, 1000.0], [-1000.0, 0.0]])
    spec = PolicySpec("categorical", (1,), 2)
    ls = log_softmax(logits)
    assert np.all(np.isfinite(ls))
    # exp(-1000) underflows to 0 in float64: the certain action has log-prob exactly 0.
    np.testing.assert_allclose(ls, [[-1000, 0], [0, -1000], [-math.log(2)] * 2, [-1000, 0]])
    actions, log_probs = sample(spec, logits, np.random.default_rng(0))
    assert actions[0] == 1 and actions[1] == 0 and actions[3] == 1
    assert np.all(np.isfinite(log_probs))
    np.testing.assert_allclose(log_probs[[0, 1, 3]], 0.0)
    np.testing.assert_allclose(log_probs[2], -math.log(2))
    np.testing.assert_allclose(log_prob(spec, logits, np.array([0, 1, 0, 0])), [-1000, -1000, -math.log(2), -1000])


# ---------------------------------------------------------------------------------------
# sample.


@pytest.mark.parametrize("spec", [CAT4, GAUSS2], ids=["categorical", "gaussian"])
def test_sample_is_seeded_and_returns_its_log_probs(spec):
    params = np.random.default_rng(2).normal(size=(64, spec.num_params))
    a1, lp1 = sample(spec, params, np.random.default_rng(5))
    a2, lp2 = sample(spec, params, np.random.default_rng(5))
    a3, _ = sample(spec, params, np.random.default_rng(6))
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(lp1, lp2)
    assert not np.array_equal(a1, a3)
    expected_shape = (64,) if spec.is_discrete else (64, 2)
    assert a1.shape == expected_shape and lp1.shape == (64,)
    assert a1.dtype == (np.int64 if spec.is_discrete else np.float64) and lp1.dtype == np.float64
    np.testing.assert_allclose(lp1, log_prob(spec, params, a1), rtol=1e-15)


def test_float32_params_are_sampled_in_float64():
    params = np.random.default_rng(3).normal(size=(8, 4)).astype(np.float32)
    actions, log_probs = sample(GAUSS2, params, np.random.default_rng(0))
    assert actions.dtype == np.float64 and log_probs.dtype == np.float64


def test_categorical_frequencies_match_softmax():
    logits = np.array([0.5, -1.0, 2.0, 0.0])
    probs = np.exp(logits) / np.exp(logits).sum()
    n = 200_000
    actions, _ = sample(CAT4, np.tile(logits, (n, 1)), np.random.default_rng(11))
    counts = np.bincount(actions, minlength=4)
    chi2 = np.sum((counts - n * probs) ** 2 / (n * probs))
    # 3 degrees of freedom: P(chi2 > 21.1) = 1e-4 for a correct sampler.
    assert chi2 < 21.1, (counts, n * probs)


def test_categorical_never_samples_a_zero_probability_action():
    # A uniform draw just below 1 lands above a cumsum that rounded a few ulps below 1;
    # the action after it has probability exactly 0 (exp(-1000) underflows).
    class AlmostOne:
        def random(self, size):
            return np.full(size, np.nextafter(1.0, 0.0))

    logits = np.random.default_rng(4).normal(scale=3.0, size=(2000, 7))
    logits[:, -1] = -1000.0
    actions, log_probs = sample(PolicySpec("categorical", (1,), 7), logits, AlmostOne())
    assert np.all(actions < 6)
    assert np.all(log_probs > -100)


def test_gaussian_sample_mean_and_std():
    mean, std = np.array([1.0, -3.0]), np.array([0.5, 2.0])
    n = 200_000
    params = np.tile(np.concatenate([mean, np.log(std)]), (n, 1))
    actions, _ = sample(GAUSS2, params, np.random.default_rng(12))
    # The sample mean has standard error std / sqrt(n); 5 standard errors.
    np.testing.assert_array_less(np.abs(actions.mean(axis=0) - mean), 5 * std / math.sqrt(n))
    # The sample std has standard error ~ std / sqrt(2n), i.e. 0.16% here; allow 1%.
    np.testing.assert_allclose(actions.std(axis=0), std, rtol=1e-2)
    # Independent dimensions.
    assert abs(np.corrcoef(actions.T)[0, 1]) < 5 / math.sqrt(n)


# ---------------------------------------------------------------------------------------
# env_actions.


def test_env_actions_clips_only_gaussian():
    cat = np.array([0, 3, 1])
    assert env_actions(CAT4, cat) is cat
    raw = np.array([[-3.0, 0.5], [0.2, 7.0], [1.0, -0.1]])
    clipped = env_actions(GAUSS2_BOXED, raw)
    np.testing.assert_array_equal(clipped, np.float32([[-2.0, 0.5], [0.2, 1.0], [1.0, 0.0]]))
    assert clipped.dtype == np.float32
    np.testing.assert_array_equal(raw, [[-3.0, 0.5], [0.2, 7.0], [1.0, -0.1]])  # not in place
    assert env_actions(GAUSS2, raw) is raw  # unbounded: nothing to clip to


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_an_integer_box_gets_each_sample_rounded_not_truncated(dtype):
    # A cast alone truncated 4.99 to 4 and 9.999 to 9: the env's actions were 0.5 low on
    # average and the top of Box(0, 10) out of reach.
    spec = PolicySpec("gaussian", (3,), 2, action_low=(0.0, 0.0), action_high=(10.0, 10.0))
    raw = np.array([[4.99, 5.01], [4.6, 9.999], [0.7, 2.5], [-3.0, 12.0], [3.5, 0.49]])
    sent = env_actions(spec, raw, dtype)
    assert sent.dtype == dtype
    # by hand: nearest integers (numpy rounds halves to even: 2.5 -> 2, 3.5 -> 4), inside
    # the box
    assert sent.tolist() == [[5, 5], [5, 10], [1, 2], [0, 10], [4, 0]]


def test_env_actions_stay_in_the_box_in_the_envs_own_dtype():
    # A float64 Box(-0.1, 0.1): actions were cast to float32 after the clip, and the bound
    # -0.1 became -0.10000000149, outside the box (gymnasium's Box.contains says False).
    spec = PolicySpec("gaussian", (3,), 1, hidden=(4,), action_low=(-0.1,), action_high=(0.1,),
                      squash="tanh")
    raw = np.array([[-5.0], [5.0], [0.05]])
    as_float64 = env_actions(spec, raw, np.float64)
    assert as_float64.dtype == np.float64 and as_float64.tolist() == [[-0.1], [0.1], [0.05]]
    as_float32 = env_actions(spec, raw, np.float32)
    assert as_float32.dtype == np.float32
    assert np.all(as_float32.astype(np.float64) >= -0.1) and np.all(as_float32 <= 0.1)
    # the float32 neighbours just inside the bounds, the middle value as cast
    assert as_float32[0, 0] == np.nextafter(np.float32(-0.1), np.float32(0))
    assert as_float32[2, 0] == np.float32(0.05)


def test_a_non_finite_sample_never_reaches_the_env():
    import gymnasium as gym

    from pgtwin_core.envs import make_vec_env
    from pgtwin_core.rollout import collect

    envs = make_vec_env("Pendulum-v1", 2, seed=0)
    spec = PolicySpec("gaussian", (3,), 1, hidden=(4,), action_low=(-2.0,), action_high=(2.0,),
                      squash="tanh")
    stepped = []
    envs.step = lambda actions: stepped.append(actions)  # noqa: E731 (a spy)
    params = np.array([[0.0, 800.0], [0.0, 800.0]])  # log_std 800: exp overflows float64
    with pytest.raises(ValueError, match=r"non-finite action \[-?inf\] sampled for env 0 at "
                                         r"rollout step 0, from distribution params \[  0. 800.\]"
                                         r".*nothing was sent to the env"):
        collect(envs, lambda obs: params, spec, 4, np.random.default_rng(0))
    assert stepped == []
    assert isinstance(envs, gym.vector.VectorEnv)
