"""Tests for ``pgtwin_core.specs``: PolicySpec validation, weight layout, initial weights,
``spec_for_env`` and ``check_weights``.

Expected names and shapes are written out by hand from the network in the module
docstring (``x @ kernel``: kernels are ``[fan_in, fan_out]``), never read back from
``weight_shapes``.
"""
from __future__ import annotations

import dataclasses
import re

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from pgtwin_core.envs import make_vec_env
from pgtwin_core.sampling import env_actions
from pgtwin_core.specs import PolicySpec, check_weights, init_weights, spec_for_env

CATEGORICAL_MLP = PolicySpec("categorical", (4,), 2)                      # CartPole-like
GAUSSIAN_MLP = PolicySpec("gaussian", (3,), 1, hidden=(32,), squash="tanh",
                          action_low=(-2.0,), action_high=(2.0,), log_std_init=-0.7)
LSTM_K8 = PolicySpec("categorical", (8, 5), 3, torso="lstm", hidden=(16, 8))

# Hand-written layouts: obs_dim -> hidden... -> head, kernels [fan_in, fan_out].
EXPECTED_SHAPES = {
    "categorical_mlp": (CATEGORICAL_MLP, [
        ("policy/dense_0/kernel", (4, 64)), ("policy/dense_0/bias", (64,)),
        ("policy/dense_1/kernel", (64, 64)), ("policy/dense_1/bias", (64,)),
        ("policy/head/kernel", (64, 2)), ("policy/head/bias", (2,)),
    ]),
    "gaussian_mlp": (GAUSSIAN_MLP, [
        ("policy/dense_0/kernel", (3, 32)), ("policy/dense_0/bias", (32,)),
        ("policy/head/kernel", (32, 1)), ("policy/head/bias", (1,)),
        ("policy/log_std", (1,)),
    ]),
    # LSTM over [K=8, obs_dim=5] with 16 units: kernel [[x, h], 4 gates] = [5 + 16, 64];
    # then one dense layer of 8 and the head.
    "lstm_k8": (LSTM_K8, [
        ("policy/lstm/kernel", (21, 64)), ("policy/lstm/bias", (64,)),
        ("policy/dense_0/kernel", (16, 8)), ("policy/dense_0/bias", (8,)),
        ("policy/head/kernel", (8, 3)), ("policy/head/bias", (3,)),
    ]),
}

HIDDEN_GAIN = np.sqrt(2.0)
HEAD_GAIN = 0.01


# ---------------------------------------------------------------------------------------
# Weight layout and initial values.


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(EXPECTED_SHAPES))
def test_init_weights_names_shapes_dtypes(case, dtype):
    spec, expected = EXPECTED_SHAPES[case]
    weights = init_weights(spec, seed=0, dtype=dtype)
    assert [(n, w.shape) for n, w in weights.items()] == expected  # names, order, shapes
    assert list(spec.weight_shapes().items()) == expected
    assert all(w.dtype == np.dtype(dtype) for w in weights.values())


def test_properties_of_the_three_specs():
    assert (CATEGORICAL_MLP.obs_dim, CATEGORICAL_MLP.history, CATEGORICAL_MLP.num_params) == (4, 1, 2)
    assert CATEGORICAL_MLP.dense_sizes == (64, 64) and CATEGORICAL_MLP.is_discrete
    # Gaussian params are mean and log-std side by side: 2 * action_dim.
    assert (GAUSSIAN_MLP.num_params, GAUSSIAN_MLP.is_discrete) == (2, False)
    # LSTM: the first hidden size is the LSTM's units, the rest are dense layers.
    assert (LSTM_K8.obs_dim, LSTM_K8.history, LSTM_K8.dense_sizes) == (5, 8, (8,))


def test_the_dtype_is_the_configs_not_the_specs():
    # One home (issue 13): the dtype is ReinforceConfig.dtype, passed to what needs it.
    assert "dtype" not in {f.name for f in dataclasses.fields(PolicySpec)}
    with pytest.raises(TypeError, match="dtype"):
        PolicySpec("categorical", (4,), 2, dtype="float64")
    for make in (lambda: init_weights(LSTM_K8, dtype="float16"),
                 lambda: check_weights(LSTM_K8, init_weights(LSTM_K8, dtype="float32"),
                                       dtype="float16")):
        with pytest.raises(ValueError, match=r"dtype='float16' is not one of \('float32', 'float64'\)"):
            make()


