"""Optimal baselines: episode segmentation, each formula against a hand case and a slow numpy
oracle, and every baseline of both twins against the oracle fed from the ``loop`` gradients.

The oracles below are written from the formulas (module doc of ``pgtwin_core.baselines``) with
explicit loops and padded arrays; they share no code with the library beyond the batch
arrays and ``pgtwin_core.advantages.training_inputs`` (the per-step returns, tested elsewhere).
"""
from __future__ import annotations

import dataclasses
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from pgtwin_core import baselines as bl
from pgtwin_core.advantages import training_inputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.errors import NoCompleteEpisodeError
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec
from pgtwin.twins import agent_class

from tests.per_sample_cases import KINDS, episodic_batch, random_weights

TWINS = ("graph", "eager")
OPTIMAL = ("optimal_scalar", "optimal_scalar_episodic", "optimal_per_param", "optimal_time")


# ---------------------------------------------------------------------------- segments
def hand_batch(episode_lengths=(2, 4, 2)) -> Batch:
    """T = 6, N = 2 (time-major, flat i = 2 t + n)::

        t:      0    1       2          3    4        5
        env 0:  r=1  r=2 T   autoreset  r=1  r=1      r=4      (cut at the end)
        env 1:  r=1  r=1 T   autoreset  r=2  r=2 Tr   autoreset

    Ends in rollout order: (t1, env 0) length 2, (t1, env 1) length 4 (it began two steps
    before the batch), (t4, env 1) length 2.
    """
    rewards = np.array([[1, 1], [2, 1], [0, 0], [1, 2], [1, 2], [4, 0]], float)
    valid = np.ones((6, 2), bool)
    valid[2] = False
    valid[5, 1] = False
    terminated = np.zeros((6, 2), bool)
    terminated[1] = True
    truncated = np.zeros((6, 2), bool)
    truncated[4, 1] = True
    obs = np.zeros((6, 2, 4))
    return Batch(obs=obs, actions=np.zeros((6, 2), np.int64), rewards=rewards,
                 terminated=terminated, truncated=truncated, log_probs=np.zeros((6, 2)),
                 valid=valid, next_obs=obs[-1], episode_returns=np.zeros(len(episode_lengths)),
                 episode_lengths=np.array(episode_lengths, np.int64))


def test_segments_hand_case():
    segs = bl.segments(hand_batch(), gamma=0.5)
    # Segments env by env: 0 = env 0 t0-1, 1 = env 0 t3-5, 2 = env 1 t0-1, 3 = env 1 t3-4.
    np.testing.assert_array_equal(segs.ids, [0, 2, 0, 2, -1, -1, 1, 3, 1, 3, 1, -1])
    np.testing.assert_array_equal(segs.time, [0, 0, 1, 1, -1, -1, 0, 0, 1, 1, 2, -1])
    np.testing.assert_array_equal(segs.lengths, [2, 3, 2, 2])
    # 0: recorded length 2 = 2 in the batch; 1: cut at the end; 2: recorded 4 > 2; 3: inside.
    np.testing.assert_array_equal(segs.complete, [True, False, False, True])
    # sum_l 0.5^l r_l: 1 + .5*2 = 2;  1 + .5*1 + .25*4 = 2.5;  1 + .5*1 = 1.5;  2 + .5*2 = 3
    np.testing.assert_allclose(segs.returns, [2.0, 2.5, 1.5, 3.0])
    np.testing.assert_allclose(segs.discounted_rewards, [1, 1, 1, .5, 0, 0, 1, 2, .5, 1, 1, 0])
    assert segs.num_episodes == 2
    np.testing.assert_array_equal(segs.episode_ids(), [0, -1, 0, -1, -1, -1, -1, 1, -1, 1, -1, -1])
    np.testing.assert_array_equal(segs.episode_order(), [0, 2, 7, 9])


def test_segments_without_recorded_lengths_count_only_episodes_started_inside():
    segs = bl.segments(hand_batch(episode_lengths=()), gamma=0.5)
    np.testing.assert_array_equal(segs.complete, [False, False, False, True])


def test_segments_refuse_inconsistent_episode_lengths():
    with pytest.raises(ValueError, match="episode_lengths has 2 entries but the batch ends 3"):
        bl.segments(hand_batch(episode_lengths=(2, 4)), gamma=0.5)
    with pytest.raises(ValueError, match=r"episode_lengths\[2\] = 3 but the episode of env 1 "
                                         "ending at step 4 has 2 steps"):
        bl.segments(hand_batch(episode_lengths=(2, 4, 3)), gamma=0.5)


