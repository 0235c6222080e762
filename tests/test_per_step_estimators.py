"""The per-step estimators of issue 15 in numpy: episode time, GPOMDP's gamma^t, the
per-time leave-one-out mean (``baseline='time_mean'``). Hand-derived cases and a slow
oracle; the rollout's recorded step index against a count over a real rollout."""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin_core.advantages import training_inputs
from pgtwin_core.baselines.time_mean import time_mean_baseline
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.envs import make_vec_env
from pgtwin_core.episode_time import episode_steps, step_discounts
from pgtwin_core.returns import discounted_returns
from pgtwin_core.rollout import Batch, collect
from pgtwin_core.specs import PolicySpec

CAT = PolicySpec("categorical", (1,), 2)


def hand_batch(episode_steps_=None) -> Batch:
    """Two envs, T = 5 (time-major rows t, columns env 0, env 1):

    env 0: rewards 1, 1 (terminated), autoreset, 2, 2 (cut by T): a complete episode A of
           length 2, then a segment of an episode cut at the end.
    env 1: rewards 3 (terminated), autoreset, 1, 1, 1 (terminated): complete episodes B
           (length 1) and C (length 3).
    """
    rewards = np.array([[1, 3], [1, 0], [0, 1], [2, 1], [2, 1]], float)
    terminated = np.zeros((5, 2), bool)
    terminated[1, 0] = terminated[0, 1] = terminated[4, 1] = True
    valid = np.ones((5, 2), bool)
    valid[2, 0] = valid[1, 1] = False
    return Batch(obs=np.zeros((5, 2, 1)), actions=np.zeros((5, 2), np.int64), rewards=rewards,
                 terminated=terminated, truncated=np.zeros((5, 2), bool),
                 log_probs=np.zeros((5, 2)), valid=valid, next_obs=np.zeros((2, 1)),
                 episode_returns=np.array([3.0, 2.0, 3.0]),
                 episode_lengths=np.array([1, 2, 3]), episode_steps=episode_steps_)


def test_episode_steps_count_from_the_episode_start():
    # Counted in the batch: env 0 -> 0, 1, -1, 0, 1; env 1 -> 0, -1, 0, 1, 2.
    want = np.array([[0, 0], [1, -1], [-1, 0], [0, 1], [1, 2]])
    np.testing.assert_array_equal(episode_steps(hand_batch()), want)
    # A recorded index wins: the episode of env 0's first rows began 7 steps earlier.
    recorded = want.copy()
    recorded[:2, 0] = [7, 8]
    np.testing.assert_array_equal(episode_steps(hand_batch(recorded)), recorded)
    # gamma^t, 0 on autoreset steps.
    np.testing.assert_allclose(step_discounts(hand_batch(recorded), 0.5)[:, 0],
                               [0.5 ** 7, 0.5 ** 8, 0.0, 1.0, 0.5])


def test_recorded_episode_steps_must_agree_with_valid():
    bad = np.zeros((5, 2), np.int64)  # 0 on the autoreset steps too
    with pytest.raises(ValueError, match=r"batch.episode_steps\[1, 1\] = 0 disagrees with "
                                         r"batch.valid\[1, 1\] = False"):
        episode_steps(hand_batch(bad))


def test_the_rollout_records_each_steps_index_across_batches():
    # Oracle: a step index is the count of valid steps since the last episode end, kept
    # over batch edges (a second collect continues the first one's episodes).
    envs = make_vec_env("CartPole-v1", 3, seed=0)
    spec = PolicySpec("categorical", (4,), 2)
    rng = np.random.default_rng(0)
    uniform = lambda obs: np.zeros((obs.shape[0], 2))  # noqa: E731
    first, state = collect(envs, uniform, spec, 40, rng)
    second, _ = collect(envs, uniform, spec, 40, rng, state)
    running = np.zeros(3, np.int64)
    for batch in (first, second):
        for t in range(40):
            want = np.where(batch.valid[t], running, -1)
            np.testing.assert_array_equal(batch.episode_steps[t], want)
            ended = (batch.terminated[t] | batch.truncated[t]) & batch.valid[t]
            running = np.where(ended | ~batch.valid[t], 0, running + batch.valid[t])
    assert second.episode_steps[0].max() > 0  # an episode carried over the edge
    envs.close()


def test_time_mean_by_hand():
    # gamma = 1. Reward-to-go: env 0: A = (2, 1), cut segment (4, 2); env 1: B = (3),
    # C = (3, 2, 1). Complete episodes A, B, C (E = 3); sums at t: S_0 = 2 + 3 + 3 = 8,
    # S_1 = 1 + 0 + 2 = 3, S_2 = 0 + 0 + 1 = 1 (an ended episode counts 0).
    # A's steps: (S_0 - 2) / 2 = 3, (S_1 - 1) / 2 = 1. B: (8 - 3) / 2 = 2.5.
    # C: (8 - 3) / 2 = 2.5, (3 - 2) / 2 = 0.5, (1 - 1) / 2 = 0.
    # The cut segment (in no complete episode): S_t / E = 8/3, 1.
    batch = hand_batch()
    g = discounted_returns(batch.rewards, batch.terminated, batch.truncated, 1.0)
    g = np.where(batch.valid, g, 0.0)
    b = time_mean_baseline(batch, g, 1.0)
    want = np.array([[3.0, 2.5], [1.0, 0.0], [0.0, 2.5], [8 / 3, 0.5], [1.0, 0.0]])
    np.testing.assert_allclose(b, want, rtol=1e-15)