@pytest.mark.parametrize("dtype,atol", [("float64", 1e-12), ("float32", 1e-6)])
@pytest.mark.parametrize("case", sorted(EXPECTED_SHAPES))
def test_kernels_are_orthogonal_with_their_gain(case, dtype, atol):
    spec, _ = EXPECTED_SHAPES[case]
    weights = init_weights(spec, seed=3, dtype=dtype)
    kernels = [n for n in weights if n.endswith("kernel")]
    assert kernels
    for name in kernels:
        q = weights[name].astype(np.float64)
        gain = HEAD_GAIN if name.startswith("policy/head") else HIDDEN_GAIN
        rows, cols = q.shape
        # A tall matrix has orthonormal columns (q^T q = gain^2 I), a wide one orthonormal rows.
        gram = q.T @ q if rows >= cols else q @ q.T
        np.testing.assert_allclose(gram, gain**2 * np.eye(min(rows, cols)), rtol=0,
                                   atol=atol * gain**2, err_msg=name)


def test_biases_log_std_and_lstm_forget_gate():
    gw = init_weights(GAUSSIAN_MLP, seed=0, dtype="float32")
    np.testing.assert_array_equal(gw["policy/dense_0/bias"], np.zeros(32))
    np.testing.assert_array_equal(gw["policy/head/bias"], np.zeros(1))
    np.testing.assert_array_equal(gw["policy/log_std"], np.float32([-0.7]))
    lw = init_weights(LSTM_K8, seed=0, dtype="float32")
    # Gates laid out i, f, g, o with 16 units each: only f (entries 16..31) starts at 1.
    expected_bias = np.zeros(64)
    expected_bias[16:32] = 1.0
    np.testing.assert_array_equal(lw["policy/lstm/bias"], expected_bias)


@pytest.mark.parametrize("case", sorted(EXPECTED_SHAPES))
def test_same_seed_same_weights_different_seed_different_kernels(case):
    spec, _ = EXPECTED_SHAPES[case]
    a, b, c = (init_weights(spec, seed=s, dtype="float32") for s in (7, 7, 8))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        if name.endswith("kernel"):
            assert not np.allclose(a[name], c[name]), name


# ---------------------------------------------------------------------------------------
# spec_for_env.


def test_spec_for_cartpole_is_categorical():
    for env in (gymnasium.make("CartPole-v1"), make_vec_env("CartPole-v1", 3)):
        spec = spec_for_env(env)
        assert (spec.distribution, spec.obs_shape, spec.action_size) == ("categorical", (4,), 2)
        assert (spec.torso, spec.hidden, spec.action_low, spec.action_high) == ("mlp", (64, 64), None, None)
        env.close()


def test_spec_for_pendulum_is_tanh_gaussian_in_minus_two_two():
    envs = make_vec_env("Pendulum-v1", 2)
    spec = spec_for_env(envs, hidden=(16,), log_std_init=-1.0)
    assert (spec.distribution, spec.obs_shape, spec.action_size) == ("gaussian", (3,), 1)
    assert (spec.squash, spec.action_low, spec.action_high) == ("tanh", (-2.0,), (2.0,))
    assert (spec.hidden, spec.log_std_init) == ((16,), -1.0)
    envs.close()


def test_spec_for_battery_is_sigmoid_gaussian_in_unit_box():
    envs = make_vec_env("BatteryArbitrage-v0", 2)
    spec = spec_for_env(envs)
    assert (spec.distribution, spec.obs_shape, spec.action_size) == ("gaussian", (3,), 2)
    assert (spec.squash, spec.action_low, spec.action_high) == ("sigmoid", (0.0, 0.0), (1.0, 1.0))
    # An explicit squash wins over the guess.
    assert spec_for_env(envs, squash="tanh").squash == "tanh"
    envs.close()


def test_spec_for_history_env_needs_lstm():
    envs = make_vec_env("CartPole-v1", 2, history=8)
    spec = spec_for_env(envs, torso="lstm", hidden=(16, 8))
    assert (spec.torso, spec.obs_shape, spec.history, spec.obs_dim) == ("lstm", (8, 4), 8, 4)
    assert spec.weight_shapes()["policy/lstm/kernel"] == (4 + 16, 64)
    with pytest.raises(ValueError, match=re.escape("obs_shape=(8, 4) does not fit torso='mlp'")):
        spec_for_env(envs, torso="mlp")
    envs.close()


class _SpacesOnly:
    """Just the two spaces spec_for_env reads."""

    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space


