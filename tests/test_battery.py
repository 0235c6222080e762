"""Tests for the ``BatteryArbitrage-v0`` environment (pgtwin_core/battery.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import pgtwin_core  # noqa: F401  (registers the id)
from pgtwin_core.battery import ENV_ID, HOURS_PER_WEEK, BatteryArbitrageEnv


def _episode(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One full episode with seeded random actions: (obs [T+1, 3], rewards [T])."""
    env = gymnasium.make(ENV_ID)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    all_obs, rewards = [obs], []
    truncated = False
    while not truncated:
        obs, reward, _, truncated, _ = env.step(env.action_space.sample())
        all_obs.append(obs)
        rewards.append(reward)
    return np.stack(all_obs), np.array(rewards)


def _always_high(**kwargs) -> BatteryArbitrageEnv:
    """An env whose price is high forever: P(high) at reset is 1 and high never switches."""
    return BatteryArbitrageEnv(p_low_to_high=1.0, p_high_to_low=0.0, **kwargs)


def test_passes_gymnasium_env_checker():
    check_env(gymnasium.make(ENV_ID).unwrapped)


def test_registration_is_guarded_and_pulls_in_no_tensorflow():
    # A fresh interpreter, so reloading does not swap the class under the other tests;
    # warnings are errors because gymnasium warns when an id is registered twice.
    code = (
        "import importlib, sys, gymnasium, pgtwin_core, pgtwin_core.envs, pgtwin_core.battery\n"
        "importlib.reload(pgtwin_core.battery)\n"
        "assert 'tensorflow' not in sys.modules\n"
        "print(gymnasium.spec('BatteryArbitrage-v0').entry_point)\n"
    )
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                          text=True, timeout=60, check=False,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pgtwin_core.battery:BatteryArbitrageEnv"


def test_same_seed_gives_identical_episode_and_different_seeds_differ():
    obs_a, rew_a = _episode(seed=7)
    obs_b, rew_b = _episode(seed=7)
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(rew_a, rew_b)
    obs_c, _ = _episode(seed=8)
    assert not np.array_equal(obs_a, obs_c)


def test_truncates_after_exactly_one_week():
    env = gymnasium.make(ENV_ID)
    env.reset(seed=0)
    action = np.array([0.5, 0.5], dtype=np.float32)
    for t in range(1, HOURS_PER_WEEK + 1):
        _, _, terminated, truncated, _ = env.step(action)
        assert not terminated
        assert truncated == (t == HOURS_PER_WEEK), t
    assert HOURS_PER_WEEK == 168


def test_energy_balance_charge_bounds_and_reward_sign_on_a_random_episode():
    env = BatteryArbitrageEnv()
    env.action_space.seed(3)
    obs, _ = env.reset(seed=3)
    truncated = False
    while not truncated:
        energy, price, charge = (float(x) for x in obs)
        next_obs, reward, _, truncated, info = env.step(env.action_space.sample())
        next_charge = float(next_obs[2])
        # float32 observations: compare with a float32-sized tolerance.
        assert np.isclose(energy + charge, info["sold"] + next_charge + info["spilled"],
                          rtol=1e-5, atol=1e-5)
        assert 0.0 <= next_charge <= env.capacity
        assert info["spilled"] >= 0 and info["sold"] >= 0
        # The price that counts is the one the agent saw, at the start of the step.
        assert reward == (info["sold"] if price == 1.0 else -info["sold"])
        assert price in (0.0, 1.0) and energy >= 0.0
        obs = next_obs


def test_discharge_removes_charge_hand_worked():
    # Daylight is hours [0, 2) with a noiseless peak of 3, so hour 0 produces
    # 3 * sin(0) = 0 and hour 1 produces 3 * sin(pi / 2) = 3.
    env = _always_high(capacity=10.0, peak_energy=3.0, noise_std=0.0, initial_charge=4.0,
                       sunrise=0, sunset=2)
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs, [0.0, 1.0, 4.0])
    obs, reward, _, _, info = env.step(np.array([0.0, 0.0], dtype=np.float32))
    np.testing.assert_allclose(obs, [3.0, 1.0, 4.0], rtol=1e-6)
    assert reward == 0.0
    # discharged = 0.25 * 4 = 1; stored = 0.5 * 3 = 1.5; sold = 3 * (1 - 0.5) + 1 = 2.5;
    # charge = 4 - 1 + 1.5 = 4.5; spilled = 0; reward = +2.5 at the high price.
    obs, reward, _, _, info = env.step(np.array([0.5, 0.25], dtype=np.float32))
    assert info == pytest.approx({"sold": 2.5, "stored": 1.5, "discharged": 1.0, "spilled": 0.0})
    assert reward == pytest.approx(2.5)
    assert obs[2] == pytest.approx(4.5)