def test_time_mean_with_one_episode_is_zero():
    # One complete episode: it has no other episode to be compared with; b = 0 for it,
    # and its own G for a step outside it (E = 1).
    batch = Batch(obs=np.zeros((3, 1, 1)), actions=np.zeros((3, 1), np.int64),
                  rewards=np.array([[1.0], [0.0], [5.0]]),
                  terminated=np.array([[True], [False], [False]]),
                  truncated=np.zeros((3, 1), bool), log_probs=np.zeros((3, 1)),
                  valid=np.array([[True], [False], [True]]), next_obs=np.zeros((1, 1)),
                  episode_returns=np.array([1.0]), episode_lengths=np.array([1]))
    g = np.array([[1.0], [0.0], [5.0]])
    np.testing.assert_array_equal(time_mean_baseline(batch, g, 0.9), [[0.0], [0.0], [1.0]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("normalize", [False, True])
def test_gpomdp_time_mean_inputs_by_hand(normalize, dtype):
    # gamma = 0.5. Reward-to-go: env 0: A = (1.5, 1), cut (3, 2); env 1: B = (3),
    # C = (1.75, 1.5, 1). S_0 = 1.5 + 3 + 1.75 = 6.25, S_1 = 1 + 1.5 = 2.5, S_2 = 1.
    # Baselines: A: (6.25 - 1.5)/2 = 2.375, (2.5 - 1)/2 = 0.75; B: (6.25 - 3)/2 = 1.625;
    # C: (6.25 - 1.75)/2 = 2.25, (2.5 - 1.5)/2 = 0.5, 0; cut: 6.25/3, 2.5/3.
    # GPOMDP: A_i = 0.5^t (G - b): A: -0.875, 0.125; B: 1.375; C: -0.5, 0.5, 0.25;
    # cut: 3 - 6.25/3 = 11/12, 0.5 (2 - 2.5/3) = 7/12.
    batch = hand_batch()
    config = ReinforceConfig(gamma=0.5, baseline="time_mean", gpomdp=True,
                             normalize_returns=normalize, dtype=dtype)
    got = training_inputs(batch, config, CAT)
    want = np.array([[-0.875, 1.375], [0.125, 0.0], [0.0, -0.5], [11 / 12, 0.5],
                     [7 / 12, 0.25]]).reshape(-1)
    if normalize:  # divided by the std of the 8 valid reward-to-go values, not centred
        g = np.array([1.5, 3, 1, 1.75, 3, 1.5, 2, 1])
        want = want / (np.sqrt(np.mean((g - g.mean()) ** 2)) + 1e-8)
    tol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got.advantages, want, rtol=tol, atol=tol)
    assert got.advantages.dtype == np.dtype(dtype)


def slow_gpomdp_oracle(batch: Batch, gamma: float, baseline: str) -> np.ndarray:
    """Literal loops: A_i = gamma^t (G_i - b_i) with b the per-step mean over valid steps
    (``mean``) or 0 (``none``); t and G counted step by step from each episode's start."""
    T, N = batch.rewards.shape
    adv = np.zeros((T, N))
    g_all, t_all = np.zeros((T, N)), np.zeros((T, N), int)
    for n in range(N):
        t_in = 0
        for t in range(T):
            if not batch.valid[t, n]:
                t_in = 0
                continue
            g, k = 0.0, t
            while True:
                g += gamma ** (k - t) * batch.rewards[k, n]
                if batch.terminated[k, n] or batch.truncated[k, n] or k == T - 1:
                    break
                k += 1
            g_all[t, n], t_all[t, n] = g, t_in
            t_in = 0 if (batch.terminated[t, n] or batch.truncated[t, n]) else t_in + 1
    b = g_all[batch.valid].mean() if baseline == "mean" else 0.0
    for t in range(T):
        for n in range(N):
            if batch.valid[t, n]:
                adv[t, n] = gamma ** t_all[t, n] * (g_all[t, n] - b)
    return adv.reshape(-1)


@pytest.mark.parametrize("baseline", ["none", "mean"])
def test_gpomdp_matches_a_slow_oracle(baseline):
    from tests.test_advantages import random_batch
    rng = np.random.default_rng(3)
    config = ReinforceConfig(gamma=0.8, baseline=baseline, gpomdp=True, normalize_returns=False,
                             dtype="float64")
    for _ in range(3):
        batch = random_batch(rng, PolicySpec("categorical", (3,), 4))
        got = training_inputs(batch, config, PolicySpec("categorical", (3,), 4))
        np.testing.assert_allclose(got.advantages, slow_gpomdp_oracle(batch, 0.8, baseline),
                                   rtol=1e-12, atol=1e-12)