def test_spec_for_unbounded_box_has_no_squash_and_no_bounds():
    env = _SpacesOnly(spaces.Box(-1, 1, (2,)), spaces.Box(-np.inf, np.inf, (3,)))
    spec = spec_for_env(env)
    assert (spec.squash, spec.action_low, spec.action_high, spec.action_size) == ("none", None, None, 3)


def test_a_box_bounded_in_some_dimensions_is_clipped_there_and_not_squashed():
    # Box([0, -inf], [1, inf]): dimension 0 in [0, 1], dimension 1 free. No squash can
    # serve both, so the mean is not squashed and the samples are clipped per dimension.
    env = _SpacesOnly(spaces.Box(-1, 1, (2,)),
                      spaces.Box(np.array([0.0, -np.inf]), np.array([1.0, np.inf])))
    spec = spec_for_env(env)
    assert (spec.squash, spec.action_low, spec.action_high) == ("none", (0.0, -np.inf),
                                                                (1.0, np.inf))
    samples = np.array([[-1.84, -7.0], [2.09, 9.0], [0.5, 0.25]])
    np.testing.assert_array_equal(env_actions(spec, samples),
                                  np.float32([[0.0, -7.0], [1.0, 9.0], [0.5, 0.25]]))


def test_spec_for_env_rejects_unsupported_spaces():
    with pytest.raises(ValueError, match=r"spec_for_env: observation space Discrete\(3\) is not a Box"):
        spec_for_env(_SpacesOnly(spaces.Discrete(3), spaces.Discrete(2)))
    with pytest.raises(ValueError, match=r"action space MultiBinary\(2\) is not supported"):
        spec_for_env(_SpacesOnly(spaces.Box(-1, 1, (2,)), spaces.MultiBinary(2)))
    with pytest.raises(ValueError, match=r"is not supported \(supported: Discrete, or a 1-D Box\)"):
        spec_for_env(_SpacesOnly(spaces.Box(-1, 1, (2,)), spaces.Box(-1, 1, (2, 2))))


# ---------------------------------------------------------------------------------------
# PolicySpec validation: every message names the field and the bad value.


BAD_SPECS = [
    (dict(distribution="beta"), "PolicySpec.distribution='beta' is not one of ('categorical', 'gaussian')"),
    (dict(torso="gru"), "PolicySpec.torso='gru' is not one of ('mlp', 'lstm')"),
    (dict(activation="sigmoid"), "PolicySpec.activation='sigmoid' is not one of ('tanh', 'relu')"),
    (dict(squash="softplus"), "PolicySpec.squash='softplus' is not one of ('sigmoid', 'tanh', 'none')"),
    (dict(obs_shape=(2, 3)), "PolicySpec.obs_shape=(2, 3) does not fit torso='mlp': expected (obs_dim,)"),
    (dict(obs_shape=(0,)), "PolicySpec.obs_shape=(0,) does not fit torso='mlp'"),
    (dict(obs_shape=(4,), torso="lstm"), "PolicySpec.obs_shape=(4,) does not fit torso='lstm': expected (K, obs_dim)"),
    (dict(action_size=0), "PolicySpec.action_size must be >= 1, got 0"),
    (dict(action_size=2.5), "PolicySpec.action_size must be an integer, got 2.5"),
    (dict(hidden=(64, 0)), "PolicySpec.hidden sizes must be >= 1, got (64, 0)"),
    (dict(obs_shape=(8, 4), torso="lstm", hidden=()), "PolicySpec.hidden must name the LSTM units for torso='lstm'"),
    (dict(log_std_init=float("nan")), "PolicySpec.log_std_init must be finite, got nan"),
]
GAUSSIAN = dict(distribution="gaussian", action_size=2)
BAD_GAUSSIAN_SPECS = [
    (dict(squash="tanh"), "PolicySpec.action_low=None must have 2 entries for squash='tanh'"),
    (dict(squash="sigmoid", action_low=(0.0,), action_high=(1.0, 1.0)),
     "PolicySpec.action_low=(0.0,) must have 2 entries for squash='sigmoid'"),
    (dict(squash="none", action_low=(0.0, 0.0)),
     "PolicySpec.action_high=None must have 2 entries for squash='none'"),
    (dict(squash="tanh", action_low=(0.0, 1.0), action_high=(1.0, 1.0)),
     "PolicySpec action bounds must be finite with low < high for squash='tanh', got "
     "low=(0.0, 1.0), high=(1.0, 1.0)"),
    (dict(squash="tanh", action_low=(0.0, -np.inf), action_high=(1.0, 1.0)),
     "PolicySpec action bounds must be finite with low < high for squash='tanh', got "
     "low=(0.0, -inf)"),
    (dict(squash="none", action_low=(0.0, -np.inf), action_high=(0.0, np.inf)),
     "PolicySpec action bounds must be low < high for squash='none', got low=(0.0, -inf), "
     "high=(0.0, inf)"),
]


