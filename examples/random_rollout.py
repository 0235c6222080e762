"""Random-policy CartPole steps, laid out as old TF1 code kept its buffers (for examples' batches).

Old training loops appended each step to Python lists and fed ``np.vstack(obs)``,
``np.array(actions)`` and the discounted, standardised returns straight into ``feed_dict``:
float64 observations (gym's CartPole returned float64 before gymnasium), int64 actions, float64
returns, whatever the placeholders declared. The batches here keep those dtypes on purpose, so a
harness has to cast them as ``feed_dict`` does.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np


def random_cartpole_steps(seed: int, n: int) -> dict[str, np.ndarray]:
    """``n`` consecutive CartPole-v1 steps under uniformly random actions.

    Episodes follow one another (``env.reset`` when one ends); the last one is cut at ``n``.

    Returns:
      obs: float64 [n, 4]; actions: int64 [n] in {0, 1}; rewards: float64 [n];
      episode_ends: bool [n], True on an episode's last step (the cut step included).
    """
    if n < 1:
        raise ValueError(f"random_cartpole_steps: n must be >= 1, got {n}")
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    states, actions, rewards, ends = [], [], [], []
    for t in range(n):
        action = int(rng.integers(2))
        states.append(obs)
        actions.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(reward)
        done = terminated or truncated or t == n - 1
        ends.append(done)
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return {"obs": np.vstack(states).astype(np.float64), "actions": np.array(actions, np.int64),
            "rewards": np.array(rewards, np.float64), "episode_ends": np.array(ends, bool)}


def standardised_returns(rewards: np.ndarray, episode_ends: np.ndarray,
                         gamma: float = 0.99) -> np.ndarray:
    """``G_t = r_t + gamma G_{t+1}`` within each episode (0 after its end), then standardised.

    Args:
      rewards: float [T]; episode_ends: bool [T] (True on an episode's last step).
    Returns:
      float64 [T], mean 0 and standard deviation 1 over the batch (as REINFORCE code did it).
    """
    rewards = np.asarray(rewards, np.float64)
    episode_ends = np.asarray(episode_ends, bool)
    if rewards.shape != episode_ends.shape or rewards.ndim != 1:
        raise ValueError(f"standardised_returns: rewards {rewards.shape} and episode_ends "
                         f"{episode_ends.shape} must be the same 1-d shape")
    returns = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running * (not episode_ends[t])
        returns[t] = running
    return (returns - returns.mean()) / (returns.std() + 1e-8)
