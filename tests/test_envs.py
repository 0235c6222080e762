"""Tests for ``make_vec_env`` (pgtwin_core/envs.py) and ``HistoryWindow`` (pgtwin_core/history.py)."""
from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from pgtwin_core.envs import _check_autoreset, env_spaces_check, make_vec_env
from pgtwin_core.history import HistoryWindow
from pgtwin_core.specs import observation_rank_problem, spec_for_env

SYNC_IDS = ["Pendulum-v1", "BatteryArbitrage-v0"]
PUSH_RIGHT = np.ones(3, dtype=np.int64)  # always pushing one way topples CartPole in ~10 steps


class _MultiBinaryActionEnv(gymnasium.Env):
    """A Box-observation env with an unsupported (MultiBinary) action space."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.MultiBinary(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {}


class GridObservationEnv(gymnasium.Env):
    """Observations ``[2, 3]`` (a grid, not a time window), actions ``Discrete(3, start=-1)``."""

    observation_space = spaces.Box(0.0, 1.0, (2, 3), np.float32)
    action_space = spaces.Discrete(3, start=-1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros((2, 3), np.float32), {}

    def step(self, action):
        return np.zeros((2, 3), np.float32), float(action), False, False, {}


if "PgtwinTestMultiBinary-v0" not in gymnasium.registry:
    gymnasium.register("PgtwinTestMultiBinary-v0", entry_point=_MultiBinaryActionEnv)
if "PgtwinTestGrid-v0" not in gymnasium.registry:
    gymnasium.register("PgtwinTestGrid-v0", entry_point=GridObservationEnv, max_episode_steps=5)


def _windows_by_loop(obs: list[np.ndarray], dones: list[np.ndarray], k: int) -> list[np.ndarray]:
    """Slow reference for HistoryWindow: per env, per step, restart after a NEXT_STEP reset.

    obs[t]: float [N, D], from reset (t = 0) and each step; dones[t]: bool [N], the
    terminated | truncated returned with obs[t] (all False at t = 0).
    """
    n, d = obs[0].shape
    windows = []
    for t in range(len(obs)):
        w = np.zeros((n, k, d), dtype=obs[0].dtype)
        for i in range(n):
            start = t
            # Walk back while the previous obs belongs to the same episode.
            while start > 0 and t - start + 1 < k and not dones[start - 1][i]:
                start -= 1
            rows = [obs[s][i] for s in range(start, t + 1)]
            w[i, k - len(rows):] = rows
        windows.append(w)
    return windows


def test_cartpole_uses_the_fast_vector_class():
    envs = make_vec_env("CartPole-v1", 3, seed=0)
    assert isinstance(envs.unwrapped, CartPoleVectorEnv)
    assert envs.num_envs == 3
    assert isinstance(make_vec_env("CartPole-v1", 2, history=3).unwrapped, CartPoleVectorEnv)


@pytest.mark.parametrize("env_id", SYNC_IDS)
def test_envs_without_a_vector_entry_point_are_sync(env_id):
    envs = make_vec_env(env_id, 2, seed=0)
    assert isinstance(envs.unwrapped, SyncVectorEnv)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP


def test_seed_is_recorded_not_consumed():
    envs = make_vec_env("CartPole-v1", 3, seed=11, history=2)
    assert (envs.pgtwin_seed, envs.pgtwin_env_id, envs.pgtwin_history) == (11, "CartPole-v1", 2)
    first, _ = envs.reset(seed=envs.pgtwin_seed)
    again, _ = make_vec_env("CartPole-v1", 3, seed=11, history=2).reset(seed=11)
    np.testing.assert_array_equal(first, again)


@pytest.mark.parametrize("env_id", SYNC_IDS)
def test_env_i_replays_a_single_env_seeded_with_seed_plus_i(env_id):
    envs = make_vec_env(env_id, 3, seed=5)
    vec_obs, _ = envs.reset(seed=envs.pgtwin_seed)
    singles = [gymnasium.make(env_id) for _ in range(3)]
    for i, env in enumerate(singles):
        np.testing.assert_array_equal(vec_obs[i], env.reset(seed=5 + i)[0])
    for _ in range(5):  # the whole trajectory, not only the first obs
        actions = envs.action_space.sample()
        vec_obs, vec_rew, *_ = envs.step(actions)
        for i, env in enumerate(singles):
            obs, rew, *_ = env.step(actions[i])
            np.testing.assert_array_equal(vec_obs[i], obs)
            assert vec_rew[i] == pytest.approx(rew)


@pytest.mark.parametrize("env_id", ["CartPole-v1", *SYNC_IDS])
def test_action_spaces_are_seeded(env_id):
    a = make_vec_env(env_id, 2, seed=3)
    b = make_vec_env(env_id, 2, seed=3)
    np.testing.assert_array_equal(a.action_space.sample(), b.action_space.sample())
    np.testing.assert_array_equal(a.single_action_space.sample(), b.single_action_space.sample())


def test_async_matches_sync():
    sync = make_vec_env("BatteryArbitrage-v0", 2, seed=4, vectorization="sync")
    async_ = make_vec_env("BatteryArbitrage-v0", 2, seed=4, vectorization="async")
    try:
        assert isinstance(async_.unwrapped, gymnasium.vector.AsyncVectorEnv)
        np.testing.assert_array_equal(sync.reset(seed=4)[0], async_.reset(seed=4)[0])
        actions = sync.action_space.sample()
        np.testing.assert_array_equal(sync.step(actions)[0], async_.step(actions)[0])
    finally:
        async_.close()


def test_history_one_leaves_observations_alone():
    envs = make_vec_env("Pendulum-v1", 2, seed=0, history=1)
    assert not isinstance(envs, HistoryWindow)
    assert envs.reset(seed=0)[0].shape == (2, 3)


def test_history_space_and_zero_padding_after_reset():
    envs = make_vec_env("BatteryArbitrage-v0", 3, seed=1, history=4)
    assert envs.single_observation_space.shape == (4, 3)
    assert envs.observation_space.shape == (3, 4, 3)
    # Battery observations are >= 0, so the zero padding sits exactly on the lower bound.
    assert np.all(envs.single_observation_space.low == 0)
    plain = make_vec_env("BatteryArbitrage-v0", 3, seed=1)
    windows, _ = envs.reset(seed=1)
    plain_obs, _ = plain.reset(seed=1)
    assert windows.shape == (3, 4, 3) and windows.dtype == np.float32
    np.testing.assert_array_equal(windows[:, :-1], 0)
    np.testing.assert_array_equal(windows[:, -1], plain_obs)
    assert envs.observation_space.contains(windows)


def test_history_slides_one_row_per_step():
    envs = make_vec_env("Pendulum-v1", 2, seed=2, history=3)
    plain = make_vec_env("Pendulum-v1", 2, seed=2)
    envs.reset(seed=2)
    seen = [plain.reset(seed=2)[0]]
    for t in range(4):
        actions = plain.action_space.sample()
        windows = envs.step(actions)[0]
        seen.append(plain.step(actions)[0])
        if t == 0:  # one real row of padding left: [0, o_0, o_1]
            np.testing.assert_array_equal(windows[:, 0], 0)
        np.testing.assert_array_equal(windows[:, -1], seen[-1])
        np.testing.assert_array_equal(windows[:, -2], seen[-2])
        assert envs.observation_space.contains(windows)
    np.testing.assert_array_equal(windows, np.stack(seen[-3:], axis=1))


def test_history_restarts_after_an_autoreset_on_cartpole():
    k = 4
    envs = make_vec_env("CartPole-v1", 3, seed=0, history=k)
    plain = make_vec_env("CartPole-v1", 3, seed=0)
    envs.reset(seed=0)
    plain.reset(seed=0)
    prev_done = np.zeros(3, dtype=bool)
    restarts = 0
    for _ in range(40):
        windows, _, terminated, truncated, _ = envs.step(PUSH_RIGHT)
        obs, _, plain_term, plain_trunc, _ = plain.step(PUSH_RIGHT)
        np.testing.assert_array_equal(terminated, plain_term)
        for i in np.flatnonzero(prev_done):  # this step returned env i's reset observation
            np.testing.assert_array_equal(windows[i, :-1], 0)
            np.testing.assert_array_equal(windows[i, -1], obs[i])
            restarts += 1
        prev_done = terminated | truncated
    assert restarts >= 3  # every env went through at least one autoreset


@pytest.mark.parametrize("env_id, k", [("CartPole-v1", 3), ("BatteryArbitrage-v0", 2)])
def test_history_matches_a_slow_reference_loop(env_id, k):
    # A 10-hour battery "week", so this short run crosses episode boundaries there too.
    kwargs = {"episode_length": 10} if env_id == "BatteryArbitrage-v0" else {}
    envs = HistoryWindow(gymnasium.make_vec(env_id, 3, **kwargs), k)
    plain = gymnasium.make_vec(env_id, 3, **kwargs)
    got = [envs.reset(seed=9)[0]]
    obs = [plain.reset(seed=9)[0]]
    dones = [np.zeros(3, dtype=bool)]
    plain.action_space.seed(9)
    for _ in range(30):
        actions = PUSH_RIGHT if env_id == "CartPole-v1" else plain.action_space.sample()
        got.append(envs.step(actions)[0])
        o, _, term, trunc, _ = plain.step(actions)
        obs.append(o)
        dones.append(term | trunc)
    assert sum(d.sum() for d in dones) >= 3
    for t, (g, want) in enumerate(zip(got, _windows_by_loop(obs, dones, k))):
        np.testing.assert_array_equal(g, want, err_msg=f"step {t}")


def test_history_reset_mask_restarts_only_masked_windows():
    inner = gymnasium.make_vec("Pendulum-v1", 2, vectorization_mode="sync")
    envs = HistoryWindow(inner, 2)
    envs.reset(seed=0)
    before = envs.step(np.zeros((2, 1), np.float32))[0]
    windows, _ = envs.reset(options={"reset_mask": np.array([True, False])})
    np.testing.assert_array_equal(windows[0, 0], 0)
    np.testing.assert_array_equal(windows[1], before[1])


def test_unknown_id_names_it_and_hints_what_is_supported():
    with pytest.raises(ValueError, match=r"'NoSuchEnv-v9'.*supported: .*BatteryArbitrage-v0"):
        make_vec_env("NoSuchEnv-v9")


def test_non_box_observation_space_is_rejected():
    with pytest.raises(ValueError, match=r"observation space Discrete\(16\)"):
        make_vec_env("FrozenLake-v1")


def test_image_observations_are_told_to_flatten_and_not_to_try_the_lstm():
    # [8, 8, 1] has no time axis the lstm could read (it takes [K, obs_dim]): a helper
    # followed the advice "--torso lstm --history 1" and was refused by the lstm's check
    from pgtwin_core.specs import observation_rank_problem
    mlp = observation_rank_problem("Img-v0", (8, 8, 1), "mlp")
    assert mlp.startswith("'Img-v0' has 3-D observations (8, 8, 1), and the mlp torso takes "
                          "1-D ones: flatten them first") and "--torso lstm" not in mlp
    assert observation_rank_problem("Img-v0", (8, 8, 1), "lstm", 1).startswith(
        "'Img-v0' has 3-D observations (8, 8, 1): the lstm torso takes 1-D observations")


def test_observations_of_a_rank_the_torso_does_not_take_are_refused_naming_the_fix():
    # The mlp takes [obs_dim]; the lstm an env's own window [K, obs_dim], or [obs_dim]
    # stacked by --history K.
    with pytest.raises(ValueError, match=r"'PgtwinTestGrid-v0' has 2-D observations \(2, 3\), "
                       r"and the mlp torso takes 1-D ones: flatten them first "
                       r"\(gymnasium.wrappers.FlattenObservation.*--torso lstm --history 1"):
        env_spaces_check("PgtwinTestGrid-v0")
    env_spaces_check("PgtwinTestGrid-v0", torso="lstm")  # read as 2 steps of 3
    # The advice leads somewhere: the history window given (4 here; 8, the lstm's default,
    # unless given) is named as what refuses the env's own window, with --history 1.
    with pytest.raises(ValueError, match=r"'PgtwinTestGrid-v0' has 2-D observations \(2, 3\): "
                       r"the lstm torso reads them as the env's own window \[K, obs_dim\] only "
                       r"with --history 1 \(history=1\), while a history window \(here 4 steps\) .* "
                       r"pass --history 1"):
        env_spaces_check("PgtwinTestGrid-v0", torso="lstm", history=4)
    env_spaces_check("CartPole-v1", torso="lstm", history=4)
    assert observation_rank_problem("E", (2, 3, 4), "lstm").startswith(
        "'E' has 3-D observations (2, 3, 4): the lstm torso takes 1-D observations or an env's "
        "own window [K, obs_dim]; flatten them first")
    envs = make_vec_env("PgtwinTestGrid-v0", 2)
    with pytest.raises(ValueError, match=r"spec_for_env: 'PgtwinTestGrid-v0' has 2-D"):
        spec_for_env(envs)
    assert spec_for_env(envs, torso="lstm").obs_shape == (2, 3)
    assert spec_for_env(make_vec_env("CartPole-v1", 2, history=3), torso="lstm").obs_shape == (3, 4)
    envs.close()


def test_unsupported_action_space_is_rejected():
    with pytest.raises(ValueError, match=r"action space MultiBinary\(2\)"):
        make_vec_env("PgtwinTestMultiBinary-v0")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_envs": 0}, "num_envs=0"),
        ({"num_envs": 1.5}, "num_envs=1.5"),
        ({"history": 0}, "history=0"),
        ({"vectorization": "threads"}, "vectorization='threads'"),
    ],
)
def test_bad_arguments_name_the_argument_and_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_vec_env("CartPole-v1", **kwargs)


def test_vector_mode_needs_a_vector_entry_point():
    with pytest.raises(ValueError, match="vector_entry_point"):
        make_vec_env("Pendulum-v1", vectorization="vector")


def test_other_autoreset_modes_are_rejected():
    envs = gymnasium.make_vec("Pendulum-v1", 2, vectorization_mode="sync",
                              vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    with pytest.raises(ValueError, match="NEXT_STEP"):
        _check_autoreset("Pendulum-v1", envs)


def test_cartpole_vector_env_i_starts_every_episode_like_a_single_env_seeded_seed_plus_i():
    # The fast CartPole vector env, with one generator per env: env i's k-th episode must
    # start exactly where gymnasium.make("CartPole-v1") reset with seed + i starts its k-th
    # (the first reset with the seed, later ones with none, as gymnasium's autoreset does).
    n, seed = 3, 7
    envs = make_vec_env("CartPole-v1", n, seed=seed)
    assert isinstance(envs.unwrapped, CartPoleVectorEnv)  # still the hand-vectorised physics
    obs, _ = envs.reset(seed=seed)
    starts = [[obs[i]] for i in range(n)]
    done = np.zeros(n, bool)
    for _ in range(200):  # always push left: every pole falls within ~10 steps
        obs, _, terminated, truncated, _ = envs.step(np.zeros(n, np.int64))
        for i in np.flatnonzero(done):
            starts[i].append(obs[i])  # the step after an end returns the new episode's start
        done = terminated | truncated
    for i in range(n):
        single = gymnasium.make("CartPole-v1")
        expected = [single.reset(seed=seed + i)[0]] + [single.reset()[0] for _ in starts[i][1:]]
        assert len(starts[i]) >= 5
        np.testing.assert_array_equal(np.array(starts[i]), np.array(expected))


def test_cartpole_vector_env_keeps_the_time_limit():
    # CartPole-v1 truncates at 500 steps: a policy that balances long enough must see it.
    envs = make_vec_env("CartPole-v1", 1, seed=0)
    envs.reset(seed=0)
    assert envs.unwrapped.max_episode_steps == gymnasium.spec("CartPole-v1").max_episode_steps
