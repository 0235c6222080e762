"""The episodic optimal baselines computed in TensorFlow (``pgtwin/mode_agnostic/episodic_baselines.py``)
against the numpy reference (``pgtwin_core.baselines.EpisodicUpdate``), both twins.

The reference is the numpy estimator run on the agent's own ``loop`` per-sample gradients'
twin (``analytic``) in float64, on a second agent with the same weights; both take the same
three batches, so their weights, metrics and memories must agree step by step (1e-10). The
batches have unequal episode lengths (some longer than a 16-step chunk), episodes cut at
both edges of the batch, a horizon that shrinks from one batch to the next (the memory is
then padded), and counts that are not buckets (so the grid carries padding).
"""
from __future__ import annotations

import dataclasses
import os
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from pgtwin_core.baseline_memory import BaselineMemory
from pgtwin_core.baselines import EpisodicUpdate
from pgtwin_core.baselines.episode_layout import CHUNK, episode_layout
from pgtwin_core.baselines.layout_path import (MIN_EPISODES, FewEpisodesWarning, LayoutPath,
                                               few_episodes_message)
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.specs import PolicySpec
from pgtwin.train import run_checkpoint
from pgtwin.twins import agent_class

from tests.graph_ops import compiled_calls, scope_op_types
from tests.per_sample_cases import KINDS, episodic_batch, random_weights

EPISODIC = ("optimal_scalar_episodic", "optimal_per_param", "optimal_time")
SPECS = {**KINDS,
         # One action (Pendulum's, MountainCarContinuous'): the head's and log_std's weights
         # have a trailing axis of 1, whose static size TensorFlow's broadcasting does not
         # keep from an operand of unknown size.
         "gaussian_one_action": PolicySpec("gaussian", (3,), 1, hidden=(16,),
                                           action_low=(-2.0,), action_high=(2.0,),
                                           squash="tanh")}


def batches(spec):
    """Three batches: long episodes (five of the ten over two chunks), then shorter ones (a
    shorter horizon than the memory's), one with an episode cut at the start (its recorded
    length is longer than its part in the batch: started before it). Each holds 10-12
    complete episodes in 16 chunks, so all three share one grid shape (one XLA compile per
    agent): E and K padded to 16, optimal_time's horizon 24."""
    first = episodic_batch(spec, 48, 4, seed=49, mean_length=16.0).batch
    second = episodic_batch(spec, 20, 4, seed=32, mean_length=5.0).batch
    third = episodic_batch(spec, 30, 3, seed=33, mean_length=6.0).batch
    lengths = third.episode_lengths.copy()
    lengths[0] += 3  # the earliest end is an env's first episode, from t = 0: now cut
    return [first, second, dataclasses.replace(third, episode_lengths=lengths)]


def config_for(baseline, **kw):
    return ReinforceConfig(**{"dtype": "float64", "baseline": baseline, "baseline_memory": 0.7,
                              "gamma": 0.9, "entropy_coef": 0.01, "max_grad_norm": 5.0,
                              "learning_rate": 0.05, "num_envs": 3, "num_steps": 48, **kw})


def assert_close(got, want, what):
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=what)


