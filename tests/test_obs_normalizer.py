"""Observation normalisation: numpy oracles for the running statistics, the loop's order of
normalising and merging, and identical normalised batches in both twins."""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin_core.envs import make_vec_env
from pgtwin_core.loop import iterate_training
from pgtwin_core.obs_normalizer import EPS, ObsNormalizer
from pgtwin_core.specs import init_weights
from pgtwin.parity.twin_parity import get_policy_kind, ladder_config
from pgtwin.twins import agent_class


def test_merged_statistics_are_those_of_all_the_data():
    rng = np.random.default_rng(0)
    chunks = [rng.normal(3.0, 2.0, size=(n, 3)) * [1, 10, 0.1] for n in (1, 7, 50, 400)]
    norm = ObsNormalizer(3)
    for c in chunks:
        norm.update(c)
    every = np.concatenate(chunks)
    assert norm.count == every.shape[0]
    np.testing.assert_allclose(norm.mean, every.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(norm.var, every.var(axis=0), rtol=1e-12)
    norm.update(np.zeros((0, 3)))  # nothing to merge: unchanged
    assert norm.count == every.shape[0]


def test_normalise_and_clip_by_hand():
    norm = ObsNormalizer(2, clip=2.0)
    norm.update(np.array([[0.0, 10.0], [2.0, 10.0]]))   # mean (1, 10), var (1, 0)
    out = norm(np.array([[3.0, 10.0], [-9.0, 11.0]]))
    # (3 - 1) / sqrt(1 + eps) = 2 (- a hair); (-9 - 1) -> -10 clipped to -2;
    # (10 - 10) / sqrt(eps) = 0; (11 - 10) / sqrt(1e-8) = 1e4 clipped to 2.
    np.testing.assert_allclose(out, [[2.0 / np.sqrt(1 + EPS), 0.0], [-2.0, 2.0]])
    # A history window [M, K, obs_dim] is normalised feature by feature.
    window = np.array([[[1.0, 10.0], [2.0, 10.0]]])
    np.testing.assert_allclose(norm(window), [[[0.0, 0.0], [1 / np.sqrt(1 + EPS), 0.0]]])


def test_state_round_trip_and_refusals():
    norm = ObsNormalizer(3, clip=5.0)
    norm.update(np.random.default_rng(1).normal(size=(20, 3)))
    other = ObsNormalizer(3, clip=5.0)
    other.load_state(norm.state(), where="x.npz")
    assert (other.count, other.mean.tolist(), other.var.tolist()) == \
        (norm.count, norm.mean.tolist(), norm.var.tolist())
    with pytest.raises(ValueError, match="x.npz: observation statistics for \\(3,\\) features; "
                                         "this run's observations have 4"):
        ObsNormalizer(4, clip=5.0).load_state(norm.state(), where="x.npz")
    with pytest.raises(ValueError, match="saved with obs_norm_clip=5.0, this run has 10.0"):
        ObsNormalizer(3).load_state(norm.state(), where="x.npz")
    with pytest.raises(ValueError, match="lack \\['var'\\]"):
        other.load_state({k: v for k, v in norm.state().items() if k != "var"}, where="x.npz")
    bad = {**norm.state(), "mean": np.array([0.0, np.nan, 0.0])}
    with pytest.raises(ValueError, match="not finite"):
        other.load_state(bad, where="x.npz")


def _two_iterations(impl: str, dtype: str):
    kind = get_policy_kind("gaussian_tanh_mlp")
    envs = make_vec_env(kind.env_id, 4, seed=3)
    spec = kind.spec(envs)
    agent = agent_class(impl)(spec, ladder_config(dtype, num_steps=16),
                              init_weights(spec, 0, dtype=dtype))
    norm = ObsNormalizer(spec.obs_dim)
    seen = []
    agent_policy = agent.rollout_policy

    def recording_policy():  # what the policy is fed, call by call
        inner = agent_policy()
        return lambda obs: (seen.append(np.array(obs)), inner(obs))[1]

    agent.rollout_policy = recording_policy
    loop = iterate_training(agent, envs, np.random.default_rng(3), normalizer=norm)
    out = [next(loop) for _ in range(2)]
    stats = norm.state()
    envs.close()
    agent.close()
    return out, seen, stats


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_loop_normalises_with_frozen_statistics_identically_in_both_twins(dtype):
    (g1, g2), g_seen, g_stats = _two_iterations("graph", dtype)
    (e1, e2), e_seen, e_stats = _two_iterations("eager", dtype)
    # The first rollout sees the identity statistics (mean 0, var 1): obs / sqrt(1 + eps).
    raw1 = make_vec_env("Pendulum-v1", 4, seed=3)
    first, _ = raw1.reset(seed=3)
    raw1.close()
    np.testing.assert_allclose(g1.batch.obs[0], first / np.sqrt(1 + EPS), rtol=1e-6)
    # What the policy saw is what the batch holds, call by call.
    np.testing.assert_array_equal(np.stack(g_seen[:16]), g1.batch.obs)
    # The second rollout is normalised with the first batch's raw valid observations.
    raw_first = g1.batch.obs[g1.batch.valid] * np.sqrt(1 + EPS)
    mean, var = raw_first.mean(axis=0), raw_first.var(axis=0)
    raw_next = g1.batch.next_obs * np.sqrt(1 + EPS)  # batch 2 starts where batch 1 ended
    np.testing.assert_allclose(g2.batch.obs[0], (raw_next - mean) / np.sqrt(var + EPS),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.stack(g_seen[16:]), g2.batch.obs)
    assert g_stats["count"] == g1.batch.num_valid + g2.batch.num_valid
    # Both twins: identical statistics; the same normalised first batch (same weights and
    # seed), and the same second while their float rounding has not parted the actions.
    for k in g_stats:
        np.testing.assert_allclose(g_stats[k], e_stats[k], rtol=1e-4 if dtype == "float32" else 1e-9)
    if dtype == "float64":
        np.testing.assert_array_equal(g1.batch.obs, e1.batch.obs)
    else:  # the eager rollout's XLA forward pass rounds the Gaussian mean its own way (1 ulp)
        np.testing.assert_allclose(g1.batch.obs, e1.batch.obs, rtol=0, atol=1e-6)


@pytest.mark.parametrize("raw", [np.uint8, np.int32, np.int64])
def test_integer_observations_are_normalised_to_floats_not_cast_back(raw):
    # Cast back to the env's dtype, (obs - mean) / std was truncated to whole numbers and
    # a negative value wrapped around to 255 in uint8: the policy and the update saw those.
    norm = ObsNormalizer(obs_dim=3)
    norm.update(np.array([[1, 0, 1], [3, 2, 1]], dtype=raw))
    # by hand: mean [2, 1, 1], population var [1, 1, 0]
    obs = np.array([[3, 2, 1], [1, 0, 1]], dtype=raw)
    expected = np.array([[1.0, 1.0, 0.0], [-1.0, -1.0, 0.0]]) / np.sqrt([1 + EPS, 1 + EPS, EPS])
    expected[:, 2] = 0.0
    seen = []
    norm.wrap(lambda o: seen.append(o) or np.zeros((2, 2)))(obs)
    np.testing.assert_allclose(seen[0], expected, rtol=1e-7)
    assert seen[0].dtype == np.float64


def test_float32_observations_stay_float32():
    norm = ObsNormalizer(obs_dim=2)
    seen = []
    norm.wrap(lambda o: seen.append(o) or np.zeros((1, 2)))(np.ones((1, 2), np.float32))
    assert seen[0].dtype == np.float32
