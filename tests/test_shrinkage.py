"""``ReinforceConfig.baseline_shrinkage``: the leave-one-out ratio baseline shrunk towards the
leave-one-out mean (``pgtwin_core/baselines/shrinkage.py``), in the numpy reference and in
both twins' TensorFlow path, its config and command-line checks, and the few-episodes warning.

Oracles: a hand-computed case (comments), a direct double loop over the other episodes (the
formula as the module doc writes it, no prefix sums nor expanded squares), and the numpy
reference for the TensorFlow path (float64, 1e-10).
"""
from __future__ import annotations

import argparse
import os
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from pgtwin_core.baseline_memory import EpisodeSums
from pgtwin_core.baselines import EpisodicUpdate
from pgtwin_core.baselines.layout_path import (MIN_EPISODES, FewEpisodesWarning,
                                               few_episodes_message)
from pgtwin_core.baselines.leave_one_out import leave_one_out, per_param_terms, scalar_terms
from pgtwin_core.config import ReinforceConfig
from pgtwin.cli.commands.train import add_parser, settings_from_args
from pgtwin.twins import agent_class

from tests.per_sample_cases import KINDS, random_weights
from tests.test_episodic_tf import assert_close, batches, config_for


class TwoReplicas:
    """``ReplicaSums`` over two local replicas (what an all-reduce of two would return)."""

    num_replicas = 2

    def sum(self, local):
        return [a + b for a, b in zip(*local)]

    def max(self, local):
        return max(local)


def direct(scores: np.ndarray, returns: np.ndarray, prior: EpisodeSums | None, shrinkage,
           scalar: bool) -> np.ndarray:
    """``[E, K]``: each episode's shrunk baseline by a loop over the other episodes."""
    e_count, width = scores.shape
    out = []
    for e in range(e_count):
        o = [j for j in range(e_count) if j != e]
        n = np.sum(scores[o] ** 2, axis=1, keepdims=True) if scalar else scores[o] ** 2
        r = returns[o][:, None]
        m_num, m_den, m_r, m_c = ((0.0, 0.0, 0.0, 0.0) if prior is None else
                                  (prior.num, prior.den, prior.sum_r, prior.count))
        c = m_c + len(o)
        b = (m_num + np.sum(n * r, axis=0)) / (m_den + np.sum(n, axis=0))
        m = (m_r + np.sum(r)) / c
        if shrinkage == "auto":
            nbar = (m_den + np.sum(n, axis=0)) / c
            z = (n / nbar) * (r - b) - (r - m)
            v = np.sum(z ** 2, axis=0) / ((len(o) - 1) * c)
            lam = min(1.0, np.sum(nbar * v) / np.sum(nbar * (b - m) ** 2))
        else:
            lam = shrinkage
        out.append((1 - lam) * b + lam * m)
    return np.array(out)


def test_fixed_shrinkage_by_hand():
    # Scalar, no memory, E = 3: n = ||g_e||^2 = 1, 2, 3 (scores 1, sqrt 2, sqrt 3), R = 1, 2, 4.
    # e=0: b = (2*2 + 3*4) / 5 = 3.2,  m = 3,   lambda 0.25: 0.75*3.2 + 0.25*3 = 3.15
    # e=1: b = (1*1 + 3*4) / 4 = 3.25, m = 2.5:             0.75*3.25 + 0.25*2.5 = 3.0625
    # e=2: b = (1*1 + 2*2) / 3 = 5/3,  m = 1.5:             0.75*5/3 + 0.25*1.5 = 1.625
    scores = np.sqrt(np.array([[1.0], [2.0], [3.0]]))
    terms = scalar_terms(scores, np.array([1.0, 2.0, 4.0]))
    got = leave_one_out(*([t] for t in terms), None, shrinkage=0.25).per_replica[0][:, 0]
    np.testing.assert_allclose(got, [3.15, 3.0625, 1.625], rtol=1e-14)
    # lambda 1 is the leave-one-out mean itself, lambda 0 (and None) the ratio.
    mean = leave_one_out(*([t] for t in terms), None, shrinkage=1.0).per_replica[0][:, 0]
    np.testing.assert_allclose(mean, [3.0, 2.5, 1.5], rtol=1e-14)
    for off in (0, 0.0, None):
        ratio = leave_one_out(*([t] for t in terms), None, shrinkage=off).per_replica[0][:, 0]
        np.testing.assert_allclose(ratio, [3.2, 3.25, 5 / 3], rtol=1e-14)