@pytest.mark.parametrize("seed", range(4))
def test_segments_find_the_constructed_episodes(seed):
    case = episodic_batch(KINDS["categorical_mlp"], num_steps=30, num_envs=3, seed=seed)
    segs = bl.segments(case.batch, gamma=0.9)
    order, lengths = segs.episode_order(), segs.lengths[segs.complete]
    found = [list(order[s - n:s]) for s, n in zip(np.cumsum(lengths), lengths)]
    assert found == case.episodes
    rewards = case.batch.rewards.reshape(-1)
    np.testing.assert_allclose(segs.returns[segs.complete],
                               [sum(0.9 ** l * rewards[i] for l, i in enumerate(e)) for e in case.episodes])


# ---------------------------------------------------------------------------- formulas
def test_optimal_scalar_baseline_hand_values():
    # (1*2 + 3*6) / (1 + 3) = 5;  with weights (1, 0): 2;  all norms 0: the mean (2 + 6) / 2 = 4
    assert bl.optimal_scalar_baseline([1.0, 3.0], [2.0, 6.0]) == 5.0
    assert bl.optimal_scalar_baseline([1.0, 3.0], [2.0, 6.0], [1.0, 0.0]) == 2.0
    assert bl.optimal_scalar_baseline([0.0, 0.0], [2.0, 6.0]) == 4.0
    with pytest.raises(ValueError, match="vectors of one length"):
        bl.optimal_scalar_baseline([1.0], [2.0, 6.0])


@pytest.mark.parametrize("seed", range(3))
def test_optimal_scalar_baseline_minimises_the_second_moment(seed):
    rng = np.random.default_rng(seed)
    n, r, w = rng.random(50) ** 3, rng.standard_normal(50) + 2, rng.random(50)
    moment = lambda b: np.sum(w * n * (r - b) ** 2)  # noqa: E731
    b = bl.optimal_scalar_baseline(n, r, w)
    for delta in (1e-3, 1e-1, 1.0):
        assert moment(b + delta) > moment(b) < moment(b - delta)


def test_per_param_hand_case():
    # Two episodes: each one's baseline comes from the other (leave-one-out).
    # Element 0: b for episode 0 = 6 (episode 1's R), for episode 1 = 3;
    #            ascent = (1 (3 - 6) + 2 (6 - 3)) / 4 = 0.75. Plug-in: (1*3 + 4*6) / 5 = 5.4.
    # Element 1: scores 0, denominators 0: the other's mean R; ascent 0 (not NaN). Plug-in 4.5.
    ascent, b = bl.per_param_ascent(np.array([[1.0, 0.0], [2.0, 0.0]]), np.array([3.0, 6.0]), 4)
    np.testing.assert_allclose(b, [5.4, 4.5])
    np.testing.assert_allclose(ascent, [0.75, 0.0], atol=1e-15)


def test_scalar_leave_one_out_hand_case():
    # n = (1, 3, 0), R = (2, 6, 5): b_0 = (18 + 0) / 3 = 6;  b_1 = 2 / 1 = 2;
    # b_2 = (2 + 18) / 4 = 5.  A lone episode: 0.  Others all 0: their mean (6 + 5) / 2.
    np.testing.assert_allclose(bl.loo_scalar_baselines([1.0, 3.0, 0.0], [2.0, 6.0, 5.0]), [6, 2, 5])
    np.testing.assert_allclose(bl.loo_scalar_baselines([4.0], [2.0]), [0.0])
    np.testing.assert_allclose(bl.loo_scalar_baselines([1.0, 0.0, 0.0], [2.0, 6.0, 5.0])[0], 5.5)


def test_time_hand_case():
    # Episode 0: g = 1, 2 and a r = 1, 2; episode 1 (T = 1): g = 3, a r = 4. H = 2.
    # psi: episode 0: 1, 3; episode 1: 3, then frozen at 3 with r = 0.
    # For episode 0, from episode 1 alone: b_0 = 9*4 / 9 = 4, b_1 = 9*0 / 9 = 0:
    #   1 (1 - 4) + 3 (2 - 0) = 3.
    # For episode 1, from episode 0 alone: b_0 = 1*1 / 1 = 1, b_1 = 9*2 / 9 = 2:
    #   3 (4 - 1) + 3 (0 - 2) = 3  (the frozen step l = 1 meets b_1).   ascent = 6 / 3 = 2.
    # Plug-in b: b_0 = (1 + 36) / 10 = 3.7;  b_1 = (18 + 0) / 18 = 1.
    ascent, b = bl.time_ascent(np.array([[1.0], [2.0], [3.0]]), np.array([2, 1]),
                               np.array([1.0, 2.0, 4.0]), 3)
    np.testing.assert_allclose(b[:, 0], [3.7, 1.0])
    np.testing.assert_allclose(ascent, [2.0])