def _reference_cases():
    """Every baseline x kind with one twin, alternating, so that each twin meets every baseline
    and kind (suite time: each case is ~5-14 s of XLA compiles).
    parity_tests/test_per_sample_parity.py holds the other twin to this one for every baseline
    with memory (float64 within 1e-9 relative). The path runs under XLA in four cases (each
    twin twice, each kind) and with ``jit_compile=False`` in two, one per twin. A Gaussian
    policy with one action adds three cases: ``optimal_time`` in each twin (its loop once
    failed to trace there), ``optimal_per_param`` in one."""
    cases = [(b, k) for k in ("categorical_mlp", "gaussian_mlp") for b in EPISODIC]
    one_action = [pytest.param(impl, b, "gaussian_one_action", xla, marks=pytest.mark.slow)
                  for impl, b, xla in [("graph", "optimal_time", True),
                                       ("eager", "optimal_time", False),
                                       ("eager", "optimal_per_param", True)]]
    return [pytest.param(("graph", "eager")[i % 2], b, k, (i // 2) % 2 == 0,
                         marks=pytest.mark.slow if k == "gaussian_mlp" else ())
            for i, (b, k) in enumerate(cases)] + one_action


@pytest.mark.parametrize("impl,baseline,kind,xla", _reference_cases())
def test_tensorflow_path_equals_the_numpy_reference(impl, baseline, kind, xla):
    spec = SPECS[kind]
    config = config_for(baseline, normalize_returns=not spec.is_discrete, jit_compile=xla)
    weights = random_weights(spec, seed=4)
    agent = agent_class(impl)(spec, config, weights=weights)
    # The reference's per-sample gradients and optimizer step without XLA: nothing of it is
    # under test, and its compiles would be most of this test's time.
    ref_agent = agent_class(impl)(spec, dataclasses.replace(config, jit_compile=False),
                                  weights=weights)
    assert isinstance(agent.update_path, LayoutPath)  # the TensorFlow path is the default
    ref = EpisodicUpdate(config, spec, ref_agent.weighted_loss, ref_agent.per_sample_gradients,
                         ref_agent.dist_params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewEpisodesWarning)
        for step, batch in enumerate(batches(spec)):
            where = f"{impl} {baseline} {kind} update {step}"
            got, want = agent.gradients(batch), ref.gradients(batch)
            for name in want:
                assert_close(got[name], want[name], f"{where}: gradient {name}")
            assert_close(agent.loss_value(batch), ref.loss_value(batch), f"{where}: loss")
            m, r = agent.update(batch), ref.update(batch)
            assert m["applied"] and r["applied"] and m["episodes"] == r["episodes"]
            for key in ("loss", "grad_norm", "entropy", "baseline"):
                assert_close(m[key], r[key], f"{where}: {key}")
            mine, theirs = agent.baseline_memory.state(), ref.memory.state()
            assert mine.keys() == theirs.keys() == {"num", "den", "sum_r", "count"}
            for key in theirs:
                assert_close(mine[key], theirs[key], f"{where}: memory.{key}")
            wa, wb = agent.get_weights(), ref_agent.get_weights()
            for name in wa:
                assert_close(wa[name], wb[name], f"{where}: weights {name}")
    agent.close()
    ref_agent.close()


def test_the_grid_pads_chunks_and_episodes_with_nothing_that_counts():
    spec = KINDS["categorical_mlp"]
    batch = batches(spec)[0]
    config = config_for("optimal_per_param")
    layout = episode_layout(batch, config, spec, one_chunk_per_episode=False)
    # Hand count: each episode fills ceil(T_e / 16) chunks, the rest of the grid is empty.
    ends = (batch.terminated | batch.truncated) & batch.valid
    lengths = np.asarray(batch.episode_lengths)
    assert layout.num_episodes == ends.sum() == lengths.size
    assert layout.mask.sum() == layout.num_steps == lengths.sum()
    assert layout.mask.shape[1] == CHUNK
    assert layout.mask.shape[0] >= int(np.sum(-(-lengths // CHUNK)))
    assert np.all(layout.discounted_rewards[layout.mask == 0] == 0)
    assert np.all(layout.returns[layout.num_episodes:] == 0)
    time = episode_layout(batch, config, spec, one_chunk_per_episode=True, min_horizon=40)
    assert time.mask.shape[1] >= max(40, int(lengths.max()))
    # Each episode's row holds its own steps from l = 0 on: T_e ones, then zeros.
    rows = time.mask[:time.num_episodes]
    assert all(np.all(r[:int(r.sum())] == 1) and np.all(r[int(r.sum()):] == 0) for r in rows)
    assert sorted(rows.sum(axis=1).astype(int)) == sorted(lengths.tolist())


@pytest.mark.parametrize("impl", ("graph", "eager"))
def test_memory_variables_travel_with_the_agent_checkpoint(impl, tmp_path):
    spec = KINDS["categorical_mlp"]
    config = config_for("optimal_time", jit_compile=False)  # about the variables, not XLA
    agent = agent_class(impl)(spec, config, weights=random_weights(spec, seed=5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewEpisodesWarning)
        assert agent.update(batches(spec)[0])["applied"]
    state = agent.baseline_memory.state()
    assert state["count"] > 0 and state["num"].shape[0] == agent.baseline_memory.horizon
    agent.save(str(tmp_path / "ckpt"))
    fresh = agent_class(impl)(spec, config, weights=random_weights(spec, seed=6))
    assert fresh.baseline_memory.state() == {}
    fresh.restore(str(tmp_path / "ckpt"))
    for key, value in fresh.baseline_memory.state().items():
        np.testing.assert_array_equal(value, state[key], err_msg=key)
    agent.close()
    fresh.close()


@pytest.mark.parametrize("impl,xla", [("graph", False), ("eager", True)])
def test_an_update_after_the_memory_was_restored_behind_the_paths_back(impl, xla, tmp_path):
    """``optimal_time``'s record of the memory's rows (``HeldMemory.held_rows``) goes stale
    when a checkpoint is restored into an agent that has updated: here it says 16 rows and
    horizon 12 (the third batch's grid) while the restored variables hold 24 rows and horizon
    23 (the first batch's). Laid out for the record, the update would cut the memory to 16
    rows; the computation finds the mismatch, applies nothing, and the path updates again
    from a fresh read. The oracle is the agent the checkpoint came from, updated on the
    same batch: the same twin from the same state, so metrics, weights and memory agree."""
    spec = KINDS["categorical_mlp"]
    config = config_for("optimal_time", jit_compile=xla)
    first, _, third = batches(spec)
    source = agent_class(impl)(spec, config, weights=random_weights(spec, seed=9))
    stale = agent_class(impl)(spec, config, weights=random_weights(spec, seed=10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewEpisodesWarning)
        assert source.update(first)["applied"]
        source.save(str(tmp_path / "ckpt"))
        assert stale.update(third)["applied"]
        assert stale.update_path.memory.held_rows() == (16, 12)
        stale.restore(str(tmp_path / "ckpt"))
        got, want = stale.update(third), source.update(third)
    assert got["applied"] and want["applied"]
    for key in ("loss", "grad_norm", "entropy", "baseline"):
        assert_close(got[key], want[key], f"{impl}: {key}")
    for name, value in source.get_weights().items():
        assert_close(stale.get_weights()[name], value, f"{impl}: weights {name}")
    mine, theirs = stale.baseline_memory.state(), source.baseline_memory.state()
    assert mine["num"].shape[0] == 23
    for key in theirs:
        assert_close(mine[key], theirs[key], f"{impl}: memory.{key}")
    assert stale.update_path.memory.held_rows() == (24, 23)
    source.close()
    stale.close()


def test_a_non_finite_update_under_xla_changes_no_weight_moment_or_memory():
    """The graph twin runs its guarded Adam step inside the update's XLA cluster: a step whose
    scores are not finite (a head of 1e308: infinite logits) must change no weight, no Adam
    moment or step count and no memory sum. The oracle is a second agent that took the same
    first update and never met the bad one: after the weights are set back, both take the
    same next update, which a moved moment or step count would make differ (by ~1e-2
    relative: Adam's bias correction of step 2 against step 3)."""
    spec = KINDS["categorical_mlp"]
    config = config_for("optimal_time", jit_compile=True)
    first, second, _ = batches(spec)
    agent, fresh = (agent_class("graph")(spec, config, weights=random_weights(spec, seed=11))
                    for _ in range(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewEpisodesWarning)
        assert agent.update(first)["applied"] and fresh.update(first)["applied"]
        weights, memory = agent.get_weights(), agent.baseline_memory.state()
        bad = {**weights, "policy/head/kernel": weights["policy/head/kernel"] * 1e308}
        agent.set_weights(bad)
        with np.errstate(all="ignore"):
            assert not agent.update(second)["applied"]
        for name, value in agent.get_weights().items():
            np.testing.assert_array_equal(value, bad[name], err_msg=name)
        for key, value in agent.baseline_memory.state().items():
            np.testing.assert_array_equal(value, memory[key], err_msg=f"memory.{key}")
        agent.set_weights(weights)
        assert agent.update(second)["applied"] and fresh.update(second)["applied"]
    for name, value in fresh.get_weights().items():
        assert_close(agent.get_weights()[name], value, f"weights {name}")
    for key, value in fresh.baseline_memory.state().items():
        assert_close(agent.baseline_memory.state()[key], value, f"memory.{key}")
    agent.close()
    fresh.close()


@pytest.mark.parametrize("xla", (True, False))
def test_the_graph_twin_updates_in_one_compiled_call_and_estimates_in_another(xla):
    """Under ``jit_compile`` the graph twin's episodic update is one call, in its graph, of a
    function marked for XLA (the estimate and the guarded Adam step: no MatMul of the forward
    and backward pass left in the graph itself), and ``gradients`` builds a second one, the
    estimate alone, on first use. Without ``jit_compile`` nothing is compiled and the MatMuls
    are in the graph itself. (That the Adam step inside the call is guarded is
    ``test_a_non_finite_update_under_xla_changes_no_weight_moment_or_memory``'s.)"""
    spec = KINDS["categorical_mlp"]
    agent = agent_class("graph")(spec, config_for("optimal_time", jit_compile=xla),
                                 weights=random_weights(spec, seed=3))
    first = batches(spec)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewEpisodesWarning)
        agent.update(first)
        steps = compiled_calls(agent.graph, "episodic")
        agent.gradients(first)
    calls, outer = compiled_calls(agent.graph, "episodic"), scope_op_types(agent.graph, "episodic")
    if xla:
        named = [c.rsplit("_", 1)[0] for c in calls]  # the trace's number dropped
        assert len(steps) == 1 and steps[0] == calls[0], (steps, calls)
        assert named == ["__inference_episodic_step", "__inference_episodic_estimate"], calls
        assert "MatMul" not in outer, outer
    else:
        assert not calls and "MatMul" in outer, (calls, outer)
    agent.close()


@pytest.mark.parametrize("impl", ("graph", "eager"))
def test_an_old_run_directory_resumes_its_memory_from_the_npz(impl, tmp_path):
    """Before the memory was the agent's, ``agent/`` held only the policy and the optimizer
    (the layout of any other baseline's agent) and ``baseline_memory.npz`` the sums."""
    spec = KINDS["categorical_mlp"]
    config = config_for("optimal_per_param")
    old = agent_class(impl)(spec, dataclasses.replace(config, baseline="mean"),
                            weights=random_weights(spec, seed=7))
    run_checkpoint.save_agent(str(tmp_path), old)
    memory = BaselineMemory(0.7)
    width = sum(int(np.prod(s)) for s in spec.weight_shapes().values())
    sums = {"num": np.linspace(0.5, 2.0, width), "den": np.linspace(1.0, 3.0, width),
            "sum_r": np.float64(4.5), "count": np.float64(2.5)}
    memory.load_state(sums)
    np.savez(os.path.join(str(tmp_path), run_checkpoint.BASELINE_MEMORY), **memory.state())
    agent = agent_class(impl)(spec, config, weights=random_weights(spec, seed=8))
    run_checkpoint.restore_agent(str(tmp_path), agent)
    for name, value in old.get_weights().items():
        np.testing.assert_array_equal(agent.get_weights()[name], value, err_msg=name)
    for key, value in agent.baseline_memory.state().items():
        np.testing.assert_array_equal(value, sums[key], err_msg=key)
    with pytest.raises(ValueError, match=r"x.npz: sums of shapes \(num, sum_r\) \(\(3,\), \(\)\) "
                                         r"do not fit this agent's baseline \(vector"):
        agent.baseline_memory.load_state({**sums, "num": np.ones(3), "den": np.ones(3)},
                                         where="x.npz")
    old.close()
    agent.close()


@pytest.mark.parametrize("impl", ("graph", "eager"))
def test_no_memory_kept_at_decay_zero_and_few_episodes_warn_once(impl):
    spec = KINDS["categorical_mlp"]
    config = config_for("optimal_scalar_episodic", baseline_memory=0.0, jit_compile=False)
    agent = agent_class(impl)(spec, config, weights=random_weights(spec, seed=9))
    batch = batches(spec)[1]
    with pytest.warns(FewEpisodesWarning) as caught:
        assert agent.update(batch)["applied"]
        assert agent.update(batch)["applied"]
    # Only this category: pytest.warns records every warning raised inside it (a TF or Keras
    # one, a ResourceWarning from a collected object), and those need not come first or at all.
    few = [w for w in caught if w.category is FewEpisodesWarning]
    assert len(few) == 1
    count = int(((batch.terminated | batch.truncated) & batch.valid).sum())
    assert str(few[0].message) == few_episodes_message("optimal_scalar_episodic", count, 0.0,
                                                       batch.num_envs, batch.num_steps)
    assert agent.baseline_memory.state() == {} and agent.baseline_memory.sums is None
    agent.close()


def test_few_episodes_message_names_the_count_and_the_fixes():
    msg = few_episodes_message("optimal_per_param", 8, 0.5)
    assert f"from 8 complete episodes in this batch (fewer than {MIN_EPISODES})" in msg
    assert "ReinforceConfig.num_envs" in msg and "baseline_memory, now 0.5" in msg


@pytest.mark.parametrize("fused", (True, False))
@pytest.mark.parametrize("width", ((12, 10), (5, 2)), ids=("wide", "narrow"))
def test_chunk_scores_equal_the_sum_of_the_steps_outer_products(fused, width):
    import tensorflow as tf

    from pgtwin.mode_agnostic.episodic_baselines import chunk_scores
    rng = np.random.default_rng(7)
    a = rng.standard_normal((6, 4, width[0]))
    d = rng.standard_normal((6, 4, width[1]))
    # Oracle: chunk k's score is the sum over its C = 4 steps of a_c^T d_c (outer products).
    want = sum(a[:, c, :, None] * d[:, c, None, :] for c in range(4))
    got = chunk_scores(tf.constant(a), tf.constant(d), fused).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_chunk_scores_without_xla_write_no_per_step_product_of_a_wide_kernel():
    import tensorflow as tf

    from pgtwin.mode_agnostic.episodic_baselines import NARROW, chunk_scores
    wide = NARROW + 1
    graph = tf.function(lambda a, d: chunk_scores(a, d, fused=False)).get_concrete_function(
        tf.TensorSpec([None, 16, wide], tf.float32),
        tf.TensorSpec([None, 16, wide + 3], tf.float32)).graph
    # Without XLA every op's output is a buffer: a [K, C, in, out] one would hold C times the
    # chunk scores (at B = 2048 and a 256 x 256 kernel, 512 MiB).
    ranks = {t.shape.rank for op in graph.get_operations() for t in op.outputs}
    assert 4 not in ranks, ranks