def test_auto_shrinkage_by_hand():
    # Scalar, no memory, E = 4; episode 0's baseline from e' = 1, 2, 3 only:
    # n = 1, 1, 2, R = 0, 2, 4: b = (0 + 2 + 8) / 4 = 2.5, m = 2, n_bar = 4/3, c = k = 3.
    # z = (n / n_bar)(R - b) - (R - m): 0.75*(-2.5) + 2 = 0.125, 0.75*(-0.5) - 0 = -0.375,
    #     1.5*1.5 - 2 = 0.25;  sum z^2 = 7/32;  V = (7/32) / ((3 - 1) * 3) = 7/192.
    # d = b - m = 0.5: lambda = V / d^2 = 7/48 (n_bar cancels for one element);
    # b_shrunk = 2.5 - (7/48) * 0.5 = 2.5 - 7/96.
    scores = np.sqrt(np.array([[5.0], [1.0], [1.0], [2.0]]))
    terms = scalar_terms(scores, np.array([10.0, 0.0, 2.0, 4.0]))
    got = leave_one_out(*([t] for t in terms), None, shrinkage="auto").per_replica[0][:, 0]
    assert got[0] == pytest.approx(2.5 - 7 / 96, rel=1e-13)


@pytest.mark.parametrize("scalar", (True, False))
@pytest.mark.parametrize("shrinkage", (0.3, "auto"))
@pytest.mark.parametrize("with_memory", (False, True))
def test_shrunk_baselines_equal_a_direct_loop_and_split_over_replicas(scalar, shrinkage,
                                                                      with_memory):
    rng = np.random.default_rng(7)
    size = rng.uniform(0.2, 3.0, size=(9, 1))
    scores = rng.normal(size=(9, 4)) * size
    returns = 4.0 * size[:, 0] ** 2 + rng.normal(size=9) - 20.0  # b* away from the mean
    width = 1 if scalar else 4
    prior = (EpisodeSums(num=rng.uniform(1, 2, width) * -20.0, den=rng.uniform(1, 2, width),
                         sum_r=-41.0, count=2.1) if with_memory else None)
    terms = scalar_terms(scores, returns) if scalar else per_param_terms(scores, returns)
    want = direct(scores, returns, prior, shrinkage, scalar)
    one = leave_one_out(*([t] for t in terms), prior, shrinkage=shrinkage).per_replica[0]
    np.testing.assert_allclose(one, want, rtol=1e-11)
    # The same episodes held by two replicas: the others' sums come through the hook.
    split = [[t[:4] for t in terms], [t[4:] for t in terms]]
    two = leave_one_out(*zip(*split), prior, TwoReplicas(), shrinkage).per_replica
    np.testing.assert_allclose(np.concatenate(two), want, rtol=1e-11)
    if shrinkage == "auto":  # a case that tests the formula: strictly between ratio and mean
        ratio = leave_one_out(*([t] for t in terms), prior).per_replica[0]
        mean = leave_one_out(*([t] for t in terms), prior, shrinkage=1.0).per_replica[0]
        lam = (one - ratio) / (mean - ratio)
        assert np.sum((lam > 0.01) & (lam < 0.99)) >= 3, lam


def test_auto_is_the_mean_below_three_episodes():
    # Two episodes, no memory: one other episode gives no variance estimate, lambda = 1.
    scores, returns = np.array([[1.0, 2.0], [0.5, -1.0]]), np.array([3.0, -2.0])
    terms = per_param_terms(scores, returns)
    got = leave_one_out(*([t] for t in terms), None, shrinkage="auto").per_replica[0]
    np.testing.assert_array_equal(got, [[-2.0, -2.0], [3.0, 3.0]])


def _tf_cases():
    """Every baseline x shrinkage with one twin, alternating so that each twin meets both
    baselines and both forms (suite time: each case is ~10-18 s of XLA compiles); the two
    ``auto`` ones fast, the rest ``slow`` (CI runs them). The twins are held to each other
    with ``auto`` in parity_tests/test_per_sample_parity.py."""
    chosen = {("optimal_scalar_episodic", 0.4): "graph",
              ("optimal_scalar_episodic", "auto"): "eager",
              ("optimal_per_param", 0.4): "eager", ("optimal_per_param", "auto"): "graph"}
    return [pytest.param(i, b, s, marks=() if s == "auto" else pytest.mark.slow)
            for (b, s), i in chosen.items()]