def ratio_or_mean(num: float, den: float, mean: float) -> float:
    return num / den if den != 0 else mean


def oracle_per_param(scores: np.ndarray, returns: np.ndarray, num_steps: int) -> np.ndarray:
    """One element and one episode at a time; each episode's b from the others only."""
    num_episodes, width = scores.shape
    out = np.zeros(width)
    for h in range(width):
        for e in range(num_episodes):
            others = [k for k in range(num_episodes) if k != e]
            g, r = scores[others, h], returns[others]
            b = ratio_or_mean(np.sum(g ** 2 * r), np.sum(g ** 2), r.mean() if others else 0.0)
            out[h] += scores[e, h] * (returns[e] - b) / num_steps
    return out


def oracle_time(grads: np.ndarray, lengths, ar: np.ndarray, num_steps: int) -> np.ndarray:
    """Padded to [E, H, P] (psi frozen and r = 0 after an episode's end); each episode's
    b_l from the others only."""
    num_episodes, horizon, width = len(lengths), max(lengths), grads.shape[1]
    g = np.zeros((num_episodes, horizon, width))
    r = np.zeros((num_episodes, horizon, 1))
    start = 0
    for e, n in enumerate(lengths):
        g[e, :n], r[e, :n, 0] = grads[start:start + n], ar[start:start + n]
        start += n
    psi = np.cumsum(g, axis=1)  # zeros after the end keep psi at its last value
    total = np.zeros(width)
    for e in range(num_episodes):
        o = [k for k in range(num_episodes) if k != e]
        den = np.sum(psi[o] ** 2, axis=0)
        mean = np.mean(r[o], axis=0) if o else np.zeros((horizon, 1))
        b = np.where(den != 0, np.sum(psi[o] ** 2 * r[o], axis=0) / np.where(den != 0, den, 1),
                     mean)
        total += np.sum(psi[e] * (r[e] - b), axis=0)
    return total / num_steps


