"""Both twins' ``ReinforceAgent`` against the hand-derived cases, and at their boundaries.

Every test runs for ``graph`` (legacy_graph) and ``eager`` and asserts the same numbers from
``tests/expected_values.py``. Twin-specific checks (``checked_gradients`` on a graph or a
tape, retracing) are in ``test_legacy_agent.py`` and ``test_eager_agent.py``.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.specs import PolicySpec, init_weights
from pgtwin.twins import IMPLS, agent_class

from tests.expected_values import CASES, CATEGORICAL, CATEGORICAL_GRAD_NORM, FULL_GRADIENT_CASES
from tests.synthetic_batches import batch_of, random_batch

DTYPES = ("float32", "float64")
# float32 agents hold the hand weights rounded to float32 (ln 3 to ~6e-8 relative).
TOL = {"float64": dict(rtol=1e-12, atol=1e-12), "float32": dict(rtol=1e-5, atol=2e-6)}


@pytest.fixture(scope="module")
def hand_agent():
    """``hand_agent(impl, case, dtype)``: an SGD agent on the case's weights (built once)."""
    built = {}

    def get(impl, case, dtype):
        key = (impl, case.name, dtype)
        if key not in built:
            built[key] = agent_class(impl)(case.spec, case.config(dtype),
                                           case.weights)
        agent = built[key]
        agent.set_weights(case.weights)  # an earlier test may have stepped it (SGD: no state)
        return agent

    yield get
    for agent in built.values():
        agent.close()


def _close(actual, expected, dtype, what):
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, err_msg=what, **TOL[dtype])


cases = pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
impls = pytest.mark.parametrize("impl", IMPLS)
dtypes = pytest.mark.parametrize("dtype", DTYPES)


# --------------------------------------------------------------------- hand-derived
@impls
@dtypes
@cases
def test_dist_params(hand_agent, impl, dtype, case):
    _close(hand_agent(impl, case, dtype).dist_params(case.obs), case.params, dtype, case.name)


@impls
@dtypes
@cases
def test_log_probs(hand_agent, impl, dtype, case):
    agent = hand_agent(impl, case, dtype)
    _close(agent.log_prob(case.obs, case.actions), case.log_probs, dtype, case.name)


@impls
@dtypes
@cases
def test_loss(hand_agent, impl, dtype, case):
    _close(hand_agent(impl, case, dtype).loss_value(case.batch), case.loss, dtype, case.name)


@impls
@dtypes
@cases
def test_gradients(hand_agent, impl, dtype, case):
    grads = hand_agent(impl, case, dtype).gradients(case.batch)
    assert set(grads) == set(case.weights)
    for name, expected in case.grads.items():
        _close(grads[name], expected, dtype, f"{case.name}: {name}")


@impls
@dtypes
@pytest.mark.parametrize("case", FULL_GRADIENT_CASES, ids=lambda c: c.name)
def test_sgd_update(hand_agent, impl, dtype, case):
    agent = hand_agent(impl, case, dtype)
    metrics = agent.update(case.batch)
    assert metrics["applied"] is True
    _close(metrics["loss"], case.loss, dtype, "loss metric")
    _close(metrics["entropy"], case.entropy, dtype, "entropy metric")
    _close(metrics["grad_norm"], case.grad_norm, dtype, "grad_norm metric")
    lr = agent.config.learning_rate
    after = agent.get_weights()
    for name, expected in case.after_sgd(lr).items():
        _close(after[name], expected, dtype, f"{case.name}: {name} after one SGD step")


def test_categorical_grad_norm_is_the_hand_derived_one():
    # Two derivations of the same number must agree: sqrt(84/64) and the sum of the squares.
    assert CATEGORICAL.grad_norm == pytest.approx(CATEGORICAL_GRAD_NORM, rel=1e-15)