@pytest.mark.parametrize("impl, baseline, shrinkage", _tf_cases())
def test_tensorflow_path_equals_the_numpy_reference(impl, baseline, shrinkage):
    spec = KINDS["categorical_mlp"]
    config = config_for(baseline, baseline_shrinkage=shrinkage)
    weights = random_weights(spec, seed=4)
    # The reference's per-sample gradients and optimizer step, and the unshrunk estimate, run
    # without XLA: they are not under test, and their compiles would double the case's time.
    uncompiled = config.replace(jit_compile=False)
    agent, ref_agent, plain = (agent_class(impl)(spec, c, weights=weights)
                               for c in (config, uncompiled,
                                         uncompiled.replace(baseline_shrinkage=None)))
    ref = EpisodicUpdate(config, spec, ref_agent.weighted_loss, ref_agent.per_sample_gradients,
                         ref_agent.dist_params)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FewEpisodesWarning)  # shrinkage on: no warning
        for step, batch in enumerate(batches(spec)):
            where = f"{impl} {baseline} {shrinkage} update {step}"
            got, want, unshrunk = agent.gradients(batch), ref.gradients(batch), None
            for name in want:
                assert_close(got[name], want[name], f"{where}: gradient {name}")
            if step == 0:  # the shrinkage changes the estimate
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FewEpisodesWarning)  # plain: no shrinkage
                    unshrunk = plain.gradients(batch)
                assert max(np.max(np.abs(unshrunk[n] - want[n])) for n in want) > 1e-6
            assert_close(agent.loss_value(batch), ref.loss_value(batch), f"{where}: loss")
            m, r = agent.update(batch), ref.update(batch)
            assert m["applied"] and r["applied"]
            for key in ("loss", "grad_norm", "entropy", "baseline"):
                assert_close(m[key], r[key], f"{where}: {key}")
            wa, wb = agent.get_weights(), ref_agent.get_weights()
            for name in wa:
                assert_close(wa[name], wb[name], f"{where}: weights {name}")
    for a in (agent, ref_agent, plain):
        a.close()


@pytest.mark.parametrize("value, why", [
    (1.5, "must be None (off), a number in [0, 1] or 'auto'"),
    (-0.1, "must be None (off), a number in [0, 1] or 'auto'"),
    ("Auto", "must be None (off), a number in [0, 1] or 'auto'"),
    (True, "must be None (off), a number in [0, 1] or 'auto'"),
    (float("nan"), "must be None (off), a number in [0, 1] or 'auto'"),
])
def test_config_refuses_a_bad_shrinkage(value, why):
    with pytest.raises(ValueError) as err:
        ReinforceConfig(baseline="optimal_per_param", baseline_shrinkage=value)
    assert str(err.value) == f"ReinforceConfig.baseline_shrinkage={value!r} {why}"


@pytest.mark.parametrize("baseline", ("mean", "optimal_time", "optimal_scalar"))
def test_config_refuses_shrinkage_with_another_baseline(baseline):
    with pytest.raises(ValueError, match=f"baseline_shrinkage=0.5 cannot serve "
                                         f"baseline='{baseline}'.*optimal_scalar_episodic"):
        ReinforceConfig(baseline=baseline, baseline_shrinkage=0.5)
    assert ReinforceConfig(baseline=baseline, baseline_shrinkage=0).baseline_shrinkage == 0


def test_few_episodes_message_names_the_count_the_batch_and_the_fixes():
    msg = few_episodes_message("optimal_per_param", 8, 0.5, 8, 169)
    assert f"from 8 complete episodes in this batch (fewer than {MIN_EPISODES})" in msg
    assert "raise ReinforceConfig.num_envs or num_steps (this batch: 8 envs x 169 steps)" in msg
    assert "baseline_shrinkage='auto'" in msg and "--baseline-shrinkage auto" in msg
    assert "baseline='mean'" in msg