@pytest.mark.parametrize("seed", range(3))
def test_episodic_formulas_match_the_oracles(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 7, 5)
    grads = rng.standard_normal((lengths.sum(), 6))
    grads[:, 2] = 0.0  # an element with no gradient: the mean-baseline fallback
    grads[: lengths[0], 4] = 0.0  # ... and one zero in a single episode only
    ar, returns = rng.standard_normal(lengths.sum()) + 1, rng.standard_normal(5) + 1
    steps = int(lengths.sum())
    scores = bl.episode_scores(grads, lengths)
    np.testing.assert_allclose(scores, [grads[s - n:s].sum(0) for s, n in zip(np.cumsum(lengths), lengths)])
    ascent, _ = bl.per_param_ascent(scores, returns, steps)
    np.testing.assert_allclose(ascent, oracle_per_param(scores, returns, steps), rtol=1e-12, atol=1e-15)
    ascent, b = bl.time_ascent(grads, lengths, ar, steps)
    assert np.isfinite(b).all()
    np.testing.assert_allclose(ascent, oracle_time(grads, lengths, ar, steps), rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------------- agents
def oracle_gradient(baseline: str, case, config: ReinforceConfig, spec: PolicySpec,
                    loop: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The loss gradient (``-ascent``) of ``baseline`` on ``case``, from ``loop`` grads ``[B, ...]``."""
    names = list(loop)
    g = np.concatenate([loop[n].reshape(loop[n].shape[0], -1) for n in names], 1).astype(np.float64)
    batch = case.batch
    if baseline in ("none", "mean", "optimal_scalar"):
        inputs = training_inputs(batch, config, spec)
        r, w = inputs.returns.astype(np.float64), inputs.weights.astype(np.float64)
        b = {"none": 0.0, "mean": np.sum(w * r)}.get(baseline)
        if b is None:
            n = np.sum(g ** 2, axis=1)
            b = np.sum(w * n * r) / np.sum(w * n)
        grad = -np.sum((w * (r - b))[:, None] * g, axis=0)
    else:
        rewards = batch.rewards.reshape(-1)
        episodes = case.episodes
        steps = sum(len(e) for e in episodes)
        scores = np.array([g[e].sum(0) for e in episodes])
        returns = np.array([sum(config.gamma ** l * rewards[i] for l, i in enumerate(e)) for e in episodes])
        if baseline == "optimal_scalar_episodic":  # b* of each episode from the others
            n = np.sum(scores ** 2, axis=1)
            b = np.array([(np.sum(n * returns) - n[e] * returns[e]) / (np.sum(n) - n[e])
                          for e in range(len(episodes))])
            grad = -np.sum((returns - b)[:, None] * scores, axis=0) / steps
        elif baseline == "optimal_per_param":
            grad = -oracle_per_param(scores, returns, steps)
        else:
            order = [i for e in episodes for i in e]
            ar = np.array([config.gamma ** l * rewards[i] for e in episodes for l, i in enumerate(e)])
            grad = -oracle_time(g[order], [len(e) for e in episodes], ar, steps)
    out, start = {}, 0
    for n in names:
        size = int(np.prod(loop[n].shape[1:]))
        out[n] = grad[start:start + size].reshape(loop[n].shape[1:])
        start += size
    return out


# One twin per case (suite time: each case is ~15-20 s of XLA compiles), alternating so that
# each twin meets the oracle on an MLP and in float64, and the four cases cover every kind and
# dtype between them. parity_tests/test_per_sample_parity.py holds the other twin to this one
# for every baseline on the same four (kind, dtype) cases (float64 within 1e-9 relative).
# Each twin on one case under XLA (float64: the 1e-10 bar as users run it) and one with
# jit_compile=False (XLA's compiles are about half of a case's time).
AGENT_CASES = [("graph", "categorical_mlp", "float64", False),
               ("eager", "categorical_mlp", "float32", False),
               ("eager", "gaussian_mlp", "float64", True), ("graph", "gaussian_lstm", "float64", True)]


@pytest.mark.parametrize("impl,kind,dtype,xla", AGENT_CASES)
def test_every_baseline_matches_the_oracle(impl, kind, dtype, xla):
    spec = KINDS[kind]
    case = episodic_batch(spec, num_steps=20, num_envs=3, seed=7)
    weights = random_weights(spec, seed=1)
    base = ReinforceConfig(dtype=dtype, gamma=0.9, normalize_returns=False, num_envs=3, num_steps=20,
                           jit_compile=xla)
    loop = None
    for baseline in ("none", "mean") + OPTIMAL:
        config = base.replace(baseline=baseline)
        agent = agent_class(impl)(spec, config, weights=weights)
        if loop is None:
            inputs = training_inputs(case.batch, config, agent.spec)
            loop = agent.per_sample_gradients(inputs.obs, inputs.actions, method="loop")
        expected = oracle_gradient(baseline, case, config, agent.spec, loop)
        got = agent.gradients(case.batch)
        scale = max(float(np.abs(v).max()) for v in expected.values())
        for n in expected:
            np.testing.assert_allclose(got[n], expected[n], rtol=1e-9 if dtype == "float64" else 1e-3,
                                       atol=(1e-12 if dtype == "float64" else 1e-4) * scale,
                                       err_msg=f"{impl} {kind} {dtype} {baseline} {n}")
        # Updates are held twin to twin elsewhere (the optimal baselines' over 3 updates with
        # memory in parity_tests/test_per_sample_parity.py, mean's in the twin ladder's
        # weights rung); here one, optimal_scalar's, for its trace count.
        if baseline != "optimal_scalar":
            agent.close()
            continue
        metrics = agent.update(case.batch)
        assert metrics["applied"] and np.isfinite(metrics["loss"]), metrics
        if impl == "eager":
            small = episodic_batch(spec, num_steps=5, num_envs=2, seed=8).batch
            agent.update(small)
            assert set(agent.update_path.trace_counts().values()) == {1}
        agent.close()


def ordinary_gradients(agent, inputs) -> dict[str, np.ndarray]:
    """The agent's own backward pass of the REINFORCE loss on ``inputs`` (no baseline logic)."""
    return agent.weighted_loss.gradients([inputs])


@pytest.mark.parametrize("kind", ("categorical_mlp", "gaussian_mlp"))
@pytest.mark.parametrize("impl", TWINS)
def test_scalar_update_is_the_backward_pass_of_the_loss_at_b_star(impl, kind):
    """With an entropy bonus too: the delta-reusing gradient of ``optimal_scalar`` equals an
    ordinary backward pass of the loss with advantages ``R - b*`` (b* from the loop grads)."""
    spec = KINDS[kind]
    case = episodic_batch(spec, num_steps=20, num_envs=3, seed=6)
    config = ReinforceConfig(dtype="float64", entropy_coef=0.05, num_envs=3, num_steps=20)
    weights = random_weights(spec, seed=4)
    plain = agent_class(impl)(spec, config, weights=weights)
    optimal = agent_class(impl)(spec, config.replace(baseline="optimal_scalar"), weights=weights)
    inputs = training_inputs(case.batch, config, plain.spec)
    loop = plain.per_sample_gradients(inputs.obs, inputs.actions, method="loop")
    n = sum(np.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in loop.values())
    b = np.sum(inputs.weights * n * inputs.returns) / np.sum(inputs.weights * n)
    expected = ordinary_gradients(plain, dataclasses.replace(inputs, advantages=inputs.returns - b))
    got = optimal.gradients(case.batch)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-9, atol=1e-13, err_msg=name)
    plain.close()
    optimal.close()


@pytest.mark.parametrize("impl", TWINS)
def test_reported_scalar_baseline_minimises_the_second_moment(impl):
    """The b* an ``optimal_scalar`` update reports, checked on the loop gradients."""
    spec = KINDS["categorical_mlp"]
    case = episodic_batch(spec, num_steps=20, num_envs=3, seed=5)
    config = ReinforceConfig(dtype="float64", baseline="optimal_scalar", num_envs=3, num_steps=20)
    agent = agent_class(impl)(spec, config, weights=random_weights(spec))
    inputs = training_inputs(case.batch, config, agent.spec)
    loop = agent.per_sample_gradients(inputs.obs, inputs.actions, method="loop")
    n = sum(np.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in loop.values())
    moment = lambda b: np.sum(inputs.weights * n * (inputs.returns - b) ** 2)  # noqa: E731
    b = agent.update(case.batch)["baseline"]
    for delta in (1e-4, 1e-2, 1.0):
        assert moment(b + delta) > moment(b) < moment(b - delta)
    agent.close()


@pytest.mark.parametrize("baseline", ("optimal_scalar_episodic", "optimal_per_param", "optimal_time"))
def test_normalized_returns_only_rescale_the_episodic_estimates(baseline):
    """Every episodic estimate is linear in R (and b moves with R): normalising divides it by
    the std of the batch's reward-to-go."""
    spec = KINDS["categorical_mlp"]
    case = episodic_batch(spec, num_steps=20, num_envs=3, seed=2)
    # Without XLA: linearity in R is the formulas' property; XLA's compiles would be most of
    # the time (test_every_baseline_matches_the_oracle runs the estimates under XLA).
    config = ReinforceConfig(dtype="float64", baseline=baseline, gamma=0.9, num_envs=3, num_steps=20,
                             jit_compile=False)
    grads = {}
    for normalize in (True, False):
        agent = agent_class("graph")(spec, config.replace(normalize_returns=normalize),
                                     weights=random_weights(spec))
        grads[normalize] = agent.gradients(case.batch)
        agent.close()
    from pgtwin_core.returns import discounted_returns
    b = case.batch
    scale = np.std(discounted_returns(b.rewards, b.terminated, b.truncated, 0.9)[b.valid])
    for n in grads[True]:
        np.testing.assert_allclose(grads[True][n] * scale, grads[False][n], rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("impl", TWINS)
def test_deterministic_policy_falls_back_to_the_mean_baseline(impl):
    """Logits (1000, 0): every score is exactly 0, so every optimal denominator is 0."""
    spec = PolicySpec("categorical", (4,), 2, hidden=(8,))
    weights = {n: np.zeros(s, np.float32) for n, s in spec.weight_shapes().items()}
    weights["policy/head/bias"] = np.array([1000.0, 0.0], np.float32)
    case = episodic_batch(spec, num_steps=12, num_envs=2, seed=4)
    batch = Batch(**{**case.batch.__dict__, "actions": np.zeros_like(case.batch.actions)})
    rewards = batch.rewards.reshape(-1)
    episode_returns = [sum(rewards[i] for i in e) for e in case.episodes]  # gamma = 1
    for baseline in OPTIMAL:
        # The eager twin under XLA, the graph twin without (XLA's compiles are most of the time).
        config = ReinforceConfig(baseline=baseline, gamma=1.0, normalize_returns=False,
                                 num_envs=2, num_steps=12, jit_compile=impl == "eager")
        agent = agent_class(impl)(spec, config, weights=weights)
        grads = agent.gradients(batch)
        assert all(np.array_equal(g, np.zeros_like(g)) for g in grads.values()), baseline
        metrics = agent.update(batch)
        assert metrics["applied"] and np.isfinite(metrics["baseline"]), (baseline, metrics)
        if baseline == "optimal_scalar":  # sum_i w_i R_i, R_i the undiscounted reward-to-go
            inputs = training_inputs(batch, config, spec)
            np.testing.assert_allclose(metrics["baseline"], np.sum(inputs.weights * inputs.returns), rtol=1e-6)
        elif baseline in ("optimal_scalar_episodic", "optimal_per_param"):
            np.testing.assert_allclose(metrics["baseline"], np.mean(episode_returns), rtol=1e-6)
        agent.close()


@pytest.mark.parametrize("impl", TWINS)
def test_a_batch_without_a_complete_episode_is_skipped(impl):
    spec = KINDS["categorical_mlp"]
    case = episodic_batch(spec, num_steps=3, num_envs=1, seed=0, mean_length=50.0)
    assert not case.episodes
    agent = agent_class(impl)(spec, ReinforceConfig(baseline="optimal_per_param", num_envs=1,
                                                    num_steps=3))
    before = agent.get_weights()
    metrics = agent.update(case.batch)
    # Skipped, not a crash: nothing applied, and the metrics say why.
    assert metrics["applied"] is False and metrics["episodes"] == 0, metrics
    assert all(np.isnan(metrics[k]) for k in ("loss", "grad_norm", "entropy", "baseline"))
    for name, w in agent.get_weights().items():
        np.testing.assert_array_equal(w, before[name], err_msg=name)
    assert agent.baseline_memory.sums is None  # the memory took nothing in
    # Asked for a gradient or a loss, it has none to give: a clear error.
    for ask in (agent.gradients, agent.loss_value):
        with pytest.raises(NoCompleteEpisodeError,
                           match="needs a complete episode.*raise ReinforceConfig.num_steps"):
            ask(case.batch)
    agent.close()


# ---------------------------------------------------------------------------- statistics
# A bandit in episodes: 4 states drawn i.i.d. at every step (one-hot obs scaled by SCALE),
# 2 actions, reward REWARD[s, a], episode lengths uniform in 1..4 whatever the actions, so
# longer episodes have larger scores ||g_e||^2 and larger returns: the optimal baselines
# differ from the mean one (as in CartPole, where failing early means both are small).
SCALE = np.array([0.25, 0.5, 1.0, 2.0])
REWARD = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5], [-1.0, 1.0]]) + 1.0 + 2.0 * SCALE[:, None]
STEPS = 10