@impls
@dtypes
@pytest.mark.parametrize("case", FULL_GRADIENT_CASES, ids=lambda c: c.name)
def test_first_adam_step(impl, dtype, case):
    config = case.config(dtype, optimizer="adam", learning_rate=0.01)
    agent = agent_class(impl)(case.spec, config, case.weights)
    try:
        assert agent.update(case.batch)["applied"] is True
        after = agent.get_weights()
    finally:
        agent.close()
    expected = case.after_adam(config.learning_rate, config.adam_beta1, config.adam_beta2,
                               config.adam_epsilon)
    # float32: TF1's fused ApplyAdam takes 1 - beta2 in float32 where Keras takes it in
    # float64, a 7e-6 relative difference in the step; allow 2e-5 of a step (lr).
    tol = TOL[dtype] if dtype == "float64" else dict(rtol=1e-6, atol=2e-5 * config.learning_rate)
    for name in after:
        np.testing.assert_allclose(after[name], expected[name], err_msg=name, **tol)


@impls
@dtypes
def test_log_prob_matches_numpy_oracle(impl, dtype):
    """``log_prob`` against ``pgtwin_core.sampling.log_prob`` on the agent's own params."""
    from pgtwin_core.sampling import log_prob
    spec = PolicySpec("gaussian", (3,), 2, hidden=(5,), squash="tanh", action_low=(-2, -1),
                      action_high=(2, 1))
    agent = agent_class(impl)(spec, CATEGORICAL.config(dtype), seed=3)
    try:
        batch = random_batch(spec, 6, 2, seed=4)
        obs, actions = batch.obs.reshape(12, 3), batch.actions.reshape(12, 2)
        expected = log_prob(spec, agent.dist_params(obs), actions)
        _close(agent.log_prob(obs, actions), expected, dtype, "log_prob vs numpy")
    finally:
        agent.close()


# ---------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def cat_agents():
    """One float32 agent per twin for a 4-feature, 3-action categorical MLP."""
    spec = PolicySpec("categorical", (4,), 3, hidden=(8,))
    agents = {impl: agent_class(impl)(spec, CATEGORICAL.config("float32"), seed=0)
              for impl in IMPLS}
    yield agents
    for agent in agents.values():
        agent.close()


def _cat_batch(actions=(0, 2, 1), obs=None):
    obs = np.arange(12.0).reshape(3, 4) / 10 if obs is None else obs
    return batch_of(obs=obs, actions=list(actions), rewards=[1.0, 0.0, -1.0])


@impls
@pytest.mark.parametrize("obs, message", [
    (np.zeros((3, 5)), r"obs has shape \(3, 5\); expected \[B, 4\]"),
    (np.zeros(4), r"obs has shape \(4,\); expected \[B, 4\]"),
    (np.full((2, 4), "x"), r"obs has dtype <U1; expected real numbers"),
    (np.zeros((2, 4), complex), r"obs has dtype complex128; expected real numbers"),
    ([[0.0, 1.0, 2.0, 3.0], [0.0, 1.0]], r"obs is not one numeric array \(.*\): pass an "
                                         r"array of one shape"),
    (None, r"obs is None; expected an array"),
    (np.zeros((0, 4)), r"obs is an empty batch \(B = 0\)"),
    (np.array([[0, 0, 0, 0], [0, 0, np.nan, 0]]), r"obs\[1, 2\] = nan is not finite"),
    # 1e39 is a finite float64 past float32's largest, 3.4028e38: the cast, not the env,
    # would make it inf
    (np.array([[0, 0, 0, 0], [0, 1e39, 0, 0]]),
     r"obs\[1, 1\] = 1e\+39 is finite but past float32's range \(\+-3.4e\+38\): normalise "
     r"the observations \(pgtwin train --obs-norm\) or scale them in the env, or train in "
     r"float64 \(--dtype float64\)"),
], ids=["wrong_width", "no_batch_axis", "strings", "complex", "ragged", "none", "empty", "nan",
        "past_float32"])
def test_bad_obs_is_refused_naming_it(cat_agents, impl, obs, message):
    with pytest.raises(ValueError, match=message):
        cat_agents[impl].dist_params(obs)