def test_full_discharge_empties_the_battery_so_charge_is_sold_once():
    env = _always_high(noise_std=0.0, initial_charge=4.0)
    env.reset(seed=0)
    sell_all = np.array([0.0, 1.0], dtype=np.float32)
    # Hour 0 is night: energy 0, so sold = discharged = 4 and the battery is empty after.
    obs, reward, _, _, info = env.step(sell_all)
    assert (info["discharged"], reward, obs[2]) == (4.0, 4.0, 0.0)
    obs, reward, _, _, info = env.step(sell_all)
    assert (info["discharged"], reward, obs[2]) == (0.0, 0.0, 0.0)


def test_storing_into_a_full_battery_spills_instead_of_creating_energy():
    env = _always_high(capacity=5.0, peak_energy=3.0, noise_std=0.0, initial_charge=4.0,
                       sunrise=0, sunset=2)
    env.reset(seed=0)
    env.step(np.array([0.0, 0.0], dtype=np.float32))  # to hour 1: energy 3, charge 4
    # discharged = 0.25 * 4 = 1; stored = 1 * 3 = 3; 4 - 1 + 3 = 6 > 5, so spilled = 1,
    # charge = 5; sold = 3 * (1 - 1) + 1 = 1; balance 3 + 4 = 1 + 5 + 1.
    obs, reward, _, _, info = env.step(np.array([1.0, 0.25], dtype=np.float32))
    assert info == pytest.approx({"sold": 1.0, "stored": 3.0, "discharged": 1.0, "spilled": 1.0})
    assert obs[2] == pytest.approx(5.0)


def test_low_price_makes_selling_cost():
    env = BatteryArbitrageEnv(p_low_to_high=0.0, p_high_to_low=1.0, noise_std=0.0,
                              initial_charge=2.0)
    obs, _ = env.reset(seed=0)
    assert obs[1] == 0.0
    _, reward, _, _, info = env.step(np.array([0.0, 0.5], dtype=np.float32))
    assert info["sold"] == 1.0 and reward == -1.0  # -(0.5 * 2) at the low price


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-2, 3), st.floats(-2, 3)), min_size=1, max_size=30),
    st.integers(0, 2**16),
)
def test_energy_balance_for_any_actions_including_out_of_range(actions, seed):
    env = BatteryArbitrageEnv(capacity=3.0, peak_energy=4.0, initial_charge=1.0,
                              sunrise=0, sunset=24)
    obs, _ = env.reset(seed=seed)
    for store, discharge in actions:
        energy, charge = float(obs[0]), float(obs[2])
        obs, _, _, _, info = env.step(np.array([store, discharge]))
        assert np.isclose(energy + charge, info["sold"] + float(obs[2]) + info["spilled"],
                          rtol=1e-5, atol=1e-5)
        assert env.observation_space.contains(obs)


def test_out_of_range_actions_are_clipped():
    a = _always_high(noise_std=0.0, initial_charge=4.0)
    b = _always_high(noise_std=0.0, initial_charge=4.0)
    a.reset(seed=1)
    b.reset(seed=1)
    out_a = a.step(np.array([2.0, -1.0]))
    out_b = b.step(np.array([1.0, 0.0], dtype=np.float32))
    np.testing.assert_array_equal(out_a[0], out_b[0])
    assert out_a[1:] == out_b[1:]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_action_is_rejected(bad):
    env = BatteryArbitrageEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([0.5, bad]))


def test_wrong_action_shape_is_rejected():
    env = BatteryArbitrageEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        env.step(np.array([0.5]))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"capacity": 0.0}, "capacity"),
        ({"noise_std": -1.0}, "noise_std"),
        ({"p_low_to_high": 1.5}, "p_low_to_high"),
        ({"initial_charge": 11.0}, "initial_charge"),
        ({"episode_length": 0}, "episode_length"),
        ({"sunrise": 12, "sunset": 6}, "sunrise/sunset"),
    ],
)
def test_bad_constructor_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        BatteryArbitrageEnv(**kwargs)


def test_kwargs_pass_through_gymnasium_make():
    env = gymnasium.make(ENV_ID, capacity=2.0, episode_length=3)
    env.reset(seed=0)
    assert env.observation_space.high[2] == 2.0
    flags = [env.step(np.array([1.0, 0.0], dtype=np.float32))[3] for _ in range(3)]
    assert flags == [False, False, True]