def bandit_obs(states: np.ndarray) -> np.ndarray:
    return np.eye(4)[states] * SCALE[states][..., None]


def bandit_batches(agent, num_batches: int, num_envs: int, seed: int) -> list[Batch]:
    """Batches of T = 10 from fresh envs; the last episode of an env may be cut."""
    rng = np.random.default_rng(seed)
    t, n = STEPS, num_envs
    batches = []
    for _ in range(num_batches):
        valid, terminated, ends = np.ones((t, n), bool), np.zeros((t, n), bool), []
        for env in range(n):
            step = 0
            while step < t:
                length = int(rng.integers(1, 5))
                last = step + length - 1
                if last >= t:
                    break
                terminated[last, env] = True
                ends.append((last, env, length))
                if last + 1 < t:
                    valid[last + 1, env] = False
                step = last + 2
        states = rng.integers(0, 4, (t, n))
        obs = bandit_obs(states)
        logits = agent.dist_params(obs.reshape(-1, 4)).astype(np.float64)
        probs = np.exp(logits - logits.max(1, keepdims=True))
        probs /= probs.sum(1, keepdims=True)
        actions = (rng.random(len(probs)) > probs[:, 0]).astype(np.int64).reshape(t, n)
        batches.append(Batch(
            obs=obs, actions=actions, rewards=np.where(valid, REWARD[states, actions], 0.0),
            terminated=terminated, truncated=np.zeros((t, n), bool), log_probs=np.zeros((t, n)),
            valid=valid, next_obs=obs[-1], episode_returns=np.zeros(len(ends)),
            episode_lengths=np.array([e[2] for e in sorted(ends)], np.int64)))
    return batches