@pytest.mark.parametrize("baseline, shrinkage, warns", [
    ("optimal_per_param", None, True), ("optimal_per_param", "auto", False),
    ("optimal_scalar_episodic", 0.5, False), ("optimal_time", None, False),
])
def test_few_episodes_warn_only_without_the_fix(baseline, shrinkage, warns):
    spec = KINDS["categorical_mlp"]
    config = config_for(baseline, baseline_shrinkage=shrinkage)
    agent = agent_class("graph")(spec, config, weights=random_weights(spec, seed=9))
    batch = batches(spec)[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent.update_path.layout(batch)
    few = [w for w in caught if w.category is FewEpisodesWarning]
    assert len(few) == warns
    if warns:
        assert f"this batch: {batch.num_envs} envs x {batch.num_steps} steps" in str(few[0].message)
    agent.close()


@pytest.mark.parametrize("value, want", [("auto", "auto"), ("0.25", 0.25)])
def test_train_flag_sets_the_config(tmp_path, value, want):
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["train", "--env", "CartPole-v1", "--logdir", str(tmp_path),
                              "--baseline", "optimal_per_param", "--baseline-shrinkage", value])
    settings, _ = settings_from_args(args, parser)
    assert settings.config.baseline_shrinkage == want


@pytest.mark.parametrize("argv, message", [
    (["--baseline", "optimal_per_param", "--baseline-shrinkage", "2"],
     "ReinforceConfig.baseline_shrinkage=2.0 must be None (off), a number in [0, 1] or 'auto'"),
    (["--baseline", "optimal_per_param", "--baseline-shrinkage", "some"],
     "argument --baseline-shrinkage: must be a number, got 'some'"),
    (["--baseline", "mean", "--baseline-shrinkage", "auto"],
     "baseline_shrinkage='auto' cannot serve baseline='mean'"),
])
def test_train_flag_errors(tmp_path, capsys, argv, message):
    from pgtwin.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--env", "CartPole-v1", *argv, "--logdir", str(tmp_path / "run"),
              "--no-progress"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err, err


@pytest.mark.slow
def test_shrunk_estimates_stay_unbiased_and_keep_the_bandits_gain():
    """The test bandit of tests/test_baselines.py (b* away from the mean: the optimal
    baselines measure 20-30 % below the mean's variance there), 300 batches in sequence with
    the default memory: each shrunk estimate's mean equals the mean-baseline estimate's (both
    unbiased: paired over the batches, every element within 4.5 s.e.; tests/test_baselines.py
    checks that one against the exact gradient), and none is noisier than it (paired)."""
    from pgtwin_core.specs import PolicySpec
    from pgtwin.measure.baseline_variance import gradient_estimates, paired_excess
    from tests.test_baselines import bandit_batches

    spec = PolicySpec("categorical", (4,), 2, hidden=(8,))
    weights = random_weights(spec, seed=3, dtype="float64")
    config = ReinforceConfig(dtype="float64", gamma=1.0, normalize_returns=False)
    agent = agent_class("graph")(spec, config, weights=weights)
    batches = bandit_batches(agent, 300, num_envs=32, seed=0)
    agent.close()
    names = ("episodic_mean_memory", "optimal_scalar_episodic@auto", "optimal_per_param@auto",
             "optimal_per_param@0.5")
    estimates = gradient_estimates(spec, config, weights, batches, estimators=names)
    ref = estimates["episodic_mean_memory"]
    for name in names[1:]:
        d = estimates[name] - ref
        sd = d.std(0, ddof=1) / np.sqrt(len(batches))
        z = np.where(sd > 0, d.mean(0) / np.where(sd > 0, sd, 1.0), 0.0)  # 0: identical
        assert np.max(np.abs(z)) < 4.5, (name, np.round(z, 1))
        excess, se = paired_excess(estimates[name], ref)
        assert excess <= 3 * se, (name, excess, se)


def test_shrinkage_check_by_hand():
    from pgtwin.measure.shrinkage_check import first_episode_d_and_v

    # test_auto_shrinkage_by_hand's episodes: d = 2.5 - 2 = 0.5, V = 7/192.
    scores = np.sqrt(np.array([[5.0], [1.0], [1.0], [2.0]]))
    d, v = first_episode_d_and_v(scores, np.array([10.0, 0.0, 2.0, 4.0]))
    assert d == pytest.approx(0.5, rel=1e-14) and v == pytest.approx(7 / 192, rel=1e-14)
    assert first_episode_d_and_v(scores[:2], np.array([1.0, 2.0])) is None  # one other