@impls
def test_categorical_action_out_of_range_is_refused(cat_agents, impl):
    agent = cat_agents[impl]
    with pytest.raises(ValueError, match=r"actions\[1\] = 3 is out of range for a categorical "
                                         r"policy with 3 actions \(valid: 0..2\)"):
        agent.log_prob(np.zeros((2, 4)), np.array([0, 3]))
    before = agent.get_weights()
    with pytest.raises(ValueError, match=r"batch.actions\[2\] = -1 is out of range"):
        agent.update(_cat_batch(actions=(0, 1, -1)))
    _assert_same_weights(agent.get_weights(), before)


@impls
def test_nan_in_batch_obs_is_refused_before_any_update(cat_agents, impl):
    agent = cat_agents[impl]
    obs = np.zeros((3, 4))
    obs[2, 1] = np.inf
    before = agent.get_weights()
    with pytest.raises(ValueError, match=r"batch.obs\[2, 1\] = inf is not finite"):
        agent.update(_cat_batch(obs=obs))
    _assert_same_weights(agent.get_weights(), before)


@impls
def test_a_time_major_array_of_another_shape_is_named(cat_agents, impl):
    # obs, actions, terminated, truncated and valid are [T, N] = [3, 1]; rewards built as
    # [N, T] = [1, 3] is the one named (before, the flattened actions were blamed)
    batch = _cat_batch()
    wrong = dataclasses.replace(batch, rewards=batch.rewards.T)
    before = cat_agents[impl].get_weights()
    with pytest.raises(ValueError, match=re.escape(
            "batch.rewards has shape (1, 3); the batch's other time-major arrays (obs, "
            "actions, terminated, truncated, valid) start with [T, N] = [3, 1]")):
        cat_agents[impl].update(wrong)
    _assert_same_weights(cat_agents[impl].get_weights(), before)


@impls
def test_batch_without_valid_steps_is_refused(cat_agents, impl):
    batch = batch_of(obs=np.zeros((2, 4)), actions=[0, 1], rewards=[0.0, 0.0],
                     valid=[False, False])
    with pytest.raises(ValueError, match=r"batch has no valid step \(T=2, N=1\)"):
        cat_agents[impl].update(batch)


@impls
@pytest.mark.parametrize("change, message", [
    (lambda w: w.pop("policy/head/bias"), r"missing \['policy/head/bias'\]"),
    (lambda w: w.update({"policy/extra": np.zeros(2)}), r"extra \['policy/extra'\]"),
    (lambda w: w.update({"policy/dense_0/kernel": np.zeros((4, 9))}),
     r"wrongly shaped policy/dense_0/kernel: expected \(4, 8\), got \(4, 9\)"),
], ids=["missing", "extra", "misshapen"])
def test_spec_weights_mismatch_names_the_weight(cat_agents, impl, change, message):
    agent = cat_agents[impl]
    weights = init_weights(agent.spec, 0, dtype=agent.config.dtype)
    change(weights)
    with pytest.raises(ValueError, match=message):
        agent_class(impl)(agent.spec, agent.config, weights)
    before = agent.get_weights()
    with pytest.raises(ValueError, match=message):
        agent.set_weights(weights)
    _assert_same_weights(agent.get_weights(), before)


# ----------------------------------------------------------------------- non-finite
def _overflowing(case, dtype):
    """Case-1 weights whose logits overflow to inf: s = [1, 0] gives z = [big + big, ...]."""
    big = np.finfo(dtype).max / 2
    weights = {n: v.copy() for n, v in case.weights.items()}
    weights["policy/head/kernel"] = np.full((2, 2), big)
    return weights