@pytest.mark.slow
def test_optimal_baselines_lower_the_variance_and_stay_unbiased():
    """300 batches from a fixed policy, run in sequence (the episodic estimators carry their
    memory of earlier batches at the default ``baseline_memory``, the value baseline fits its
    net on each batch after its estimate): every estimator's mean is the exact
    gradient within sampling error, and the optimal baselines are no noisier than the mean
    baseline of their family, batch-only or with the same memory (paired over the same
    batches; measured: the episodic ones 20-30 % below it)."""
    from pgtwin.measure.baseline_variance import ESTIMATORS, gradient_estimates, paired_excess

    spec = PolicySpec("categorical", (4,), 2, hidden=(8,))
    weights = random_weights(spec, seed=3, dtype="float64")
    # Without XLA: a statistical property of the estimators, not of their compiled code.
    config = ReinforceConfig(dtype="float64", gamma=1.0, normalize_returns=False, jit_compile=False)
    agent = agent_class("graph")(spec, config, weights=weights)
    # Exact gradient per step: E_s sum_a pi(a|s) r(s, a) grad log pi(a|s), s uniform. Other
    # rewards of the episode, and its length, do not depend on a_t: they add nothing on
    # average, to the per-step estimate (/ steps) as to the episodic one (/ sum_e T_e).
    states, actions = np.repeat(np.arange(4), 2), np.tile([0, 1], 4)
    logits = agent.dist_params(bandit_obs(states))
    pi = np.exp(logits[np.arange(8), actions] - np.log(np.exp(logits).sum(1)))
    scores = bl.flatten(agent.per_sample_gradients(bandit_obs(states), actions, method="loop"))
    truth = np.sum((pi * REWARD[states, actions] / 4)[:, None] * scores, 0)
    batches = bandit_batches(agent, 300, num_envs=32, seed=0)
    agent.close()

    # Every estimator but value_before, whose net is fitted on the batch it is used on (a
    # baseline correlated with the batch's own actions: biased by design, docs/baselines.md).
    # gamma = 1: the GPOMDP ones weigh every step 1, the same expectation.
    unbiased = tuple(e for e in ESTIMATORS if e not in ("value_before", "gpomdp_value_before"))
    estimates = gradient_estimates(spec, config, weights, batches, estimators=unbiased)
    assert set(estimates) == set(unbiased)
    n = len(batches)
    for name, x in estimates.items():
        z = (x.mean(0) - truth) / (x.std(0, ddof=1) / np.sqrt(n))
        assert np.max(np.abs(z)) < 4.5, (name, np.round(z, 1))
    for better, ref in (("optimal_scalar", "mean"), ("optimal_scalar_episodic", "episodic_mean"),
                        ("optimal_per_param", "episodic_mean"), ("optimal_time", "episodic_mean"),
                        ("optimal_scalar_episodic", "episodic_mean_memory"),
                        ("optimal_per_param", "episodic_mean_memory"),
                        ("optimal_time", "episodic_mean_memory")):
        excess, se = paired_excess(estimates[better], estimates[ref])
        assert excess <= 3 * se, (better, ref, excess, se)
    excess, se = paired_excess(estimates["none"], estimates["mean"])
    assert excess > 3 * se, ("the comparison resolves a real difference", excess, se)


def test_the_covariance_trace_and_its_paired_excess_need_two_batches():
    # By hand: rows (1, 0) and (3, 2) have mean (2, 1), squared distances 2 and 2, times
    # n / (n - 1) = 2: d = (4, 4), so tr Cov = 4 with standard error 0.
    from pgtwin.measure.baseline_variance import paired_excess, trace_of_covariance
    assert trace_of_covariance(np.array([[1.0, 0.0], [3.0, 2.0]])) == (4.0, 0.0)
    with pytest.raises(ValueError, match="at least 2 batches \\(rows\\), got 1"):
        trace_of_covariance(np.ones((1, 3)))
    with pytest.raises(ValueError, match="paired_excess needs"):
        paired_excess(np.ones((1, 3)), np.ones((1, 3)))