@pytest.mark.parametrize("changes,message", BAD_SPECS + [({**GAUSSIAN, **c}, m) for c, m in BAD_GAUSSIAN_SPECS],
                         ids=[m[:50] for _, m in BAD_SPECS + BAD_GAUSSIAN_SPECS])
def test_policy_spec_errors(changes, message):
    kwargs = dict(distribution="categorical", obs_shape=(4,), action_size=2)
    kwargs.update(changes)
    with pytest.raises(ValueError, match=re.escape(message)):
        PolicySpec(**kwargs)


def test_unbounded_gaussian_and_linear_policy_are_valid():
    spec = PolicySpec("gaussian", (3,), 2, hidden=())  # no bounds with squash='none'
    assert list(spec.weight_shapes()) == ["policy/head/kernel", "policy/head/bias", "policy/log_std"]
    assert spec.weight_shapes()["policy/head/kernel"] == (3, 2)


# ---------------------------------------------------------------------------------------
# check_weights.


def test_check_weights_lists_missing_extra_and_wrongly_shaped_together():
    weights = init_weights(GAUSSIAN_MLP, dtype="float32")
    del weights["policy/log_std"]
    weights["policy/dense_0/kernel"] = np.zeros((3, 31))
    weights["policy/head/bias"] = np.zeros((2,))
    weights["policy/dense_9/kernel"] = np.zeros((1, 1))
    with pytest.raises(ValueError) as err:
        check_weights(GAUSSIAN_MLP, weights, dtype="float32")
    assert str(err.value) == (
        "weights do not match the PolicySpec: missing ['policy/log_std'], "
        "extra ['policy/dense_9/kernel'], wrongly shaped "
        "policy/dense_0/kernel: expected (3, 32), got (3, 31); "
        "policy/head/bias: expected (1,), got (2,)"
    )


@pytest.mark.parametrize("problem,message", [
    ("missing", "weights do not match the PolicySpec: missing ['policy/head/bias']"),
    ("extra", "weights do not match the PolicySpec: extra ['policy/extra']"),
    ("shape", "weights do not match the PolicySpec: wrongly shaped policy/head/kernel: expected (64, 2), got (2, 64)"),
    ("nonfinite", "weight policy/dense_1/bias[5] = inf is not finite"),
    # 1e300 is finite in float64, past float32's largest (3.4e38): the cast is named
    ("past_float32", "weight policy/dense_1/bias[5] = 1e+300 is finite but past float32's "
                     "range (+-3.4e+38): scale the weights, or train in float64 (--dtype "
                     "float64)"),
    # float32 + 1j is complex64 (numpy 2 keeps the float's precision)
    ("complex", "weight policy/dense_1/bias has dtype complex64; expected real numbers"),
])
def test_check_weights_single_problems(problem, message):
    weights = init_weights(CATEGORICAL_MLP, dtype="float32")
    if problem == "missing":
        del weights["policy/head/bias"]
    elif problem == "extra":
        weights["policy/extra"] = np.zeros(1)
    elif problem == "shape":
        weights["policy/head/kernel"] = weights["policy/head/kernel"].T
    elif problem == "nonfinite":
        weights["policy/dense_1/bias"][5] = np.inf
    elif problem == "past_float32":
        weights["policy/dense_1/bias"] = weights["policy/dense_1/bias"].astype(np.float64)
        weights["policy/dense_1/bias"][5] = 1e300
    else:
        weights["policy/dense_1/bias"] = weights["policy/dense_1/bias"] + 1j
    with pytest.raises(ValueError) as err:
        check_weights(CATEGORICAL_MLP, weights, dtype="float32")
    assert str(err.value) == message


def test_check_weights_casts_to_the_given_dtype_in_canonical_order():
    weights32 = init_weights(LSTM_K8, seed=1, dtype="float32")
    shuffled = dict(reversed(list(weights32.items())))
    out = check_weights(LSTM_K8, shuffled, dtype="float64")
    assert list(out) == list(LSTM_K8.weight_shapes())
    for name, value in out.items():
        assert value.dtype == np.float64
        np.testing.assert_array_equal(value, weights32[name].astype(np.float64))