@impls
@dtypes
def test_non_finite_loss_skips_the_update(impl, dtype):
    config = CATEGORICAL.config(dtype, optimizer="adam", learning_rate=0.01)
    batch = batch_of(obs=[[2.0, 1.0], [1.0, 2.0]], actions=[0, 1], rewards=[1.0, -2.0])
    agent = agent_class(impl)(CATEGORICAL.spec, config,
                              _overflowing(CATEGORICAL, dtype))
    fresh = agent_class(impl)(CATEGORICAL.spec, config, CATEGORICAL.weights)
    try:
        before = agent.get_weights()
        metrics = agent.update(batch)
        assert metrics["applied"] is False
        assert not np.isfinite(metrics["loss"])
        _assert_same_weights(agent.get_weights(), before)
        # The optimizer state is untouched too: from the same weights, the next (finite)
        # step is exactly a fresh agent's first step (Adam's step count, moments unchanged).
        agent.set_weights(CATEGORICAL.weights)
        assert agent.update(CATEGORICAL.batch)["applied"] is True
        assert fresh.update(CATEGORICAL.batch)["applied"] is True
        _assert_same_weights(agent.get_weights(), fresh.get_weights())
    finally:
        agent.close()
        fresh.close()


@impls
@dtypes
def test_non_finite_gradients_are_not_applied(impl, dtype):
    config = CATEGORICAL.config(dtype, optimizer="adam", learning_rate=0.01)
    agent = agent_class(impl)(CATEGORICAL.spec, config, CATEGORICAL.weights)
    fresh = agent_class(impl)(CATEGORICAL.spec, config, CATEGORICAL.weights)
    try:
        bad = {n: np.ones_like(w) for n, w in CATEGORICAL.weights.items()}
        bad["policy/head/bias"] = np.array([0.5, np.nan])
        assert agent.apply_gradients(bad) is False
        _assert_same_weights(agent.get_weights(), CATEGORICAL.weights, dtype)
        good = dict(CATEGORICAL.grads)
        assert agent.apply_gradients(good) is True
        assert fresh.apply_gradients(good) is True
        _assert_same_weights(agent.get_weights(), fresh.get_weights())
    finally:
        agent.close()
        fresh.close()


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_the_graph_twins_given_gradient_step_adds_no_variable_and_checkpoints(tmp_path, optimizer):
    # The TF1 twin builds its step for given gradients on first use, after its variables
    # were initialised and its Saver made: that step must add no variable, and a checkpoint
    # written after it must carry the optimizer state a second step reads (Adam's moments
    # and powers: a fresh agent restored from it takes the same second step).
    config = CATEGORICAL.config("float64", optimizer=optimizer, learning_rate=0.01)
    agent = agent_class("graph")(CATEGORICAL.spec, config, CATEGORICAL.weights)
    fresh = agent_class("graph")(CATEGORICAL.spec, config, CATEGORICAL.weights)
    try:
        before = [v.name for v in agent.graph.get_collection("variables")]
        assert agent.apply_gradients(dict(CATEGORICAL.grads)) is True
        assert [v.name for v in agent.graph.get_collection("variables")] == before
        fresh.restore(agent.save(str(tmp_path / "ckpt")))
        assert agent.apply_gradients(dict(CATEGORICAL.grads)) is True
        assert fresh.apply_gradients(dict(CATEGORICAL.grads)) is True
        _assert_same_weights(fresh.get_weights(), agent.get_weights())
    finally:
        agent.close()
        fresh.close()


def _assert_same_weights(actual, expected, dtype=None):
    assert list(actual) == list(expected)
    for name in actual:
        want = expected[name] if dtype is None else np.asarray(expected[name], dtype)
        np.testing.assert_array_equal(actual[name], want, err_msg=name)


@impls
def test_a_box_of_the_float32_range_squashes_to_finite_means(impl):
    # Box(-3.4e38, 3.4e38), the float32 "unbounded" idiom, is finite, so tanh squashes
    # into it; high - low overflowed float32 and the first rollout step met inf params.
    big = float(np.finfo(np.float32).max)
    spec = PolicySpec("gaussian", (3,), 2, hidden=(4,), action_low=(-big, 0.0),
                      action_high=(big, 1.0), squash="tanh")
    agent = agent_class(impl)(spec, ReinforceConfig(), seed=0)
    try:
        params = agent.dist_params(np.array([[0.1, -0.2, 0.3], [5.0, 5.0, -5.0]]))
    finally:
        agent.close()
    assert np.all(np.isfinite(params)), params
    assert np.all(np.abs(params[:, 0]) <= big) and np.all((0 <= params[:, 1]) & (params[:, 1] <= 1))
