"""The ``cached`` update path of both twins: no second forward pass, refusal of batches it did
not record, and no silent None/zero gradient (seed 000's bug).

Gradient parity with the recompute path is in ``parity_tests/test_update_paths.py``.
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import tensorflow as tf

from pgtwin_core.errors import DisconnectedGradientError, RecordingMismatchError
from pgtwin_core.envs import make_vec_env
from pgtwin_core.loop import iterate_training
from pgtwin_core.rollout import collect
from pgtwin.mode_agnostic import forward_pass
from pgtwin.twins import IMPLS, twin_module
from tests.update_path_cases import (CASES, NUM_ENVS, NUM_STEPS, agent, config, envs_for,
                                     recorded_batch)

CATEGORICAL, GAUSSIAN = CASES["categorical_mlp"], CASES["gaussian_mlp"]


def count_forward_rows(impl: str, monkeypatch) -> list[int]:
    """Make every *run* of the twin's forward pass append its batch size to the returned list.

    ``forward_pass.dist_params`` (both twins' forward pass) is wrapped (before any agent
    builds or traces it) so the graph or ``tf.function`` it ends up in holds a ``numpy_function`` counter that every run of
    the pass must execute: the list counts runs, not traces.
    """
    original = forward_pass.dist_params
    rows: list[int] = []

    def count(n):
        rows.append(int(n))
        return np.int64(0)

    def counted_dist_params(spec, w, obs):
        params = original(spec, w, obs)
        ran = tf.numpy_function(count, [tf.shape(obs)[0]], tf.int64, stateful=True)
        with tf.control_dependencies([ran]):
            return tf.identity(params)

    monkeypatch.setattr(forward_pass, "dist_params", counted_dist_params)
    return rows


@pytest.mark.parametrize("impl", IMPLS)
def test_cached_update_runs_no_forward_pass_over_the_batch(impl, monkeypatch):
    rows = count_forward_rows(impl, monkeypatch)
    seen = {}
    for path in ("recompute", "cached"):
        # XLA cannot compile the counter (a py_func) into the recompute update: count eagerly.
        a = agent(impl, CATEGORICAL, config(path).replace(jit_compile=False))
        envs, state = envs_for(CATEGORICAL), None
        for step in range(2):
            before = a.get_weights()
            rows.clear()
            batch, state = recorded_batch(a, envs, seed=step, state=state)
            assert rows == [NUM_ENVS] * NUM_STEPS  # the rollout: T passes of N rows
            rows.clear()
            assert a.update(batch)["applied"]
            seen[path, step] = list(rows)
            after = a.get_weights()
            assert any(not np.array_equal(before[n], after[n]) for n in before)
        if impl == "eager" and path == "cached":
            assert a.update_path.loss_fn.experimental_get_tracing_count() == 1
    # The counter does see recompute's redundant pass over the T*N = 5*3 batch rows ...
    assert seen["recompute", 0] == seen["recompute", 1] == [NUM_STEPS * NUM_ENVS]
    # ... and the cached update runs no forward pass at all.
    assert seen["cached", 0] == seen["cached", 1] == []


@pytest.mark.parametrize("impl", IMPLS)
def test_cached_update_refuses_a_batch_it_did_not_record(impl):
    a = agent(impl, CATEGORICAL, config("cached"))
    envs = envs_for(CATEGORICAL)
    other, _ = recorded_batch(agent(impl, CATEGORICAL, config("recompute")), envs_for(CATEGORICAL))
    with pytest.raises(RecordingMismatchError, match="no rollout was recorded"):
        a.update(other)
    with pytest.raises(RecordingMismatchError, match="no rollout was recorded"):
        a.gradients(other)

    batch, state = recorded_batch(a, envs)
    obs = batch.obs.copy()
    obs[2, 1, 0] += 1.0
    with pytest.raises(RecordingMismatchError, match="first at step t=2, env n=1"):
        a.update(dataclasses.replace(batch, obs=obs))
    first_half = dataclasses.replace(batch, obs=batch.obs[:2], actions=batch.actions[:2],
                                     rewards=batch.rewards[:2], terminated=batch.terminated[:2],
                                     truncated=batch.truncated[:2], valid=batch.valid[:2])
    with pytest.raises(RecordingMismatchError, match=r"batch holds 6 steps .* T\*N = 5\*3 = 15"):
        a.update(first_half)
    weights = a.get_weights()
    a.set_weights({n: w + 0.5 for n, w in weights.items()})
    with pytest.raises(RecordingMismatchError, match="changed between the rollout and the update"):
        a.update(batch)
    a.set_weights(weights)
    # A refused batch leaves the recording usable: the right batch still trains, once.
    assert a.update(batch)["applied"]
    with pytest.raises(RecordingMismatchError, match="already used"):
        a.update(batch)

    # The rollout must be exactly config.num_steps long, from config.num_envs envs.
    batch, _ = collect(envs_for(CATEGORICAL), a.rollout_policy(), a.spec, NUM_STEPS - 1, np.random.default_rng(0))
    with pytest.raises(RecordingMismatchError, match="holds 4 of ReinforceConfig.num_steps=5"):
        a.update(batch)
    with pytest.raises(RecordingMismatchError, match="num_steps=5 steps and was called for step 5"):
        collect(envs_for(CATEGORICAL), a.rollout_policy(), a.spec, NUM_STEPS + 1,
                np.random.default_rng(0))
    with pytest.raises(RecordingMismatchError, match="got 2 observations .*num_envs=3"):
        collect(make_vec_env("CartPole-v1", 2), a.rollout_policy(), a.spec, NUM_STEPS,
                np.random.default_rng(0))


@pytest.mark.parametrize("impl", IMPLS)
def test_a_new_rollout_discards_the_unfinished_one_without_applying_it(impl):
    a = agent(impl, CATEGORICAL, config("cached"))
    weights = a.get_weights()
    first = a.rollout_policy()
    obs = np.zeros((NUM_ENVS, 4), np.float32)
    first(obs)
    first(obs)
    second = a.rollout_policy()
    after = a.get_weights()
    assert all(np.array_equal(weights[n], after[n]) for n in weights)
    with pytest.raises(RecordingMismatchError, match="already used"):
        first(obs)
    batch, _ = collect(envs_for(CATEGORICAL), second, a.spec, NUM_STEPS, np.random.default_rng(0))
    assert a.update(batch)["applied"]


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("impl", IMPLS)
def test_non_finite_loss_skips_the_cached_update_like_the_recompute_one(impl):
    # Rewards of 1e39 give float32 advantages of inf (max float32 ~3.4e38), so the loss is
    # not finite: both paths must skip the step and report applied=False.
    metrics, unchanged = {}, {}
    for path in ("cached", "recompute"):
        a = agent(impl, CATEGORICAL, config(path, "float32", normalize_returns=False))
        weights = a.get_weights()
        batch, _ = recorded_batch(a, envs_for(CATEGORICAL))
        metrics[path] = a.update(dataclasses.replace(batch, rewards=np.full_like(batch.rewards, 1e39)))
        after = a.get_weights()
        unchanged[path] = all(np.array_equal(weights[n], after[n]) for n in weights)
    assert unchanged == {"cached": True, "recompute": True}
    assert not metrics["cached"]["applied"] and not metrics["recompute"]["applied"]
    assert not np.isfinite(metrics["cached"]["loss"]) and not np.isfinite(metrics["recompute"]["loss"])


def check_seed_000_loss(impl: str, a, batch) -> None:
    """Seed 000's loss: the rollout's log-probs as numpy (here ``batch.log_probs``, which
    ``collect`` computed from the numpy params) times the advantages, handed to the twin's
    ``checked_gradients``, the guard every update path goes through."""
    agent_module = twin_module(impl, "gradient_step")
    adv = a.inputs(batch).advantages
    log_probs = batch.log_probs.reshape(-1).astype(adv.dtype)
    if impl == "graph":
        with a.graph.as_default():
            loss = -tf.reduce_mean(tf.constant(log_probs) * adv)
            agent_module.checked_gradients(loss, a.variables)
        return
    with tf.GradientTape() as tape:
        loss = -tf.reduce_mean(tf.constant(log_probs) * adv)
    agent_module.checked_gradients(tape, loss, a.variables)


@pytest.mark.parametrize("impl", IMPLS)
def test_seed_000_numpy_log_probs_raise_disconnected_gradient_naming_every_variable(impl):
    a = agent(impl, CATEGORICAL, config("cached"))
    batch, _ = recorded_batch(a, envs_for(CATEGORICAL))
    with pytest.raises(DisconnectedGradientError) as err:
        check_seed_000_loss(impl, a, batch)
    assert err.value.variables == list(a.variables)
    assert "policy/dense_0/kernel" in str(err.value)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_loss_missing_the_head_names_exactly_the_head_variables(impl):
    # A loss of the torso's features alone (the head forgotten) reaches dense_0 and dense_1;
    # the head's kernel and bias get None, and only they must be named. (Slicing the
    # params instead would not do: concat and split send zeros, not None, to the other part.)
    a = agent(impl, GAUSSIAN, config("recompute"))
    agent_module = twin_module(impl, "gradient_step")
    obs = np.zeros((2, 3), a.config.dtype)
    with pytest.raises(DisconnectedGradientError) as err:
        if impl == "graph":
            with a.graph.as_default():
                loss = tf.reduce_sum(forward_pass.torso(a.spec, a.variables, obs))
                agent_module.checked_gradients(loss, a.variables)
        else:
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(forward_pass.torso(a.spec, a.variables, obs))
            agent_module.checked_gradients(tape, loss, a.variables)
    assert err.value.variables == ["policy/head/kernel", "policy/head/bias", "policy/log_std"]


def test_eager_cached_update_on_detached_recorded_params_raises_not_a_zero_step():
    # Seed 000's mistake inside the cached path: the recorded params replaced by their numpy
    # values (what the rollout's policy_fn hands out). The update must refuse, not apply 0.
    a = agent("eager", CATEGORICAL, config("cached"))
    batch, _ = recorded_batch(a, envs_for(CATEGORICAL))
    recording = a.update_path.pending
    recording.params[:] = [tf.constant(p.numpy()) for p in recording.params]
    weights = a.get_weights()
    with pytest.raises(DisconnectedGradientError) as err:
        a.update(batch)
    assert err.value.variables == list(a.variables)
    after = a.get_weights()
    assert all(np.array_equal(weights[n], after[n]) for n in weights)


@pytest.mark.parametrize("impl", IMPLS)
def test_training_loop_trains_identically_with_either_path(impl):
    """Three iterations of ``iterate_training``: same episodes, losses and weights (float64)."""
    runs = {}
    for path in ("recompute", "cached"):
        a = agent(impl, CATEGORICAL, config(path))
        its = list(itertools.islice(
            iterate_training(a, envs_for(CATEGORICAL), np.random.default_rng(7)), 3))
        runs[path] = (a.get_weights(), [it.metrics for it in its], its[-1].batch.actions)
    (w_r, m_r, act_r), (w_c, m_c, act_c) = runs["recompute"], runs["cached"]
    np.testing.assert_array_equal(act_r, act_c)
    for mr, mc in zip(m_r, m_c):
        assert mc["applied"] and mr["applied"]
        np.testing.assert_allclose(mc["loss"], mr["loss"], rtol=1e-9)
    for n in w_r:
        np.testing.assert_allclose(w_c[n], w_r[n], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("baseline", ["optimal_scalar", "optimal_per_param"])
def test_cached_path_refuses_the_per_sample_baselines_at_config_time(baseline):
    with pytest.raises(ValueError, match=f"update_path='cached' cannot serve baseline='{baseline}'"):
        config("cached", baseline=baseline)
